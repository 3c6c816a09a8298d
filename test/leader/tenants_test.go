/*
Copyright The capo-sharednet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package leader

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/internal/fairshare"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
	"github.com/capo-sharednet/capo-sharednet/test/fakekeystone"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// hostileClouds is the fake cloud for the healthy tenants, and real
// OpenStack sessions (the manager's, with its bounds) for the clusters whose
// clouds.yaml points at a Keystone on 127.0.0.1 that a hostile tenant runs.
type hostileClouds struct {
	*fakecloud.Clouds
	sessions *openstack.Sessions
	hostile  map[string]openstack.Credential
}

func (h *hostileClouds) ForCluster(ctx context.Context, cluster *clusterv1.Cluster) (openstack.ClusterCloud, *infrav1.OpenStackCluster, error) {
	key := cluster.Namespace + "/" + cluster.Name
	if cred, ok := h.hostile[key]; ok {
		s, err := h.sessions.Get(ctx, key, "1", cred)
		if err != nil {
			return nil, nil, err
		}
		return s, nil, nil
	}
	return h.Clouds.ForCluster(ctx, cluster)
}

// TestATenantsHostileCloudDelaysNoOtherTenant: two tenants point their
// clusters at Keystones of their own, one that never answers and one that
// streams an endless body, and attach; a healthy tenant's attach is shared
// and nudged meanwhile, while the tarpit still holds the other's reconcile,
// in about the time it takes alone; the manager's heap does not grow with
// the endless body. The manager runs the attachment controller with the
// shipped defaults (workers, reconcile deadline, session bounds).
func TestATenantsHostileCloudDelaysNoOtherTenant(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cloud, clouds, sn, network, subnet := tenantsWorld(ctx, g, "tenants-vm", 90)
	tarpit := fakekeystone.Start(t, fakekeystone.Options{Project: "p-tarpit", Hang: make(chan struct{})})
	endless := fakekeystone.Start(t, fakekeystone.Options{Project: "p-endless", Stream: true})

	// Four tenants, each a namespace with a cluster of md-a: two healthy
	// (one attaches alone, the other beside the hostile ones), two hostile.
	type tenant struct {
		cluster *clusterv1.Cluster
		project string
	}
	tenants := map[string]*tenant{}
	for i, name := range []string{"alone", "beside", "tarpit", "endless"} {
		ns := grantedNamespace(ctx, g)
		project := "p-" + name
		clusterNetwork, clusterSubnet := uuid(90, 10+2*i), uuid(90, 11+2*i)
		cloud.AddNetworkWithIDs(project, 1450, "10.6.0.0/24", clusterNetwork, clusterSubnet)
		osc := &infrav1.OpenStackCluster{Status: infrav1.OpenStackClusterStatus{Network: &infrav1.NetworkStatusWithSubnets{
			NetworkStatus: infrav1.NetworkStatus{ID: clusterNetwork, Name: "k8s-clusterapi-cluster-" + ns + "-c"},
			Subnets:       []infrav1.Subnet{{ID: clusterSubnet, CIDR: "10.6.0.0/24"}},
		}}}
		switch name {
		case "tarpit":
			clouds.hostile[ns+"/c"] = credentialOf(t, tarpit)
		case "endless":
			clouds.hostile[ns+"/c"] = credentialOf(t, endless)
		default:
			clouds.Clusters[ns+"/c"] = &fakecloud.Project{Cloud: cloud, ID: project, OpenStackCluster: osc}
		}
		cluster := clusterOfTheExtension(ctx, t, ns, "c")
		writeClusterNetwork(ctx, g, cluster, osc)
		tenants[name] = &tenant{cluster: cluster, project: project}
	}

	// The manager's heap, sampled for the whole test.
	var peakHeap atomic.Uint64
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapInuse
	sampling, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go func() {
		for sampling.Err() == nil {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	startTenantsManager(t, clouds)
	g.Eventually(func(g Gomega) {
		got := &sharednetv1.SharedNetwork{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sn), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, sharednetv1.ReadyCondition)).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	// attach sets md-a's variable; nudged waits until the Cluster is
	// nudged (the share is recorded and GeneratePatches will emit the port)
	// and says how long after the attach that was.
	attach := func(name string) time.Time {
		start := time.Now()
		g.Expect(updateCluster(ctx, tenants[name].cluster, func(c *clusterv1.Cluster) {
			variables.SetOverride(c, "md-a", fmt.Appendf(nil, `{"name":%q,"subnet":%q}`, sn.Name, subnet))
		})).To(Succeed())
		return start
	}
	nudged := func(name string, since time.Time) time.Duration {
		g.Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tenants[name].cluster), c)).To(Succeed())
			g.Expect(c.Annotations).To(HaveKey(sharedAnnotation))
		}, 30*time.Second, 20*time.Millisecond).Should(Succeed(), "tenant %s is shared and nudged (within the tarpit's authentication timeout)", name)
		return time.Since(since)
	}
	projectsShared := func() []string {
		var out []string
		for _, s := range cloud.Shares() {
			if s[0] == network {
				out = append(out, s[1])
			}
		}
		return out
	}

	alone := nudged("alone", attach("alone"))

	attach("tarpit")
	attach("endless")
	g.Eventually(tarpit.InFlight.Load, 30*time.Second, 20*time.Millisecond).Should(BeNumerically(">=", 1), "the tarpit tenant's attach is held in its Keystone")
	g.Eventually(endless.Requests.Load, 30*time.Second, 20*time.Millisecond).Should(BeNumerically(">=", 1), "the endless tenant's attach is reading its Keystone")

	beside := nudged("beside", attach("beside"))
	g.Expect(tarpit.Ended.Load()).To(BeZero(), "the healthy tenant was shared and nudged while the tarpit still held the hostile tenant's first request: it waited for no hostile reconcile to end")
	g.Expect(projectsShared()).To(ConsistOf(tenants["alone"].project, tenants["beside"].project), "nothing is shared for a tenant whose cloud does not answer")
	// The endless Keystone is asked again with the controller's back-off;
	// each answer is cut at the bound.
	g.Eventually(endless.Requests.Load, 30*time.Second, 100*time.Millisecond).Should(BeNumerically(">=", 2))
	stopSampling()
	growth := int64(peakHeap.Load()) - int64(baseHeap)
	t.Logf("tarpit: requests %d, in flight %d, ended %d", tarpit.Requests.Load(), tarpit.InFlight.Load(), tarpit.Ended.Load())
	t.Logf("healthy attach to nudge: alone %s; beside a tarpit and an endless Keystone %s; peak heap growth %d MiB (%d reads of the endless Keystone, each cut at %d MiB)",
		alone.Round(time.Millisecond), beside.Round(time.Millisecond), growth>>20, endless.Requests.Load(), openstack.DefaultMaxResponseBytes>>20)
	g.Expect(growth).To(BeNumerically("<", 256<<20), "the heap does not grow with the endless body")
}

// tenantsWorld is the fake cloud with the VM project's network of
// scenario, the clouds the tenants' clusters use (hostile ones added by the
// test) and the SharedNetwork name over it, granted to grantedNamespace's.
func tenantsWorld(ctx context.Context, g Gomega, name string, scenario int) (*fakecloud.Cloud, *hostileClouds, *sharednetv1.SharedNetwork, string, string) {
	cloud := fakecloud.New()
	network, subnet := uuid(scenario, 1), uuid(scenario, 2)
	cloud.AddNetworkWithIDs("vm-project", 1450, fmt.Sprintf("172.16.%d.0/24", scenario), network, subnet)
	clouds := &hostileClouds{
		Clouds: &fakecloud.Clouds{Clusters: map[string]*fakecloud.Project{},
			SharedNetworks: map[string]*fakecloud.Project{name: {Cloud: cloud, ID: "vm-project"}}},
		sessions: &openstack.Sessions{},
		hostile:  map[string]openstack.Credential{},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: name},
		Data: map[string][]byte{openstack.CloudsSecretKey: []byte("clouds:\n  vm-project:\n    auth:\n      auth_url: http://127.0.0.1:5000/v3\n")}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	sn := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sharednetv1.SharedNetworkSpec{
		Identity:  sharednetv1.VMProjectIdentity{SecretName: secret.Name, CloudName: "vm-project"},
		NetworkID: network, Subnets: []string{subnet},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{grantLabel: "true"}},
	}}
	g.Expect(env.Client.Create(ctx, sn)).To(Succeed())
	return cloud, clouds, sn, network, subnet
}

func credentialOf(t *testing.T, k *fakekeystone.Keystone) openstack.Credential {
	t.Helper()
	cred, err := openstack.CredentialFromData(map[string][]byte{openstack.CloudsSecretKey: k.CloudsYAML("tenant")}, "tenant-secret", "tenant")
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// startTenantsManager runs the SharedNetwork and attachment controllers as
// internal/manager does, with its default workers and reconcile deadline.
func startTenantsManager(t *testing.T, clouds *hostileClouds) {
	t.Helper()
	mgr := newManager(t, func(*ctrl.Options) {})
	options := controller.Options{MaxConcurrentReconciles: manager.DefaultConcurrency, ReconciliationTimeout: manager.DefaultReconcileTimeout}
	recorder := mgr.GetEventRecorderFor("capo-sharednet")
	if err := (&controllers.SharedNetworkReconciler{
		Client: mgr.GetClient(), Namespace: install.Namespace, Resync: 2 * time.Second, Recorder: recorder, Clouds: clouds,
	}).SetupWithManager(mgr, options); err != nil {
		t.Fatal(err)
	}
	if err := (&controllers.AttachmentReconciler{Client: mgr.GetClient(), Credentials: clouds, Recorder: recorder}).SetupWithManager(mgr, options); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
}

// startManager runs mgr until the test ends, and then waits (bounded) for
// it to stop.
func startManager(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the manager stopped with: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the manager did not stop within 30s")
		}
	})
}

// TestTwentyHostileClustersOfOneTenantLeaveTheWorkersToOthers: one tenant
// points twenty Clusters of its namespace at a Keystone that never answers
// and attaches them all, more than the attachment controller has workers.
// That namespace holds at most its share of them (fairshare): the Keystone
// never sees more logins at once than the share, and another tenant's
// attach completes within twice its time alone.
func TestTwentyHostileClustersOfOneTenantLeaveTheWorkersToOthers(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cloud, clouds, sn, _, subnet := tenantsWorld(ctx, g, "twenty-vm", 91)
	hang := make(chan struct{})
	defer close(hang)
	tarpit := fakekeystone.Start(t, fakekeystone.Options{Project: "p-tarpit", Hang: hang})

	made := func(project string, i int) *infrav1.OpenStackCluster {
		clusterNetwork, clusterSubnet := uuid(91, 100+2*i), uuid(91, 101+2*i)
		cloud.AddNetworkWithIDs(project, 1450, "10.6.0.0/24", clusterNetwork, clusterSubnet)
		return &infrav1.OpenStackCluster{Status: infrav1.OpenStackClusterStatus{Network: &infrav1.NetworkStatusWithSubnets{
			NetworkStatus: infrav1.NetworkStatus{ID: clusterNetwork, Name: fmt.Sprintf("k8s-clusterapi-cluster-%d", i)},
			Subnets:       []infrav1.Subnet{{ID: clusterSubnet, CIDR: "10.6.0.0/24"}},
		}}}
	}
	healthy := map[string]*clusterv1.Cluster{}
	for i, name := range []string{"alone", "beside"} {
		ns := grantedNamespace(ctx, g)
		osc := made("p-"+name, i)
		clouds.Clusters[ns+"/c"] = &fakecloud.Project{Cloud: cloud, ID: "p-" + name, OpenStackCluster: osc}
		healthy[name] = clusterOfTheExtension(ctx, t, ns, "c")
		writeClusterNetwork(ctx, g, healthy[name], osc)
	}
	hostileNS := grantedNamespace(ctx, g)
	var hostile []*clusterv1.Cluster
	for i := range 20 {
		name := fmt.Sprintf("h%02d", i)
		clouds.hostile[hostileNS+"/"+name] = credentialOf(t, tarpit)
		var c *clusterv1.Cluster
		if i == 0 {
			c = clusterOfTheExtension(ctx, t, hostileNS, name) // and the namespace's ClusterClass
		} else {
			c = testenv.Cluster(hostileNS, name, "leader", "md-a")
			c.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{podCIDR}
			c.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](0)
			g.Expect(env.Client.Create(ctx, c)).To(Succeed())
		}
		writeClusterNetwork(ctx, g, c, made("p-tarpit", 10+i))
		hostile = append(hostile, c)
	}
	g.Eventually(func(g Gomega) {
		mds := &clusterv1.MachineDeploymentList{}
		g.Expect(env.Client.List(ctx, mds, client.InNamespace(hostileNS))).To(Succeed())
		g.Expect(mds.Items).To(HaveLen(20))
	}, time.Minute, 250*time.Millisecond).Should(Succeed(), "CAPI made the twenty Clusters' MachineDeployments")

	startTenantsManager(t, clouds)
	g.Eventually(func(g Gomega) {
		got := &sharednetv1.SharedNetwork{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sn), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, sharednetv1.ReadyCondition)).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	value := fmt.Appendf(nil, `{"name":%q,"subnet":%q}`, sn.Name, subnet)
	attach := func(c *clusterv1.Cluster) time.Time {
		start := time.Now()
		g.Expect(updateCluster(ctx, c, func(c *clusterv1.Cluster) { variables.SetOverride(c, "md-a", value) })).To(Succeed())
		return start
	}
	nudged := func(c *clusterv1.Cluster, since time.Time) time.Duration {
		g.Eventually(func(g Gomega) {
			got := &clusterv1.Cluster{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKey(sharedAnnotation))
		}, 30*time.Second, 20*time.Millisecond).Should(Succeed(), "cluster %s is shared and nudged", client.ObjectKeyFromObject(c))
		return time.Since(since)
	}

	alone := nudged(healthy["alone"], attach(healthy["alone"]))
	for _, c := range hostile {
		attach(c)
	}
	share := fairshare.Share(manager.DefaultConcurrency)
	held := time.Now()
	g.Eventually(tarpit.InFlight.Load, 30*time.Second, 20*time.Millisecond).Should(BeNumerically("==", share), "the hostile namespace's reconciles wait in its Keystone, its share of them")
	t.Logf("%d hostile logins held after %s", share, time.Since(held).Round(time.Millisecond))
	beside := nudged(healthy["beside"], attach(healthy["beside"]))
	g.Expect(tarpit.InFlight.Load()).To(BeNumerically("<=", share), "never more of that namespace at once than its share")
	t.Logf("tarpit: requests %d, in flight %d, ended %d", tarpit.Requests.Load(), tarpit.InFlight.Load(), tarpit.Ended.Load())
	t.Logf("healthy attach to nudge: alone %s; beside 20 hostile Clusters of one namespace %s (logins held at once: %d of %d workers)",
		alone.Round(time.Millisecond), beside.Round(time.Millisecond), tarpit.InFlight.Load(), manager.DefaultConcurrency)
	// Twice its time alone; a floor of 250 ms absorbs the scheduler on two
	// cores when alone is a few tens of milliseconds.
	g.Expect(beside).To(BeNumerically("<=", max(2*alone, alone+250*time.Millisecond)), "within twice its time alone")
}

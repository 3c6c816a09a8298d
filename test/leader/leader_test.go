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
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

const (
	// leaseName is the manager's default LeaderElectionID (internal/manager).
	leaseName  = "capo-sharednet.sharednet.capo.io"
	grantLabel = "sharednet.capo.io/leader-test"
	// sharedAnnotation is the nudge the attachment controller writes on the
	// Cluster (controllers' sharedAnnotationPrefix + topology).
	sharedAnnotation = "sharednet.capo.io/shared.md-a"
	podCIDR          = "192.168.0.0/16"
)

// Short leases keep the test quick; the renew deadline leaves the leader
// room on a loaded two-core machine so it never loses the lease by itself.
var (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// The points at which the leader is stopped in the middle of an attach.
const (
	// afterShare: Neutron (the fake) holds the RBAC policy, the answer never
	// reached the attachment's status (a lost answer).
	afterShare = "after the share is made in the cloud, before its status is recorded"
	// afterStatus: the attachment's status records the share, the Cluster
	// is not nudged yet (CAPI may still roll it if it reconciles the Cluster
	// for another reason: GeneratePatches reads the status).
	afterStatus = "after the status records the share, before the nudge that rolls the nodegroup"
)

// TestLeaderChangeDuringAnAttachMakesNoSecondShareAndNoSecondRollout runs two
// replicas of the manager with leader election on, over one fake cloud and
// one API server, and stops the leader in the middle of an attach (at two
// points): the other replica takes the lease and finishes the attach with
// the one share the first made, and md-a's OpenStackMachineTemplate changes
// exactly once.
func TestLeaderChangeDuringAnAttachMakesNoSecondShareAndNoSecondRollout(t *testing.T) {
	testenv.SkipIfShort(t, "it starts a kube-apiserver")
	cloud := fakecloud.New()
	vm := &fakecloud.Project{Cloud: cloud, ID: "vm-project"}
	clouds := &fakecloud.Clouds{Clusters: map[string]*fakecloud.Project{}, SharedNetworks: map[string]*fakecloud.Project{}}
	for i, point := range []string{afterShare, afterStatus} {
		t.Run(point, func(t *testing.T) {
			leaderChangeDuringAttach(t, vm, clouds, i+1, point)
		})
	}
}

func leaderChangeDuringAttach(t *testing.T, vm *fakecloud.Project, clouds *fakecloud.Clouds, n int, point string) {
	t.Helper()
	g := NewWithT(t)
	cloud := vm.Cloud
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()

	// The VM project's network, and the cluster's project with the network
	// CAPO made for it.
	clusterProject := fmt.Sprintf("cluster-project-%d", n)
	// The SharedNetwork's CRD takes Neutron's UUIDs only.
	network, subnet := uuid(n, 1), uuid(n, 2)
	cloud.AddNetworkWithIDs("vm-project", 1450, fmt.Sprintf("172.16.%d.0/24", n), network, subnet)
	clusterNetwork, clusterSubnet := uuid(n, 3), uuid(n, 4)
	cloud.AddNetworkWithIDs(clusterProject, 1450, "10.6.0.0/24", clusterNetwork, clusterSubnet)
	ns := grantedNamespace(ctx, g)
	snName := fmt.Sprintf("leader-vm-%d", n)
	osc := &infrav1.OpenStackCluster{Status: infrav1.OpenStackClusterStatus{Network: &infrav1.NetworkStatusWithSubnets{
		NetworkStatus: infrav1.NetworkStatus{ID: clusterNetwork, Name: "k8s-clusterapi-cluster-" + ns + "-c"},
		Subnets:       []infrav1.Subnet{{ID: clusterSubnet, CIDR: "10.6.0.0/24"}},
	}}}
	// Only written while no replica runs (they read the maps).
	clouds.Clusters[ns+"/c"] = &fakecloud.Project{Cloud: cloud, ID: clusterProject, OpenStackCluster: osc}
	clouds.SharedNetworks[snName] = vm

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: snName},
		Data: map[string][]byte{openstack.CloudsSecretKey: []byte("clouds:\n  vm-project:\n    auth:\n      auth_url: http://127.0.0.1:5000/v3\n")}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	sn := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: snName}, Spec: sharednetv1.SharedNetworkSpec{
		Identity:  sharednetv1.VMProjectIdentity{SecretName: secret.Name, CloudName: "vm-project"},
		NetworkID: network, Subnets: []string{subnet},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{grantLabel: "true"}},
	}}
	g.Expect(env.Client.Create(ctx, sn)).To(Succeed())

	// The cluster with md-a, before any replica runs.
	cluster := clusterOfTheExtension(ctx, t, ns, "c")
	writeClusterNetwork(ctx, g, cluster, osc)
	initial := templateOf(ctx, g, ns)
	refs := watchTemplateRefs(ctx, t, ns, initial)

	// Two replicas, one lease; A leads.
	rec := &shareRecorder{cloud: cloud, held: make(chan string, 1)}
	a := startReplica(t, "A", vm, clouds, rec)
	waitElected(t, a, 30*time.Second)
	b := startReplica(t, "B", vm, clouds, rec)

	shares := func() map[string][2]string {
		out := map[string][2]string{}
		for id, s := range cloud.Shares() {
			if s[0] == network {
				out[id] = s
			}
		}
		return out
	}
	attachment := func(g Gomega) *sharednetv1.SharedNetworkAttachment {
		got := &sharednetv1.SharedNetworkAttachment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharednetv1.AttachmentName(cluster.Name, "md-a")}, got)).To(Succeed())
		return got
	}
	state := func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "\nshares of network %s in the cloud: %v\nShare calls: %s\nmd-a's template refs over time: %v", network, shares(), rec, refs.get())
		got := &sharednetv1.SharedNetworkAttachment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharednetv1.AttachmentName(cluster.Name, "md-a")}, got); err != nil {
			fmt.Fprintf(&b, "\nattachment: %v", err)
		} else {
			raw, _ := yaml.Marshal(got.Status)
			fmt.Fprintf(&b, "\nattachment status:\n%s", raw)
		}
		c := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c); err == nil {
			fmt.Fprintf(&b, "cluster annotations: %v", c.Annotations)
		}
		s := &sharednetv1.SharedNetwork{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sn), s); err == nil {
			raw, _ := yaml.Marshal(s.Status.Conditions)
			fmt.Fprintf(&b, "\nSharedNetwork conditions:\n%s", raw)
		}
		return b.String()
	}
	defer func() {
		if t.Failed() {
			t.Log(state())
		}
	}()

	// The SharedNetwork's facts, read by the leader's SharedNetwork controller.
	g.Eventually(func(g Gomega) {
		got := &sharednetv1.SharedNetwork{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sn), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, sharednetv1.ReadyCondition)).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), state)

	// The attach, and the leader stopped in its middle.
	rec.arm(point)
	g.Expect(updateCluster(ctx, cluster, func(c *clusterv1.Cluster) {
		variables.SetOverride(c, "md-a", []byte(fmt.Sprintf(`{"name":%q,"subnet":%q}`, snName, subnet)))
	})).To(Succeed())
	var heldBy string
	select {
	case heldBy = <-rec.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("the leader never reached the point %q", point)
	}
	g.Expect(heldBy).To(Equal("A"), "the leader is the one attaching")
	select {
	case <-b.mgr.Elected():
		t.Fatal("B was elected while A led")
	default:
	}
	// Where the attach stands when the leader goes.
	g.Expect(shares()).To(HaveLen(1), "the cloud holds the share")
	switch point {
	case afterShare:
		g.Expect(attachment(g).Status.Share).To(BeNil(), "the share's answer has not reached the status")
	case afterStatus:
		g.Expect(attachment(g).Status.Share).NotTo(BeNil(), "the status records the share")
	}
	c := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
	g.Expect(c.Annotations).NotTo(HaveKey(sharedAnnotation), "not nudged yet")
	if point == afterShare {
		// (Once the status records the share, GeneratePatches may already
		// emit the port if CAPI reconciles the Cluster for any reason.)
		g.Expect(refs.get()).To(Equal([]string{initial}), "nothing rolled yet")
	}

	a.stop(t)
	stoppedA := time.Now()
	waitElected(t, b, 3*leaseDuration)
	t.Logf("B took the lease %s after A stopped", time.Since(stoppedA).Round(time.Millisecond))

	// B finishes the attach.
	g.Eventually(func(g Gomega) {
		got := attachment(g)
		g.Expect(got.Status.Phase).To(Equal(sharednetv1.PhaseAttached))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, sharednetv1.AttachmentReadyCondition)).To(BeTrue())
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), state)
	// And nothing more happens.
	g.Consistently(func(g Gomega) {
		g.Expect(refs.get()).To(HaveLen(2))
		g.Expect(shares()).To(HaveLen(1))
	}, 3*time.Second, 100*time.Millisecond).Should(Succeed(), state)

	// Exactly one share, made once, by A; B only found it again.
	policies := shares()
	g.Expect(policies).To(HaveLen(1), state)
	var policy string
	for id, s := range policies {
		policy = id
		g.Expect(s).To(Equal([2]string{network, clusterProject}))
	}
	got := attachment(g)
	g.Expect(got.Status.Share).NotTo(BeNil())
	g.Expect(got.Status.Share.RBACPolicyID).To(Equal(policy))
	g.Expect(got.Status.Share.ProjectID).To(Equal(clusterProject))
	made := rec.of(network)
	g.Expect(made).NotTo(BeEmpty())
	g.Expect(made[0].replica).To(Equal("A"))
	created := 0
	for _, call := range made {
		if call.created {
			created++
		}
		if call.replica != "A" {
			g.Expect(call.at).To(BeTemporally(">", stoppedA), "B shares only once A has stopped: %s", rec)
		}
	}
	g.Expect(created).To(Equal(1), "one RBAC policy created, never a second: %s", rec)
	switch point {
	case afterShare:
		// The lost answer is found by B's find-or-create.
		g.Expect(made).To(HaveLen(2), "%s", rec)
		g.Expect(made[1].policy).To(Equal(policy))
	case afterStatus:
		g.Expect(made).To(HaveLen(1), "an established share is not asked for again: %s", rec)
	}

	// Exactly one rollout: md-a's template changed once, to one with the port.
	final := refs.get()
	g.Expect(final).To(HaveLen(2), "one template change: %v", final)
	tmpl := &infrav1.OpenStackMachineTemplate{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: final[1]}, tmpl)).To(Succeed())
	ports := tmpl.Spec.Template.Spec.Ports
	g.Expect(ports).To(HaveLen(2))
	g.Expect(ptr.Deref(ports[1].Network.ID, "")).To(Equal(network))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
	g.Expect(c.Annotations).To(HaveKeyWithValue(sharedAnnotation, policy))

	b.stop(t)
}

// uuid is a UUID-shaped ID, distinct for each (scenario, object).
func uuid(scenario, object int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", scenario, object)
}

// grantedNamespace makes a namespace the test's SharedNetworks grant.
func grantedNamespace(ctx context.Context, g Gomega) string {
	ns, err := env.CreateNamespace(ctx, "leader")
	g.Expect(err).NotTo(HaveOccurred())
	obj := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, obj)).To(Succeed())
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[grantLabel] = "true"
	g.Expect(env.Client.Update(ctx, obj)).To(Succeed())
	return ns
}

// clusterOfTheExtension creates a ClusterClass whose external patch is this
// extension and a Cluster of it with one nodegroup, md-a, of zero replicas
// (no provider runs machines here: with zero, the rollout is over as soon as
// md-a runs on the template with the port); it returns the Cluster once
// md-a's MachineDeployment exists.
func clusterOfTheExtension(ctx context.Context, t *testing.T, ns, name string) *clusterv1.Cluster {
	t.Helper()
	g := NewWithT(t)
	class := "leader"
	objs := testenv.ClusterClass(ns, class, clusterv1.ClusterClassPatch{
		Name: "shared-network",
		External: &clusterv1.ExternalPatchDefinition{
			GeneratePatchesExtension:   "generate-patches." + extensionConfigName,
			ValidateTopologyExtension:  "validate-topology." + extensionConfigName,
			DiscoverVariablesExtension: "discover-variables." + extensionConfigName,
		},
	})
	g.Expect(env.CreateObjects(ctx, objs...)).To(Succeed())
	g.Expect(env.WaitForClusterClass(ctx, ns, class)).To(Succeed())
	cluster := testenv.Cluster(ns, name, class, "md-a")
	cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{podCIDR}
	cluster.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](0)
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		templateOf(ctx, g, ns)
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	return cluster
}

// writeClusterNetwork plays CAPO: the cluster network it made, which the
// rules run before the share wait for.
func writeClusterNetwork(ctx context.Context, g Gomega, cluster *clusterv1.Cluster, made *infrav1.OpenStackCluster) {
	g.Eventually(func(g Gomega) {
		list := &infrav1.OpenStackClusterList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(cluster.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		osc := &list.Items[0]
		osc.Status.Network = made.Status.Network.DeepCopy()
		g.Expect(env.Client.Status().Update(ctx, osc)).To(Succeed())
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
}

// templateOf is md-a's current OpenStackMachineTemplate.
func templateOf(ctx context.Context, g Gomega, ns string) string {
	mds := &clusterv1.MachineDeploymentList{}
	g.Expect(env.Client.List(ctx, mds, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-a"})).To(Succeed())
	g.Expect(mds.Items).To(HaveLen(1))
	ref := mds.Items[0].Spec.Template.Spec.InfrastructureRef.Name
	g.Expect(ref).NotTo(BeEmpty())
	return ref
}

// updateCluster applies change to the latest Cluster.
func updateCluster(ctx context.Context, cluster *clusterv1.Cluster, change func(*clusterv1.Cluster)) error {
	for {
		latest := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), latest); err != nil {
			return err
		}
		change(latest)
		err := env.Client.Update(ctx, latest)
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
}

// templateRefs is every OpenStackMachineTemplate md-a's MachineDeployment
// pointed at, in order, as the API server's watch reported each write.
type templateRefs struct {
	mu   sync.Mutex
	refs []string
	err  error
}

func (r *templateRefs) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return append([]string{"watch failed: " + r.err.Error()}, r.refs...)
	}
	return append([]string(nil), r.refs...)
}

// watchTemplateRefs watches md-a's MachineDeployment from the version at
// which its template was initial, so no write is missed.
func watchTemplateRefs(ctx context.Context, t *testing.T, ns, initial string) *templateRefs {
	t.Helper()
	g := NewWithT(t)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	list := &clusterv1.MachineDeploymentList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-a"})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Spec.Template.Spec.InfrastructureRef.Name).To(Equal(initial))
	w, err := wc.Watch(ctx, &clusterv1.MachineDeploymentList{}, &client.ListOptions{
		Namespace: ns, Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion},
	})
	g.Expect(err).NotTo(HaveOccurred())
	r := &templateRefs{refs: []string{initial}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			md, ok := ev.Object.(*clusterv1.MachineDeployment)
			if ev.Type == watch.Error || !ok {
				r.mu.Lock()
				r.err = fmt.Errorf("watch event %s: %v", ev.Type, ev.Object)
				r.mu.Unlock()
				continue
			}
			if md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] != "md-a" {
				continue
			}
			ref := md.Spec.Template.Spec.InfrastructureRef.Name
			r.mu.Lock()
			if r.refs[len(r.refs)-1] != ref {
				r.refs = append(r.refs, ref)
			}
			r.mu.Unlock()
		}
		r.mu.Lock()
		if r.err == nil && ctx.Err() == nil {
			r.err = fmt.Errorf("the watch ended early")
		}
		r.mu.Unlock()
	}()
	t.Cleanup(func() {
		w.Stop()
		<-done
	})
	return r
}

// replica is one manager of the extension with leader election on,
// running the controllers main.go registers (the SharedNetwork and the
// attachment controller) over the fake cloud.
type replica struct {
	name   string
	mgr    ctrl.Manager
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// startReplica builds a manager as internal/manager's NewManager does (its
// scheme, its Secret cache, leader election with lease leaseName), with the
// election's namespace and release-on-cancel, which NewManager's Options do
// not offer (out of a cluster controller-runtime cannot guess the
// namespace).
func startReplica(t *testing.T, name string, vm *fakecloud.Project, clouds *fakecloud.Clouds, rec *shareRecorder) *replica {
	t.Helper()
	mgr := newManager(t, func(o *ctrl.Options) {
		o.LeaderElection, o.LeaderElectionID, o.LeaderElectionNamespace, o.LeaderElectionReleaseOnCancel = true, leaseName, install.Namespace, true
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = &leaseDuration, &renewDeadline, &retryPeriod
		o.GracefulShutdownTimeout = ptr.To(10 * time.Second)
	})
	recorder := mgr.GetEventRecorderFor("capo-sharednet")
	if err := (&controllers.SharedNetworkReconciler{
		Client: mgr.GetClient(), Namespace: install.Namespace, Resync: 2 * time.Second, Recorder: recorder,
		// Every SharedNetwork of the test is a network of the one VM project.
		Clouds: clouds,
	}).SetupWithManager(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := (&controllers.AttachmentReconciler{
		Client: &nudgeHolder{Client: mgr.GetClient(), replica: name, rec: rec}, Credentials: &recordingClouds{Clouds: clouds, replica: name, rec: rec}, Recorder: recorder,
	}).SetupWithManager(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{name: name, mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// newManager builds a manager as internal/manager's NewManager does (its
// scheme, its Secret cache, the consumers index), with change applied to
// its options.
func newManager(t *testing.T, change func(*ctrl.Options)) ctrl.Manager {
	t.Helper()
	opts := ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{install.Namespace: {}}},
		}},
	}
	change(&opts)
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := consumers.AddIndex(context.Background(), mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	return mgr
}

// stop cancels the replica and waits, bounded, for its Start to return.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		start := time.Now()
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("replica %s stopped with: %v", r.name, err)
			}
			t.Logf("replica %s stopped in %s", r.name, time.Since(start).Round(time.Millisecond))
		case <-time.After(20 * time.Second):
			t.Errorf("replica %s did not stop within 20s", r.name)
		}
	})
}

func waitElected(t *testing.T, r *replica, within time.Duration) {
	t.Helper()
	select {
	case <-r.mgr.Elected():
	case err := <-r.done:
		r.done <- err
		t.Fatalf("replica %s stopped before it was elected: %v", r.name, err)
	case <-time.After(within):
		t.Fatalf("replica %s was not elected within %s", r.name, within)
	}
}

// nudgeHolder holds the nudge (a patch of the Cluster with the share's
// annotation) at the point afterStatus until the replica's manager stops.
type nudgeHolder struct {
	client.Client
	replica string
	rec     *shareRecorder
}

func (c *nudgeHolder) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*clusterv1.Cluster); ok && obj.GetAnnotations()[sharedAnnotation] != "" && c.rec.hold(ctx, afterStatus, c.replica) {
		return ctx.Err()
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// shareCall is one Share call the attachment controller made.
type shareCall struct {
	replica, network, policy string
	created                  bool
	at                       time.Time
}

// shareRecorder records every Share of both replicas, whether it created a
// policy in the cloud, and holds the leader at the armed point until its
// manager stops (the leader goes away in the middle of the attach).
type shareRecorder struct {
	cloud *fakecloud.Cloud
	held  chan string

	mu    sync.Mutex
	calls []shareCall
	armed string
}

func (r *shareRecorder) arm(point string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = point
}

// hold blocks the caller until ctx ends when point is armed (once);
// it says whether it held.
func (r *shareRecorder) hold(ctx context.Context, point, replica string) bool {
	r.mu.Lock()
	armed := r.armed == point
	if armed {
		r.armed = ""
	}
	r.mu.Unlock()
	if !armed {
		return false
	}
	r.held <- replica
	<-ctx.Done()
	return true
}

func (r *shareRecorder) of(network string) []shareCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []shareCall
	for _, c := range r.calls {
		if c.network == network {
			out = append(out, c)
		}
	}
	return out
}

func (r *shareRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for _, c := range r.calls {
		parts = append(parts, fmt.Sprintf("{%s network=%s policy=%s created=%t at=%s}", c.replica, c.network, c.policy, c.created, c.at.Format("15:04:05.000")))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// recordingClouds gives the attachment controller the fake cloud's
// projects, with the VM project's Share recorded.
type recordingClouds struct {
	*fakecloud.Clouds
	replica string
	rec     *shareRecorder
}

func (c *recordingClouds) ForSharedNetwork(ctx context.Context, sn *sharednetv1.SharedNetwork) (openstack.VMCloud, error) {
	vm, err := c.Clouds.ForSharedNetwork(ctx, sn)
	if err != nil {
		return nil, err
	}
	return &recordingVM{VMCloud: vm, replica: c.replica, rec: c.rec}, nil
}

type recordingVM struct {
	openstack.VMCloud
	replica string
	rec     *shareRecorder
}

// Share records whether the call created a policy (the cloud's shares
// before and after, one call at a time) and, at the point afterShare,
// holds the leader with the policy made and its answer lost.
func (v *recordingVM) Share(ctx context.Context, networkID, projectID string) (string, error) {
	// A stopping replica may still reconcile with its context cancelled: a
	// real session sends no request then, while the fake ignores contexts.
	if err := ctx.Err(); err != nil {
		return "", err
	}
	v.rec.mu.Lock()
	before := len(v.rec.cloud.Shares())
	policy, err := v.VMCloud.Share(ctx, networkID, projectID)
	v.rec.calls = append(v.rec.calls, shareCall{replica: v.replica, network: networkID, policy: policy,
		created: err == nil && len(v.rec.cloud.Shares()) > before, at: time.Now()})
	v.rec.mu.Unlock()
	if err == nil && v.rec.hold(ctx, afterShare, v.replica) {
		return "", ctx.Err()
	}
	return policy, err
}

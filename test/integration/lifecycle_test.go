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

package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/mtu"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/hooks"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/records"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
)

// attachmentController runs the real attachment reconciler in a manager of
// its own, so a test can stop it (a crash) and start it again.
type attachmentController struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func startAttachmentController(t *testing.T) *attachmentController {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{install.Namespace: {}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := consumers.AddIndex(context.Background(), mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	source := &credentials.Source{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: install.Namespace, Sessions: &openstack.Sessions{}}
	if err := (&controllers.AttachmentReconciler{Client: mgr.GetClient(), Credentials: source, Recorder: mgr.GetEventRecorderFor("capo-sharednet"), Records: &controllers.PolicyGuard{Reader: mgr.GetAPIReader()},
		Seals: &records.Keyring{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Namespace: install.Namespace}}).SetupWithManager(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &attachmentController{cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- mgr.Start(ctx) }()
	return c
}

func (c *attachmentController) stop() {
	c.once.Do(func() {
		c.cancel()
		<-c.done //nolint:errcheck // stopping: a start error was already seen by the test
	})
}

// TestNodegroupLifeCycleOnARealCloud: attach shares the network in Neutron and
// rolls md-a once, a crash and a lost status neither share twice nor roll
// again, a load balancer on the subnet blocks the detach until
// BeforeClusterDelete's clean-up removes it, and the detach unshares.
func TestNodegroupLifeCycleOnARealCloud(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vm, cluster, admin := testbed.NewClients(t, testbed.VMProject), testbed.NewClients(t, testbed.ClusterProject), testbed.NewClients(t, testbed.Admin)

	// The VM project's network, offered by the administrator.
	networkName := "vm-real"
	n, s, sn := offerRealNetwork(ctx, t, vm, networkName, "172.25.0.0/24")
	shares := func() []string { return sharesOf(ctx, g, admin, n.ID, cluster.ProjectID) }

	// The cluster, its credential, and its two nodegroups.
	ns := grantedNamespace(ctx, g)
	c, initial := clusterOfTheExtension(ctx, t, ns, "life", "c-life")

	attachment := func(g Gomega) *sharednetv1.SharedNetworkAttachment {
		a := &sharednetv1.SharedNetworkAttachment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharednetv1.AttachmentName(c.Name, "md-a")}, a)).To(Succeed())
		return a
	}

	controller := startAttachmentController(t)
	t.Cleanup(func() { controller.stop() })

	// The cluster network CAPO makes, in the cluster's project; its MTU is
	// Neutron's default, as the VM network's is.
	cn, cs := createClusterNetwork(ctx, t, cluster)
	var clusterMTU struct {
		networks.Network
		mtu.NetworkMTUExt
	}
	g.Expect(networks.Get(ctx, admin.Network, cn.ID).ExtractInto(&clusterMTU)).To(Succeed())
	setMTU := func(g Gomega, value int) {
		_, err := networks.Update(ctx, admin.Network, n.ID, mtu.UpdateOptsExt{UpdateOptsBuilder: networks.UpdateOpts{}, MTU: value}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func(g Gomega) int32 {
			got := &sharednetv1.SharedNetwork{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sn), got)).To(Succeed())
			return got.Status.MTU
		}, 3*resync+5*time.Second, 200*time.Millisecond).Should(BeEquivalentTo(value))
	}

	t.Run("a value set before CAPO made the cluster network: the MTU rule runs before the share, nothing is shared or rolled", func(t *testing.T) {
		g := NewWithT(t)
		setMTU(g, clusterMTU.MTU-50)
		// Admission cannot know the MTU of a network that does not exist yet.
		setValue(ctx, g, c, "md-a", fmt.Sprintf(`{"name":%q}`, networkName))
		g.Eventually(func(g Gomega) {
			g.Expect(condition(attachment(g), sharednetv1.SharedCondition).Reason).To(Equal(sharednetv1.ReasonWaitingForClusterNetwork))
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())

		// CAPO made it.
		recordClusterNetwork(ctx, g, c, cn, cs)

		want := And(ContainSubstring("mtu:"), ContainSubstring(fmt.Sprintf("MTU %d but the cluster network has MTU %d", clusterMTU.MTU-50, clusterMTU.MTU)), ContainSubstring("nothing was shared"))
		g.Eventually(func(g Gomega) {
			shared := condition(attachment(g), sharednetv1.SharedCondition)
			g.Expect(shared.Reason).To(Equal(sharednetv1.ReasonRuleViolated))
			g.Expect(shared.Message).To(want)
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
		g.Eventually(func(g Gomega) {
			for _, involved := range []string{c.Name, sharednetv1.AttachmentName(c.Name, "md-a")} {
				events := &corev1.EventList{}
				g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
				var messages []string
				for _, e := range events.Items {
					if e.InvolvedObject.Name == involved && e.Reason == sharednetv1.ReasonRuleViolated {
						messages = append(messages, e.Message)
					}
				}
				g.Expect(messages).To(ContainElement(want), "an Event on %s", involved)
			}
		}, 10*time.Second, 250*time.Millisecond).Should(Succeed())
		g.Expect(shares()).To(BeEmpty(), "no share")
		g.Consistently(func(g Gomega) {
			g.Expect(observe(ctx, g, c)).To(Equal(initial), "no port, no rollout")
		}, 2*time.Second, 250*time.Millisecond).Should(Succeed())

		// The administrator fixes the VM network: the attach goes on by itself.
		setMTU(g, clusterMTU.MTU)
	})

	var policy string
	var attached state
	t.Run("attach: the network is shared with the cluster's project and md-a rolls once", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			a := attachment(g)
			g.Expect(a.Status.Share).NotTo(BeNil(), "%+v", a.Status.Conditions)
			policy = a.Status.Share.RBACPolicyID
			g.Expect(a.Status.Share.ProjectID).To(Equal(cluster.ProjectID))
			g.Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseRollingOut))
		}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
		g.Expect(shares()).To(Equal([]string{policy}))
		g.Eventually(func(g Gomega) {
			attached = observe(ctx, g, c)
			g.Expect(attached.Nodegroups["md-a"].MachineSets).To(HaveLen(2))
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
		g.Expect(attached.Nodegroups["md-b"]).To(Equal(initial.Nodegroups["md-b"]))
		g.Expect(*ports(ctx, g, ns, attached.Nodegroups["md-a"].Template)[1].Network.ID).To(Equal(n.ID))
	})

	t.Run("a crash and a lost status: no second share, no second rollout", func(t *testing.T) {
		g := NewWithT(t)
		controller.stop()
		loseShareStatus(ctx, g, c, "md-a")
		controller = startAttachmentController(t)
		g.Eventually(func(g Gomega) {
			a := attachment(g)
			g.Expect(a.Status.Share).NotTo(BeNil())
			g.Expect(a.Status.Share.RBACPolicyID).To(Equal(policy), "the same share is found again")
		}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
		g.Expect(shares()).To(Equal([]string{policy}))
		g.Consistently(func(g Gomega) {
			g.Expect(observe(ctx, g, c)).To(Equal(attached))
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	var lb, otherLB *loadbalancers.LoadBalancer
	t.Run("this cluster's load balancer on the shared subnet blocks the detach, named in the refusal; another cluster's does not", func(t *testing.T) {
		g := NewWithT(t)
		// Named and tagged as the cluster's CCM names it, next to another
		// cluster's of the same project, which must not block this detach.
		name := ccm.LoadBalancerName(ccm.ClusterName(ns, c.Name), "default", "my-service")
		var err error
		lb, err = loadbalancers.Create(ctx, cluster.LoadBalancer, loadbalancers.CreateOpts{
			Name: name, Tags: []string{name}, VipSubnetID: s.ID,
		}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		other := ccm.LoadBalancerName(ccm.ClusterName(ns+"-other", c.Name), "default", "other-service")
		otherLB, err = loadbalancers.Create(ctx, cluster.LoadBalancer, loadbalancers.CreateOpts{Name: other, Tags: []string{other}, VipSubnetID: s.ID}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		err = updateCluster(ctx, c, func(c *clusterv1.Cluster) {
			for i := range c.Spec.Topology.Workers.MachineDeployments {
				c.Spec.Topology.Workers.MachineDeployments[i].Variables.Overrides = nil
			}
		})
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(And(ContainSubstring(`"md-a"`), ContainSubstring("detach"), ContainSubstring(lb.Name), ContainSubstring("default/my-service"), ContainSubstring(lb.VipAddress)))
		g.Expect(err.Error()).NotTo(ContainSubstring(otherLB.Name), "another cluster's load balancer is not this cluster's business")
		g.Expect(observe(ctx, g, c)).To(Equal(attached), "nothing rolled")
	})

	t.Run("a BeforeClusterDelete request for a cluster that is not being deleted deletes nothing", func(t *testing.T) {
		g := NewWithT(t)
		h := &hooks.Handlers{Reader: env.Client, APIReader: env.Client, Client: env.Client,
			Credentials: &credentials.Source{Client: env.Client, APIReader: env.Client, Namespace: install.Namespace, Sessions: &openstack.Sessions{}}}
		req := &runtimehooksv1.BeforeClusterDeleteRequest{Cluster: clusterv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name}}}
		resp := &runtimehooksv1.BeforeClusterDeleteResponse{}
		h.BeforeClusterDelete(ctx, req, resp)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
		g.Expect(resp.Message).To(ContainSubstring("not being deleted"))
		lbs := testbed.Session(t, testbed.ClusterProject, openstack.Options{})
		g.Expect(testbed.LoadBalancerGone(ctx, cluster.LoadBalancer, lb.ID)).To(BeFalse(), "a forged call deleted nothing")

		// The cluster owner deletes the Service (the CCM would delete its
		// load balancer); the other cluster's stays.
		g.Eventually(func() error { return lbs.DeleteCascade(ctx, lb.ID) }, time.Minute, time.Second).Should(Succeed())
		waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		g.Expect(testbed.WaitLoadBalancersGone(waitCtx, cluster.LoadBalancer, []string{lb.ID}, time.Second)).To(Succeed())
		g.Expect(testbed.LoadBalancerGone(ctx, cluster.LoadBalancer, otherLB.ID)).To(BeFalse())
	})

	t.Run("detach: md-a rolls once more and the share is removed from Neutron, also across a crash", func(t *testing.T) {
		g := NewWithT(t)
		// The controller is down while the nodegroup detaches; the unshare
		// happens (as if the controller did it) and the crash comes before
		// the attachment is released.
		controller.stop()
		g.Eventually(func() error {
			return updateCluster(ctx, c, func(c *clusterv1.Cluster) {
				for i := range c.Spec.Topology.Workers.MachineDeployments {
					c.Spec.Topology.Workers.MachineDeployments[i].Variables.Overrides = nil
				}
			})
		}, 60*time.Second, 2*time.Second).Should(Succeed(), "admitted while another cluster's load balancer is on the subnet")
		// That other cluster goes away with its load balancer: its VIP port,
		// in the same project, would keep the project's share (Neutron's 409).
		lbs := testbed.Session(t, testbed.ClusterProject, openstack.Options{})
		g.Eventually(func() error { return lbs.DeleteCascade(ctx, otherLB.ID) }, time.Minute, time.Second).Should(Succeed())
		waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		g.Expect(testbed.WaitLoadBalancersGone(waitCtx, cluster.LoadBalancer, []string{otherLB.ID}, time.Second)).To(Succeed())
		g.Eventually(func(g Gomega) {
			now := observe(ctx, g, c)
			g.Expect(now.Nodegroups["md-a"].MachineSets).To(HaveLen(3))
			g.Expect(now.Nodegroups["md-b"]).To(Equal(initial.Nodegroups["md-b"]))
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
		vmSession := testbed.Session(t, testbed.VMProject, openstack.Options{})
		g.Eventually(func() error { return vmSession.Unshare(ctx, policy) }, 60*time.Second, 2*time.Second).Should(Succeed())

		controller = startAttachmentController(t)
		g.Eventually(func() bool {
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharednetv1.AttachmentName(c.Name, "md-a")}, &sharednetv1.SharedNetworkAttachment{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 250*time.Millisecond).Should(BeTrue(), "the restarted controller finishes the detach")
		g.Expect(shares()).To(BeEmpty())
		g.Consistently(func(g Gomega) {
			g.Expect(observe(ctx, g, c).Nodegroups["md-a"].MachineSets).To(HaveLen(3), "no further rollout")
		}, 2*time.Second, 250*time.Millisecond).Should(Succeed())
		g.Expect(networks.Delete(ctx, vm.Network, n.ID).ExtractErr()).To(Succeed(), "the VM project can delete its network")
	})
}

func condition(a *sharednetv1.SharedNetworkAttachment, kind string) metav1.Condition {
	if c := meta.FindStatusCondition(a.Status.Conditions, kind); c != nil {
		return *c
	}
	return metav1.Condition{}
}

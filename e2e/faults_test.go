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

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/faultproxy"
)

// extensionAgent starts the extension's User-Agent: the proxy's faults hit
// the extension alone, while CAPO, the CCM and the plane's stand-ins, behind
// the same proxy, are answered as usual.
const extensionAgent = "capo-sharednet/"

// The cloud fails under the extension (issue 26, part 3), and the extension
// is killed between two steps whose window is only as long as one answer
// (part 2): the proxy kills it once the service has acted and before it hears
// the answer. The cluster's clouds.yaml and the SharedNetworks' credential
// both lead through the proxy (its Keystone hands out a catalog of its own
// listeners).
var _ = Describe("A failing cloud flips no decision, and a crash between two steps converges", Ordered, Label("local", "reliability"), func() {
	const (
		mdA = "md-a" // attached with md-b, then detached while Neutron stalls
		mdB = "md-b" // attached, keeps the share, deleted with the cluster
	)
	var (
		proxy              *faultproxy.Proxy
		ns, name, snName   string
		key                client.ObjectKey
		vmNet, mtuNet      plane.VMNetwork
		book               *ledger
		initialA, initialB []plane.Machine
		// down says the proxy killed the extension and no spec started it again.
		down atomic.Bool
	)
	// killOn kills the extension (SIGKILL) once the service has answered a
	// request of the extension's matching method and path with a success,
	// before the extension hears it; the answer is lost. It returns when that
	// happened. At the end of the spec the rule goes, and a killed extension
	// is started again (a failed spec leaves it running for the clean-up).
	killOn := func(service, method, path string) (killed <-chan error) {
		ch := make(chan error, 1)
		remove := proxy.Inject(faultproxy.Rule{Service: service, Method: method, PathPrefix: path, Agent: extensionAgent, Fault: faultproxy.LoseAnswer, Times: 1,
			Then: func(faultproxy.Exchange) {
				down.Store(true)
				ch <- pl.KillExtension()
			}})
		DeferCleanup(func(ctx SpecContext) {
			remove()
			if down.Load() {
				Expect(pl.StartExtension(ctx)).To(Succeed())
				down.Store(false)
			}
		}, NodeTimeout(3*time.Minute))
		return ch
	}
	restart := func(ctx SpecContext) {
		GinkgoHelper()
		Expect(pl.StartExtension(ctx)).To(Succeed())
		down.Store(false)
	}
	// acted counts the extension's requests of method on path that the
	// service answered with a success: what it did, not what it tried.
	acted := func(service, method, path string) int {
		return len(proxy.Exchanges(func(e faultproxy.Exchange) bool {
			return e.Service == service && e.Method == method && strings.HasPrefix(e.Path, path) &&
				strings.Contains(e.Agent, extensionAgent) && e.Status >= 200 && e.Status < 300
		}))
	}
	const rbac = "/v2.0/rbac-policies"

	BeforeAll(func(ctx SpecContext) {
		done := tl.step("faults: a proxy in front of Keystone, Neutron and Octavia; a cluster behind it with md-a and md-b (1 node each), all Running")
		defer done()
		authURL, err := url.Parse(vm.Network.IdentityEndpoint)
		Expect(err).NotTo(HaveOccurred())
		upstreams := map[string]string{"identity": authURL.Scheme + "://" + authURL.Host}
		for kind, endpoint := range map[string]string{"network": vm.Network.Endpoint, "load-balancer": vm.LoadBalancer.Endpoint} {
			u, err := url.Parse(endpoint)
			Expect(err).NotTo(HaveOccurred())
			upstreams[kind] = u.Scheme + "://" + u.Host
		}
		proxy, err = faultproxy.Start(upstreams)
		Expect(err).NotTo(HaveOccurred())
		// Registered first, so it runs last: the cluster's deletion below goes through it.
		DeferCleanup(proxy.Close)
		proxied, err := proxy.Clouds(clouds)
		Expect(err).NotTo(HaveOccurred())

		suffix := fmt.Sprintf("%05x", time.Now().UnixNano()&0xfffff)
		ns, name, snName = "e2e-faults-"+suffix, "c-faults-"+suffix, "e2e-faults-"+suffix
		key = client.ObjectKey{Namespace: ns, Name: name}
		Expect(pl.Namespace(ctx, ns, map[string]string{plane.GrantLabel: "true"})).To(Succeed())
		for _, n := range []struct {
			into *plane.VMNetwork
			opts plane.VMNetworkOpts
		}{
			{&vmNet, plane.VMNetworkOpts{Name: snName, CIDR: "172.26.0.0/24"}},
			{&mtuNet, plane.VMNetworkOpts{Name: snName + "-mtu", CIDR: "172.26.1.0/24", MTU: 1400}},
		} {
			*n.into, err = plane.EnsureVMNetwork(ctx, vm, n.opts)
			Expect(err).NotTo(HaveOccurred())
			id := n.into.NetworkID
			DeferCleanup(func(ctx SpecContext) { _ = plane.DeleteVMNetwork(ctx, vm, id, 2*time.Minute) }, NodeTimeout(3*time.Minute))
			sn, err := pl.OfferNetwork(ctx, n.opts.Name, *n.into, proxied, nil)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) { _ = client.IgnoreNotFound(pl.Client.Delete(ctx, sn)) })
		}
		cc, err := pl.ClusterClass(ns)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range cc {
			Expect(pl.Apply(ctx, o)).To(Succeed())
		}
		Expect(pl.WaitForClusterClass(ctx, ns, plane.ClusterClassName)).To(Succeed())

		secret, cluster, err := pl.RenderCluster(plane.ClusterVariables{
			Name: name, Namespace: ns, CloudsYAML: proxied, Workers: 1, SharedNetwork: snName, Subnet: vmNet.SubnetID,
		})
		Expect(err).NotTo(HaveOccurred())
		variables.SetOverride(cluster, mdA, nil) // attached below, on the running cluster
		Expect(pl.Apply(ctx, secret, cluster)).To(Succeed())
		DeferCleanup(deleteClusterIfPresent, key, NodeTimeout(10*time.Minute))

		book = newLedger()
		ledgerCtx, stop := context.WithCancel(context.Background())
		go book.run(ledgerCtx, pl.Client, ns, name)
		DeferCleanup(stop)
		Eventually(func(g Gomega) {
			for _, topology := range []string{mdA, mdB} {
				ms, err := pl.Machines(ctx, ns, name, topology)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ms).To(HaveLen(1))
				g.Expect(ms[0].Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "machine %s", ms[0].Name)
			}
		}, 6*time.Minute, time.Second).Should(Succeed())
		initialA, err = pl.Machines(ctx, ns, name, mdA)
		Expect(err).NotTo(HaveOccurred())
		initialB, err = pl.Machines(ctx, ns, name, mdB)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			for _, sn := range []string{snName, snName + "-mtu"} {
				s := &sharednetv1.SharedNetwork{}
				g.Expect(pl.Client.Get(ctx, client.ObjectKey{Name: sn}, s)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, sharednetv1.ReadyCondition)).To(BeTrue(), "SharedNetwork %s is Ready (its facts read through the proxy)", sn)
			}
		}, 2*time.Minute, time.Second).Should(Succeed())
	}, NodeTimeout(10*time.Minute))

	attach := func(topology, sharedNetwork string) func(*clusterv1.Cluster) {
		return func(c *clusterv1.Cluster) {
			variables.SetOverride(c, topology, plane.SharedNetworkValue(sharedNetwork, ""))
		}
	}
	// refused expects the update refused, nothing of it applied, and returns
	// why and how long the update took.
	refused := func(ctx SpecContext, change func(*clusterv1.Cluster)) (string, time.Duration) {
		GinkgoHelper()
		mark := book.mark()
		start := time.Now()
		err := pl.UpdateCluster(ctx, key, change)
		took := time.Since(start)
		Expect(err).To(HaveOccurred(), "refused")
		Expect(pl.Attachment(ctx, ns, name, mdA)).To(BeNil(), "no attachment")
		Expect(shares(ctx, vmNet.NetworkID)).To(BeEmpty(), "no share")
		Expect(book.since(mark)).To(Equal(changes{Created: map[string][]string{}, Deleted: map[string][]string{}}), "no machine created or deleted")
		fmt.Fprintf(GinkgoWriter, "refused in %s: %v\n", took, err)
		return err.Error(), took
	}

	It("admission while Keystone, Neutron and Octavia stall or answer 503: the attach is refused within the webhook's timeout, saying it cannot verify and to retry; a bad request is refused all the same; once the cloud answers, the bad one is refused naming its rule", func(ctx SpecContext) {
		defer tl.step("faults: admission while the cloud stalls, then answers 503, then answers")()
		By("every request of the extension stalls for 30 s")
		remove := proxy.Inject(faultproxy.Rule{Agent: extensionAgent, Fault: faultproxy.Stall, Stall: 30 * time.Second})
		before, err := scrapeExtension(ctx)
		Expect(err).NotTo(HaveOccurred())
		why, took := refused(ctx, attach(mdA, snName))
		after, err := scrapeExtension(ctx)
		Expect(err).NotTo(HaveOccurred())
		webhook := `webhook="/validate-sharednet-cluster"`
		calls := after.sum("controller_runtime_webhook_latency_seconds_count", webhook) - before.sum("controller_runtime_webhook_latency_seconds_count", webhook)
		answered := after.sum("controller_runtime_webhook_latency_seconds_sum", webhook) - before.sum("controller_runtime_webhook_latency_seconds_sum", webhook)
		fmt.Fprintf(GinkgoWriter, "the extension's cost: %s\n", after.costs(before))
		Expect(calls).To(BeNumerically(">=", 1))
		Expect(answered/calls).To(BeNumerically("<", 10), "the webhook answers within its 10 s timeout, with its own reason")
		Expect(why).To(And(ContainSubstring(`"md-a"`), ContainSubstring("retry")))
		tl.notef("admission while the cloud stalls: the webhook answered %g call(s) in %.1fs each, the update refused in %.1fs: %s", calls, answered/calls, took.Seconds(), why)
		refused(ctx, attach(mdA, snName+"-mtu"))
		remove()

		By("every request of the extension answered 503")
		remove = proxy.Inject(faultproxy.Rule{Agent: extensionAgent, Fault: faultproxy.Unavailable})
		why, _ = refused(ctx, attach(mdA, snName))
		Expect(why).To(And(ContainSubstring(`"md-a"`), ContainSubstring("retry")))
		tl.notef("admission while the cloud answers 503: %s", why)
		refused(ctx, attach(mdA, snName+"-mtu"))
		remove()

		By("the cloud answers again: the bad request is refused naming its rule (the good one is admitted in the next step)")
		why, _ = refused(ctx, attach(mdA, snName+"-mtu"))
		Expect(why).To(And(ContainSubstring("mtu"), ContainSubstring("1400"), ContainSubstring("1450")))
	}, SpecTimeout(4*time.Minute))

	It("the attach refused above admitted now that the cloud answers; md-a and md-b attached while Neutron answers 503 and Keystone resets, the extension killed right after Neutron made the share and before the Cluster is nudged, started again while Neutron still fails: one share (made once), each nodegroup replaced once, one port per node, Attached", func(ctx SpecContext) {
		done := tl.step("faults: attach while Neutron fails, killed between the share and the nudge (2 nodes replaced)")
		defer done()
		mark := book.mark()
		killed := killOn("network", http.MethodPost, rbac)
		Expect(pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) { attach(mdA, snName)(c); attach(mdB, snName)(c) })).To(Succeed(), "admitted once the cloud answers")
		flaky := proxy.Inject(faultproxy.Rule{Service: "network", Method: http.MethodGet, Agent: extensionAgent, Fault: faultproxy.Unavailable, Times: 8})
		resets := proxy.Inject(faultproxy.Rule{Service: "identity", Agent: extensionAgent, Fault: faultproxy.Reset, Times: 2})
		Eventually(killed, 4*time.Minute).Should(Receive(Succeed()), "the extension shared the network, and was killed")
		flaky()
		resets()
		c := &clusterv1.Cluster{}
		Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
		Expect(c.Annotations).NotTo(HaveKey(sharedAnnotation(mdA)), "killed before the nudge")
		Expect(c.Annotations).NotTo(HaveKey(sharedAnnotation(mdB)), "killed before the nudge")
		Expect(shares(ctx, vmNet.NetworkID)).To(HaveLen(1), "Neutron made the share; the extension never heard")

		By("started again while Neutron answers the extension 503 for 15 s")
		failing := proxy.Inject(faultproxy.Rule{Service: "network", Agent: extensionAgent, Fault: faultproxy.Unavailable})
		restart(ctx)
		Eventually(func(g Gomega) string {
			a, err := pl.Attachment(ctx, ns, name, mdA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).NotTo(BeNil())
			return a.Status.Message
		}, time.Minute, time.Second).ShouldNot(BeEmpty(), "the attachment says what it waits for")
		time.Sleep(15 * time.Second)
		a, err := pl.Attachment(ctx, ns, name, mdA)
		Expect(err).NotTo(HaveOccurred())
		tl.notef("attach, Neutron failing after the restart: md-a's attachment %s: %s", a.Status.Phase, a.Status.Message)
		failing()

		nowA := attachedMachines(ctx, ns, name, mdA, 1, 4*time.Minute)
		nowB := attachedMachines(ctx, ns, name, mdB, 1, 4*time.Minute)
		Expect(shares(ctx, vmNet.NetworkID)).To(HaveLen(1), "one share")
		Expect(acted("network", http.MethodPost, rbac)).To(Equal(1), "the network was shared once")
		book.settle()
		Consistently(func(g Gomega) {
			ch := book.since(mark)
			g.Expect(ch.Deleted).To(Equal(map[string][]string{mdA: machineNames(initialA), mdB: machineNames(initialB)}), "each nodegroup replaced once")
			g.Expect(ch.Created).To(Equal(map[string][]string{mdA: machineNames(nowA), mdB: machineNames(nowB)}))
		}, 10*time.Second, time.Second).Should(Succeed())
		expectSharedPorts(ctx, append(nowA, nowB...), vmNet)
		Expect(clusterPortsOn(ctx, vmNet.NetworkID)).To(HaveLen(2), "one port per node, no orphan")
		initialA, initialB = nowA, nowB

		By("each attachment's Ready summarizes its conditions and `kubectl get` shows it; /metrics has the shared subnet's free addresses as Neutron counts them")
		rows := attachmentColumns(ctx, ns)
		for _, md := range []string{mdA, mdB} {
			a, err := pl.Attachment(ctx, ns, name, md)
			Expect(err).NotTo(HaveOccurred())
			Expect(meta.IsStatusConditionTrue(a.Status.Conditions, sharednetv1.ReadyCondition)).To(BeTrue(), "%s's Ready", md)
			Expect(rows).To(HaveKeyWithValue(a.Name, And(HaveKeyWithValue("Ready", "True"), HaveKeyWithValue("Phase", "Attached"),
				HaveKeyWithValue("Nodegroup", md), HaveKeyWithValue("Cluster", name), HaveKeyWithValue("Subnet", vmNet.SubnetID),
				HaveKeyWithValue("Attached", "1"), HaveKeyWithValue("Desired", "1"))))
		}
		Eventually(func(g Gomega) {
			metrics, err := scrapeExtension(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			free := metrics.sum("capo_sharednet_subnet_free_addresses", `sharednetwork="`+snName+`"`, `subnet="`+vmNet.SubnetID+`"`)
			g.Expect(free).To(Equal(neutronFree(ctx, g, vmNet)), "capo_sharednet_subnet_free_addresses is Neutron's total_ips - used_ips")
		}, time.Minute, time.Second).Should(Succeed())
	}, SpecTimeout(10*time.Minute))

	It("the namespace's grant revoked (reported, md-b's growth refused, nothing rolled or shared), then detach md-a while Neutron stalls the extension for 30 s and Octavia answers 503: md-a replaced once, its port gone, the share kept for md-b (same project), nothing unshared", func(ctx SpecContext) {
		done := tl.step("faults: grant revoked; detach md-a while Neutron stalls 30 s (1 node replaced; the share stays for md-b)")
		defer done()
		By("the administrator revokes the namespace's grant: reported, growth refused, nothing rolled, no new share")
		grant := func(ctx context.Context, value string) {
			GinkgoHelper()
			n := &corev1.Namespace{}
			Expect(pl.Client.Get(ctx, client.ObjectKey{Name: ns}, n)).To(Succeed())
			p := client.MergeFrom(n.DeepCopy())
			n.Labels[plane.GrantLabel] = value
			Expect(pl.Client.Patch(ctx, n, p)).To(Succeed())
		}
		mark := book.mark()
		grant(ctx, "false")
		Eventually(func(g Gomega) {
			for _, md := range []string{mdA, mdB} {
				a, err := pl.Attachment(ctx, ns, name, md)
				g.Expect(err).NotTo(HaveOccurred())
				c := meta.FindStatusCondition(a.Status.Conditions, sharednetv1.GrantedCondition)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(sharednetv1.ReasonGrantRevoked), "%s's Granted: %s", md, c.Message)
				g.Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseAttached), "reported, not rolled")
			}
		}, 2*time.Minute, time.Second).Should(Succeed())
		err := pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) {
			for i := range c.Spec.Topology.Workers.MachineDeployments {
				if c.Spec.Topology.Workers.MachineDeployments[i].Name == mdB {
					c.Spec.Topology.Workers.MachineDeployments[i].Replicas = ptr.To[int32](2)
				}
			}
		})
		Expect(err).To(HaveOccurred(), "md-b may not grow on a network its namespace is no longer granted")
		Expect(err.Error()).To(And(ContainSubstring(`"md-b"`), ContainSubstring("granted")))
		tl.notef("grant revoked, md-b grown: %v", err)
		Expect(book.since(mark)).To(Equal(changes{Created: map[string][]string{}, Deleted: map[string][]string{}}), "no machine created or deleted")
		Expect(shares(ctx, vmNet.NetworkID)).To(HaveLen(1))
		DeferCleanup(func(ctx SpecContext) { grant(ctx, "true") }) // the deletion below runs granted, as usual

		By("the detach is still possible")
		Expect(pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) { variables.SetOverride(c, mdA, nil) })).To(Succeed())
		stall := proxy.Inject(faultproxy.Rule{Service: "network", Agent: extensionAgent, Fault: faultproxy.Stall, Stall: 30 * time.Second})
		octavia := proxy.Inject(faultproxy.Rule{Service: "load-balancer", Agent: extensionAgent, Fault: faultproxy.Unavailable})
		time.Sleep(35 * time.Second)
		if a, err := pl.Attachment(ctx, ns, name, mdA); err == nil && a != nil {
			tl.notef("detach, Neutron stalling: md-a's attachment %s: %s", a.Status.Phase, a.Status.Message)
		}
		stall()
		octavia()

		var now []plane.Machine
		Eventually(func(g Gomega) {
			a, err := pl.Attachment(ctx, ns, name, mdA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(BeNil(), "md-a's attachment is released")
			now, err = pl.Machines(ctx, ns, name, mdA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(now).To(HaveLen(1))
			g.Expect(now[0].Phase).To(Equal(string(clusterv1.MachinePhaseRunning)))
		}, 5*time.Minute, time.Second).Should(Succeed())
		book.settle()
		Consistently(func(g Gomega) {
			ch := book.since(mark)
			g.Expect(ch.Deleted).To(Equal(map[string][]string{mdA: machineNames(initialA)}), "md-a replaced once, md-b untouched")
			g.Expect(ch.Created).To(Equal(map[string][]string{mdA: machineNames(now)}))
		}, 10*time.Second, time.Second).Should(Succeed())
		Expect(shares(ctx, vmNet.NetworkID)).To(HaveLen(1), "md-b's attachment still uses the share")
		Expect(acted("network", http.MethodDelete, rbac)).To(BeZero(), "nothing unshared")
		Expect(clusterPortsOn(ctx, vmNet.NetworkID)).To(HaveLen(1), "md-b's port only")
		Expect(attachmentPhase(ctx, Default, key, mdB)).To(Equal(sharednetv1.PhaseAttached))
		Expect(acted("network", http.MethodPost, rbac)).To(Equal(1), "no new share while the grant was revoked")
	}, SpecTimeout(8*time.Minute))

	It("deleting the cluster with two load balancers on the shared subnet while Octavia answers 503, the extension killed right after Octavia accepted the first deletion and again right after Neutron deleted the share, before the attachment is released: each load balancer and the share deleted once, nothing left", func(ctx SpecContext) {
		svc1, svc2 := client.ObjectKey{Namespace: "default", Name: "faults-1"}, client.ObjectKey{Namespace: "default", Name: "faults-2"}
		for _, s := range []client.ObjectKey{svc1, svc2} {
			DeferCleanup(deleteWorkloadService, s, NodeTimeout(2*time.Minute))
		}
		lb1 := createGuideService(ctx, key, svc1, vmNet.SubnetID)
		lb2 := createGuideService(ctx, key, svc2, vmNet.SubnetID)
		DeferCleanup(func(ctx SpecContext) { deleteLB(ctx, lb1.ID); deleteLB(ctx, lb2.ID) }) // only if the hook did not
		done := tl.step("faults: delete the cluster (2 LBs) while Octavia answers 503, killed after the first LB deletion and after the unshare")
		defer done()

		octavia := proxy.Inject(faultproxy.Rule{Service: "load-balancer", Agent: extensionAgent, Fault: faultproxy.Unavailable})
		lbKilled := killOn("load-balancer", http.MethodDelete, "/v2.0/lbaas/loadbalancers/")
		unshareKilled := killOn("network", http.MethodDelete, rbac)
		c := &clusterv1.Cluster{}
		Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
		Expect(pl.Client.Delete(ctx, c)).To(Succeed())
		Eventually(func(g Gomega) string {
			g.Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
			cond := conditions.Get(c, clusterv1.ClusterTopologyReconciledCondition)
			g.Expect(cond).NotTo(BeNil())
			return cond.Message
		}, 2*time.Minute, 200*time.Millisecond).Should(And(ContainSubstring("cannot remove the cluster's load balancers on shared subnets yet"), ContainSubstring("retrying until")),
			"the Cluster says what its deletion waits for")
		tl.notef("deletion while Octavia answers 503: %s", conditions.Get(c, clusterv1.ClusterTopologyReconciledCondition).Message)
		Expect(lbGone(ctx, lb1.ID) || lbGone(ctx, lb2.ID)).To(BeFalse(), "nothing deleted while Octavia fails")
		octavia()

		Eventually(lbKilled, 3*time.Minute).Should(Receive(Succeed()), "the extension deleted a load balancer, and was killed")
		Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
		Expect(c.Annotations).NotTo(HaveKey(runtimev1.OkToDeleteAnnotation), "CAPI deletes nothing before the hook says so")
		restart(ctx)
		By("the unshare, once CAPO has deleted the servers and their ports")
		Eventually(unshareKilled, 6*time.Minute).Should(Receive(Succeed()), "the extension deleted the share, and was killed")
		Expect(shares(ctx, vmNet.NetworkID)).To(BeEmpty(), "Neutron deleted the share; the extension never heard")
		Expect(pl.Attachment(ctx, ns, name, mdB)).NotTo(BeNil(), "killed before the attachment is released")
		restart(ctx)
		Eventually(func() bool {
			return apierrors.IsNotFound(pl.Client.Get(ctx, key, &clusterv1.Cluster{}))
		}, 6*time.Minute, time.Second).Should(BeTrue(), "the cluster is deleted")

		for _, lb := range []string{lb1.ID, lb2.ID} {
			Expect(lbGone(ctx, lb)).To(BeTrue(), "load balancer %s deleted", lb)
			Expect(acted("load-balancer", http.MethodDelete, "/v2.0/lbaas/loadbalancers/"+lb)).To(Equal(1), "load balancer %s deleted once", lb)
		}
		Expect(acted("network", http.MethodDelete, rbac)).To(Equal(1), "the share deleted once")
		Expect(shares(ctx, vmNet.NetworkID)).To(BeEmpty())
		Expect(clusterPortsOn(ctx, vmNet.NetworkID)).To(BeEmpty())
		Expect(lbsOnSubnet(ctx, vmNet.SubnetID)).To(BeEmpty())
		Expect(leftovers(ctx, ns, name)).To(BeEmpty(), "nothing of the cluster is left in Neutron, Nova or Octavia")
		Expect(proxy.Exchanges(func(e faultproxy.Exchange) bool { return e.Fault != "" && !strings.Contains(e.Agent, extensionAgent) })).To(BeEmpty(),
			"no fault hit another client")
	}, SpecTimeout(16*time.Minute))

})

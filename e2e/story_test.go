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
	"net/netip"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/exp/guardrails"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/dataplane"
	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// The story of the guide (docs/ and the product page), in its order: attach
// a nodegroup, see bad requests refused, see a load balancer block the
// detach, then detach, and delete a cluster that still has a load balancer on a
// shared subnet.
var _ = Describe("A nodegroup on a shared network", Ordered, Label("local", "reliability"), func() {
	const (
		mdA = "md-a" // 2 nodes: attached, detached
		mdB = "md-b" // 1 node: untouched, then attached before the cluster is deleted
	)
	var (
		ns, name, snName string
		key              client.ObjectKey
		book             *ledger
		vmNet            plane.VMNetwork
		initialA         []plane.Machine
		initialB         []plane.Machine
		controlPlane     controlPlaneState
		mdBTemplates     [2]string
		// attachTrace followed md-a's attach, to compare with the inline patch's rollout.
		attachTrace *rolloutTrace
		attachTook  time.Duration
		attachCosts string
		// flavor is a copy of the workers' flavor, for the inline patch
		// rollout; it lives as long as the story (later rollouts of md-a use it).
		flavor string
		// detachedA are md-a's machines after the detach.
		detachedA []plane.Machine
		// myService is the guide's Service in the workload cluster.
		myService = client.ObjectKey{Namespace: "default", Name: "my-service"}
	)

	BeforeAll(func(ctx SpecContext) {
		done := tl.step("cluster from templates/ with md-a (2 nodes) and md-b (1 node), all Running")
		defer done()
		ns, name, snName, vmNet = newStory(ctx, "e2e-", "c-", "172.28.0.0/24")
		key = client.ObjectKey{Namespace: ns, Name: name}
		secret, cluster, err := pl.RenderCluster(plane.ClusterVariables{
			Name: name, Namespace: ns, CloudsYAML: clouds, Workers: 2, SharedNetwork: snName, Subnet: vmNet.SubnetID,
		})
		Expect(err).NotTo(HaveOccurred())
		// The template attaches md-a at creation (creation_test.go takes that path); this story attaches it to
		// a running cluster, and keeps md-b small.
		variables.SetOverride(cluster, mdA, nil)
		for i := range cluster.Spec.Topology.Workers.MachineDeployments {
			if cluster.Spec.Topology.Workers.MachineDeployments[i].Name == mdB {
				cluster.Spec.Topology.Workers.MachineDeployments[i].Replicas = ptr.To[int32](1)
			}
		}
		Expect(pl.Apply(ctx, secret, cluster)).To(Succeed())
		DeferCleanup(deleteClusterIfPresent, key, NodeTimeout(10*time.Minute))
		DeferCleanup(deleteWorkloadService, myService, NodeTimeout(2*time.Minute))

		book = newLedger()
		ledgerCtx, stop := context.WithCancel(context.Background())
		go book.run(ledgerCtx, pl.Client, ns, name)
		DeferCleanup(stop)

		Eventually(func(g Gomega) {
			for topology, want := range map[string]int{mdA: 2, mdB: 1} {
				ms, err := pl.Machines(ctx, ns, name, topology)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ms).To(HaveLen(want))
				for _, m := range ms {
					g.Expect(m.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "machine %s", m.Name)
				}
			}
		}, 6*time.Minute, time.Second).Should(Succeed())
		initialA, err = pl.Machines(ctx, ns, name, mdA)
		Expect(err).NotTo(HaveOccurred())
		initialB, err = pl.Machines(ctx, ns, name, mdB)
		Expect(err).NotTo(HaveOccurred())
		controlPlane = observeControlPlane(ctx, key)
		mdBTemplates = machineDeploymentTemplates(ctx, key, mdB)
		flavor = copyFlavor(ctx, plane.TestbedFlavor, ns+"-copy")
	}, NodeTimeout(10*time.Minute))

	It("attach md-a: the network is shared in Neutron, md-a's machines are replaced exactly once, each new server has a port on the shared subnet and each new Node the network's label; md-b and the control plane are untouched", func(ctx SpecContext) {
		done := tl.step("attach md-a (2 nodes replaced)")
		defer done()
		mark := book.mark()
		metricsBefore, err := scrapeExtension(ctx)
		Expect(err).NotTo(HaveOccurred())
		attachTrace = traceRollout(ctx, ns, name, mdA, initialA, 2)
		Expect(pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) {
			variables.SetOverride(c, mdA, plane.SharedNetworkValue(snName, vmNet.SubnetID))
		})).To(Succeed())
		attachTrace.mark("Cluster update admitted")

		var a *sharednetv1.SharedNetworkAttachment
		Eventually(func(g Gomega) {
			var err error
			a, err = pl.Attachment(ctx, ns, name, mdA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).NotTo(BeNil())
			g.Expect(a.ShareEstablished()).To(BeTrue())
		}, time.Minute, 250*time.Millisecond).Should(Succeed())
		By("the share appears in Neutron: one RBAC policy for the cluster's project")
		Expect(shares(ctx, vmNet.NetworkID)).To(Equal([]string{a.Status.Share.RBACPolicyID}))
		Expect(a.Status.Share.ProjectID).To(Equal(clusterProject.ProjectID))

		By("md-a rolls out: Attached once every new node has its shared address")
		now := attachedMachines(ctx, ns, name, mdA, 2, 5*time.Minute)
		attachTook = attachTrace.wait(time.Minute)
		fmt.Fprintf(GinkgoWriter, "attach md-a: %s; %s\n", attachTook.Round(100*time.Millisecond), attachTrace)
		metricsAfter, err := scrapeExtension(ctx)
		Expect(err).NotTo(HaveOccurred())
		attachCosts = metricsAfter.costs(metricsBefore)

		By("exactly once: every old machine deleted, exactly as many new ones, nothing else")
		book.settle()
		Consistently(func(g Gomega) {
			ch := book.since(mark)
			g.Expect(ch.Deleted).To(Equal(map[string][]string{mdA: machineNames(initialA)}))
			g.Expect(ch.Created).To(Equal(map[string][]string{mdA: machineNames(now)}))
		}, 15*time.Second, time.Second).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "md-a: created %v, deleted %v\n", machineNames(now), machineNames(initialA))

		By("every new Nova server has one port on the shared subnet, in the cluster's project, with an address from its pools")
		expectSharedPorts(ctx, now, vmNet)
		Expect(clusterPortsOn(ctx, vmNet.NetworkID)).To(HaveLen(len(now)), "no other server of the project is on the network")

		By("every Node of md-a is initialized by the real cloud controller manager and keeps its first InternalIP on the cluster network")
		_, clusterCIDR, err := pl.ClusterSubnet(ctx, ns, name)
		Expect(err).NotTo(HaveOccurred())
		expectNodesOnClusterNetwork(ctx, now, clusterCIDR, vmNet)

		By("every Node of md-a carries the label naming the shared network, set in that one rollout; md-b's do not")
		expectNetworkLabel(ctx, now, snName)
		expectNetworkLabel(ctx, initialB, "")

		By("md-b and the control plane are untouched")
		Expect(pl.Machines(ctx, ns, name, mdB)).To(Equal(initialB))
		Expect(machineDeploymentTemplates(ctx, key, mdB)).To(Equal(mdBTemplates))
		Expect(observeControlPlane(ctx, key)).To(Equal(controlPlane))
	}, SpecTimeout(8*time.Minute))

	It("md-a rolled again by an inline ClusterClass patch (workerFlavor overridden to a copy of its flavor, no extension involved): replaced exactly once, each new server keeps its shared port; the attach's wall time is compared with this rollout's", func(ctx SpecContext) {
		done := tl.step("inline patch rollout of md-a: workerFlavor override to a copy of the flavor (2 nodes replaced)")
		defer done()
		Expect(attachTrace).NotTo(BeNil(), "the attach was traced")
		before, err := pl.Machines(ctx, ns, name, mdA)
		Expect(err).NotTo(HaveOccurred())
		mark := book.mark()
		inline := traceRollout(ctx, ns, name, mdA, before, 2)
		Expect(pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) {
			setOverride(c, mdA, "workerFlavor", []byte(`"`+flavor+`"`))
		})).To(Succeed())
		inline.mark("Cluster update admitted")
		took := inline.wait(5 * time.Minute)
		fmt.Fprintf(GinkgoWriter, "inline patch rollout md-a: %s; %s\n", took.Round(100*time.Millisecond), inline)

		By("the same figures, side by side, in the timeline")
		tl.notef("attach md-a (2 nodes):                    %5.1fs  Cluster update -> every machine replaced and Running", attachTook.Seconds())
		tl.notef("inline patch rollout md-a (workerFlavor): %5.1fs  same measure, same nodegroup, same run", took.Seconds())
		tl.notef("attach / inline patch rollout = %.2fx", attachTook.Seconds()/took.Seconds())
		attachSet, _ := attachTrace.at("new MachineSet")
		inlineSet, _ := inline.at("new MachineSet")
		tl.notef("head start: the new MachineSet %.1fs after the Cluster update for the attach (target <= 1.5 s), %.1fs for the inline patch", attachSet.Seconds(), inlineSet.Seconds())
		tl.notef("attach: %s", attachTrace)
		tl.notef("inline: %s", inline)
		tl.notef("the extension during the attach: %s", attachCosts)

		By("the attachment is Attached again: the new servers have their shared port, from the new flavor's template")
		now := attachedMachines(ctx, ns, name, mdA, 2, 2*time.Minute)
		book.settle()
		Consistently(func(g Gomega) {
			ch := book.since(mark)
			g.Expect(ch.Deleted).To(Equal(map[string][]string{mdA: machineNames(before)}))
			g.Expect(ch.Created).To(Equal(map[string][]string{mdA: machineNames(now)}))
		}, 5*time.Second, time.Second).Should(Succeed())
		tmpl := &infrav1.OpenStackMachineTemplate{}
		Expect(pl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: machineDeploymentTemplates(ctx, key, mdA)[0]}, tmpl)).To(Succeed())
		Expect(tmpl.Spec.Template.Spec.Flavor).To(HaveValue(Equal(flavor)))
		expectSharedPorts(ctx, now, vmNet)
		Expect(pl.Machines(ctx, ns, name, mdB)).To(Equal(initialB))
		Expect(observeControlPlane(ctx, key)).To(Equal(controlPlane))
	}, SpecTimeout(8*time.Minute))

	It("an Attached nodegroup asks OpenStack nothing between SharedNetwork resyncs: md-a's attachment reconciled again on its Machines' events while the extension's capo_sharednet_openstack_requests_total does not move", func(ctx SpecContext) {
		defer tl.step("OpenStack requests of Attached md-a between resyncs (the extension's /metrics)")()
		a, err := pl.Attachment(ctx, ns, name, mdA)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseAttached))
		machines, err := pl.Machines(ctx, ns, name, mdA)
		Expect(err).NotTo(HaveOccurred())

		By("what a SharedNetwork resync and the rest cost, over 10 s, for the record")
		first, err := scrapeExtension(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(first.sum(openStackRequests)).To(BeNumerically(">", 0), "the extension has asked OpenStack (the attach)")
		time.Sleep(10 * time.Second)
		second, err := scrapeExtension(ctx)
		Expect(err).NotTo(HaveOccurred())
		fmt.Fprintf(GinkgoWriter, "in 10 s: reconciles %v; OpenStack requests %v\n", second.since(first, reconciles), second.since(first, openStackRequests))
		tl.notef("10 s of steady state (resync %s): %g sharednetwork, %g sharednetworkattachment, %g workloadguardrails reconciles; %g OpenStack requests %v",
			5*time.Second, second.reconcilesOf("sharednetwork")-first.reconcilesOf("sharednetwork"),
			second.reconcilesOf("sharednetworkattachment")-first.reconcilesOf("sharednetworkattachment"),
			second.reconcilesOf("workloadguardrails")-first.reconcilesOf("workloadguardrails"),
			second.sum(openStackRequests)-first.sum(openStackRequests), second.since(first, openStackRequests))

		By("a window without a SharedNetwork resync or a guardrails poll: md-a's Machines touched, the attachment reconciled, no request")
		attempts := 0
		Eventually(func(g Gomega) {
			attempts++
			// Open the window right after a resync and its follow-on: each
			// attachment looks at the cloud once more when its SharedNetwork's
			// facts were read (a few requests, done within a second or two).
			// The window opens once 0.5 s pass without a request and without
			// an attachment reconcile in flight; the next resync is 5 s away.
			start, err := scrapeExtension(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			var pre scrape
			for deadline := time.Now().Add(15 * time.Second); ; {
				pre, err = scrapeExtension(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				if pre.reconcilesOf("sharednetwork") > start.reconcilesOf("sharednetwork") && !pre.busy("sharednetwork") {
					break
				}
				g.Expect(time.Now().Before(deadline)).To(BeTrue(), "a SharedNetwork resync within 15 s (resync %s)", 5*time.Second)
				time.Sleep(50 * time.Millisecond)
			}
			var before scrape
			for last, deadline := pre, time.Now().Add(3*time.Second); ; last = before {
				time.Sleep(500 * time.Millisecond)
				before, err = scrapeExtension(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				if len(before.since(last, openStackRequests)) == 0 && !before.busy("sharednetworkattachment") {
					break
				}
				g.Expect(time.Now().Before(deadline)).To(BeTrue(), "the resync's follow-on over within 3 s (else try another window)")
			}
			g.Expect(before.reconcilesOf("sharednetwork")).To(Equal(pre.reconcilesOf("sharednetwork")), "no second resync before the window (else try another window)")
			for i := range 4 {
				m := &clusterv1.Machine{}
				g.Expect(pl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: machines[i%len(machines)].Name}, m)).To(Succeed())
				p := client.MergeFrom(m.DeepCopy())
				if m.Annotations == nil {
					m.Annotations = map[string]string{}
				}
				m.Annotations["e2e.capo-sharednet/touch"] = fmt.Sprintf("%d-%d", attempts, i)
				g.Expect(pl.Client.Patch(ctx, m, p)).To(Succeed())
				time.Sleep(250 * time.Millisecond)
			}
			after, err := scrapeExtension(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			time.Sleep(time.Second) // a resync whose calls fell in the window has counted its reconcile by now
			tail, err := scrapeExtension(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			for _, c := range []string{"sharednetwork", "workloadguardrails"} {
				// A resync in flight at either end, or counted in between,
				// may have asked OpenStack in the window: try another window.
				g.Expect(before.busy(c) || tail.busy(c)).To(BeFalse(), "no %s reconcile in flight at either end of the window (else try another window)", c)
				g.Expect(tail.reconcilesOf(c)).To(Equal(before.reconcilesOf(c)), "no %s reconcile in the window (else try another window)", c)
			}
			reconciled := after.reconcilesOf("sharednetworkattachment") - before.reconcilesOf("sharednetworkattachment")
			g.Expect(reconciled).To(BeNumerically(">=", 3), "the attachment controller reconciled md-a's Cluster on its Machines' events")
			moved := tail.since(before, openStackRequests)
			fmt.Fprintf(GinkgoWriter, "window %d: %g attachment reconciles, OpenStack requests moved: %v\n", attempts, reconciled, moved)
			tl.notef("Attached md-a, %g attachment reconciles (its Machines touched) without a resync: %g OpenStack requests %v (window %d)",
				reconciled, tail.sum(openStackRequests)-before.sum(openStackRequests), moved, attempts)
			if len(moved) > 0 { // a real failure, not a reason to try another window
				StopTrying(fmt.Sprintf("an Attached nodegroup's reconciles asked OpenStack: %v", moved)).Now()
			}
		}, 90*time.Second, 100*time.Millisecond).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("the data path, on Neutron's real bridge with the VM's security groups deciding: nothing reaches a VM of the VM project while its group admits nothing from the shared subnet, and the attachment says 0 of 1 VM ports accept the nodes; once the guide's rule is added, md-a's node and a masqueraded pod on it reach the VM from the node's shared address; md-b's node reaches nothing; md-a keeps its one default route, and sends off the networks, on the cluster network", Label("datapath"), func(ctx SpecContext) {
		done := tl.step("the data path: md-a's node, a pod on it and md-b's node against a VM of the VM project, before and after the guide's security group rule")
		defer done()
		needDataPath()
		Expect(dataplane.Sweep(ctx, dataPathPrefix)).To(Succeed(), "what a killed earlier run left")
		ingress := func(g Gomega) *sharednetv1.VMIngressStatus {
			a, err := pl.Attachment(ctx, ns, name, mdA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).NotTo(BeNil())
			g.Expect(a.Status.VMIngress).NotTo(BeZero(), "status.vmIngress")
			return &a.Status.VMIngress
		}
		By("no VM on the shared subnet yet: the attachment says so")
		Eventually(func(g Gomega) {
			g.Expect(ingress(g).Admission).To(Equal(sharednetv1.VMIngressNoVMPorts))
		}, 2*time.Minute, time.Second).Should(Succeed())

		By("a VM of the VM project on the shared subnet, in a security group that admits nothing")
		sg, err := plane.EmptySecurityGroup(ctx, vm, snName+"-vms")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = groups.Delete(ctx, vm.Network, sg).ExtractErr() })
		attached, err := pl.Machines(ctx, ns, name, mdA)
		Expect(err).NotTo(HaveOccurred())
		Expect(attached).NotTo(BeEmpty())
		theVM, err := plane.BootVM(ctx, vm, admin, vmNet, dataPathPrefix+"vm-"+name, plane.ServerID(attached[0].ProviderID), sg)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(theVM.Close(ctx)).To(Succeed()) }, NodeTimeout(2*time.Minute))
		Eventually(func(g Gomega) {
			in := ingress(g)
			g.Expect(in.Admission).To(Equal(sharednetv1.VMIngressRefused))
			g.Expect(in.VMPorts).To(HaveValue(BeEquivalentTo(1)))
			g.Expect(in.AdmittingVMPorts).To(HaveValue(BeEquivalentTo(0)))
			g.Expect(in.Message).To(ContainSubstring("0 of 1 VM ports"))
			g.Expect(in.Suggestion).To(ContainSubstring("openstack security group rule create --ingress --ethertype IPv4 --remote-ip " + vmNet.CIDR))
		}, 2*time.Minute, time.Second).Should(Succeed())

		By("md-a's node and md-b's node plugged as Nova plugs them, with the route commands of their KubeadmConfig run")
		nodeA := plugMachine(ctx, ns, attached[0], "a-"+name)
		nodeB := plugMachine(ctx, ns, initialB[0], "b-"+name)
		Expect(nodeA.Links).To(HaveLen(2), "md-a's node: the cluster network and the shared network")
		Expect(nodeB.Links).To(HaveLen(1), "md-b's node: the cluster network only")
		shared := sharedAddress(nodeA, vmNet)
		clusterLink := nodeA.Links[0]
		Expect(clusterLink.NetworkID).NotTo(Equal(vmNet.NetworkID), "the node's first NIC is on the cluster network")

		By("md-a's node has exactly one default route, on its cluster interface")
		routes, err := nodeA.Routes(ctx)
		Expect(err).NotTo(HaveOccurred())
		var defaults []string
		for _, r := range routes {
			if r.Dst == "default" {
				defaults = append(defaults, r.Dev)
			}
		}
		Expect(defaults).To(Equal([]string{clusterLink.Name}), "%+v", routes)
		sharedLink, _ := nodeA.Link(vmNet.NetworkID)
		for _, r := range routes {
			if r.Dev == sharedLink.Name {
				dst, err := netip.ParsePrefix(r.Dst)
				if err != nil {
					dst = netip.PrefixFrom(netip.MustParseAddr(r.Dst), 32)
				}
				Expect(netip.MustParsePrefix(vmNet.CIDR).Contains(dst.Addr())).To(BeTrue(), "only the shared subnet is reached through %s: %+v", sharedLink.Name, r)
			}
		}
		By("what md-a's node sends off the networks leaves through its cluster interface, not the shared one")
		internet := netip.MustParseAddr("203.0.113.10")
		sent, err := nodeA.SentVia(ctx, internet, []string{clusterLink.Name, sharedLink.Name}, func() error {
			_, _ = dataplane.AskUDP(nodeA.Namespace, netip.AddrPortFrom(internet, 53), 200*time.Millisecond)
			return nil
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(sent).To(Equal(map[string]int{clusterLink.Name: 1, sharedLink.Name: 0}), "packets to %s by interface", internet)

		By("the VM's group admits nothing from the shared subnet: nothing from md-a's node reaches the VM, as the status says")
		unreachable(ctx, nodeA.Namespace, theVM, "the VM's security group admits nothing")

		By("the VM project adds the guide's rule: the shared subnet's range")
		_, err = rules.Create(ctx, vm.Network, rules.CreateOpts{
			SecGroupID: sg, Direction: rules.DirIngress, EtherType: rules.EtherType4, RemoteIPPrefix: vmNet.CIDR,
		}).Extract()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			in := ingress(g)
			g.Expect(in.Admission).To(Equal(sharednetv1.VMIngressAdmitted))
			g.Expect(in.AdmittingVMPorts).To(HaveValue(BeEquivalentTo(1)))
			g.Expect(in.AdmittingRules).To(HaveValue(BeEquivalentTo(1)), "the rule counted, not named")
			g.Expect(in.Message).To(ContainSubstring("1 of 1 VM ports"))
			g.Expect(in.Suggestion).To(BeEmpty())
		}, 2*time.Minute, time.Second).Should(Succeed())
		to := theVM.Responder.Addr
		Eventually(func() (netip.Addr, error) { return dataplane.Ask(nodeA.Namespace, to, dropWait) }, time.Minute, time.Second).
			Should(Equal(shared), "TCP: the VM answers md-a's node and saw its shared-subnet address")
		Expect(dataplane.AskUDP(nodeA.Namespace, to, dropWait)).To(Equal(shared), "UDP")
		Expect(nodeA.Ping(ctx, to.Addr().String(), 56)).To(BeTrue(), "ICMP")
		Expect(nodeA.Ping(ctx, to.Addr().String(), vmNet.MTU-28)).To(BeTrue(), "a packet of the network's MTU (%d) with DF set", vmNet.MTU)
		fmt.Fprintf(GinkgoWriter, "the VM %s answered md-a's node, seen from %s\n", to, shared)

		By("a pod on md-a's node: port security drops its own address; masqueraded as Calico's natOutgoing does, the VM sees the node's shared address")
		pods, podAddr := podAddress(ctx, key)
		pod, err := nodeA.AddPod(ctx, podAddr)
		Expect(err).NotTo(HaveOccurred())
		unreachable(ctx, pod, theVM, "without the masquerade the packet leaves with the pod's address, which port security drops")
		Expect(nodeA.Masquerade(ctx, pods, true)).To(Succeed())
		Expect(dataplane.Ask(pod, to, dropWait)).To(Equal(shared), "TCP from the pod")
		Expect(dataplane.AskUDP(pod, to, dropWait)).To(Equal(shared), "UDP from the pod")

		By("md-b's node: no port on the shared network; the VM's address is off its networks (through the cluster gateway): nothing reaches the VM")
		_, onShared := nodeB.Link(vmNet.NetworkID)
		Expect(onShared).To(BeFalse())
		dev, gateway, _, err := nodeB.RouteTo(ctx, to.Addr().String())
		Expect(err).NotTo(HaveOccurred())
		Expect(dev).To(Equal(nodeB.Links[0].Name))
		Expect(gateway).NotTo(BeEmpty(), "not on link")
		unreachable(ctx, nodeB.Namespace, theVM, "md-b is not attached")
	}, SpecTimeout(8*time.Minute))

	Context("bad requests are refused at admission and nothing changes", Ordered, func() {
		var mtuNet, overlapNet, smallNet plane.VMNetwork
		BeforeAll(func(ctx SpecContext) {
			done := tl.step("offer the networks of the bad requests (MTU 1400, overlapping, one free address, not granted)")
			defer done()
			var err error
			for _, n := range []struct {
				into *plane.VMNetwork
				opts plane.VMNetworkOpts
			}{
				{&mtuNet, plane.VMNetworkOpts{Name: snName + "-mtu", CIDR: "172.28.10.0/24", MTU: 1400}},
				{&overlapNet, plane.VMNetworkOpts{Name: snName + "-overlap", CIDR: "192.168.10.0/24"}}, // in the pods' 192.168.0.0/16
				{&smallNet, plane.VMNetworkOpts{Name: snName + "-small", CIDR: "172.28.11.0/24", Pool: []string{"172.28.11.10", "172.28.11.10"}}},
			} {
				*n.into, err = plane.EnsureVMNetwork(ctx, vm, n.opts)
				Expect(err).NotTo(HaveOccurred())
				id := n.into.NetworkID
				DeferCleanup(func(ctx SpecContext) { _ = plane.DeleteVMNetwork(ctx, vm, id, time.Minute) })
				_, err = pl.OfferNetwork(ctx, n.opts.Name, *n.into, clouds, nil)
				Expect(err).NotTo(HaveOccurred())
			}
			Expect(mtuNet.MTU).To(Equal(1400))
			_, err = pl.OfferNetwork(ctx, snName+"-restricted", vmNet, clouds, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "other"}})
			Expect(err).NotTo(HaveOccurred())
		}, NodeTimeout(3*time.Minute))

		refused := func(ctx context.Context, network plane.VMNetwork, value []byte, want ...string) {
			mark := book.mark()
			err := pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) { variables.SetOverride(c, mdB, value) })
			Expect(err).To(HaveOccurred(), "want the attach refused")
			fmt.Fprintf(GinkgoWriter, "refused: %v\n", err)
			for _, w := range append([]string{`"md-b"`}, want...) {
				Expect(err.Error()).To(ContainSubstring(w))
			}
			Consistently(func(g Gomega) {
				g.Expect(book.since(mark)).To(Equal(changes{Created: map[string][]string{}, Deleted: map[string][]string{}}), "no machine created or deleted")
			}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
			c := &clusterv1.Cluster{}
			Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
			for _, md := range c.Spec.Topology.Workers.MachineDeployments {
				if md.Name == mdB {
					Expect(md.Variables.Overrides).To(BeEmpty())
				}
			}
			Expect(pl.Attachment(ctx, ns, name, mdB)).To(BeNil(), "no attachment")
			Expect(shares(ctx, network.NetworkID)).To(HaveLen(map[bool]int{true: 1, false: 0}[network.NetworkID == vmNet.NetworkID]), "no new share")
			Expect(machineDeploymentTemplates(ctx, key, mdB)).To(Equal(mdBTemplates))
		}

		It("MTU: a network whose MTU differs from the cluster network's", func(ctx SpecContext) {
			defer tl.step("refused: MTU mismatch")()
			refused(ctx, mtuNet, plane.SharedNetworkValue(snName+"-mtu", ""), "mtu", "1400", "1450")
		})
		It("overlap: a subnet inside the cluster's pod range", func(ctx SpecContext) {
			defer tl.step("refused: overlap with the pods' range")()
			refused(ctx, overlapNet, plane.SharedNetworkValue(snName+"-overlap", ""), "overlap", "192.168.10.0/24", "192.168.0.0/16")
		})
		It("capacity: a subnet with one free address for a nodegroup that needs two", func(ctx SpecContext) {
			defer tl.step("refused: capacity")()
			refused(ctx, smallNet, plane.SharedNetworkValue(snName+"-small", ""), "capacity", "1 free address")
		})
		It("granted: a network the cluster's namespace was not granted", func(ctx SpecContext) {
			defer tl.step("refused: namespace not granted")()
			refused(ctx, vmNet, plane.SharedNetworkValue(snName+"-restricted", ""), "granted", snName+"-restricted")
		})
		It("version: a new cluster below Kubernetes v1.35.0 is not created", func(ctx SpecContext) {
			defer tl.step("refused: version v1.34.3")()
			_, c2, err := pl.RenderCluster(plane.ClusterVariables{
				Name: name + "-old", Namespace: ns, CloudsYAML: clouds, KubernetesVersion: "v1.34.3", SharedNetwork: snName, Subnet: vmNet.SubnetID,
			})
			Expect(err).NotTo(HaveOccurred())
			err = pl.Client.Create(ctx, c2)
			Expect(err).To(HaveOccurred())
			fmt.Fprintf(GinkgoWriter, "refused: %v\n", err)
			Expect(err.Error()).To(And(ContainSubstring(`"md-a"`), ContainSubstring("version"), ContainSubstring("v1.34.3"), ContainSubstring("v1.35.0")))
			Expect(apierrors.IsNotFound(pl.Client.Get(ctx, client.ObjectKeyFromObject(c2), &clusterv1.Cluster{}))).To(BeTrue(), "nothing was created")
		})
	})

	It("md-a's size is held to what its subnet was checked for: kubectl scale (the scale subresource, as the autoscaler writes it) and an edit past the topology's replicas are refused naming the fix, removing its replicas from the topology is refused, md-b scales freely; nothing rolls", func(ctx SpecContext) {
		defer tl.step("md-a held to its size: kubectl scale, edit and a topology without replicas refused")()
		mark := book.mark()
		mdOf := func(topology string) *clusterv1.MachineDeployment {
			list := &clusterv1.MachineDeploymentList{}
			Expect(pl.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{
				clusterv1.ClusterNameLabel: name, clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology})).To(Succeed())
			Expect(list.Items).To(HaveLen(1))
			return &list.Items[0]
		}
		// kubectl scale sends this merge patch to the scale subresource.
		scale := func(md *clusterv1.MachineDeployment, replicas int) error {
			return pl.Client.SubResource("scale").Patch(ctx, md, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)))
		}
		a := mdOf(mdA)
		err := scale(a, 30)
		Expect(err).To(HaveOccurred())
		fmt.Fprintf(GinkgoWriter, "refused: %v\n", err)
		Expect(err.Error()).To(And(ContainSubstring("nodegroup md-a of Cluster "+name), ContainSubstring("spec.replicas (scale) 30 is more than the 2 nodes"),
			ContainSubstring("scale to 2 or fewer, or raise the nodegroup's replicas or max size in the Cluster's topology")))
		a.Spec.Replicas = ptr.To[int32](3)
		Expect(pl.Client.Update(ctx, a)).To(MatchError(ContainSubstring("spec.replicas 3 is more than the 2 nodes")), "kubectl edit")
		err = pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) {
			for i := range c.Spec.Topology.Workers.MachineDeployments {
				if c.Spec.Topology.Workers.MachineDeployments[i].Name == mdA {
					c.Spec.Topology.Workers.MachineDeployments[i].Replicas = nil
				}
			}
		})
		Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("sets neither replicas nor"), ContainSubstring("set replicas on the nodegroup in the Cluster's topology"))))
		// md-b is on no shared network: its scale goes through (and CAPI's
		// topology controller puts its replicas back to the topology's).
		Expect(scale(mdOf(mdB), 1)).To(Succeed())
		Expect(mdOf(mdA).Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		Consistently(func(g Gomega) {
			g.Expect(book.since(mark)).To(Equal(changes{Created: map[string][]string{}, Deleted: map[string][]string{}}), "no machine created or deleted")
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
	})

	var lb *loadbalancers.LoadBalancer
	AfterAll(func(ctx SpecContext) { // a load balancer a failed spec left
		if lb != nil {
			deleteLB(ctx, lb.ID)
		}
	})
	It("the workload cluster: a Service without the internal annotation is refused by its API server; the guide's Service gets an internal load balancer on the shared subnet from the real cloud controller manager", func(ctx SpecContext) {
		defer tl.step("Services: a public one refused by the guardrails; the guide's one gets its internal LB from the CCM")()
		subnetID, _, err := pl.ClusterSubnet(ctx, ns, name)
		Expect(err).NotTo(HaveOccurred())
		public := plane.GuideService(client.ObjectKey{Namespace: "default", Name: "public"}, vmNet.SubnetID, subnetID)
		delete(public.Annotations, guardrails.InternalAnnotation)
		Eventually(func(g Gomega) {
			err := pl.WorkloadClient.Create(ctx, public.DeepCopy())
			if err == nil { // the policy was not there yet: remove it before the CCM acts, try again
				_ = pl.WorkloadClient.Delete(ctx, public.DeepCopy())
			}
			g.Expect(err).To(HaveOccurred(), "refused by the workload API server")
			g.Expect(err.Error()).To(ContainSubstring("must be internal"))
		}, time.Minute, time.Second).Should(Succeed())

		lb = createGuideService(ctx, key, myService, vmNet.SubnetID)
	}, SpecTimeout(5*time.Minute))

	It("a Gateway in Envoy Gateway's shape (real Gateway API CRDs) is judged by the same policy: refused without the internal annotation, admitted with the three", func(ctx SpecContext) {
		defer tl.step("Gateway: refused without the internal annotation, admitted with the three")()
		paths, err := providers.GatewayAPICRDs()
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(pl.Workload, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
		Expect(err).NotTo(HaveOccurred())
		subnetID, _, err := pl.ClusterSubnet(ctx, ns, name)
		Expect(err).NotTo(HaveOccurred())
		three := map[string]string{guardrails.InternalAnnotation: "true", guardrails.SubnetAnnotation: vmNet.SubnetID, guardrails.MemberSubnetAnnotation: subnetID}
		public := map[string]string{guardrails.SubnetAnnotation: vmNet.SubnetID, guardrails.MemberSubnetAnnotation: subnetID}
		Eventually(func(g Gomega) {
			gw := providers.EnvoyGateway("default", "public", public)
			err := pl.WorkloadClient.Create(ctx, gw)
			if err == nil {
				_ = pl.WorkloadClient.Delete(ctx, gw)
			}
			g.Expect(err).To(HaveOccurred(), "refused by the workload API server")
			g.Expect(err.Error()).To(ContainSubstring("must be internal"))
		}, time.Minute, time.Second).Should(Succeed())
		gw := providers.EnvoyGateway("default", "internal", three)
		Expect(pl.WorkloadClient.Create(ctx, gw)).To(Succeed())
		Expect(pl.WorkloadClient.Delete(ctx, gw)).To(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("the Service's internal load balancer on the shared subnet blocks the detach, named in the refusal", func(ctx SpecContext) {
		defer tl.step("detach refused while the Service's internal LB is on the shared subnet")()
		Expect(lb).NotTo(BeNil(), "the Service's load balancer")
		mark := book.mark()
		err := pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) { variables.SetOverride(c, mdA, nil) })
		Expect(err).To(HaveOccurred())
		fmt.Fprintf(GinkgoWriter, "refused: %v\n", err)
		Expect(err.Error()).To(And(ContainSubstring(`"md-a"`), ContainSubstring("detach"), ContainSubstring(lb.Name), ContainSubstring(lb.VipAddress), ContainSubstring("default/my-service")))
		Consistently(func(g Gomega) {
			g.Expect(book.since(mark).Created).To(BeEmpty())
			g.Expect(book.since(mark).Deleted).To(BeEmpty())
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
		a, err := pl.Attachment(ctx, ns, name, mdA)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseAttached))
		Expect(shares(ctx, vmNet.NetworkID)).To(HaveLen(1))
	}, SpecTimeout(4*time.Minute))

	It("after the load balancer is deleted, detach replaces md-a's machines exactly once more, also with the extension killed mid-detach, their ports go, the share is deleted and the VM project can delete its network", func(ctx SpecContext) {
		done := tl.step("delete the Service (the CCM deletes its LB), detach md-a (2 nodes replaced), unshare, VM project deletes its network")
		defer done()
		By("the owner deletes the Service: the cloud controller manager deletes its load balancer")
		Expect(pl.WorkloadClient.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: myService.Namespace, Name: myService.Name}})).To(Succeed())
		Eventually(func() bool { return lbGone(ctx, lb.ID) }, 2*time.Minute, time.Second).Should(BeTrue(), "the CCM deleted load balancer %s", lb.Name)
		attached, err := pl.Machines(ctx, ns, name, mdA)
		Expect(err).NotTo(HaveOccurred())
		mark := book.mark()
		Eventually(func() error {
			return pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) { variables.SetOverride(c, mdA, nil) })
		}, time.Minute, 2*time.Second).Should(Succeed(), "accepted once the load balancer is gone")
		By("the extension killed (SIGKILL) while md-a detaches, and started again")
		Eventually(func(g Gomega) sharednetv1.AttachmentPhase { return attachmentPhase(ctx, g, key, mdA) }, 2*time.Minute, 200*time.Millisecond).
			Should(Equal(sharednetv1.PhaseDetaching))
		Expect(pl.KillExtension()).To(Succeed())
		Expect(pl.StartExtension(ctx)).To(Succeed())

		var now []plane.Machine
		Eventually(func(g Gomega) {
			a, err := pl.Attachment(ctx, ns, name, mdA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(BeNil(), "the attachment is released after the unshare")
			now, err = pl.Machines(ctx, ns, name, mdA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(now).To(HaveLen(2))
			for _, m := range now {
				g.Expect(m.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)))
			}
		}, 5*time.Minute, time.Second).Should(Succeed())
		book.settle()
		Consistently(func(g Gomega) {
			ch := book.since(mark)
			g.Expect(ch.Deleted).To(Equal(map[string][]string{mdA: machineNames(attached)}))
			g.Expect(ch.Created).To(Equal(map[string][]string{mdA: machineNames(now)}))
		}, 15*time.Second, time.Second).Should(Succeed())

		Expect(clusterPortsOn(ctx, vmNet.NetworkID)).To(BeEmpty(), "no port of the cluster's project on the network")
		expectNetworkLabel(ctx, now, "")
		Expect(shares(ctx, vmNet.NetworkID)).To(BeEmpty(), "the share is deleted")
		Expect(pl.Machines(ctx, ns, name, mdB)).To(Equal(initialB))
		Expect(observeControlPlane(ctx, key)).To(Equal(controlPlane))

		detachedA = now
	}, SpecTimeout(8*time.Minute))

	It("the data path after the detach: a replaced md-a node has no port on the shared network and reaches nothing of a VM whose group admits the shared subnet", Label("datapath"), func(ctx SpecContext) {
		done := tl.step("the data path after the detach: a replaced md-a node against a VM that admits the shared subnet")
		defer done()
		Expect(detachedA).NotTo(BeEmpty(), "md-a detached by the spec before")
		now := detachedA
		needDataPath()
		sg, err := plane.EmptySecurityGroup(ctx, vm, snName+"-vms-after")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = groups.Delete(ctx, vm.Network, sg).ExtractErr() })
		_, err = rules.Create(ctx, vm.Network, rules.CreateOpts{
			SecGroupID: sg, Direction: rules.DirIngress, EtherType: rules.EtherType4, RemoteIPPrefix: vmNet.CIDR,
		}).Extract()
		Expect(err).NotTo(HaveOccurred())
		theVM, err := plane.BootVM(ctx, vm, admin, vmNet, dataPathPrefix+"vm-after-"+name, plane.ServerID(now[0].ProviderID), sg)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = theVM.Close(ctx) }, NodeTimeout(2*time.Minute))
		By("a probe of the VM project on the shared subnet reaches the VM: its group admits the subnet")
		probe, err := plane.BootVM(ctx, vm, admin, vmNet, dataPathPrefix+"probe-"+name, plane.ServerID(now[0].ProviderID), sg)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = probe.Close(ctx) }, NodeTimeout(2*time.Minute))
		Eventually(func() (netip.Addr, error) { return dataplane.Ask(probe.Namespace, theVM.Responder.Addr, dropWait) }, time.Minute, time.Second).
			Should(Equal(probe.Links[0].Addr.Addr()))
		Expect(probe.Close(ctx)).To(Succeed())
		By("the replaced md-a node: no port on the shared network, nothing reaches the VM")
		node := plugMachine(ctx, ns, now[0], "a-after-"+name)
		Expect(node.Links).To(HaveLen(1), "the cluster network only")
		unreachable(ctx, node.Namespace, theVM, "md-a is detached")
		Expect(theVM.Close(ctx)).To(Succeed(), "the VM project deletes its VM")
	}, SpecTimeout(5*time.Minute))

	It("once md-a is detached, the VM project can delete its network", func(ctx SpecContext) {
		Expect(detachedA).NotTo(BeEmpty(), "md-a detached by the spec before")
		Expect(plane.DeleteVMNetwork(ctx, vm, vmNet.NetworkID, 10*time.Second)).To(Succeed(), "the VM project deletes its network")
	}, SpecTimeout(8*time.Minute))

	It("deleting the cluster with a load balancer still on a shared subnet: BeforeClusterDelete removes it (and not the load balancer of a Cluster of the same name in another namespace of the project) and the share, and nothing of the cluster is left in Neutron, Nova or Octavia; with the extension down, a cluster with nothing attached is deleted all the same while this one waits, saying why, until the extension is back", func(ctx SpecContext) {
		// Provisions while md-b attaches; its namespace has no attachment.
		plain := newPlainCluster(ctx, "e2e-plain-")

		second, err := plane.EnsureVMNetwork(ctx, vm, plane.VMNetworkOpts{Name: snName + "-vm-net-2", CIDR: "172.28.2.0/24"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = plane.DeleteVMNetwork(ctx, vm, second.NetworkID, 2*time.Minute) }, NodeTimeout(3*time.Minute))
		_, err = pl.OfferNetwork(ctx, snName+"-2", second, clouds, nil)
		Expect(err).NotTo(HaveOccurred())

		done := tl.step("attach md-b to a second network, the extension killed (SIGKILL) mid-rollout and started again (1 node replaced, once)")
		beforeB, err := pl.Machines(ctx, ns, name, mdB)
		Expect(err).NotTo(HaveOccurred())
		mark := book.mark()
		Expect(pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) {
			variables.SetOverride(c, mdB, plane.SharedNetworkValue(snName+"-2", ""))
		})).To(Succeed())
		phase := func(g Gomega) sharednetv1.AttachmentPhase { return attachmentPhase(ctx, g, key, mdB) }
		Eventually(phase, 4*time.Minute, 200*time.Millisecond).Should(Equal(sharednetv1.PhaseRollingOut), "shared, nudged, rolling out")
		Expect(pl.KillExtension()).To(Succeed())
		Expect(pl.StartExtension(ctx)).To(Succeed())
		Eventually(phase, 4*time.Minute, time.Second).Should(Equal(sharednetv1.PhaseAttached))
		Expect(shares(ctx, second.NetworkID)).To(HaveLen(1), "one share, not a second one after the restart")
		book.settle()
		Consistently(func(g Gomega) {
			ch := book.since(mark)
			g.Expect(ch.Deleted).To(Equal(map[string][]string{mdB: machineNames(beforeB)}), "md-b's node replaced once, nothing else")
			g.Expect(ch.Created).To(HaveKey(mdB))
			g.Expect(ch.Created).To(HaveLen(1))
			g.Expect(ch.Created[mdB]).To(HaveLen(len(beforeB)))
		}, 15*time.Second, time.Second).Should(Succeed())
		Expect(clusterPortsOn(ctx, second.NetworkID)).To(HaveLen(len(beforeB)), "one port on the shared network per node, no orphan")
		done()

		gatewayService := client.ObjectKey{Namespace: "default", Name: "gateway"}
		DeferCleanup(deleteWorkloadService, gatewayService, NodeTimeout(2*time.Minute))
		lb2 := createGuideService(ctx, key, gatewayService, second.SubnetID)
		DeferCleanup(func(ctx SpecContext) { deleteLB(ctx, lb2.ID) }) // only if the hook did not
		// A Cluster with the same name in another namespace of the same
		// project, whose own CCM made a load balancer for a Service of the
		// same name on the same subnet: never this one's.
		twin := otherClustersLoadBalancer(ctx, client.ObjectKey{Namespace: ns + "-twin", Name: name}, gatewayService, second.SubnetID)
		DeferCleanup(func(ctx SpecContext) { deleteLB(ctx, twin.ID) })

		Eventually(func(g Gomega) bool { return provisioned(ctx, g, plain) }, 4*time.Minute, time.Second).Should(BeTrue(), "the cluster with nothing attached is provisioned")
		Eventually(func(g Gomega) {
			namespaces := deletionHookNamespaces(ctx, g)
			g.Expect(namespaces).To(ContainElement(ns), "BeforeClusterDelete is called for the attached cluster's namespace")
			g.Expect(namespaces).NotTo(ContainElement(plain.Namespace), "and not for one without attachments")
		}, time.Minute, time.Second).Should(Succeed())

		done = tl.step("extension down: the cluster with nothing attached is deleted; the attached one waits, saying why")
		Expect(pl.StopExtension()).To(Succeed())
		down := true
		DeferCleanup(func(ctx SpecContext) {
			if down {
				Expect(pl.StartExtension(ctx)).To(Succeed())
			}
		}, NodeTimeout(3*time.Minute))
		Expect(pl.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: plain.Namespace, Name: plain.Name}})).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(pl.Client.Get(ctx, plain, &clusterv1.Cluster{}))
		}, 5*time.Minute, time.Second).Should(BeTrue(), "a cluster with nothing attached is deleted while the extension is down")
		Expect(leftovers(ctx, plain.Namespace, plain.Name)).To(BeEmpty(), "CAPO removed all of it")

		c := &clusterv1.Cluster{}
		Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
		Expect(pl.Client.Delete(ctx, c)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
			cond := conditions.Get(c, clusterv1.ClusterTopologyReconciledCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Message).To(ContainSubstring("before-cluster-delete."+plane.DeletionExtensionConfigName), "the Cluster says which hook it waits for")
		}, time.Minute, time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
			g.Expect(c.Annotations).NotTo(HaveKey(runtimev1.OkToDeleteAnnotation), "CAPI deletes nothing of the cluster before the hook answers")
			g.Expect(lbGone(ctx, lb2.ID)).To(BeFalse())
		}, 15*time.Second, time.Second).Should(Succeed())
		done()

		done = tl.step("extension back: the cluster is deleted (BeforeClusterDelete removes the LB; CAPO the servers, ports, network)")
		Expect(pl.StartExtension(ctx)).To(Succeed())
		down = false
		By("the extension killed (SIGKILL) while BeforeClusterDelete waits for the load balancer it deletes, and started again")
		Eventually(func(g Gomega) string {
			g.Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
			cond := conditions.Get(c, clusterv1.ClusterTopologyReconciledCondition)
			g.Expect(cond).NotTo(BeNil())
			return cond.Message
		}, 5*time.Minute, 200*time.Millisecond).Should(ContainSubstring("deleting load balancers on shared subnets"))
		Expect(pl.KillExtension()).To(Succeed())
		Expect(pl.StartExtension(ctx)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(pl.Client.Get(ctx, key, &clusterv1.Cluster{}))
		}, 6*time.Minute, time.Second).Should(BeTrue(), "the cluster is deleted")
		done()

		Expect(lbGone(ctx, lb2.ID)).To(BeTrue(), "BeforeClusterDelete removed the load balancer")
		Expect(lbsOnSubnet(ctx, second.SubnetID)).To(ConsistOf(twin.Name+" "+twin.VipAddress), "the twin cluster's load balancer is left alone")
		// The twin cluster goes too: its VIP port, in the same project, kept the share.
		deleteLB(ctx, twin.ID)
		Expect(lbsOnSubnet(ctx, second.SubnetID)).To(BeEmpty())
		Eventually(func() []string { return shares(ctx, second.NetworkID) }, time.Minute, time.Second).Should(BeEmpty(), "the share is removed")
		Expect(clusterPortsOn(ctx, second.NetworkID)).To(BeEmpty())
		Expect(leftovers(ctx, ns, name)).To(BeEmpty(), "nothing of the cluster is left in Neutron, Nova or Octavia")
		Expect(plane.DeleteVMNetwork(ctx, vm, second.NetworkID, 10*time.Second)).To(Succeed(), "the VM project deletes its network")
		Eventually(func(g Gomega) []string { return deletionHookNamespaces(ctx, g) }, time.Minute, time.Second).
			ShouldNot(ContainElement(ns), "with its attachments gone, the namespace leaves BeforeClusterDelete's selector")
	}, SpecTimeout(16*time.Minute))
})

// controlPlaneState is what would change if the control plane rolled.
type controlPlaneState struct {
	Name, InfrastructureTemplate string
	Generation                   int64
	Machines                     int
}

func observeControlPlane(ctx context.Context, key client.ObjectKey) controlPlaneState {
	list := &controlplanev1.KubeadmControlPlaneList{}
	Expect(pl.Client.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name})).To(Succeed())
	Expect(list.Items).To(HaveLen(1))
	kcp := list.Items[0]
	ms, err := pl.Machines(ctx, key.Namespace, key.Name, "")
	Expect(err).NotTo(HaveOccurred())
	return controlPlaneState{
		Name: kcp.Name, InfrastructureTemplate: kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name,
		Generation: kcp.Generation, Machines: len(ms),
	}
}

// machineDeploymentTemplates are a nodegroup's infrastructure and bootstrap templates.
func machineDeploymentTemplates(ctx context.Context, key client.ObjectKey, topology string) [2]string {
	list := &clusterv1.MachineDeploymentList{}
	Expect(pl.Client.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel: key.Name, clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology,
	})).To(Succeed())
	Expect(list.Items).To(HaveLen(1))
	md := list.Items[0]
	return [2]string{md.Spec.Template.Spec.InfrastructureRef.Name, md.Spec.Template.Spec.Bootstrap.ConfigRef.Name}
}

func machineNames(ms []plane.Machine) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return names(out)
}

// deleteClusterIfPresent deletes a cluster a failed spec left behind and
// waits until CAPO has removed its servers.
func deleteClusterIfPresent(ctx SpecContext, key client.ObjectKey) {
	c := &clusterv1.Cluster{}
	if err := pl.Client.Get(ctx, key, c); err != nil {
		return
	}
	_ = pl.Client.Delete(ctx, c)
	Eventually(func() bool { return apierrors.IsNotFound(pl.Client.Get(ctx, key, &clusterv1.Cluster{})) }, 8*time.Minute, 2*time.Second).Should(BeTrue())
}

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
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
)

// The path templates/cluster-template-shared-network.yaml takes by default:
// md-a is attached when the cluster is created. Its machines are created
// once, each with its shared port, and never rolled for the attach; a
// Kubernetes upgrade then rolls md-a exactly once and the new machines keep
// their port. Deleting the cluster's namespace then removes everything it
// made, in Kubernetes and in the cloud.
var _ = Describe("A cluster created with a nodegroup on a shared network", Ordered, Label("local"), func() {
	const mdA, mdB = "md-a", "md-b"
	var (
		ns, name, snName string
		key              client.ObjectKey
		book             *ledger
		vmNet            plane.VMNetwork
		created          []plane.Machine
	)

	BeforeAll(func(ctx SpecContext) {
		ns, name, snName, vmNet = newStory(ctx, "e2e-new-", "c-new-", "172.27.0.0/24")
		key = client.ObjectKey{Namespace: ns, Name: name}

		// The ledger runs before the Cluster exists: every Machine ever made counts.
		book = newLedger()
		ledgerCtx, stop := context.WithCancel(context.Background())
		go book.run(ledgerCtx, pl.Client, ns, name)
		DeferCleanup(stop)
		book.settle()
		// After every spec of this container: the upgrade uses the cluster too.
		DeferCleanup(deleteClusterIfPresent, key, NodeTimeout(10*time.Minute))
	}, NodeTimeout(5*time.Minute))

	It("attach at creation: every machine of md-a is created once, each with its port on the shared subnet; nothing is rolled for the attach", func(ctx SpecContext) {
		done := tl.step("create a cluster with md-a attached (2 nodes, each created once with its port)")
		defer done()
		secret, cluster, err := pl.RenderCluster(plane.ClusterVariables{
			Name: name, Namespace: ns, CloudsYAML: clouds, Workers: 2, SharedNetwork: snName, Subnet: vmNet.SubnetID,
		})
		Expect(err).NotTo(HaveOccurred())
		for i := range cluster.Spec.Topology.Workers.MachineDeployments {
			if cluster.Spec.Topology.Workers.MachineDeployments[i].Name == mdB {
				cluster.Spec.Topology.Workers.MachineDeployments[i].Replicas = ptr.To[int32](1)
			}
		}
		Expect(pl.Apply(ctx, secret, cluster)).To(Succeed())

		created = attachedMachines(ctx, ns, name, mdA, 2, 8*time.Minute)

		By("md-a's machines were created once: two created, none deleted, and nothing more happens")
		book.settle()
		Consistently(func(g Gomega) {
			ch := book.since(0)
			g.Expect(ch.Created[mdA]).To(Equal(machineNames(created)))
			g.Expect(ch.Deleted).To(BeEmpty())
		}, 15*time.Second, time.Second).Should(Succeed())
		Expect(shares(ctx, vmNet.NetworkID)).To(HaveLen(1))
		expectSharedPorts(ctx, created, vmNet)
	}, SpecTimeout(10*time.Minute))

	It("a Kubernetes upgrade rolls md-a exactly once, and its new machines keep their port on the shared subnet", func(ctx SpecContext) {
		done := tl.step("upgrade v1.35.0 -> v1.35.1 (md-a rolled once, ports kept)")
		defer done()
		mark := book.mark()
		Expect(pl.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) { c.Spec.Topology.Version = "v1.35.1" })).To(Succeed())

		var now []plane.Machine
		Eventually(func(g Gomega) {
			var err error
			now, err = pl.Machines(ctx, ns, name, mdA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(now).To(HaveLen(2))
			for _, m := range now {
				g.Expect(m.Version).To(Equal("v1.35.1"), "machine %s", m.Name)
				g.Expect(m.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)))
			}
			a, err := pl.Attachment(ctx, ns, name, mdA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseAttached), a.Status.Message)
		}, 6*time.Minute, time.Second).Should(Succeed())

		By("exactly once: the two old machines deleted, two new ones, nothing else of md-a")
		book.settle()
		Consistently(func(g Gomega) {
			ch := book.since(mark)
			g.Expect(ch.Deleted[mdA]).To(Equal(machineNames(created)))
			g.Expect(ch.Created[mdA]).To(Equal(machineNames(now)))
		}, 15*time.Second, time.Second).Should(Succeed())
		expectSharedPorts(ctx, now, vmNet)
		Expect(shares(ctx, vmNet.NetworkID)).To(HaveLen(1), "the same share")
	}, SpecTimeout(8*time.Minute))

	It("deleting the cluster's namespace, with a Service's internal load balancer on the shared subnet, completes (kube-controller-manager's namespace controller) and leaves nothing in Nova, Neutron (no share, no port) or Octavia", func(ctx SpecContext) {
		By("the upgrade has rolled md-b too: every machine runs v1.35.1")
		Eventually(func(g Gomega) {
			for topology, want := range map[string]int{mdA: 2, mdB: 1} {
				ms, err := pl.Machines(ctx, ns, name, topology)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ms).To(HaveLen(want), topology)
				for _, m := range ms {
					g.Expect(m.Version).To(Equal("v1.35.1"), "machine %s", m.Name)
					g.Expect(m.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "machine %s", m.Name)
				}
			}
		}, 5*time.Minute, time.Second).Should(Succeed())

		By("the credential webhook reaches the cluster's namespace, and no namespace without a cluster on a shared network")
		Eventually(func(g Gomega) {
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			g.Expect(pl.Client.Get(ctx, client.ObjectKey{Name: plane.CredentialWebhookConfiguration}, vwc)).To(Succeed())
			i := slices.IndexFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
				return w.Name == controllers.CredentialWebhookName
			})
			g.Expect(i).NotTo(BeNumerically("<", 0))
			sel, err := metav1.LabelSelectorAsSelector(vwc.Webhooks[i].NamespaceSelector)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sel.Matches(labels.Set{corev1.LabelMetadataName: ns})).To(BeTrue(), "selector %s", sel)
			g.Expect(sel.Matches(labels.Set{corev1.LabelMetadataName: "default"})).To(BeFalse(), "selector %s", sel)
		}, time.Minute, time.Second).Should(Succeed())

		service := client.ObjectKey{Namespace: "default", Name: "svc-" + name}
		DeferCleanup(deleteWorkloadService, service, NodeTimeout(2*time.Minute))
		lb := createGuideService(ctx, key, service, vmNet.SubnetID)

		done := tl.step("delete the cluster's namespace (the namespace controller deletes the Cluster; BeforeClusterDelete removes the LB)")
		Expect(pl.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func(g Gomega) {
			n := &corev1.Namespace{}
			err := pl.Client.Get(ctx, client.ObjectKey{Name: ns}, n)
			if apierrors.IsNotFound(err) {
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Status.Conditions).To(BeEmpty(), "namespace %s is still %s", ns, n.Status.Phase)
			g.Expect(n.Status.Phase).To(BeEmpty(), "namespace %s is still there", ns)
		}, 8*time.Minute, 2*time.Second).Should(Succeed())
		done()

		Expect(lbGone(ctx, lb.ID)).To(BeTrue(), "BeforeClusterDelete removed the load balancer")
		Expect(lbsOnSubnet(ctx, vmNet.SubnetID)).To(BeEmpty())
		Eventually(func() []string { return shares(ctx, vmNet.NetworkID) }, time.Minute, time.Second).Should(BeEmpty(), "the share is removed")
		Expect(clusterPortsOn(ctx, vmNet.NetworkID)).To(BeEmpty())
		Expect(leftovers(ctx, ns, name)).To(BeEmpty(), "nothing of the cluster is left in Neutron, Nova or Octavia")
	}, SpecTimeout(12*time.Minute))
})

// expectSharedPorts: every machine's Nova server has one port on the shared
// subnet, named after the machine, with an address from the subnet's pools.
func expectSharedPorts(ctx context.Context, machines []plane.Machine, vmNet plane.VMNetwork) {
	GinkgoHelper()
	onShared := clusterPortsOn(ctx, vmNet.NetworkID)
	for _, m := range machines {
		server := plane.ServerID(m.ProviderID)
		Expect(onShared[server]).To(HaveLen(1), "server %s of machine %s", server, m.Name)
		port := onShared[server][0]
		Expect(port.Name).To(Equal(m.Name + "-shared"))
		Expect(port.FixedIPs).To(HaveLen(1))
		Expect(port.FixedIPs[0].SubnetID).To(Equal(vmNet.SubnetID))
		Expect(inPools(ctx, vmNet.SubnetID, port.FixedIPs[0].IPAddress)).To(BeTrue(), port.FixedIPs[0].IPAddress)
		fmt.Fprintf(GinkgoWriter, "%s: server %s, shared address %s\n", m.Name, server, port.FixedIPs[0].IPAddress)
	}
}

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
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/nodeconfig"
)

// What the workload cluster shows: Nodes initialized by the real OpenStack
// cloud controller manager, Services of type LoadBalancer it turns into
// Octavia load balancers.

// uninitializedTaint is the taint the cloud controller manager removes once
// it has initialized a Node.
const uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// expectNodesOnClusterNetwork: every machine's Node is initialized by the
// cloud controller manager, its first InternalIP is on the cluster subnet and
// its address on the shared subnet is there too (row "node InternalIP stays
// on the cluster network").
func expectNodesOnClusterNetwork(ctx context.Context, machines []plane.Machine, clusterCIDR string, vmNet plane.VMNetwork) {
	GinkgoHelper()
	clusterPrefix := netip.MustParsePrefix(clusterCIDR)
	sharedPrefix := netip.MustParsePrefix(vmNet.CIDR)
	Eventually(func(g Gomega) {
		byProvider := nodesByProvider(ctx, g)
		for _, m := range machines {
			n, ok := byProvider[m.ProviderID]
			g.Expect(ok).To(BeTrue(), "a Node for machine %s (%s)", m.Name, m.ProviderID)
			for _, t := range n.Spec.Taints {
				g.Expect(t.Key).NotTo(Equal(uninitializedTaint), "Node %s initialized by the cloud controller manager", n.Name)
				// The API server taints a new Node not-ready; kube-controller-manager's
				// node lifecycle controller removes it once the Node is Ready.
				g.Expect(t.Key).NotTo(Equal(corev1.TaintNodeNotReady), "Node %s seen Ready by the node lifecycle controller", n.Name)
			}
			var internal []netip.Addr
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					internal = append(internal, netip.MustParseAddr(a.Address))
				}
			}
			g.Expect(internal).NotTo(BeEmpty(), "Node %s has InternalIPs", n.Name)
			g.Expect(clusterPrefix.Contains(internal[0])).To(BeTrue(), "Node %s: first InternalIP %s is on the cluster subnet %s (addresses %v)", n.Name, internal[0], clusterCIDR, n.Status.Addresses)
			shared := 0
			for _, a := range internal {
				if sharedPrefix.Contains(a) {
					shared++
				}
			}
			g.Expect(shared).To(Equal(1), "Node %s has its address on the shared subnet %s (addresses %v)", n.Name, vmNet.CIDR, n.Status.Addresses)
		}
	}, 2*time.Minute, time.Second).Should(Succeed())
	for _, m := range machines {
		fmt.Fprintf(GinkgoWriter, "Node of %s: initialized by the CCM, first InternalIP on %s\n", m.Name, clusterCIDR)
	}
}

// createGuideService creates the guide's Service in the workload cluster and
// waits for the real cloud controller manager to give it an internal load
// balancer: VIP on the shared subnet, one member per Node of the cluster, on
// the cluster subnet at the Node's first InternalIP. It returns the load
// balancer as Octavia has it. The caller deletes the Service
// (deleteWorkloadService) when it is done.
func createGuideService(ctx context.Context, cluster, service client.ObjectKey, sharedSubnetID string) *loadbalancers.LoadBalancer {
	GinkgoHelper()
	subnetID, cidr, err := pl.ClusterSubnet(ctx, cluster.Namespace, cluster.Name)
	Expect(err).NotTo(HaveOccurred())
	svc := plane.GuideService(service, sharedSubnetID, subnetID)
	Expect(pl.WorkloadClient.Create(ctx, svc)).To(Succeed())
	vip, err := pl.WaitForLoadBalancerIP(ctx, service, 3*time.Minute)
	Expect(err).NotTo(HaveOccurred())

	name := ccm.LoadBalancerName(ccm.ClusterName(cluster.Namespace, cluster.Name), service.Namespace, service.Name)
	var lb loadbalancers.LoadBalancer
	var members []string
	Eventually(func(g Gomega) {
		lb = theLoadBalancer(ctx, g, name)
		g.Expect(lb.VipSubnetID).To(Equal(sharedSubnetID), "the VIP is on the shared subnet")
		g.Expect(lb.VipAddress).To(Equal(vip), "the Service's ingress IP is the VIP")
		g.Expect(lb.Pools).To(HaveLen(1))
		mpages, err := pools.ListMembers(clusterProject.LoadBalancer, lb.Pools[0].ID, pools.ListMembersOpts{}).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		ms, err := pools.ExtractMembers(mpages)
		g.Expect(err).NotTo(HaveOccurred())
		members = nil
		for _, m := range ms {
			g.Expect(m.SubnetID).To(Equal(subnetID), "member %s is declared on the cluster subnet", m.Address)
			members = append(members, m.Address)
		}
		// While a nodegroup rolls, Nodes come and go: the CCM follows them.
		g.Expect(members).To(ConsistOf(nodeAddresses(ctx, g, cluster, cidr)), "one member per Node, at its address on the cluster subnet")
	}, 2*time.Minute, time.Second).Should(Succeed())
	fmt.Fprintf(GinkgoWriter, "Service %s: load balancer %s, VIP %s on the shared subnet, members %v on %s\n", service, lb.Name, vip, members, cidr)
	return &lb
}

// expectNetworkLabel: the Node of every machine carries the label naming the
// SharedNetwork (want; "" for none), registered with by the kubelet from the
// bootstrap configuration of its machine.
func expectNetworkLabel(ctx context.Context, machines []plane.Machine, want string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		byProvider := nodesByProvider(ctx, g)
		for _, m := range machines {
			n, ok := byProvider[m.ProviderID]
			g.Expect(ok).To(BeTrue(), "a Node for machine %s (%s)", m.Name, m.ProviderID)
			if want == "" {
				g.Expect(n.Labels).NotTo(HaveKey(nodeconfig.LabelKey), "Node %s", n.Name)
				continue
			}
			g.Expect(n.Labels).To(HaveKeyWithValue(nodeconfig.LabelKey, nodeconfig.LabelValue(want)), "Node %s", n.Name)
		}
	}, time.Minute, time.Second).Should(Succeed())
}

// nodesByProvider are the workload cluster's Nodes by provider ID.
func nodesByProvider(ctx context.Context, g Gomega) map[string]corev1.Node {
	nodes := &corev1.NodeList{}
	g.Expect(pl.WorkloadClient.List(ctx, nodes)).To(Succeed())
	byProvider := map[string]corev1.Node{}
	for _, n := range nodes.Items {
		byProvider[n.Spec.ProviderID] = n
	}
	return byProvider
}

// nodeAddresses are the first InternalIPs of a cluster's Nodes, each on the
// cluster subnet.
func nodeAddresses(ctx context.Context, g Gomega, cluster client.ObjectKey, clusterCIDR string) []string {
	nodes := &corev1.NodeList{}
	g.Expect(pl.WorkloadClient.List(ctx, nodes, client.MatchingLabels{
		plane.SimulatedNodeNamespace: cluster.Namespace, plane.SimulatedNodeCluster: cluster.Name,
	})).To(Succeed())
	prefix := netip.MustParsePrefix(clusterCIDR)
	var out []string
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				g.Expect(prefix.Contains(netip.MustParseAddr(a.Address))).To(BeTrue(), "Node %s: first InternalIP %s on %s", n.Name, a.Address, clusterCIDR)
				out = append(out, a.Address)
				break
			}
		}
	}
	g.Expect(out).NotTo(BeEmpty(), "the cluster's Nodes have InternalIPs")
	return out
}

// deleteWorkloadService deletes a Service of the workload cluster. Once its
// cluster is gone no cloud controller manager removes the Service's
// load-balancer finalizer; the workload API server outlives the clusters of
// the plane, so the finalizer is dropped then.
func deleteWorkloadService(ctx SpecContext, key client.ObjectKey) {
	svc := &corev1.Service{}
	if err := pl.WorkloadClient.Get(ctx, key, svc); apierrors.IsNotFound(err) {
		return
	}
	_ = pl.WorkloadClient.Delete(ctx, svc)
	Eventually(func() bool {
		err := pl.WorkloadClient.Get(ctx, key, svc)
		if apierrors.IsNotFound(err) {
			return true
		}
		if err == nil && len(svc.Finalizers) > 0 {
			before := svc.DeepCopy()
			svc.Finalizers = nil
			_ = pl.WorkloadClient.Patch(ctx, svc, client.MergeFrom(before))
		}
		return false
	}, time.Minute, time.Second).Should(BeTrue())
}

// otherClustersLoadBalancer creates by hand what the OpenStack cloud
// controller manager of another cluster (one the plane does not run) makes
// for a Service with the three annotations of the guide: a load balancer of
// the cluster's project, named and tagged for that cluster, with its VIP on
// the shared subnet. A second real CCM cannot play that cluster here: on the
// plane's one workload API server it would take over this cluster's Service
// (and its load balancer, through the CCM's load-balancer-id annotation).
func otherClustersLoadBalancer(ctx context.Context, cluster client.ObjectKey, service client.ObjectKey, subnetID string) *loadbalancers.LoadBalancer {
	name := ccm.LoadBalancerName(ccm.ClusterName(cluster.Namespace, cluster.Name), service.Namespace, service.Name)
	lb, err := loadbalancers.Create(ctx, clusterProject.LoadBalancer, loadbalancers.CreateOpts{
		Name: name, Tags: []string{name}, VipSubnetID: subnetID,
		Description: "Kubernetes external service " + service.String() + " from cluster " + ccm.ClusterName(cluster.Namespace, cluster.Name),
	}).Extract()
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		got, err := loadbalancers.Get(ctx, clusterProject.LoadBalancer, lb.ID).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.ProvisioningStatus).To(Equal("ACTIVE"))
		lb = got
	}, 2*time.Minute, time.Second).Should(Succeed())
	return lb
}

// theLoadBalancer is the one load balancer of the cluster's project named so.
func theLoadBalancer(ctx context.Context, g Gomega, name string) loadbalancers.LoadBalancer {
	pages, err := loadbalancers.List(clusterProject.LoadBalancer, loadbalancers.ListOpts{Name: name}).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	lbs, err := loadbalancers.ExtractLoadBalancers(pages)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lbs).To(HaveLen(1), "one load balancer named %s in the cluster's project", name)
	return lbs[0]
}

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
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/networkipavailabilities"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/rbacpolicies"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	. "github.com/onsi/gomega"

	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
)

// shares are the RBAC policies sharing a network with the cluster's project,
// as the admin sees them in Neutron.
func shares(ctx context.Context, networkID string) []string {
	pages, err := rbacpolicies.List(admin.Network, rbacpolicies.ListOpts{ObjectID: networkID, TargetTenant: clusterProject.ProjectID}).AllPages(ctx)
	Expect(err).NotTo(HaveOccurred())
	all, err := rbacpolicies.ExtractRBACPolicies(pages)
	Expect(err).NotTo(HaveOccurred())
	ids := []string{}
	for _, p := range all {
		ids = append(ids, p.ID)
	}
	return ids
}

// clusterPortsOn lists the cluster project's ports on a network, by server.
func clusterPortsOn(ctx context.Context, networkID string) map[string][]ports.Port {
	pages, err := ports.List(admin.Network, ports.ListOpts{NetworkID: networkID, ProjectID: clusterProject.ProjectID}).AllPages(ctx)
	Expect(err).NotTo(HaveOccurred())
	all, err := ports.ExtractPorts(pages)
	Expect(err).NotTo(HaveOccurred())
	out := map[string][]ports.Port{}
	for _, p := range all {
		out[p.DeviceID] = append(out[p.DeviceID], p)
	}
	return out
}

// inPools says whether an address is in one of a subnet's allocation pools.
func inPools(ctx context.Context, subnetID, address string) bool {
	s, err := subnets.Get(ctx, admin.Network, subnetID).Extract()
	Expect(err).NotTo(HaveOccurred())
	a := netip.MustParseAddr(address)
	for _, p := range s.AllocationPools {
		start, end := netip.MustParseAddr(p.Start), netip.MustParseAddr(p.End)
		if a.Compare(start) >= 0 && a.Compare(end) <= 0 {
			return true
		}
	}
	return false
}

// deleteLB deletes a load balancer with its listeners and pools, as the
// cloud controller manager does when its Service goes, and waits until it
// is gone.
func deleteLB(ctx context.Context, id string) {
	err := loadbalancers.Delete(ctx, clusterProject.LoadBalancer, id, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr()
	if err != nil && !gophercloud.ResponseCodeIs(err, 404) && !gophercloud.ResponseCodeIs(err, 409) { // 409: already PENDING_DELETE
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(func() bool { return lbGone(ctx, id) }, 2*time.Minute, time.Second).Should(BeTrue())
}

// lbGone says whether a load balancer is deleted.
func lbGone(ctx context.Context, id string) bool {
	got, err := loadbalancers.Get(ctx, clusterProject.LoadBalancer, id).Extract()
	if gophercloud.ResponseCodeIs(err, 404) {
		return true
	}
	Expect(err).NotTo(HaveOccurred())
	return got.ProvisioningStatus == "DELETED"
}

// lbsOnSubnet lists the cluster project's load balancers with a VIP on a subnet.
func lbsOnSubnet(ctx context.Context, subnetID string) []string {
	pages, err := loadbalancers.List(admin.LoadBalancer, loadbalancers.ListOpts{VipSubnetID: subnetID, ProjectID: clusterProject.ProjectID}).AllPages(ctx)
	Expect(err).NotTo(HaveOccurred())
	all, err := loadbalancers.ExtractLoadBalancers(pages)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, lb := range all {
		if lb.ProvisioningStatus != "DELETED" {
			out = append(out, lb.Name+" "+lb.VipAddress)
		}
	}
	return out
}

// leftovers lists what the cluster's project still holds of a cluster: Nova
// servers, Neutron ports, networks and security groups named after it (CAPO
// names them <cluster>-..., k8s-clusterapi-cluster-<ns>-<cluster>,
// k8s-cluster-<ns>-<cluster>-secgroup-...), and Octavia load balancers named
// after it (its CCM's kube_service_<ns>.<cluster>_...).
func leftovers(ctx context.Context, namespace, cluster string) []string {
	resource := namespace + "-" + cluster
	ours := func(name string) bool {
		return strings.HasPrefix(name, cluster+"-") || strings.Contains(name, resource) || strings.Contains(name, "_"+cluster+"_") ||
			strings.Contains(name, "_"+ccm.ClusterName(namespace, cluster)+"_")
	}
	var out []string
	spages, err := servers.List(clusterProject.Compute, servers.ListOpts{}).AllPages(ctx)
	Expect(err).NotTo(HaveOccurred())
	srvs, err := servers.ExtractServers(spages)
	Expect(err).NotTo(HaveOccurred())
	for _, s := range srvs {
		if ours(s.Name) {
			out = append(out, "Nova server "+s.Name+" "+s.Status)
		}
	}
	ppages, err := ports.List(clusterProject.Network, ports.ListOpts{ProjectID: clusterProject.ProjectID}).AllPages(ctx)
	Expect(err).NotTo(HaveOccurred())
	ps, err := ports.ExtractPorts(ppages)
	Expect(err).NotTo(HaveOccurred())
	for _, p := range ps {
		if ours(p.Name) {
			out = append(out, "Neutron port "+p.Name)
		}
	}
	npages, err := networks.List(clusterProject.Network, networks.ListOpts{ProjectID: clusterProject.ProjectID}).AllPages(ctx)
	Expect(err).NotTo(HaveOccurred())
	ns, err := networks.ExtractNetworks(npages)
	Expect(err).NotTo(HaveOccurred())
	for _, n := range ns {
		if ours(n.Name) {
			out = append(out, "Neutron network "+n.Name)
		}
	}
	gpages, err := groups.List(clusterProject.Network, groups.ListOpts{ProjectID: clusterProject.ProjectID}).AllPages(ctx)
	Expect(err).NotTo(HaveOccurred())
	gs, err := groups.ExtractGroups(gpages)
	Expect(err).NotTo(HaveOccurred())
	for _, g := range gs {
		if ours(g.Name) {
			out = append(out, "security group "+g.Name)
		}
	}
	lpages, err := loadbalancers.List(clusterProject.LoadBalancer, loadbalancers.ListOpts{ProjectID: clusterProject.ProjectID}).AllPages(ctx)
	Expect(err).NotTo(HaveOccurred())
	lbs, err := loadbalancers.ExtractLoadBalancers(lpages)
	Expect(err).NotTo(HaveOccurred())
	for _, lb := range lbs {
		if ours(lb.Name) && lb.ProvisioningStatus != "DELETED" {
			out = append(out, "Octavia load balancer "+lb.Name)
		}
	}
	return out
}

// neutronFree is the free addresses of a VM network's subnet as Neutron
// counts them (network IP availability: total_ips - used_ips).
func neutronFree(ctx context.Context, g Gomega, n plane.VMNetwork) float64 {
	availability, err := networkipavailabilities.Get(ctx, admin.Network, n.NetworkID).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range availability.SubnetIPAvailabilities {
		if s.SubnetID == n.SubnetID {
			total, err := strconv.ParseFloat(s.TotalIPs, 64)
			g.Expect(err).NotTo(HaveOccurred())
			used, err := strconv.ParseFloat(s.UsedIPs, 64)
			g.Expect(err).NotTo(HaveOccurred())
			return total - used
		}
	}
	g.Expect(availability.SubnetIPAvailabilities).To(ContainElement(HaveField("SubnetID", n.SubnetID)))
	return 0
}

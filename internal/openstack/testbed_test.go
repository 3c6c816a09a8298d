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

package openstack_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/networkipavailabilities"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/portsecurity"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/quotas"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/rbacpolicies"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
)

// vmNetwork creates, in the VM project, a network with one subnet of two
// allocation pools, and removes both at the end.
func vmNetwork(t *testing.T, vm testbed.Clients, cidr string, pools []subnets.AllocationPool) (networkID, subnetID string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	n, err := networks.Create(ctx, vm.Network, networks.CreateOpts{Name: testbed.Name(t, "net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, vm.Network, n.ID).ExtractErr() })
	noGateway := ""
	s, err := subnets.Create(ctx, vm.Network, subnets.CreateOpts{
		NetworkID: n.ID, CIDR: cidr, IPVersion: 4, AllocationPools: pools, GatewayIP: &noGateway, Name: testbed.Name(t, "subnet"),
	}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = subnets.Delete(ctx, vm.Network, s.ID).ExtractErr() })
	return n.ID, s.ID
}

func portOn(t *testing.T, c testbed.Clients, networkID, subnetID string) *ports.Port {
	t.Helper()
	p, err := ports.Create(context.Background(), c.Network, ports.CreateOpts{
		NetworkID: networkID, FixedIPs: []ports.IP{{SubnetID: subnetID}}, Name: testbed.Name(t, "port"),
	}).Extract()
	if err != nil {
		t.Fatalf("creating a port on subnet %s: %v", subnetID, err)
	}
	return p
}

func TestShareMakesTheNetworkUsableAndUnshareWaitsForItsPorts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vm, cluster := testbed.NewClients(t, testbed.VMProject), testbed.NewClients(t, testbed.ClusterProject)
	networkID, subnetID := vmNetwork(t, vm, "172.20.1.0/24", nil)
	sharer := testbed.Session(t, testbed.VMProject, openstack.Options{})
	clusterSession := testbed.Session(t, testbed.ClusterProject, openstack.Options{})

	_, err := clusterSession.Network(ctx, networkID)
	g.Expect(openstack.IsNotFound(err)).To(BeTrue(), "not shared yet: the cluster project cannot see it, got %v", err)

	policy, err := sharer.Share(ctx, networkID, cluster.ProjectID)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := sharer.Share(ctx, networkID, cluster.ProjectID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(policy), "sharing twice finds the same policy (Neutron refuses the duplicate)")
	t.Cleanup(func() { _ = sharer.Unshare(ctx, policy) })

	network, err := clusterSession.Network(ctx, networkID)
	g.Expect(err).NotTo(HaveOccurred(), "shared: the cluster project sees the network")
	g.Expect(network.MTU).To(BeNumerically(">", 0))

	port := portOn(t, cluster, networkID, subnetID)
	err = sharer.Unshare(ctx, policy)
	g.Expect(openstack.IsInUse(err)).To(BeTrue(), "Neutron refuses the unshare while the port exists (409), got %v", err)
	g.Expect(sharer.FindShare(ctx, networkID, cluster.ProjectID)).To(Equal(policy), "and the share is still there")

	g.Expect(ports.Delete(ctx, cluster.Network, port.ID).ExtractErr()).To(Succeed())
	g.Expect(sharer.Unshare(ctx, policy)).To(Succeed())
	g.Expect(sharer.FindShare(ctx, networkID, cluster.ProjectID)).To(BeEmpty())
	_, err = clusterSession.Network(ctx, networkID)
	g.Expect(openstack.IsNotFound(err)).To(BeTrue(), "unshared: invisible again")
	g.Expect(sharer.Unshare(ctx, policy)).To(Succeed(), "unsharing what is gone is done")
}

func TestFreeAddressesMatchNeutronsOwnAvailability(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vm, admin := testbed.NewClients(t, testbed.VMProject), testbed.NewClients(t, testbed.Admin)
	networkID, subnetID := vmNetwork(t, vm, "172.20.2.0/24", []subnets.AllocationPool{
		{Start: "172.20.2.10", End: "172.20.2.19"}, {Start: "172.20.2.100", End: "172.20.2.104"},
	})
	for range 3 {
		p := portOn(t, vm, networkID, subnetID)
		t.Cleanup(func() { _ = ports.Delete(ctx, vm.Network, p.ID).ExtractErr() })
	}
	s := testbed.Session(t, testbed.VMProject, openstack.Options{})
	facts, err := s.Subnets(ctx, networkID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(facts).To(HaveLen(1))
	subnet := facts[0]
	g.Expect(subnet.ID).To(Equal(subnetID))
	byNetwork, err := s.AddressesOnNetwork(ctx, networkID)
	g.Expect(err).NotTo(HaveOccurred())
	used := byNetwork[subnetID].All
	free := openstack.FreeAddresses(subnet.AllocationPools, used)

	availability, err := networkipavailabilities.Get(ctx, admin.Network, networkID).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	var neutron *networkipavailabilities.SubnetIPAvailability
	for i := range availability.SubnetIPAvailabilities {
		if availability.SubnetIPAvailabilities[i].SubnetID == subnetID {
			neutron = &availability.SubnetIPAvailabilities[i]
		}
	}
	g.Expect(neutron).NotTo(BeNil())
	g.Expect(free).To(Equal(int64(15 - 3)))
	g.Expect(strconv.FormatInt(openstack.PoolSize(subnet.AllocationPools), 10)).To(Equal(neutron.TotalIPs))
	g.Expect(strconv.FormatInt(openstack.UsedInPools(subnet.AllocationPools, used), 10)).To(Equal(neutron.UsedIPs))
}

func TestLoadBalancersOnASubnetAreFoundAndDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vm, cluster := testbed.NewClients(t, testbed.VMProject), testbed.NewClients(t, testbed.ClusterProject)
	networkID, subnetID := vmNetwork(t, vm, "172.20.3.0/24", nil)
	sharer := testbed.Session(t, testbed.VMProject, openstack.Options{})
	policy, err := sharer.Share(ctx, networkID, cluster.ProjectID)
	g.Expect(err).NotTo(HaveOccurred())

	// The cluster's own network, with an LB that must not be listed.
	own, err := networks.Create(ctx, cluster.Network, networks.CreateOpts{Name: testbed.Name(t, "own")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, cluster.Network, own.ID).ExtractErr() })
	ownSubnet, err := subnets.Create(ctx, cluster.Network, subnets.CreateOpts{NetworkID: own.ID, CIDR: "10.6.30.0/24", IPVersion: 4}).Extract()
	g.Expect(err).NotTo(HaveOccurred())

	onShared, err := loadbalancers.Create(ctx, cluster.LoadBalancer, loadbalancers.CreateOpts{
		Name: "kube_service_c1_default_my-service", Description: "Kubernetes external service default/my-service from cluster c1", VipSubnetID: subnetID,
	}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	onOwn, err := loadbalancers.Create(ctx, cluster.LoadBalancer, loadbalancers.CreateOpts{Name: testbed.Name(t, "own-lb"), VipSubnetID: ownSubnet.ID}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	lbs := testbed.Session(t, testbed.ClusterProject, openstack.Options{})
	t.Cleanup(func() {
		_ = lbs.DeleteCascade(ctx, onOwn.ID)
		_ = testbed.WaitLoadBalancersGone(ctx, cluster.LoadBalancer, []string{onOwn.ID}, time.Second)
		_ = subnets.Delete(ctx, cluster.Network, ownSubnet.ID).ExtractErr()
	})

	found, err := lbs.OnSubnet(ctx, subnetID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(HaveLen(1))
	g.Expect(found[0].ID).To(Equal(onShared.ID))
	g.Expect(found[0].Tags).To(BeEmpty(), "created by hand here, without the tag the CCM adds")
	g.Expect(netip.MustParseAddr(found[0].VIP).Is4()).To(BeTrue())

	// The LB's VIP port keeps the network shared: Neutron refuses the unshare.
	g.Eventually(func() string {
		lb, _ := loadbalancers.Get(ctx, cluster.LoadBalancer, onShared.ID).Extract()
		return lb.ProvisioningStatus
	}, 60*time.Second, time.Second).Should(Equal("ACTIVE"))
	g.Expect(openstack.IsInUse(sharer.Unshare(ctx, policy))).To(BeTrue())

	// The VM project sees the VIP port on its network, of whatever project,
	// as a load balancer's address, and counts it as used.
	addresses, err := sharer.AddressesOnNetwork(ctx, networkID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(addresses[subnetID].LoadBalancers).To(ConsistOf(netip.MustParseAddr(found[0].VIP)))
	g.Expect(addresses[subnetID].All).To(ContainElement(netip.MustParseAddr(found[0].VIP)))

	g.Expect(lbs.DeleteCascade(ctx, onShared.ID)).To(Succeed())
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	g.Expect(testbed.WaitLoadBalancersGone(waitCtx, cluster.LoadBalancer, []string{onShared.ID}, time.Second)).To(Succeed())
	g.Expect(lbs.OnSubnet(ctx, subnetID)).To(BeEmpty())
	g.Eventually(func() error { return sharer.Unshare(ctx, policy) }, 60*time.Second, 2*time.Second).Should(Succeed(), "the VIP port is gone with the LB")
}

// The VM-side audit on a real Neutron: of the VM project's ports on the
// shared subnet (its DHCP port is Neutron's, not counted), the one in a
// group whose /16 rule admits the /24 and the one without port security
// accept the nodes; the one in the project's default group (whose ingress
// rules have a remote group) does not; a /25 rule admits half the nodes and
// is not counted.
func TestSecurityGroupAuditReadsTheVMPortsOnTheSharedSubnet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vm := testbed.NewClients(t, testbed.VMProject)
	networkID, subnetID := vmNetwork(t, vm, "172.21.5.0/24", nil)
	sg, err := groups.Create(ctx, vm.Network, groups.CreateOpts{Name: testbed.Name(t, "sg")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = groups.Delete(ctx, vm.Network, sg.ID).ExtractErr() })
	_, err = rules.Create(ctx, vm.Network, rules.CreateOpts{SecGroupID: sg.ID, Direction: rules.DirIngress, EtherType: rules.EtherType4, RemoteIPPrefix: "172.21.0.0/16", Protocol: rules.ProtocolTCP, PortRangeMin: 443, PortRangeMax: 443}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = rules.Create(ctx, vm.Network, rules.CreateOpts{SecGroupID: sg.ID, Direction: rules.DirIngress, EtherType: rules.EtherType4, RemoteIPPrefix: "172.21.5.0/25"}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	off := false
	// VM ports carry a compute owner, as Nova sets it; a port bound to
	// nothing (the last) has no VM behind it and is not counted.
	const vm1 = "compute:nova"
	for _, opts := range []ports.CreateOptsBuilder{
		ports.CreateOpts{NetworkID: networkID, FixedIPs: []ports.IP{{SubnetID: subnetID}}, Name: testbed.Name(t, "in-group"), SecurityGroups: &[]string{sg.ID}, DeviceOwner: vm1},
		ports.CreateOpts{NetworkID: networkID, FixedIPs: []ports.IP{{SubnetID: subnetID}}, Name: testbed.Name(t, "default-group"), DeviceOwner: vm1},
		portsecurity.PortCreateOptsExt{PortSecurityEnabled: &off,
			CreateOptsBuilder: ports.CreateOpts{NetworkID: networkID, FixedIPs: []ports.IP{{SubnetID: subnetID}}, Name: testbed.Name(t, "open"), SecurityGroups: &[]string{}, DeviceOwner: vm1}},
		ports.CreateOpts{NetworkID: networkID, FixedIPs: []ports.IP{{SubnetID: subnetID}}, Name: testbed.Name(t, "reserved"), SecurityGroups: &[]string{}},
	} {
		p, err := ports.Create(ctx, vm.Network, opts).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = ports.Delete(ctx, vm.Network, p.ID).ExtractErr() })
	}

	s := testbed.Session(t, testbed.VMProject, openstack.Options{})
	found, err := s.PortsOnSubnets(ctx, networkID, []string{subnetID})
	g.Expect(err).NotTo(HaveOccurred())
	groupRules, err := s.IngressRules(ctx, openstack.GroupsOf(found))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(openstack.AuditSubnet(s.ProjectID(), subnetID, netip.MustParsePrefix("172.21.5.0/24"), found, groupRules)).To(Equal(
		openstack.SubnetIngress{VMPorts: 3, AdmittingVMPorts: 2, AdmittingRules: 1}))
}

func TestPortQuotaOfTheClusterProject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := testbed.Session(t, testbed.ClusterProject, openstack.Options{})
	before, err := s.Ports(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before.Limit).NotTo(BeZero())

	cluster := testbed.NewClients(t, testbed.ClusterProject)
	n, err := networks.Create(ctx, cluster.Network, networks.CreateOpts{Name: testbed.Name(t, "q")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, cluster.Network, n.ID).ExtractErr() })
	p, err := ports.Create(ctx, cluster.Network, ports.CreateOpts{NetworkID: n.ID}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ports.Delete(ctx, cluster.Network, p.ID).ExtractErr() })
	after, err := s.Ports(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Used).To(Equal(before.Used + 1))
}

// TestRBACPolicyQuotaOfTheVMProject reads the quota every share takes one
// of with the VM credential, and shows what Neutron does at the limit: the
// next share is refused.
func TestRBACPolicyQuotaOfTheVMProject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vm, admin, cluster := testbed.NewClients(t, testbed.VMProject), testbed.NewClients(t, testbed.Admin), testbed.NewClients(t, testbed.ClusterProject)
	s := testbed.Session(t, testbed.VMProject, openstack.Options{})
	before, err := s.RBACPolicies(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before.Limit).NotTo(BeZero())

	networkID, _ := vmNetwork(t, vm, "172.20.6.0/24", nil)
	_, err = s.Share(ctx, networkID, cluster.ProjectID)
	g.Expect(err).NotTo(HaveOccurred())
	after, err := s.RBACPolicies(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Used).To(Equal(before.Used + 1))

	limit := after.Used + after.Reserved
	_, err = quotas.Update(ctx, admin.Network, vm.ProjectID, quotas.UpdateOpts{RBACPolicy: &limit}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_, _ = quotas.Update(ctx, admin.Network, vm.ProjectID, quotas.UpdateOpts{RBACPolicy: &before.Limit}).Extract()
	})
	full, err := s.RBACPolicies(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(full.Free()).To(HaveValue(BeZero()))
	_, err = s.Share(ctx, networkID, admin.ProjectID)
	g.Expect(err).To(MatchError(ContainSubstring("OverQuota")), "a new project's share needs a policy the VM project has not got")
	var overQuota *openstack.OverQuotaError
	g.Expect(errors.As(err, &overQuota)).To(BeTrue())
	_, err = s.Share(ctx, networkID, cluster.ProjectID)
	g.Expect(err).NotTo(HaveOccurred(), "the project's share exists: found, whatever the quota says")
}

// TestSubnetFactsCarryTheGatewayAndHostRoutes: what a node is handed on
// its second interface.
func TestSubnetFactsCarryTheGatewayAndHostRoutes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vm := testbed.NewClients(t, testbed.VMProject)
	n, err := networks.Create(ctx, vm.Network, networks.CreateOpts{Name: testbed.Name(t, "net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, vm.Network, n.ID).ExtractErr() })
	sn, err := subnets.Create(ctx, vm.Network, subnets.CreateOpts{NetworkID: n.ID, CIDR: "172.20.7.0/24", IPVersion: 4,
		HostRoutes: []subnets.HostRoute{{DestinationCIDR: "172.20.8.0/24", NextHop: "172.20.7.254"}}}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = subnets.Delete(ctx, vm.Network, sn.ID).ExtractErr() })

	facts, err := testbed.Session(t, testbed.VMProject, openstack.Options{}).Subnets(ctx, n.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(facts).To(HaveLen(1))
	g.Expect(facts[0].Gateway).To(Equal(netip.MustParseAddr("172.20.7.1")), "openstack subnet create sets a gateway unless told not to")
	g.Expect(facts[0].HostRoutes).To(Equal([]openstack.Route{{Destination: netip.MustParsePrefix("172.20.8.0/24"), NextHop: netip.MustParseAddr("172.20.7.254")}}))
}

// TestFaultsNeverDuplicateOrLoseAShare puts a fault injector in front of the
// real Neutron: lost answers, 5xx, resets and timeouts while sharing and
// unsharing never create a second share nor delete one by mistake.
func TestFaultsNeverDuplicateOrLoseAShare(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vm, cluster, admin := testbed.NewClients(t, testbed.VMProject), testbed.NewClients(t, testbed.ClusterProject), testbed.NewClients(t, testbed.Admin)
	networkID, subnetID := vmNetwork(t, vm, "172.20.4.0/24", nil)
	injector := &testbed.FaultInjector{Hold: 3 * time.Second}
	s := testbed.Session(t, testbed.VMProject, openstack.Options{Timeout: time.Second, WrapTransport: func(next http.RoundTripper) http.RoundTripper {
		injector.Next = next
		return injector
	}})
	sharesInNeutron := func() []string {
		pages, err := rbacpolicies.List(admin.Network, rbacpolicies.ListOpts{ObjectID: networkID, TargetTenant: cluster.ProjectID}).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		all, err := rbacpolicies.ExtractRBACPolicies(pages)
		g.Expect(err).NotTo(HaveOccurred())
		var ids []string
		for _, p := range all {
			ids = append(ids, p.ID)
		}
		return ids
	}

	// The create reaches Neutron but its answer is lost; then a 503, a reset and a timeout.
	injector.Plan = []testbed.Fault{testbed.LostAnswer, testbed.ServerError, testbed.Reset, testbed.Timeout}
	policy, err := s.Share(ctx, networkID, cluster.ProjectID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(injector.Injected).To(BeNumerically(">=", 2))
	g.Expect(sharesInNeutron()).To(Equal([]string{policy}), "exactly one share, the one reported")
	t.Cleanup(func() { _ = s.Unshare(ctx, policy) })

	port := portOn(t, cluster, networkID, subnetID)
	injector.Plan = []testbed.Fault{testbed.ServerError, testbed.Reset}
	g.Expect(openstack.IsInUse(s.Unshare(ctx, policy))).To(BeTrue(), "faults then the 409: still in use, never success")
	g.Expect(sharesInNeutron()).To(Equal([]string{policy}), "nothing deleted by mistake")

	injector.Plan = []testbed.Fault{testbed.ServerError, testbed.ServerError, testbed.ServerError, testbed.ServerError, testbed.ServerError}
	_, err = s.FindShare(ctx, networkID, cluster.ProjectID)
	g.Expect(err).To(HaveOccurred(), "when Neutron keeps failing the error says so")
	g.Expect(err.Error()).To(ContainSubstring("503"))

	injector.Plan = nil
	g.Expect(ports.Delete(ctx, cluster.Network, port.ID).ExtractErr()).To(Succeed())
	injector.Plan = []testbed.Fault{testbed.LostAnswer}
	g.Expect(s.Unshare(ctx, policy)).To(Succeed(), "a lost answer to a delete is retried; 404 then means done")
	g.Expect(sharesInNeutron()).To(BeEmpty())
}

// TestProjectOfTokenIsAskedOfTheAdministratorsKeystone: the VM project's
// session asks its own Keystone which project the cluster's token is for;
// a token Keystone does not know is refused.
func TestProjectOfTokenIsAskedOfTheAdministratorsKeystone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vm := testbed.Session(t, testbed.VMProject, openstack.Options{})
	cluster := testbed.Session(t, testbed.ClusterProject, openstack.Options{})
	g.Expect(cluster.Keystone()).To(Equal(vm.Keystone()))
	g.Expect(cluster.ProjectID()).NotTo(Equal(vm.ProjectID()))

	project, err := vm.ProjectOfToken(ctx, cluster.Token())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(project).To(Equal(cluster.ProjectID()))

	_, err = vm.ProjectOfToken(ctx, "gAAAA-not-a-token")
	g.Expect(err).To(MatchError(ContainSubstring("answered 40")))
}

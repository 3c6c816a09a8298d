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
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/fakekeystone"
)

const (
	vmProject = "vm-project"
	vmSubnet  = "subnet-vm"
)

// vmPort is a VM's port of the VM project on vmSubnet with groups.
func vmPort(id string, groups ...string) openstack.Port {
	return openstack.Port{ID: id, ProjectID: vmProject, DeviceOwner: "compute:nova", SubnetIDs: []string{vmSubnet}, SecurityGroups: groups}
}

// prefixRule is an ingress rule of group sg from prefix.
func prefixRule(id, sg, prefix string) openstack.IngressRule {
	return openstack.IngressRule{ID: id, SecurityGroupID: sg, EtherType: "IPv4", RemoteIPPrefix: prefix}
}

// Which of the VM project's ports on a shared subnet accept traffic from
// the nodes (any address of the subnet): port security off, or a group of
// the port with an ingress rule that admits the whole subnet.
func TestWhichVMPortAdmitsTheNodes(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("10.77.0.0/24"), netip.MustParsePrefix("2001:db8:77::/64")
	noSecurity := vmPort("p-open")
	noSecurity.PortSecurityDisabled = true
	owned := func(id, owner, name string) openstack.Port {
		p := vmPort(id, "sg-open")
		p.DeviceOwner, p.Name = owner, name
		return p
	}
	anywhere := openstack.IngressRule{ID: "r-any", SecurityGroupID: "sg-open", EtherType: "IPv4"}
	for name, tc := range map[string]struct {
		cidr  netip.Prefix
		ports []openstack.Port
		rules []openstack.IngressRule
		want  openstack.SubnetIngress
	}{
		"a prefix covering the subnet": {v4, []openstack.Port{vmPort("p", "sg")}, []openstack.IngressRule{prefixRule("r", "sg", "10.77.0.0/16")},
			openstack.SubnetIngress{VMPorts: 1, AdmittingVMPorts: 1, AdmittingRules: 1}},
		"the subnet's own prefix": {v4, []openstack.Port{vmPort("p", "sg")}, []openstack.IngressRule{prefixRule("r", "sg", "10.77.0.0/24")},
			openstack.SubnetIngress{VMPorts: 1, AdmittingVMPorts: 1, AdmittingRules: 1}},
		"a prefix narrower than the subnet admits some nodes only": {v4, []openstack.Port{vmPort("p", "sg")}, []openstack.IngressRule{prefixRule("r", "sg", "10.77.0.0/25")},
			openstack.SubnetIngress{VMPorts: 1}},
		"another range": {v4, []openstack.Port{vmPort("p", "sg")}, []openstack.IngressRule{prefixRule("r", "sg", "10.0.0.0/16")},
			openstack.SubnetIngress{VMPorts: 1}},
		"a prefix that does not parse": {v4, []openstack.Port{vmPort("p", "sg")}, []openstack.IngressRule{prefixRule("r", "sg", "not-a-prefix")},
			openstack.SubnetIngress{VMPorts: 1}},
		"an IPv6 prefix for an IPv4 subnet": {v4, []openstack.Port{vmPort("p", "sg")},
			[]openstack.IngressRule{{ID: "r", SecurityGroupID: "sg", EtherType: "IPv6", RemoteIPPrefix: "::/0"}},
			openstack.SubnetIngress{VMPorts: 1}},
		"an IPv4 prefix for an IPv6 subnet": {v6, []openstack.Port{vmPort("p", "sg")}, []openstack.IngressRule{prefixRule("r", "sg", "0.0.0.0/0")},
			openstack.SubnetIngress{VMPorts: 1}},
		"an IPv6 prefix covering an IPv6 subnet": {v6, []openstack.Port{vmPort("p", "sg")},
			[]openstack.IngressRule{{ID: "r", SecurityGroupID: "sg", EtherType: "IPv6", RemoteIPPrefix: "2001:db8::/32"}},
			openstack.SubnetIngress{VMPorts: 1, AdmittingVMPorts: 1, AdmittingRules: 1}},
		"neither a prefix nor a remote group: from anywhere": {v4, []openstack.Port{vmPort("p", "sg-open")}, []openstack.IngressRule{anywhere},
			openstack.SubnetIngress{VMPorts: 1, AdmittingVMPorts: 1, AdmittingRules: 1}},
		"from anywhere, Neutron's default ether type (IPv4)": {v4, []openstack.Port{vmPort("p", "sg")}, []openstack.IngressRule{{ID: "r", SecurityGroupID: "sg"}},
			openstack.SubnetIngress{VMPorts: 1, AdmittingVMPorts: 1, AdmittingRules: 1}},
		"from anywhere of the other IP version": {v6, []openstack.Port{vmPort("p", "sg-open")}, []openstack.IngressRule{anywhere},
			openstack.SubnetIngress{VMPorts: 1}},
		"a remote group: the nodes are no members": {v4, []openstack.Port{vmPort("p", "sg")},
			[]openstack.IngressRule{{ID: "r", SecurityGroupID: "sg", EtherType: "IPv4", RemoteGroupID: "sg"}},
			openstack.SubnetIngress{VMPorts: 1}},
		"a remote address group": {v4, []openstack.Port{vmPort("p", "sg")},
			[]openstack.IngressRule{{ID: "r", SecurityGroupID: "sg", EtherType: "IPv4", RemoteAddressGroupID: "ag"}},
			openstack.SubnetIngress{VMPorts: 1}},
		"a rule for TCP 22 only counts (any protocol does)": {v4, []openstack.Port{vmPort("p", "sg")},
			[]openstack.IngressRule{{ID: "r", SecurityGroupID: "sg", EtherType: "IPv4", RemoteIPPrefix: "10.77.0.0/24", Protocol: "tcp", PortRangeMin: 22, PortRangeMax: 22}},
			openstack.SubnetIngress{VMPorts: 1, AdmittingVMPorts: 1, AdmittingRules: 1}},
		"port security off admits without a group": {v4, []openstack.Port{noSecurity}, nil,
			openstack.SubnetIngress{VMPorts: 1, AdmittingVMPorts: 1}},
		"a rule of a group no VM port uses": {v4, []openstack.Port{vmPort("p", "sg")}, []openstack.IngressRule{prefixRule("r", "sg-other", "10.77.0.0/24")},
			openstack.SubnetIngress{VMPorts: 1}},
		"Neutron's and load balancers' ports are no VM ports": {v4, []openstack.Port{
			owned("dhcp", "network:dhcp", ""), owned("router", "network:router_interface", ""), owned("ha", "network:router_ha_interface", ""),
			owned("vip", "Octavia", "octavia-lb-1"), owned("hm", "Octavia:health-mgr", ""), owned("lbaas", "neutron:LOADBALANCERV2", ""),
			owned("vrrp", "compute:nova", "octavia-lb-vrrp-a1"), owned("ovn-vip", "", "ovn-lb-vip-1"),
			vmPort("vm", "sg"),
		}, []openstack.IngressRule{anywhere}, openstack.SubnetIngress{VMPorts: 1}},
		"a port bound to nothing (no device owner) has no VM behind it": {v4, []openstack.Port{owned("reserved", "", "keepalived-vip"), vmPort("vm", "sg")},
			[]openstack.IngressRule{anywhere}, openstack.SubnetIngress{VMPorts: 1}},
		"another project's port (a node's) is not the VM project's": {v4, []openstack.Port{
			{ID: "node", ProjectID: "cluster-project", DeviceOwner: "compute:nova", SubnetIDs: []string{vmSubnet}, SecurityGroups: []string{"sg-open"}},
		}, []openstack.IngressRule{anywhere}, openstack.SubnetIngress{}},
		"a port on another subnet of the network": {v4, []openstack.Port{
			{ID: "elsewhere", ProjectID: vmProject, SubnetIDs: []string{"subnet-other"}, SecurityGroups: []string{"sg-open"}},
		}, []openstack.IngressRule{anywhere}, openstack.SubnetIngress{}},
		"zero VM ports": {v4, nil, []openstack.IngressRule{anywhere}, openstack.SubnetIngress{}},
		"some ports admit, some do not": {v4, []openstack.Port{vmPort("a", "sg-open"), vmPort("b", "sg-open", "sg"), vmPort("c", "sg"), vmPort("d")},
			[]openstack.IngressRule{anywhere, prefixRule("r-half", "sg", "10.77.0.0/25")},
			openstack.SubnetIngress{VMPorts: 4, AdmittingVMPorts: 2, AdmittingRules: 1}},
		"distinct rules: a group of several ports counts its rules once, a port's groups add up": {v4,
			[]openstack.Port{vmPort("a", "sg-open", "sg"), vmPort("b", "sg-open")},
			[]openstack.IngressRule{anywhere, prefixRule("r-wide", "sg", "10.0.0.0/8"), prefixRule("r-exact", "sg", "10.77.0.0/24")},
			openstack.SubnetIngress{VMPorts: 2, AdmittingVMPorts: 2, AdmittingRules: 3}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ports := tc.ports
			if tc.cidr == v6 {
				ports = nil
				for _, p := range tc.ports {
					p.SubnetIDs = []string{"subnet-v6"}
					ports = append(ports, p)
				}
				g.Expect(openstack.AuditSubnet(vmProject, "subnet-v6", tc.cidr, ports, tc.rules)).To(Equal(tc.want))
				return
			}
			g.Expect(openstack.AuditSubnet(vmProject, vmSubnet, tc.cidr, ports, tc.rules)).To(Equal(tc.want))
		})
	}
}

// neutron is a Neutron of two lists, ports and ingress security group
// rules, that records the queries it was asked.
type neutron struct {
	mu      sync.Mutex
	queries map[string][]string // path -> raw queries
	ports   []map[string]any
	rules   []map[string]any
	// status, when set, is the answer to every list.
	status int
}

func (n *neutron) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.queries == nil {
		n.queries = map[string][]string{}
	}
	n.queries[r.URL.Path] = append(n.queries[r.URL.Path], r.URL.RawQuery)
	if n.status != 0 {
		w.WriteHeader(n.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/ports":
		_ = json.NewEncoder(w).Encode(map[string]any{"ports": n.ports})
	case "/security-group-rules":
		_ = json.NewEncoder(w).Encode(map[string]any{"security_group_rules": n.rules})
	default:
		http.NotFound(w, r)
	}
}

// The VM-side audit asks Neutron twice, whatever the number of subnets:
// the project's ports with an address on any of them (one fixed_ips filter
// each), and the project's ingress rules, of which it keeps those of the
// ports' groups; port security comes from its extension, off only when
// Neutron says so. A 403 is a *NotReadableError.
func TestTheVMSideAuditReadsThePortsAndTheirGroupsRules(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := &neutron{
		ports: []map[string]any{
			{"id": "p1", "project_id": vmProject, "device_owner": "compute:nova", "security_groups": []string{"sg-a"}, "port_security_enabled": true,
				"fixed_ips": []any{map[string]any{"subnet_id": "s1", "ip_address": "10.77.0.5"}}},
			{"id": "p2", "project_id": vmProject, "security_groups": []string{}, "port_security_enabled": false,
				"fixed_ips": []any{map[string]any{"subnet_id": "s1", "ip_address": "10.77.0.6"}, map[string]any{"subnet_id": "s2", "ip_address": "10.78.0.6"}}},
			{"id": "p2", "project_id": vmProject, "security_groups": []string{}, "port_security_enabled": false, // an older Neutron answers it once per address
				"fixed_ips": []any{map[string]any{"subnet_id": "s1", "ip_address": "10.77.0.6"}, map[string]any{"subnet_id": "s2", "ip_address": "10.78.0.6"}}},
			{"id": "p3", "project_id": vmProject, "security_groups": []string{"sg-b", "sg-a"}, // no port-security extension
				"fixed_ips": []any{map[string]any{"subnet_id": "s2", "ip_address": "10.78.0.7"}}},
		},
		rules: []map[string]any{
			{"id": "r1", "security_group_id": "sg-a", "direction": "ingress", "ethertype": "IPv4", "remote_ip_prefix": "10.77.0.0/24", "protocol": "tcp", "port_range_min": 22, "port_range_max": 22},
			{"id": "r2", "security_group_id": "sg-b", "direction": "ingress", "ethertype": "IPv4", "remote_group_id": "sg-b"},
			{"id": "r3", "security_group_id": "sg-unused", "direction": "ingress", "ethertype": "IPv4"},
		},
	}
	s := neutronSession(t, n)

	ports, err := s.PortsOnSubnets(ctx, "net", []string{"s1", "s2"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ports).To(Equal([]openstack.Port{
		{ID: "p1", ProjectID: vmProject, DeviceOwner: "compute:nova", SubnetIDs: []string{"s1"}, SecurityGroups: []string{"sg-a"}},
		{ID: "p2", ProjectID: vmProject, SubnetIDs: []string{"s1", "s2"}, SecurityGroups: []string{}, PortSecurityDisabled: true},
		{ID: "p3", ProjectID: vmProject, SubnetIDs: []string{"s2"}, SecurityGroups: []string{"sg-b", "sg-a"}},
	}))
	g.Expect(n.queries["/ports"]).To(ConsistOf("fixed_ips=subnet_id%3Ds1&fixed_ips=subnet_id%3Ds2&network_id=net&project_id=" + vmProject))

	groups := openstack.GroupsOf(ports)
	g.Expect(groups).To(Equal([]string{"sg-a", "sg-b"}))
	rules, err := s.IngressRules(ctx, groups)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rules).To(Equal([]openstack.IngressRule{
		{ID: "r1", SecurityGroupID: "sg-a", EtherType: "IPv4", RemoteIPPrefix: "10.77.0.0/24", Protocol: "tcp", PortRangeMin: 22, PortRangeMax: 22},
		{ID: "r2", SecurityGroupID: "sg-b", EtherType: "IPv4", RemoteGroupID: "sg-b"},
	}), "only the rules of the ports' groups")
	g.Expect(n.queries["/security-group-rules"]).To(ConsistOf("direction=ingress&project_id=" + vmProject))

	none, err := s.IngressRules(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeEmpty())
	g.Expect(n.queries["/security-group-rules"]).To(HaveLen(1), "no group, no request")

	n.status = http.StatusForbidden
	var notReadable *openstack.NotReadableError
	_, err = s.PortsOnSubnets(ctx, "net", []string{"s1"})
	g.Expect(errors.As(err, &notReadable)).To(BeTrue(), "%v", err)
	_, err = s.IngressRules(ctx, groups)
	g.Expect(errors.As(err, &notReadable)).To(BeTrue(), "%v", err)
	n.status = http.StatusNotFound
	_, err = s.IngressRules(ctx, groups)
	g.Expect(errors.As(err, &notReadable)).To(BeTrue(), "no security groups in this Neutron: %v", err)
	n.status = http.StatusBadRequest
	_, err = s.PortsOnSubnets(ctx, "net", []string{"s1"})
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.As(err, &notReadable)).To(BeFalse(), "another failure says nothing about the permission")
}

// neutronSession is a session of vmProject whose network API is n.
func neutronSession(t *testing.T, n http.Handler) *openstack.Session {
	t.Helper()
	k := fakekeystone.Start(t, fakekeystone.Options{Project: vmProject, Neutron: n})
	s, err := openstack.NewSession(context.Background(), credentialOf(t, k), openstack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

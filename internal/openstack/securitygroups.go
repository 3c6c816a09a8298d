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

package openstack

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
)

// SecurityGroups reads what decides whether the VM project's virtual
// machines answer the nodes (which reach them from their shared-subnet
// addresses): the security groups of the project's own ports on the shared
// subnets. Used with the VM project's credential, once per SharedNetwork
// resync: two requests whatever the number of subnets and attachments.
type SecurityGroups interface {
	// PortsOnSubnets are the session project's ports with a fixed IP on
	// one of subnetIDs of network networkID, in one request; a
	// *NotReadableError when the cloud's policy does not let the
	// credential list them.
	PortsOnSubnets(ctx context.Context, networkID string, subnetIDs []string) ([]Port, error)
	// IngressRules are the project's ingress rules of the security groups
	// groupIDs, of both IP versions, in one request (none without groups);
	// a *NotReadableError when the cloud's policy does not let the
	// credential list them, or Neutron has no security groups.
	IngressRules(ctx context.Context, groupIDs []string) ([]IngressRule, error)
}

// Port is one port as the VM-side audit reads it.
type Port struct {
	ID, ProjectID, Name, DeviceOwner string
	// SubnetIDs are the subnets of its fixed IPs.
	SubnetIDs      []string
	SecurityGroups []string
	// PortSecurityDisabled: port_security_enabled is false, Neutron
	// filters no traffic of the port (a port of a Neutron without the
	// port-security extension is filtered by its groups).
	PortSecurityDisabled bool
}

// IngressRule is one ingress security group rule, decoded from Neutron's
// (its fields only, see subnet).
type IngressRule struct {
	ID              string `json:"id"`
	SecurityGroupID string `json:"security_group_id"`
	Protocol        string `json:"protocol"`
	// EtherType is IPv4 or IPv6 (IPv4 when empty, Neutron's default).
	EtherType string `json:"ethertype"`
	// RemoteIPPrefix, RemoteGroupID and RemoteAddressGroupID say where the
	// traffic it lets in comes from; from anywhere (of its ether type) when
	// all are empty.
	RemoteIPPrefix       string `json:"remote_ip_prefix"`
	RemoteGroupID        string `json:"remote_group_id"`
	RemoteAddressGroupID string `json:"remote_address_group_id"`
	PortRangeMin         int    `json:"port_range_min"`
	PortRangeMax         int    `json:"port_range_max"`
}

// Admits says whether the rule lets traffic from the whole of cidr in, on
// some protocol or port: a remote IP prefix that contains it (a rule for
// part of a subnet admits only some of its nodes), or no remote at all
// (from anywhere) of cidr's IP version. A remote group or address group
// does not: the nodes are members of no group of the VM project.
func (r IngressRule) Admits(cidr netip.Prefix) bool {
	if r.RemoteGroupID != "" || r.RemoteAddressGroupID != "" {
		return false
	}
	if r.RemoteIPPrefix == "" {
		return (r.EtherType == string(rules.EtherType6)) == cidr.Addr().Is6()
	}
	remote, err := netip.ParsePrefix(r.RemoteIPPrefix)
	return err == nil && remote.Addr().Is4() == cidr.Addr().Is4() && remote.Bits() <= cidr.Bits() && remote.Masked().Contains(cidr.Masked().Addr())
}

// IsVMPort says whether p is one of project's own ports on subnet, the
// ports whose security groups decide whether the VMs answer the nodes:
// not Neutron's own (device owner network:*, its DHCP, routers and
// floating IPs), nor a load balancer's, nor a port bound to nothing (no
// device owner: a reserved address, no VM behind it to answer). The nodes'
// ports are their clusters' projects'.
func IsVMPort(p Port, project, subnet string) bool {
	return p.ProjectID == project && slices.Contains(p.SubnetIDs, subnet) && p.DeviceOwner != "" &&
		!strings.HasPrefix(p.DeviceOwner, "network:") && !isLoadBalancerOwner(p.DeviceOwner) && !IsLoadBalancerPort(p.DeviceOwner, p.Name)
}

// isLoadBalancerOwner: Octavia's ports (Octavia, Octavia:*) and
// neutron-lbaas' (neutron:LOADBALANCER, neutron:LOADBALANCERV2).
func isLoadBalancerOwner(owner string) bool {
	return strings.HasPrefix(owner, "Octavia") || strings.HasPrefix(owner, "neutron:LOADBALANCER")
}

// SubnetIngress is what the VM-side audit found on one subnet.
type SubnetIngress struct {
	// VMPorts are the VM project's ports on the subnet (IsVMPort);
	// AdmittingVMPorts those of them that accept traffic from all of it.
	VMPorts, AdmittingVMPorts int
	// AdmittingRules are the distinct rules, of the VM ports' security
	// groups, that admit the whole subnet.
	AdmittingRules int
}

// AuditSubnet says which of project's ports on subnet (of cidr) accept
// traffic from the whole subnet: a port with port security disabled, or
// one with a security group holding a rule that admits it. ports and rules
// may hold others (other subnets, other groups): only the subnet's VM
// ports and their groups' ingress rules count.
func AuditSubnet(project, subnet string, cidr netip.Prefix, ports []Port, rules []IngressRule) SubnetIngress {
	admitting := map[string][]string{} // group -> its rules that admit the subnet
	for _, r := range rules {
		if r.Admits(cidr) {
			admitting[r.SecurityGroupID] = append(admitting[r.SecurityGroupID], r.ID)
		}
	}
	var out SubnetIngress
	counted := map[string]bool{}
	for _, p := range ports {
		if !IsVMPort(p, project, subnet) {
			continue
		}
		out.VMPorts++
		admits := p.PortSecurityDisabled
		for _, g := range p.SecurityGroups {
			for _, id := range admitting[g] {
				admits = true
				if !counted[id] {
					counted[id] = true
					out.AdmittingRules++
				}
			}
		}
		if admits {
			out.AdmittingVMPorts++
		}
	}
	return out
}

// GroupsOf are the distinct security groups of ports, sorted.
func GroupsOf(ports []Port) []string {
	var out []string
	for _, p := range ports {
		out = append(out, p.SecurityGroups...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// PortsOnSubnets implements SecurityGroups: Neutron answers the ports with
// a fixed IP on any of the subnets (its fixed_ips filters are one IN).
func (s *Session) PortsOnSubnets(ctx context.Context, networkID string, subnetIDs []string) ([]Port, error) {
	if len(subnetIDs) == 0 {
		return nil, nil
	}
	opts := ports.ListOpts{NetworkID: networkID, ProjectID: s.projectID}
	for _, id := range subnetIDs {
		opts.FixedIPs = append(opts.FixedIPs, ports.FixedIPOpts{SubnetID: id})
	}
	const what = "the project's ports on the shared subnets"
	all, err := s.listPorts(ctx, opts, what)
	if err != nil {
		return nil, s.notReadable(err, what)
	}
	out := make([]Port, 0, len(all))
	seen := map[string]bool{} // an older Neutron answers a port once per matching address
	for _, p := range all {
		if seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		port := Port{ID: p.ID, ProjectID: p.ProjectID, Name: p.Name, DeviceOwner: p.DeviceOwner, SecurityGroups: p.SecurityGroups,
			PortSecurityDisabled: p.PortSecurityEnabled != nil && !*p.PortSecurityEnabled}
		for _, ip := range p.FixedIPs {
			port.SubnetIDs = append(port.SubnetIDs, ip.SubnetID)
		}
		out = append(out, port)
	}
	return out, nil
}

// IngressRules implements SecurityGroups: the project's ingress rules in
// one request, those of groupIDs kept.
func (s *Session) IngressRules(ctx context.Context, groupIDs []string) ([]IngressRule, error) {
	if len(groupIDs) == 0 {
		return nil, nil
	}
	const what = "the ingress security group rules"
	var all []IngressRule
	err := s.retry.do(ctx, func(ctx context.Context) error {
		query, err := rules.ListOpts{Direction: string(rules.DirIngress), ProjectID: s.projectID}.ToSecGroupListQuery()
		if err != nil {
			return err
		}
		all, err = listAll[IngressRule](ctx, s.network, s.network.ServiceURL("security-group-rules")+query, "security_group_rules")
		return err
	})
	if err != nil {
		return nil, s.notReadable(s.wrap(err, "listing %s", what), what)
	}
	return slices.DeleteFunc(all, func(r IngressRule) bool { return !slices.Contains(groupIDs, r.SecurityGroupID) }), nil
}

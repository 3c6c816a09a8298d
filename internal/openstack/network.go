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
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/mtu"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"go4.org/netipx"
)

// NetworkFacts reads what the rules need to know about a network.
type NetworkFacts interface {
	Network(ctx context.Context, networkID string) (Network, error)
	// Subnets are all subnets of the network, in one request.
	Subnets(ctx context.Context, networkID string) ([]Subnet, error)
	// AddressesOnNetwork are the fixed IPs of every port on the network, by
	// subnet ID, in one request.
	AddressesOnNetwork(ctx context.Context, networkID string) (map[string]Addresses, error)
}

// ProjectPorts lists the session project's own ports on a network. Used
// with the cluster's credential: a Service may name one of them as its load
// balancer's VIP port.
type ProjectPorts interface {
	PortIDsOnNetwork(ctx context.Context, networkID string) ([]string, error)
}

// PortIDsOnNetwork implements ProjectPorts.
func (s *Session) PortIDsOnNetwork(ctx context.Context, networkID string) ([]string, error) {
	all, err := s.listPorts(ctx, ports.ListOpts{NetworkID: networkID, ProjectID: s.projectID}, "the project's ports on network "+networkID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(all))
	for _, p := range all {
		ids = append(ids, p.ID)
	}
	return ids, nil
}

// Network is a Neutron network's facts.
type Network struct {
	ID        string
	Name      string
	ProjectID string
	MTU       int
	SubnetIDs []string
}

// Subnet is a Neutron subnet's facts.
type Subnet struct {
	ID              string
	NetworkID       string
	CIDR            netip.Prefix
	IPVersion       int
	AllocationPools []Pool
	// Gateway is invalid when the subnet has none.
	Gateway    netip.Addr
	HostRoutes []Route
}

// Route is a subnet's host route.
type Route struct {
	Destination netip.Prefix
	NextHop     netip.Addr
}

// Addresses are the fixed IPs on one subnet, and those of them that load
// balancers' ports hold.
type Addresses struct {
	All, LoadBalancers []netip.Addr
}

// IsLoadBalancerPort says whether a port is a load balancer's: Octavia's
// amphora driver owns its VIP and VRRP ports (device_owner Octavia, names
// octavia-lb-<id> and octavia-lb-vrrp-<amphora>, the latter re-owned by
// Nova once plugged), the OVN provider names its VIP ports ovn-lb-vip-<id>.
func IsLoadBalancerPort(deviceOwner, name string) bool {
	return deviceOwner == "Octavia" || strings.HasPrefix(name, "octavia-lb-") || strings.HasPrefix(name, "ovn-lb-vip-")
}

// Pool is an allocation pool, inclusive at both ends.
type Pool struct {
	Start, End netip.Addr
}

// NotFoundError says an object does not exist (or is not visible to the project).
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return e.What + " not found" }

// Network implements NetworkFacts.
func (s *Session) Network(ctx context.Context, networkID string) (Network, error) {
	var n struct {
		networks.Network
		mtu.NetworkMTUExt
	}
	err := s.retry.do(ctx, func(ctx context.Context) error {
		return networks.Get(ctx, s.network, networkID).ExtractInto(&n)
	})
	if err != nil {
		return Network{}, s.wrap(err, "reading network %s", networkID)
	}
	return Network{ID: n.ID, Name: n.Name, ProjectID: n.ProjectID, MTU: n.MTU, SubnetIDs: n.Subnets}, nil
}

// Subnets implements NetworkFacts.
func (s *Session) Subnets(ctx context.Context, networkID string) ([]Subnet, error) {
	var all []subnet
	err := s.retry.do(ctx, func(ctx context.Context) error {
		query, err := subnets.ListOpts{NetworkID: networkID}.ToSubnetListQuery()
		if err != nil {
			return err
		}
		all, err = listAll[subnet](ctx, s.network, s.network.ServiceURL("subnets")+query, "subnets")
		return err
	})
	if err != nil {
		return nil, s.wrap(err, "listing subnets of network %s", networkID)
	}
	out := make([]Subnet, 0, len(all))
	for i := range all {
		f, err := subnetFacts(&all[i])
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// subnet is what the extension reads of a Neutron subnet. Lists are decoded
// into such types, of the fields used only, rather than into gophercloud's:
// each of those has its own decoder, which costs KiB an item, however
// short (listAll).
type subnet struct {
	ID              string                   `json:"id"`
	NetworkID       string                   `json:"network_id"`
	CIDR            string                   `json:"cidr"`
	IPVersion       int                      `json:"ip_version"`
	GatewayIP       string                   `json:"gateway_ip"`
	AllocationPools []subnets.AllocationPool `json:"allocation_pools"`
	HostRoutes      []subnets.HostRoute      `json:"host_routes"`
}

func subnetFacts(sn *subnet) (Subnet, error) {
	cidr, err := netip.ParsePrefix(sn.CIDR)
	if err != nil {
		return Subnet{}, fmt.Errorf("subnet %s: Neutron answered CIDR %q: %w", sn.ID, sn.CIDR, err)
	}
	out := Subnet{ID: sn.ID, NetworkID: sn.NetworkID, CIDR: cidr, IPVersion: sn.IPVersion}
	if sn.GatewayIP != "" {
		if out.Gateway, err = netip.ParseAddr(sn.GatewayIP); err != nil {
			return Subnet{}, fmt.Errorf("subnet %s: Neutron answered gateway %q: %w", sn.ID, sn.GatewayIP, err)
		}
	}
	for _, r := range sn.HostRoutes {
		dest, err1 := netip.ParsePrefix(r.DestinationCIDR)
		hop, err2 := netip.ParseAddr(r.NextHop)
		if err1 != nil || err2 != nil {
			return Subnet{}, fmt.Errorf("subnet %s: host route %s via %s does not parse", sn.ID, r.DestinationCIDR, r.NextHop)
		}
		out.HostRoutes = append(out.HostRoutes, Route{Destination: dest, NextHop: hop})
	}
	for _, p := range sn.AllocationPools {
		start, err1 := netip.ParseAddr(p.Start)
		end, err2 := netip.ParseAddr(p.End)
		if err1 != nil || err2 != nil {
			return Subnet{}, fmt.Errorf("subnet %s: allocation pool %s-%s does not parse", sn.ID, p.Start, p.End)
		}
		out.AllocationPools = append(out.AllocationPools, Pool{Start: start, End: end})
	}
	return out, nil
}

// AddressesOnNetwork implements NetworkFacts.
func (s *Session) AddressesOnNetwork(ctx context.Context, networkID string) (map[string]Addresses, error) {
	all, err := s.listPorts(ctx, ports.ListOpts{NetworkID: networkID}, "ports on network "+networkID)
	if err != nil {
		return nil, err
	}
	out := map[string]Addresses{}
	for _, p := range all {
		lb := IsLoadBalancerPort(p.DeviceOwner, p.Name)
		for _, ip := range p.FixedIPs {
			a, err := netip.ParseAddr(ip.IPAddress)
			if err != nil {
				continue
			}
			on := out[ip.SubnetID]
			on.All = append(on.All, a)
			if lb {
				on.LoadBalancers = append(on.LoadBalancers, a)
			}
			out[ip.SubnetID] = on
		}
	}
	return out, nil
}

// port is what the extension reads of a Neutron port (see subnet).
type port struct {
	ID             string     `json:"id"`
	Name           string     `json:"name"`
	ProjectID      string     `json:"project_id"`
	DeviceOwner    string     `json:"device_owner"`
	FixedIPs       []ports.IP `json:"fixed_ips"`
	SecurityGroups []string   `json:"security_groups"`
	// PortSecurityEnabled is nil when Neutron does not say (no
	// port-security extension: the port's groups filter it).
	PortSecurityEnabled *bool `json:"port_security_enabled"`
}

// listPorts lists ports, retried; what names them in an error.
func (s *Session) listPorts(ctx context.Context, opts ports.ListOpts, what string) ([]port, error) {
	var all []port
	err := s.retry.do(ctx, func(ctx context.Context) error {
		query, err := opts.ToPortListQuery()
		if err != nil {
			return err
		}
		all, err = listAll[port](ctx, s.network, s.network.ServiceURL("ports")+query, "ports")
		return err
	})
	if err != nil {
		return nil, s.wrap(err, "listing %s", what)
	}
	return all, nil
}

// PoolSize is how many addresses the pools hold, at most MaxInt64 (an IPv6
// pool holds more). A reversed pool (end before start) holds none.
func PoolSize(pools []Pool) int64 {
	return size(poolSet(pools))
}

// UsedInPools counts the distinct addresses that fall inside the pools
// (addresses outside them, such as a router's fixed gateway, take no room).
func UsedInPools(pools []Pool, used []netip.Addr) int64 {
	in := poolSet(pools)
	var b netipx.IPSetBuilder
	for _, a := range used {
		if in.Contains(a) {
			b.Add(a)
		}
	}
	s, _ := b.IPSet() // only addresses inside the pools were added: no error
	return size(s)
}

// FreeAddresses is pool addresses minus the used ones in them; Neutron's
// network-ip-availability says the same but is admin-only by default.
// Capped at MaxInt64 for IPv6 pools.
func FreeAddresses(pools []Pool, used []netip.Addr) int64 {
	total := PoolSize(pools)
	if total == math.MaxInt64 {
		return total
	}
	return total - UsedInPools(pools, used)
}

// poolSet is the addresses of the pools (Neutron refuses overlapping pools;
// were they to overlap, the shared addresses would count once).
func poolSet(pools []Pool) *netipx.IPSet {
	var b netipx.IPSetBuilder
	for _, p := range pools {
		b.AddRange(netipx.IPRangeFrom(p.Start, p.End))
	}
	s, _ := b.IPSet() // the error names the invalid (reversed) pools, which are left out
	return s
}

// size counts the addresses of s, at most MaxInt64.
func size(s *netipx.IPSet) int64 {
	var n int64
	for _, p := range s.Prefixes() {
		hostBits := p.Addr().BitLen() - p.Bits()
		if hostBits >= 63 || n > math.MaxInt64-int64(1)<<hostBits {
			return math.MaxInt64
		}
		n += int64(1) << hostBits
	}
	return n
}

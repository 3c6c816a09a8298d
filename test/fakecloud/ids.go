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

package fakecloud

import (
	"net/netip"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// AddNetworkWithIDs is AddNetwork with the network's and its subnet's IDs
// given, e.g. UUIDs as Neutron makes them: a SharedNetwork on a real API
// server accepts nothing else in spec.networkID and spec.subnets.
func (c *Cloud) AddNetworkWithIDs(project string, mtu int, cidr, networkID, subnetID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := netip.MustParsePrefix(cidr)
	n := &network{Network: openstack.Network{ID: networkID, ProjectID: project, MTU: mtu}}
	s := openstack.Subnet{ID: subnetID, NetworkID: networkID, CIDR: p, IPVersion: 4,
		AllocationPools: []openstack.Pool{{Start: p.Addr().Next(), End: lastAddr(p)}}}
	n.SubnetIDs = []string{subnetID}
	n.subnets = []openstack.Subnet{s}
	c.networks[networkID] = n
}

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
	"math"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

func TestAddressPoolArithmetic(t *testing.T) {
	pool := func(start, end string) openstack.Pool {
		return openstack.Pool{Start: netip.MustParseAddr(start), End: netip.MustParseAddr(end)}
	}
	addrs := func(s ...string) []netip.Addr {
		out := make([]netip.Addr, 0, len(s))
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	twoPools := []openstack.Pool{pool("172.20.2.10", "172.20.2.19"), pool("172.20.2.100", "172.20.2.104")}
	for name, tc := range map[string]struct {
		pools             []openstack.Pool
		used              []netip.Addr
		size, inUse, free int64
	}{
		"no pools":                          {nil, addrs("172.20.2.10"), 0, 0, 0},
		"one address":                       {[]openstack.Pool{pool("172.20.2.10", "172.20.2.10")}, addrs("172.20.2.10"), 1, 1, 0},
		"two pools, used in both":           {twoPools, addrs("172.20.2.10", "172.20.2.19", "172.20.2.104"), 15, 3, 12},
		"an address used twice counts once": {twoPools, addrs("172.20.2.11", "172.20.2.11", "172.20.2.100", "172.20.2.100"), 15, 2, 13},
		"the router's gateway outside the pools takes no room": {twoPools, addrs("172.20.2.1", "172.20.2.50", "172.20.2.12"), 15, 1, 14},
		"a reversed pool holds nothing": {[]openstack.Pool{pool("172.20.2.19", "172.20.2.10"), pool("172.20.2.100", "172.20.2.104")},
			addrs("172.20.2.12", "172.20.2.101"), 5, 1, 4},
		"a whole /24":        {[]openstack.Pool{pool("10.0.0.0", "10.0.0.255")}, addrs("10.0.0.0", "10.0.0.255"), 256, 2, 254},
		"an IPv6 pool of 16": {[]openstack.Pool{pool("2001:db8::10", "2001:db8::1f")}, addrs("2001:db8::10", "2001:db8::1"), 16, 1, 15},
		"an IPv6 /64 saturates": {[]openstack.Pool{pool("2001:db8::2", "2001:db8::ffff:ffff:ffff:ffff")},
			addrs("2001:db8::2", "2001:db8::3", "2001:db8::1", "2001:db8:1::5"), math.MaxInt64, 2, math.MaxInt64},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(openstack.PoolSize(tc.pools)).To(Equal(tc.size), "pool size")
			g.Expect(openstack.UsedInPools(tc.pools, tc.used)).To(Equal(tc.inUse), "used in the pools")
			g.Expect(openstack.FreeAddresses(tc.pools, tc.used)).To(Equal(tc.free), "free")
		})
	}
}

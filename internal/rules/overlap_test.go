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

package rules

import (
	"net/netip"
	"strings"
	"testing"
)

func pfx(cidrs ...string) []netip.Prefix {
	ps, err := ParsePrefixes(cidrs)
	if err != nil {
		panic(err)
	}
	return ps
}

func TestOverlap(t *testing.T) {
	cluster := ClusterRanges{
		NodeSubnets: pfx("10.6.0.0/24"),
		Pods:        pfx("192.168.0.0/16", "fd00:10::/56"),
		Services:    pfx("10.128.0.0/12", "fd00:20::/108"),
		OtherShared: []NamedPrefix{{Name: "md-b's shared subnet sub-b", Prefix: netip.MustParsePrefix("172.20.0.0/24")}},
	}
	defaultServices := cluster
	defaultServices.Services = nil
	tests := []struct {
		name     string
		shared   string
		cluster  ClusterRanges
		wantRule string
		wantIn   []string
	}{
		{name: "a subnet apart from every cluster range can be attached", shared: "172.16.5.0/24", cluster: cluster},
		{name: "an IPv6 subnet apart from the IPv6 ranges can be attached", shared: "fd00:99::/64", cluster: cluster},
		{name: "an IPv4 subnet never overlaps IPv6 ranges", shared: "10.200.0.0/24", cluster: ClusterRanges{Pods: pfx("fd00::/8"), Services: pfx("fd01::/108")}},
		{name: "adjacent ranges do not overlap", shared: "10.6.1.0/24", cluster: cluster},
		{name: "the node subnet overlaps", shared: "10.6.0.128/25", cluster: cluster,
			wantRule: RuleOverlap, wantIn: []string{"10.6.0.128/25", "node subnet 10.6.0.0/24", "choose another subnet in the VM project"}},
		{name: "a subnet containing the node subnet overlaps", shared: "10.0.0.0/8", cluster: ClusterRanges{NodeSubnets: pfx("10.6.0.0/24"), Services: pfx("172.31.0.0/16")},
			wantRule: RuleOverlap, wantIn: []string{"10.0.0.0/8", "10.6.0.0/24"}},
		{name: "the pod range overlaps", shared: "192.168.10.0/24", cluster: cluster,
			wantRule: RuleOverlap, wantIn: []string{"pod range", "192.168.0.0/16", "choose another subnet in the VM project"}},
		{name: "an IPv6 pod range overlaps (dual-stack)", shared: "fd00:10:0:1::/64", cluster: cluster,
			wantRule: RuleOverlap, wantIn: []string{"fd00:10::/56"}},
		{name: "the service range overlaps and a new cluster with another Service range is suggested", shared: "10.130.0.0/24", cluster: cluster,
			wantRule: RuleOverlap, wantIn: []string{"Service range", "10.128.0.0/12", "create a new cluster with a Service range (spec.clusterNetwork.services.cidrBlocks) that does not overlap"}},
		{name: "an IPv6 service range overlaps", shared: "fd00:20::/64", cluster: cluster,
			wantRule: RuleOverlap, wantIn: []string{"fd00:20::/108", "create a new cluster"}},
		{name: "without a service range kubeadm's default 10.96.0.0/12 applies", shared: "10.100.0.0/24", cluster: defaultServices,
			wantRule: RuleOverlap, wantIn: []string{"10.96.0.0/12", "create a new cluster"}},
		{name: "with a service range set the default does not apply", shared: "10.100.0.0/24", cluster: cluster},
		{name: "another shared subnet of the cluster overlaps", shared: "172.20.0.0/16", cluster: cluster,
			wantRule: RuleOverlap, wantIn: []string{"md-b's shared subnet sub-b", "172.20.0.0/24"}},
		{name: "unmasked prefixes are compared masked", shared: "10.6.0.77/24", cluster: ClusterRanges{NodeSubnets: []netip.Prefix{netip.MustParsePrefix("10.6.0.200/24")}, Services: pfx("172.31.0.0/16")},
			wantRule: RuleOverlap, wantIn: []string{"10.6.0.200/24"}},
		{name: "the first overlap is reported: node subnets before pods", shared: "0.0.0.0/0", cluster: cluster,
			wantRule: RuleOverlap, wantIn: []string{"node subnet 10.6.0.0/24"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, Overlap(netip.MustParsePrefix(tt.shared), tt.cluster), tt.wantRule, tt.wantIn...)
		})
	}
}

func TestOverlapInvalid(t *testing.T) {
	expect(t, Overlap(netip.Prefix{}, ClusterRanges{}), RuleOverlap, "cannot check")
	expect(t, Overlap(netip.MustParsePrefix("10.0.0.0/24"), ClusterRanges{Pods: []netip.Prefix{{}}}), RuleOverlap, "invalid")
}

func TestParsePrefixes(t *testing.T) {
	ps, err := ParsePrefixes([]string{"10.0.0.0/8", "fd00::/64"})
	if err != nil || len(ps) != 2 || !ps[1].Addr().Is6() {
		t.Fatalf("ParsePrefixes = %v, %v", ps, err)
	}
	if _, err := ParsePrefixes([]string{"10.0.0.0/8", "10.0.0.0/33"}); err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33"`) {
		t.Errorf("want an error naming 10.0.0.0/33, got %v", err)
	}
	if _, err := ParsePrefixes([]string{"10.0.0.1"}); err == nil {
		t.Error("an address without a prefix length must be refused")
	}
}

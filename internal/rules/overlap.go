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
	"fmt"
	"net/netip"
)

// DefaultServiceCIDR is kubeadm's default when spec.clusterNetwork.services is unset.
const DefaultServiceCIDR = "10.96.0.0/12"

// ClusterRanges are the address ranges a shared subnet must not overlap.
type ClusterRanges struct {
	Pods        []netip.Prefix
	Services    []netip.Prefix // empty means kubeadm's default DefaultServiceCIDR
	NodeSubnets []netip.Prefix // CAPO's cluster network subnets
	// OtherShared are the shared subnets already used by other nodegroups of
	// the same cluster. The caller leaves out nodegroups on the very same
	// subnet (same subnet ID): two nodegroups on one subnet do not overlap.
	OtherShared []NamedPrefix
}

// NamedPrefix is a prefix with a name for messages, e.g. "md-b's shared subnet <id>".
type NamedPrefix struct {
	Name   string
	Prefix netip.Prefix
}

// ParsePrefixes parses CIDRs (IPv4 or IPv6). The error names the bad CIDR.
func ParsePrefixes(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("invalid CIDR %q: %w", c, err)
		}
		out = append(out, p)
	}
	return out, nil
}

var defaultServices = netip.MustParsePrefix(DefaultServiceCIDR)

// Overlap checks that sharedSubnet does not overlap any range of the cluster:
// node subnets, pod ranges, service ranges (kubeadm's DefaultServiceCIDR when
// none is set) and other shared subnets of the cluster, in that order; the
// first overlap is reported. Prefixes are masked before comparison, and only
// prefixes of the same address family (IPv4 or IPv6) can overlap.
func Overlap(sharedSubnet netip.Prefix, cluster ClusterRanges) *Violation {
	fail := func(format string, a ...any) *Violation {
		return &Violation{Rule: RuleOverlap, Field: FieldSubnet, Message: fmt.Sprintf(format, a...)}
	}
	if !sharedSubnet.IsValid() {
		return fail("the shared subnet's CIDR is unknown or invalid (%q), cannot check it against the cluster's ranges", sharedSubnet.String())
	}
	shared := sharedSubnet.Masked()
	otherSubnet := "choose another subnet in the VM project (or create one) that does not overlap it"

	type ranges struct {
		fix   string
		named []NamedPrefix
	}
	named := func(what string, ps []netip.Prefix) []NamedPrefix {
		out := make([]NamedPrefix, 0, len(ps))
		for _, p := range ps {
			out = append(out, NamedPrefix{Name: what, Prefix: p})
		}
		return out
	}
	services := cluster.Services
	if len(services) == 0 {
		services = []netip.Prefix{defaultServices}
	}
	for _, r := range []ranges{
		{otherSubnet, named("the cluster's node subnet", cluster.NodeSubnets)},
		{otherSubnet, named("the cluster's pod range (spec.clusterNetwork.pods.cidrBlocks)", cluster.Pods)},
		{otherSubnet + ", or create a new cluster with a Service range (spec.clusterNetwork.services.cidrBlocks) that does not overlap",
			named("the cluster's Service range (spec.clusterNetwork.services.cidrBlocks)", services)},
		{otherSubnet, cluster.OtherShared},
	} {
		for _, n := range r.named {
			if !n.Prefix.IsValid() {
				return fail("%s %q is invalid, cannot check the shared subnet %s against it", n.Name, n.Prefix.String(), sharedSubnet)
			}
			if shared.Overlaps(n.Prefix.Masked()) {
				return fail("shared subnet %s overlaps %s %s; %s", sharedSubnet, n.Name, n.Prefix, r.fix)
			}
		}
	}
	return nil
}

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

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
)

// SecurityGroups audits the VM project's security groups: which ingress rules
// let the shared subnet in (the VMs must accept traffic from the nodes'
// shared-subnet addresses). Used with the VM project's credential.
type SecurityGroups interface {
	IngressFrom(ctx context.Context, cidr netip.Prefix) ([]IngressRule, error)
}

// IngressRule is one security group rule that admits a range.
type IngressRule struct {
	ID, SecurityGroupID, Protocol string
	RemoteIPPrefix                string
	PortRangeMin, PortRangeMax    int
}

// IngressFrom implements SecurityGroups: the project's ingress rules whose
// remote prefix contains the whole cidr, for its IP version.
func (s *Session) IngressFrom(ctx context.Context, cidr netip.Prefix) ([]IngressRule, error) {
	ether := "IPv4"
	if cidr.Addr().Is6() {
		ether = "IPv6"
	}
	var all []rules.SecGroupRule
	err := s.retry.do(ctx, func(ctx context.Context) error {
		pages, err := rules.List(s.network, rules.ListOpts{Direction: "ingress", EtherType: ether, ProjectID: s.projectID}).AllPages(ctx)
		if err != nil {
			return err
		}
		all, err = rules.ExtractRules(pages)
		return err
	})
	if err != nil {
		return nil, s.wrap(err, "listing ingress security group rules")
	}
	var out []IngressRule
	for _, r := range all {
		if r.RemoteIPPrefix == "" {
			continue // remote group rules admit members of a group, not a range
		}
		p, err := netip.ParsePrefix(r.RemoteIPPrefix)
		if err != nil {
			continue
		}
		if p.Masked().Contains(cidr.Masked().Addr()) && p.Bits() <= cidr.Bits() {
			out = append(out, IngressRule{ID: r.ID, SecurityGroupID: r.SecGroupID, Protocol: r.Protocol, RemoteIPPrefix: r.RemoteIPPrefix, PortRangeMin: r.PortRangeMin, PortRangeMax: r.PortRangeMax})
		}
	}
	return out, nil
}

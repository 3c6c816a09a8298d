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
	"net/http"
	"net/netip"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
)

// SecurityGroups audits the VM project's security groups: which ingress rules
// let a shared subnet in (the VMs must accept traffic from the nodes'
// shared-subnet addresses). Used with the VM project's credential, once per
// SharedNetwork resync.
type SecurityGroups interface {
	// IngressRules are the project's ingress rules that admit a range (a
	// remote IP prefix), of both IP versions, in one request; a
	// *NotReadableError when the cloud's policy does not let the credential
	// list them, or Neutron has no security groups.
	IngressRules(ctx context.Context) ([]IngressRule, error)
}

// IngressRule is one security group rule that admits a range.
type IngressRule struct {
	ID, SecurityGroupID, Protocol string
	RemoteIPPrefix                string
	PortRangeMin, PortRangeMax    int
}

// Admits says whether the rule lets the whole of cidr in: its remote prefix
// contains it (a rule for part of a subnet admits only some of its nodes).
func (r IngressRule) Admits(cidr netip.Prefix) bool {
	remote, err := netip.ParsePrefix(r.RemoteIPPrefix)
	return err == nil && remote.Addr().Is4() == cidr.Addr().Is4() && remote.Bits() <= cidr.Bits() && remote.Masked().Contains(cidr.Masked().Addr())
}

// Admitting counts the rules that admit the whole of cidr.
func Admitting(rules []IngressRule, cidr netip.Prefix) int {
	n := 0
	for _, r := range rules {
		if r.Admits(cidr) {
			n++
		}
	}
	return n
}

// IngressRules implements SecurityGroups.
func (s *Session) IngressRules(ctx context.Context) ([]IngressRule, error) {
	const what = "listing ingress security group rules"
	var all []rules.SecGroupRule
	err := s.retry.do(ctx, func(ctx context.Context) error {
		pages, err := rules.List(s.network, rules.ListOpts{Direction: string(rules.DirIngress), ProjectID: s.projectID}).AllPages(ctx)
		if err != nil {
			return err
		}
		all, err = rules.ExtractRules(pages)
		return err
	})
	if err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusForbidden) || gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return nil, &NotReadableError{What: fmt.Sprintf("project %s: the ingress security group rules", s.projectID)}
		}
		return nil, s.wrap(err, what)
	}
	var out []IngressRule
	for _, r := range all {
		if r.RemoteIPPrefix == "" {
			continue // remote group rules admit members of a group, not a range
		}
		out = append(out, IngressRule{ID: r.ID, SecurityGroupID: r.SecGroupID, Protocol: r.Protocol, RemoteIPPrefix: r.RemoteIPPrefix, PortRangeMin: r.PortRangeMin, PortRangeMax: r.PortRangeMax})
	}
	return out, nil
}

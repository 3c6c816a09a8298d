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

// Package networkfacts reads what the rules need to know about a
// SharedNetwork's network from Neutron, with the VM project's credential.
// The SharedNetwork controller keeps the result in status; admission reads
// it live when that status is too old to decide on.
package networkfacts

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"

	"k8s.io/utils/ptr"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// Cloud is what reading the facts takes from the VM project.
type Cloud interface {
	openstack.NetworkFacts
	Shares(ctx context.Context, networkID string) (map[string]string, error)
	openstack.RBACPolicyQuota
}

// SubnetsNotOnNetworkError says spec.subnets names subnets the network does not have.
type SubnetsNotOnNetworkError struct {
	Network string
	Missing []string
}

func (e *SubnetsNotOnNetworkError) Error() string {
	return fmt.Sprintf("subnet(s) %v of spec.subnets are not on network %s; remove them from spec.subnets or fix their IDs", e.Missing, e.Network)
}

// Read asks Neutron, in five requests whatever the number of subnets: the
// network, its subnets, its ports, its shares and the VM project's RBAC
// policy quota. A quota the credential may not read (403, or no quota
// extension) leaves RBACPolicies unset: the share-quota rule is then not
// judged, and a share Neutron refuses for quota says so on the attachment. The facts of the subnets
// that exist are returned with a *SubnetsNotOnNetworkError for the others.
func Read(ctx context.Context, cloud Cloud, sn *sharednetv1.SharedNetwork) (sharednetv1.SharedNetworkStatus, error) {
	var out sharednetv1.SharedNetworkStatus
	network, err := cloud.Network(ctx, sn.Spec.NetworkID)
	if err != nil {
		return out, err
	}
	subnets, err := cloud.Subnets(ctx, sn.Spec.NetworkID)
	if err != nil {
		return out, err
	}
	addresses, err := cloud.AddressesOnNetwork(ctx, sn.Spec.NetworkID)
	if err != nil {
		return out, err
	}
	shares, err := cloud.Shares(ctx, sn.Spec.NetworkID)
	if err != nil {
		return out, err
	}
	if out.RBACPolicies, err = rbacPolicies(ctx, cloud); err != nil {
		return out, err
	}
	out.MTU = int32(network.MTU)
	var missing []string
	for _, id := range sn.Spec.Subnets {
		i := slices.IndexFunc(subnets, func(s openstack.Subnet) bool { return s.ID == id })
		if i < 0 {
			missing = append(missing, id)
			continue
		}
		s := subnets[i]
		status := sharednetv1.SubnetStatus{
			ID: s.ID, CIDR: s.CIDR.String(), IPVersion: int32(s.IPVersion),
			UsedAddresses:         ptr.To(openstack.UsedInPools(s.AllocationPools, addresses[s.ID].All)),
			FreeAddresses:         ptr.To(openstack.FreeAddresses(s.AllocationPools, addresses[s.ID].All)),
			LoadBalancerAddresses: ptr.To(int64(len(addresses[s.ID].LoadBalancers))),
		}
		if s.Gateway.IsValid() {
			status.GatewayIP = s.Gateway.String()
		}
		for _, r := range s.HostRoutes {
			status.HostRoutes = append(status.HostRoutes, sharednetv1.HostRoute{Destination: r.Destination.String(), NextHop: r.NextHop.String()})
		}
		for _, p := range s.AllocationPools {
			status.AllocationPools = append(status.AllocationPools, sharednetv1.AllocationPool{Start: p.Start.String(), End: p.End.String()})
		}
		out.Subnets = append(out.Subnets, status)
	}
	for project, policy := range shares {
		out.Shares = append(out.Shares, sharednetv1.Share{ProjectID: project, RBACPolicyID: policy})
	}
	sort.Slice(out.Shares, func(i, j int) bool { return out.Shares[i].ProjectID < out.Shares[j].ProjectID })
	if len(missing) > 0 {
		return out, &SubnetsNotOnNetworkError{Network: sn.Spec.NetworkID, Missing: missing}
	}
	return out, nil
}

// rbacPolicies is the VM project's RBAC policy quota; zero (unset) when the
// credential may not read it.
func rbacPolicies(ctx context.Context, cloud Cloud) (sharednetv1.QuotaUsage, error) {
	q, err := cloud.RBACPolicies(ctx)
	var notReadable *openstack.NotReadableError
	switch {
	case errors.As(err, &notReadable):
		return sharednetv1.QuotaUsage{}, nil
	case err != nil:
		return sharednetv1.QuotaUsage{}, err
	}
	return sharednetv1.QuotaUsage{Used: ptr.To(clamp32(q.Used + q.Reserved)), Limit: ptr.To(clamp32(max(q.Limit, -1)))}, nil
}

// VMProject is what the VM-side audit takes from the VM project.
type VMProject interface {
	ProjectID() string
	openstack.SecurityGroups
}

// Ingress sets each subnet's VM-side audit (VMPorts, AdmittingVMPorts,
// AdmittingIngressRules) from the VM project's own ports on the network's
// subnets and the ingress rules of their security groups: two requests
// whatever the number of subnets and attachments, one when the project has
// no port there. It is read on the SharedNetwork's resync beside the facts,
// not as one of them: admission never waits for it. Ports or rules the
// credential may not list leave the counts unset; any other error leaves
// them as they were and is returned.
func Ingress(ctx context.Context, vm VMProject, networkID string, facts *sharednetv1.SharedNetworkStatus) error {
	cidrs := make([]netip.Prefix, len(facts.Subnets))
	ids := make([]string, len(facts.Subnets))
	for i, s := range facts.Subnets { // all or none: never half the subnets counted anew
		var err error
		if cidrs[i], err = netip.ParsePrefix(s.CIDR); err != nil {
			return fmt.Errorf("subnet %s has CIDR %q, which does not parse: %w", s.ID, s.CIDR, err)
		}
		ids[i] = s.ID
	}
	if len(ids) == 0 {
		return nil
	}
	ports, err := vm.PortsOnSubnets(ctx, networkID, ids)
	var rules []openstack.IngressRule
	if err == nil {
		var vmPorts []openstack.Port
		for _, p := range ports {
			if slices.ContainsFunc(ids, func(subnet string) bool { return openstack.IsVMPort(p, vm.ProjectID(), subnet) }) {
				vmPorts = append(vmPorts, p)
			}
		}
		rules, err = vm.IngressRules(ctx, openstack.GroupsOf(vmPorts))
	}
	var notReadable *openstack.NotReadableError
	switch {
	case errors.As(err, &notReadable):
		for i := range facts.Subnets {
			s := &facts.Subnets[i]
			s.VMPorts, s.AdmittingVMPorts, s.AdmittingIngressRules = nil, nil, nil
		}
		return nil
	case err != nil:
		return err
	}
	for i, cidr := range cidrs {
		found := openstack.AuditSubnet(vm.ProjectID(), ids[i], cidr, ports, rules)
		s := &facts.Subnets[i]
		s.VMPorts, s.AdmittingVMPorts, s.AdmittingIngressRules = ptr.To(clamp32(found.VMPorts)), ptr.To(clamp32(found.AdmittingVMPorts)), ptr.To(clamp32(found.AdmittingRules))
	}
	return nil
}

func clamp32(n int) int32 { return int32(min(n, math.MaxInt32)) }

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
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// Check is what a decision asks of one nodegroup.
type Check int

const (
	// CheckAttach is for a nodegroup whose sharedNetwork value is set, or its subnet changed.
	// Every rule whose facts are there runs.
	CheckAttach Check = iota
	// CheckGrow is for an attached nodegroup may take more of its subnet: the
	// grant (a revoked grant allows no more nodes), its subnet, the MTU and
	// capacity.
	CheckGrow
	// CheckFit judges an attached nodegroup against the cloud as it is now (the
	// attachment controller's CloudFits, never a refusal): its subnet, the
	// MTU and capacity.
	CheckFit
	// CheckDetach is for a value removed or changed: no load balancer of the
	// cluster may be left on the subnet.
	CheckDetach
)

// Facts are everything one decision on a Cluster knows, gathered before any
// rule runs (internal/preflight reads them from the cache and, for the few
// answers only OpenStack has, from the cloud). Evaluate judges them.
type Facts struct {
	// ClusterLevel: spec.topology.variables sets (or changes) sharedNetwork
	// for the whole cluster.
	ClusterLevel bool
	// ValueError says why a sharedNetwork value cannot be read; nothing else
	// is judged.
	ValueError string
	// Version is spec.topology.version; it is judged for an attach and, when
	// it changed, for the nodegroups in AttachedWhileVersionChanges.
	Version string
	// AttachedWhileVersionChanges are the nodegroups with a sharedNetwork
	// value on a cluster whose version changes.
	AttachedWhileVersionChanges []string
	// Nodegroups are the nodegroups the change concerns.
	Nodegroups []Nodegroup
}

// Nodegroup are the facts of one MachineDeployment topology. A fact left at
// its zero value is not judged: its rule does not run.
type Nodegroup struct {
	// Name is the MachineDeployment topology name.
	Name  string
	Check Check
	// Namespace and Cluster own the nodegroup.
	Namespace, Cluster string
	// SharedNetwork and Subnet are the variable's value.
	SharedNetwork, Subnet string
	// AttachedTo is the SharedNetwork the nodegroup used before the change
	// ("" when none).
	AttachedTo string
	// NamespaceLabels are the labels of the cluster's namespace (Granted).
	NamespaceLabels map[string]string
	// Network is the SharedNetwork; nil when none has that name.
	Network *Network
	// CannotVerify says why the management cluster's or the shared
	// network's facts could not be read now: nothing else is judged.
	CannotVerify string
	// CannotAsk says why the cluster's project could not be asked now (its
	// MTU, quota and cloud; its load balancers for a detach): the rules that
	// need no answer from it are still judged.
	CannotAsk string
	// Ranges are the cluster's address ranges (Overlap); nil: not judged.
	Ranges *ClusterRanges
	// ClusterMTU is the cluster network's MTU; 0: not known yet, not judged.
	ClusterMTU int
	// ForeignCloud says why the SharedNetwork's Keystone does not vouch for
	// the cluster's credential ("" when it does or was not asked).
	ForeignCloud string
	// Size is the nodegroup's size on the subnet (Capacity); nil: not judged.
	Size *Size
	// Others are every other nodegroup on the subnet (Capacity).
	Others []Consumer
	// PortQuotaFree is what the cluster project may still create; nil:
	// unlimited or not known.
	PortQuotaFree *int
	// RBACPolicies is the VM project's RBAC policy quota (ShareQuota); nil:
	// not judged. NewShare says the cluster's project has no share of the
	// network yet.
	RBACPolicies *PolicyQuota
	NewShare     bool
	// LoadBalancers are the cluster's load balancers on DetachSubnet.
	DetachSubnet  string
	LoadBalancers []sharednetv1.LoadBalancer
}

// Network is what the rules know of a SharedNetwork: its grant and its facts.
type Network struct {
	Name              string
	NamespaceSelector *metav1.LabelSelector
	AllowedSubnets    []string
	MTU               int
	Subnets           []Subnet
}

// Subnet is one subnet of a shared network, as Neutron reported it.
type Subnet struct {
	ID            string
	CIDR          netip.Prefix
	FreeAddresses int
	// KeptForLoadBalancers are free addresses no nodegroup may take.
	KeptForLoadBalancers int
}

// Size is how much of a subnet a nodegroup may take.
type Size struct {
	Annotations           map[string]string // the MachineDeployment topology's metadata (the autoscaler's max size)
	Replicas              *int32
	FailureDomain         string
	ClusterFailureDomains int
	Attached              int // addresses it holds on the subnet already
}

// Evaluate runs every rule on facts once and returns every violation, each
// naming its nodegroup when it has one.
func Evaluate(facts Facts) []*Violation {
	if facts.ValueError != "" {
		return []*Violation{{Rule: RuleValue, Field: "sharedNetwork", Message: facts.ValueError +
			"; set it to {name: <SharedNetwork>, subnet: <subnet ID>} (subnet may be left out when the SharedNetwork allows one)"}}
	}
	var out []*Violation
	if facts.ClusterLevel {
		out = append(out, &Violation{Rule: RuleOneNodegroup, Field: "spec.topology.variables[sharedNetwork]",
			Message: "sharedNetwork is set for the whole cluster; a shared network is attached to one nodegroup: move the value to spec.topology.workers.machineDeployments[].variables.overrides of that MachineDeployment topology"})
	}
	for _, n := range facts.Nodegroups {
		for _, v := range n.evaluate(facts.Version) {
			v.Nodegroup = n.Name
			out = append(out, v)
		}
	}
	if len(facts.AttachedWhileVersionChanges) > 0 {
		if v := Version(facts.Version); v != nil {
			v.Message += fmt.Sprintf(" (nodegroups %s are attached to a shared network)", strings.Join(facts.AttachedWhileVersionChanges, ", "))
			out = append(out, v)
		}
	}
	return out
}

func (n Nodegroup) evaluate(version string) []*Violation {
	cannot := func(why string) *Violation { return &Violation{Rule: RuleCannotVerify, Field: FieldName, Message: why} }
	if n.Check == CheckDetach {
		if n.CannotAsk != "" {
			return some(cannot(n.CannotAsk))
		}
		if n.ForeignCloud != "" {
			// Another cloud's Octavia would say anything: its "none" is not believed.
			return some(&Violation{Rule: RuleSameCloud, Field: "OpenStackCluster spec.identityRef", Message: n.ForeignCloud})
		}
		return some(Detach(n.DetachSubnet, n.LoadBalancers))
	}
	var out []*Violation
	if n.Check == CheckAttach {
		if n.AttachedTo != "" && n.AttachedTo != n.SharedNetwork {
			// One share per network: moving in one step would roll the
			// nodegroup with neither port working.
			return some(&Violation{Rule: RuleOneNetwork, Field: FieldName, Message: fmt.Sprintf(
				"the nodegroup is attached to SharedNetwork %q; a nodegroup uses one shared network: remove the variable (detach) first, then set it to %q", n.AttachedTo, n.SharedNetwork)})
		}
		out = append(out, some(Version(version))...)
	}
	if n.CannotVerify != "" {
		return append(out, cannot(n.CannotVerify))
	}
	if n.Network == nil {
		return append(out, NotOffered(n.SharedNetwork, n.Namespace))
	}
	nw := n.Network
	if n.Check != CheckFit {
		if v := Granted(nw.Name, nw.NamespaceSelector, n.Namespace, n.NamespaceLabels, nw.AllowedSubnets, n.Subnet); v != nil {
			// Nothing else of an ungranted network is the cluster owner's business.
			return append(out, v)
		}
	}
	ids := make([]string, 0, len(nw.Subnets))
	for _, s := range nw.Subnets {
		ids = append(ids, s.ID)
	}
	id, v := OneSubnet(nw.Name, ids, nw.AllowedSubnets, n.Subnet)
	if v != nil {
		return append(out, v)
	}
	var subnet Subnet
	for _, s := range nw.Subnets {
		if s.ID == id {
			subnet = s
		}
	}
	if n.Check == CheckAttach && n.Ranges != nil {
		out = append(out, some(Overlap(subnet.CIDR, *n.Ranges))...)
	}
	if n.CannotAsk != "" {
		return append(out, cannot(n.CannotAsk))
	}
	if n.ForeignCloud != "" {
		out = append(out, &Violation{Rule: RuleSameCloud, Field: "OpenStackCluster spec.identityRef", Message: n.ForeignCloud})
	}
	if n.ClusterMTU > 0 {
		out = append(out, some(MTU(nw.Name, nw.MTU, n.ClusterMTU))...)
	}
	if n.RBACPolicies != nil {
		out = append(out, some(ShareQuota(nw.Name, *n.RBACPolicies, n.NewShare))...)
	}
	if n.Size != nil {
		if n.Check == CheckAttach || n.Check == CheckGrow {
			if v := Sized(n.Size.Annotations, n.Size.Replicas); v != nil {
				return append(out, v)
			}
		}
		self, v := n.consumer()
		if v != nil {
			return append(out, v)
		}
		out = append(out, some(Capacity(CapacityInput{Subnet: id, FreeAddresses: subnet.FreeAddresses, KeptForLoadBalancers: subnet.KeptForLoadBalancers,
			New: self, Others: n.Others, PortQuotaFree: n.PortQuotaFree}))...)
	}
	return out
}

// consumer sizes the nodegroup itself.
func (n Nodegroup) consumer() (Consumer, *Violation) {
	maxSize, v := MaxSize(n.Size.Annotations, n.Size.Replicas)
	if v != nil {
		return Consumer{}, v
	}
	return Consumer{Name: ConsumerName(n.Namespace, n.Cluster, n.Name), MaxSize: maxSize,
		Zones: Zones(n.Size.FailureDomain, n.Size.ClusterFailureDomains), Attached: n.Size.Attached}, nil
}

// ConsumerName is how capacity refusals name a nodegroup of any cluster.
func ConsumerName(namespace, cluster, topology string) string {
	return namespace + "/" + cluster + "/" + topology
}

// some turns a rule's answer into a list without the typed-nil trap.
func some(v *Violation) []*Violation {
	if v == nil {
		return nil
	}
	return []*Violation{v}
}

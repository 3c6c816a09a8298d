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

package preflight

import (
	"context"

	"github.com/capo-sharednet/capo-sharednet/internal/rules"
)

// Ask is what an entry point asks of one nodegroup.
type Ask int

const (
	// Attach is the Cluster webhook's question for a value set, or whose
	// subnet changed: every rule, on current facts.
	Attach Ask = iota
	// Topology is ValidateTopology's backstop for a nodegroup not attached
	// yet: the rules the management cluster's cache can decide.
	Topology
	// BeforeShare is the attachment controller's question before it
	// shares, on the cluster CAPO made: every rule again, and what
	// admission could not decide for a Cluster being created (its
	// network's MTU, its project's quota, its cloud).
	BeforeShare
	// Grow is the Cluster webhook's question for an attached nodegroup
	// that may take more addresses: a revoked grant, the MTU and capacity.
	Grow
	// StillFits is the attachment controller's question for an attached
	// nodegroup against the cloud as it is now (condition CloudFits): its
	// answer is reported, never acted on.
	StillFits
	// Detach is the Cluster webhook's question for a value removed or
	// changed: no load balancer of the cluster left on the subnet.
	Detach
)

// Fact is one fact a question may need; each has one gatherer.
type Fact uint

const (
	// ClusterNetworkMade waits for CAPO's cluster network (Waiting until then).
	ClusterNetworkMade Fact = 1 << iota
	// Grant is the namespace's labels and the SharedNetwork's grant (cache).
	// A network the namespace may not use is looked at no further: the VM
	// project's credential is never used for it.
	Grant
	// NetworkStatus is the SharedNetwork's facts as its status says.
	NetworkStatus
	// NetworkCurrent is the SharedNetwork's facts, current or read from
	// Neutron now (cannot-verify when neither).
	NetworkCurrent
	// NetworkIfCurrent is the SharedNetwork's facts when they are current;
	// otherwise the question is skipped.
	NetworkIfCurrent
	// Ranges are the cluster's node, pod and service ranges and its other
	// nodegroups' shared subnets (overlap).
	Ranges
	// ClusterProject is the cluster's project asked now: vouched for by the
	// SharedNetwork's Keystone (same-cloud), its network's MTU, its port
	// quota (cannot-ask when it does not answer).
	ClusterProject
	// ShareQuota is the VM project's RBAC policy quota, from the
	// SharedNetwork's facts, and whether the cluster's vouched project has a
	// share of the network yet (after ClusterProject).
	ShareQuota
	// ClusterMTU is the cluster network's MTU when Neutron tells it now
	// (not judged otherwise).
	ClusterMTU
	// Capacity is the nodegroup's size and every other consumer of the subnet.
	Capacity
	// LoadBalancers are the cluster's load balancers on the attachment's
	// subnet, asked now.
	LoadBalancers
)

// needs is the one table of which rules (rules.Check) and facts each
// question judges. A fact not gathered stays at its zero value, and its
// rule does not run.
var needs = map[Ask]struct {
	check rules.Check
	facts Fact
}{
	Attach:      {rules.CheckAttach, Grant | NetworkCurrent | Ranges | ClusterProject | ShareQuota | Capacity},
	Topology:    {rules.CheckAttach, Grant | NetworkStatus | Ranges},
	BeforeShare: {rules.CheckAttach, ClusterNetworkMade | Grant | NetworkCurrent | Ranges | ClusterProject | ShareQuota | Capacity},
	Grow:        {rules.CheckGrow, Grant | NetworkCurrent | ClusterProject | Capacity},
	StillFits:   {rules.CheckFit, NetworkIfCurrent | ClusterMTU | Capacity},
	Detach:      {rules.CheckDetach, LoadBalancers},
}

// gatherers run in this order, each when its fact is needed; a later one
// may use what an earlier one found (the subnet, the session). One that
// returns false ends the gathering: what is left would not be judged.
var gatherers = []struct {
	facts  Fact
	gather func(*Checker, context.Context, *gathering) (bool, error)
}{
	{ClusterNetworkMade, (*Checker).clusterNetworkMade},
	{Grant, (*Checker).grant},
	{NetworkStatus | NetworkCurrent | NetworkIfCurrent, (*Checker).network},
	{Ranges, (*Checker).ranges},
	{ClusterProject, (*Checker).clusterProject},
	{ShareQuota, (*Checker).shareQuota},
	{ClusterMTU, (*Checker).clusterMTU},
	{Capacity, (*Checker).capacity},
	{LoadBalancers, (*Checker).loadBalancers},
}

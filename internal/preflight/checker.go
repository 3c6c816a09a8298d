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

// Package preflight gathers the facts the rules need (rules.Facts) from
// Kubernetes objects (the Cluster, its ClusterClass templates, CAPO's
// OpenStackCluster, SharedNetwork status kept current by the controller) and,
// for the few answers only OpenStack has, from the cloud; then it runs
// rules.Evaluate once. Admission, ValidateTopology and the attachment
// controller share it, so a rule cannot say yes in one place and no in
// another.
package preflight

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// Checker gathers facts and runs the rules on them.
type Checker struct {
	// Reader reads Kubernetes objects (the manager's cache).
	Reader client.Reader
	// Consumers answers the consumers of a subnet for the capacity rule
	// (the manager's ConsumerTable); when nil they are listed through
	// Reader (SubnetConsumers).
	Consumers Consumers
	// Cloud opens sessions for the facts only OpenStack has (the cluster
	// network's MTU, the port quota, load balancers on the subnet, a
	// SharedNetwork's facts when its status is not current).
	Cloud credentials.Clouds
	// CloudTimeout bounds those live lookups; 5s when zero.
	CloudTimeout time.Duration
	// MaxFactAge is how old SharedNetwork.status may be to decide on
	// (DefaultMaxFactAge when zero); older facts are read from Neutron.
	MaxFactAge time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// DefaultMaxFactAge is the SharedNetwork controller's resync (5 minutes)
// plus a minute of slack: a status older than that means the controller is
// not keeping it current.
const DefaultMaxFactAge = 6 * time.Minute

// Scope says which facts an attach is judged on.
type Scope int

const (
	// Static facts are the management cluster's (cache reads only): granted,
	// one subnet, version, overlap. ValidateTopology decides on them.
	Static Scope = iota
	// All facts: Static plus the live ones (same cloud, MTU, capacity with
	// the port quota). Admission and the check before the share.
	All
)

// Admission gathers the facts of a Cluster create (old is empty) or update:
// every nodegroup whose `sharedNetwork` value is set, changed or removed,
// every attached nodegroup that grows, and a version change of a cluster
// with attached nodegroups.
func (c *Checker) Admission(ctx context.Context, old, cluster *clusterv1.Cluster) rules.Facts {
	facts := rules.Facts{Version: cluster.Spec.Topology.Version}
	if !cluster.Spec.Topology.IsDefined() {
		return facts
	}
	newLevel, err := variables.FromClusterVariables(cluster.Spec.Topology.Variables)
	if err != nil {
		facts.ValueError = err.Error()
		return facts
	}
	oldLevel, _ := variables.FromClusterVariables(old.Spec.Topology.Variables)
	facts.ClusterLevel = newLevel != nil && !reflect.DeepEqual(newLevel, oldLevel)

	now, err := variables.Nodegroups(cluster)
	if err != nil {
		facts.ValueError = err.Error()
		return facts
	}
	before, err := variables.Nodegroups(old)
	if err != nil {
		before = nil // an unreadable old value is replaced: check the new one only
	}
	// An object that cannot be read is that nodegroup's cannot-verify; the
	// others are still judged, so the owner sees every problem at once.
	add := func(n rules.Nodegroup, err error) {
		if err != nil {
			n.CannotVerify = err.Error() + "; nothing was changed, retry later"
		}
		facts.Nodegroups = append(facts.Nodegroups, n)
	}
	for _, topology := range sortedKeys(before) {
		if value, ok := now[topology]; ok && value == before[topology] {
			continue
		}
		if n, attached, err := c.detachFacts(ctx, old, topology); attached || err != nil {
			add(n, err)
		}
	}
	for _, topology := range sortedKeys(now) {
		prev, had := before[topology]
		value := now[topology]
		switch {
		case had && prev == value:
			// An attached nodegroup that may take more addresses (replicas,
			// the autoscaler's max size, its failure domain) is checked for
			// room on the subnet: nodes without an address never join.
			if Grows(old, cluster, topology) {
				add(c.growFacts(ctx, cluster, topology, value, true))
			}
		case had && prev.Name != value.Name:
			add(rules.Nodegroup{Name: topology, Check: rules.CheckAttach, SharedNetwork: value.Name, AttachedTo: prev.Name}, nil)
		default:
			add(c.AttachFacts(ctx, cluster, topology, value, All))
		}
	}
	if len(now) > 0 && cluster.Spec.Topology.Version != old.Spec.Topology.Version {
		facts.AttachedWhileVersionChanges = sortedKeys(now)
	}
	return facts
}

// Attach judges attaching nodegroup topology of cluster to value on the
// facts of scope: a rules.Refusal with every violation, or nil.
func (c *Checker) Attach(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable, scope Scope) error {
	n, err := c.AttachFacts(ctx, cluster, topology, value, scope)
	return judge(cluster, n, err)
}

// StillFits judges an attached nodegroup against the cloud as it is now:
// the shared network's MTU against the cluster network's, and room on the
// subnet for what every consumer may still take. The attachment controller
// reports the answer (condition CloudFits) and never acts on it: a cloud
// that changed must not wedge or roll a running cluster. Facts older than
// MaxFactAge are not judged (nil).
func (c *Checker) StillFits(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable) error {
	if sn, err := c.sharedNetwork(ctx, value.Name); err != nil || sn == nil || !c.fresh(sn) {
		return nil //nolint:nilerr // facts that cannot be read are not judged, as stale ones are not
	}
	n, err := c.growFacts(ctx, cluster, topology, value, false)
	return judge(cluster, n, err)
}

// NotReadyError says the cluster is not far enough for the check before the
// share: it is retried, nothing is refused.
type NotReadyError struct{ Reason string }

func (e *NotReadyError) Error() string { return e.Reason }

// BeforeShare judges a nodegroup about to be shared on the cluster as CAPO
// made it: the rules admission could not decide for a Cluster being created
// (the cluster network's MTU, the project's port quota, the same cloud) and
// the others again, on real facts. The attachment controller calls it
// before it shares: a refusal means no share, no port and no rollout. A
// *NotReadyError while the cluster network does not exist yet.
func (c *Checker) BeforeShare(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable) error {
	network, err := c.clusterNetwork(ctx, cluster)
	if err != nil {
		return err
	}
	if network.osc == nil || network.osc.Status.Network == nil || network.osc.Status.Network.ID == "" || cluster.Spec.InfrastructureRef.Name == "" {
		return &NotReadyError{Reason: fmt.Sprintf("waiting for CAPO to create the cluster network (OpenStackCluster of cluster %s) before the rules can be checked", cluster.Name)}
	}
	return c.Attach(ctx, cluster, topology, value, All)
}

// judge runs the rules on one nodegroup's facts.
func judge(cluster *clusterv1.Cluster, n rules.Nodegroup, err error) error {
	if err != nil {
		return fmt.Errorf("MachineDeployment topology %q: %w", n.Name, err)
	}
	return rules.Refusal(rules.Evaluate(rules.Facts{Version: cluster.Spec.Topology.Version, Nodegroups: []rules.Nodegroup{n}})).Err()
}

// Grows says whether nodegroup topology may take more of its shared subnet
// in cluster than in old: a larger max size or more zones. A size that is
// not a node count counts as growth, so the rules report it.
func Grows(old, cluster *clusterv1.Cluster, topology string) bool {
	now, before := sizeOf(cluster, topology), sizeOf(old, topology)
	// Zones are the Cluster's in both: only the nodegroup's own change counts.
	before.ClusterFailureDomains = now.ClusterFailureDomains
	nowMax, v := rules.MaxSize(now.Annotations, now.Replicas)
	if v != nil {
		return true
	}
	beforeMax, v := rules.MaxSize(before.Annotations, before.Replicas)
	if v != nil {
		return true // the old size was unreadable: check the new one
	}
	need := func(maxSize int, s *rules.Size) int {
		return rules.Consumer{MaxSize: maxSize, Zones: rules.Zones(s.FailureDomain, s.ClusterFailureDomains)}.Need()
	}
	return need(nowMax, now) > need(beforeMax, before)
}

func (c *Checker) cloudTimeout() time.Duration {
	if c.CloudTimeout > 0 {
		return c.CloudTimeout
	}
	return 5 * time.Second
}

func (c *Checker) fresh(sn *sharednetv1.SharedNetwork) bool {
	maxAge := c.MaxFactAge
	if maxAge <= 0 {
		maxAge = DefaultMaxFactAge
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	return sn.FreshFor(now(), maxAge) > 0
}

func sortedKeys(m map[string]sharednetv1.SharedNetworkVariable) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

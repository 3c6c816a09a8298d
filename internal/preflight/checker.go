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

// Package preflight is the one decision service: every entry point that
// judges a nodegroup's `sharedNetwork` value (the Cluster webhook,
// ValidateTopology, the attachment controller before it shares and when it
// checks that an attached nodegroup still fits) asks it a Question. It
// gathers the facts that question needs (the needs table, needs.go) in one
// pass, from the cache and, for the few answers only OpenStack has, from
// the cloud, runs rules.Evaluate once and answers a Decision whose Refusal
// is the text the cluster owner reads wherever the decision is made. So a
// rule cannot say yes in one place and no in another, and adding a rule is
// one rule file, one fact and one row (docs/design.md, "How to add a rule").
package preflight

import (
	"context"
	"reflect"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// Consumers answers the consumers of a subnet for the capacity rule: the
// manager's consumers.Table.
type Consumers interface {
	// SubnetConsumers is every consumer of subnet of sn but the one named
	// except (rules.ConsumerName; "" for none), or consumers.ErrNotRead.
	SubnetConsumers(sn *sharednetv1.SharedNetwork, subnet, except string) ([]rules.Consumer, error)
}

// Checker gathers facts and runs the rules on them.
type Checker struct {
	// Reader reads Kubernetes objects (the manager's cache).
	Reader client.Reader
	// Consumers answers the consumers of a subnet (the manager's
	// consumers.Table); when nil, or until it has read every object, they
	// are listed through Reader (consumers.SubnetConsumers).
	Consumers Consumers
	// Cloud opens sessions for the facts only OpenStack has.
	Cloud credentials.Clouds
	// CloudTimeout bounds each question's cloud lookups; 5s when zero.
	CloudTimeout time.Duration
	// MaxFactAge is how old SharedNetwork.status may be to decide on
	// (the SharedNetwork controller's resync plus a minute: MaxFactAgeFor);
	// older facts are read from Neutron.
	MaxFactAge time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Rules judges the facts; rules.Evaluate when nil (tests count calls).
	Rules func(rules.Facts) []*rules.Violation

	// AdmissionsPerMinute and AdmissionBurst bound the admissions of one
	// namespace that ask the clouds; DefaultAdmissionsPerMinute and
	// DefaultAdmissionBurst when zero.
	AdmissionsPerMinute, AdmissionBurst int

	// admitted hands an admission's answers of the cluster's project to
	// the share that follows it.
	admitted admittedAnswers
	// budgets bound what each namespace's admissions ask of the clouds,
	// vouches reuse the VM project's Keystone's answers about a token.
	budgets budgets
	vouches vouches
}

// MaxFactAgeFor is the age of SharedNetwork facts a decision trusts when
// their controller reads them every resync: a minute of slack, so a status
// older than that means the controller is not keeping it current.
func MaxFactAgeFor(resync time.Duration) time.Duration {
	return resync + time.Minute
}

// Question is what one entry point asks of one nodegroup.
type Question struct {
	Ask     Ask
	Cluster *clusterv1.Cluster
	// Nodegroup is the MachineDeployment topology name.
	Nodegroup string
	Value     sharednetv1.SharedNetworkVariable
	// Resolved is the caller's Resolve of Value, reused instead of read
	// again (nil: the question resolves it).
	Resolved *Resolution
}

// Decision is the answer to a Question.
type Decision struct {
	Resolution
	// Facts are what the rules judged.
	Facts rules.Nodegroup
	// Refusal is every violation; empty when the nodegroup may go on.
	Refusal rules.Refusal
	// Project is the cluster's project as the SharedNetwork's Keystone
	// vouched for it ("" when the question did not ask): a share made on
	// this decision uses it, so one share costs one token validation.
	Project string
	// Waiting says why the question cannot be judged yet (the cluster
	// network CAPO has not made): nothing is refused, ask again later.
	Waiting string
	// Skipped: there is nothing to judge (a detach of a nodegroup never
	// attached; still-fits on facts that are not current).
	Skipped bool
}

// Err is the refusal as an error, nil when nothing was violated.
func (d Decision) Err() error { return d.Refusal.Err() }

// Decide answers one question: its facts gathered once, the rules run
// once. An error is an object that could not be read (nothing judged).
func (c *Checker) Decide(ctx context.Context, q Question) (Decision, error) {
	g, err := c.gather(ctx, q)
	d := g.decision()
	if err != nil || d.Waiting != "" || d.Skipped {
		return d, err
	}
	d.Refusal = c.evaluate(rules.Facts{Version: q.Cluster.Spec.Topology.Version, Nodegroups: []rules.Nodegroup{g.n}})
	return d, nil
}

// Admission judges a Cluster create (old is empty) or update: every
// nodegroup whose `sharedNetwork` value is set, changed or removed, every
// attached nodegroup that grows, and a version change of a cluster with
// attached nodegroups; their facts gathered nodegroup by nodegroup, the
// rules run once over all, so the owner sees every problem at once.
func (c *Checker) Admission(ctx context.Context, old, cluster *clusterv1.Cluster) rules.Refusal {
	facts := rules.Facts{Version: cluster.Spec.Topology.Version}
	if !cluster.Spec.Topology.IsDefined() {
		return nil
	}
	newLevel, err := variables.FromClusterVariables(cluster.Spec.Topology.Variables)
	if err != nil {
		return c.evaluate(rules.Facts{ValueError: err.Error()})
	}
	// An unreadable old value is replaced: only the new one is judged.
	oldLevel, _ := variables.FromClusterVariables(old.Spec.Topology.Variables)
	facts.ClusterLevel = newLevel != nil && !reflect.DeepEqual(newLevel, oldLevel)
	now, err := variables.Nodegroups(cluster)
	if err != nil {
		return c.evaluate(rules.Facts{ValueError: err.Error()})
	}
	before, err := variables.Nodegroups(old)
	if err != nil {
		before = nil // an unreadable old value is replaced: check the new one only
	}
	for _, q := range admissionQuestions(old, cluster, before, now) {
		if q.Ask == Attach && q.Value.Name != "" && before[q.Nodegroup].Name != "" && before[q.Nodegroup].Name != q.Value.Name {
			// One network at a time: judged without facts.
			facts.Nodegroups = append(facts.Nodegroups, rules.Nodegroup{Name: q.Nodegroup, Check: rules.CheckAttach,
				SharedNetwork: q.Value.Name, AttachedTo: before[q.Nodegroup].Name})
			continue
		}
		g, err := c.gather(ctx, q)
		if err != nil {
			// That nodegroup's cannot-verify; the others are still judged.
			g.n.CannotVerify = err.Error() + "; nothing was changed, retry later"
		} else if g.skipped {
			continue
		}
		facts.Nodegroups = append(facts.Nodegroups, g.n)
	}
	if len(now) > 0 && cluster.Spec.Topology.Version != old.Spec.Topology.Version {
		facts.AttachedWhileVersionChanges = sortedKeys(now)
	}
	return c.evaluate(facts)
}

// admissionQuestions are the questions a Cluster change asks: detaches
// first (for the old Cluster), then each nodegroup whose value is new or
// changed, or that grows.
func admissionQuestions(old, cluster *clusterv1.Cluster, before, now map[string]sharednetv1.SharedNetworkVariable) []Question {
	var out []Question
	for _, topology := range sortedKeys(before) {
		if value, ok := now[topology]; !ok || value != before[topology] {
			out = append(out, Question{Ask: Detach, Cluster: old, Nodegroup: topology, Value: before[topology]})
		}
	}
	for _, topology := range sortedKeys(now) {
		prev, had := before[topology]
		q := Question{Ask: Attach, Cluster: cluster, Nodegroup: topology, Value: now[topology]}
		if had && prev == q.Value {
			// An attached nodegroup that may take more addresses (replicas,
			// the autoscaler's max size, its failure domain) is checked for
			// room on the subnet: nodes without an address never join.
			if !Grows(old, cluster, topology) {
				continue
			}
			q.Ask = Grow
		}
		out = append(out, q)
	}
	return out
}

func (c *Checker) evaluate(facts rules.Facts) rules.Refusal {
	if c.Rules != nil {
		return c.Rules(facts)
	}
	return rules.Evaluate(facts)
}

// Grows says whether nodegroup topology may take more of its shared subnet
// in cluster than in old: a larger max size, more zones, or no bound any
// more. A size that is not a node count counts as growth, so the rules
// report it.
func Grows(old, cluster *clusterv1.Cluster, topology string) bool {
	now, before := consumers.SizeOf(cluster, topology), consumers.SizeOf(old, topology)
	if rules.Sized(now.Annotations, now.Replicas) != nil && rules.Sized(before.Annotations, before.Replicas) == nil {
		// Its bound removed, CAPI leaves the MachineDeployment's replicas to
		// kubectl scale: judged (and refused) as growth.
		return true
	}
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

// fresh says whether the SharedNetwork's status is current enough to
// decide on.
func (c *Checker) fresh(sn *sharednetv1.SharedNetwork) bool {
	maxAge := c.MaxFactAge
	if maxAge <= 0 {
		maxAge = MaxFactAgeFor(5 * time.Minute)
	}
	return sn.FreshFor(c.now(), maxAge) > 0
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func sortedKeys(m map[string]sharednetv1.SharedNetworkVariable) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

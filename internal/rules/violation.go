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

import "strings"

// Rule names, as used in Violation.Rule. Every refusal is one of them.
const (
	RuleGranted   = "granted"
	RuleOneSubnet = "one-subnet"
	RuleVersion   = "version"
	RuleOverlap   = "overlap"
	RuleCapacity  = "capacity"
	RuleMTU       = "mtu"
	RuleDetach    = "detach"
	// RuleSameCloud: the cluster's credential must belong to the shared
	// network's cloud (same Keystone and region, project vouched for by it).
	RuleSameCloud = "same-cloud"
	// RuleOneNodegroup: a shared network is attached to one nodegroup, never
	// to the whole cluster.
	RuleOneNodegroup = "one-nodegroup"
	// RuleOneNetwork: an attached nodegroup is detached before it is
	// attached to another network.
	RuleOneNetwork = "one-network"
	// RuleCannotVerify: facts the decision needs cannot be read right now;
	// nothing is admitted unchecked.
	RuleCannotVerify = "cannot-verify"
	// RuleShareQuota: a nodegroup whose project has no share of the
	// network yet needs an RBAC policy the VM project's quota allows.
	RuleShareQuota = "share-quota"
	// RuleValue: a sharedNetwork value that is not {name, subnet}.
	RuleValue = "value"
)

// Fields named in Violation.Field.
const (
	FieldName    = "sharedNetwork.name"
	FieldSubnet  = "sharedNetwork.subnet"
	FieldVersion = "spec.topology.version"
)

// Violation is a refused rule: which rule, what was found, and what to change.
type Violation struct {
	Rule      string // one of the Rule* constants
	Field     string // the variable/field path involved, e.g. "sharedNetwork.subnet"
	Message   string // values found + the fix, one or two sentences, human readable
	Nodegroup string // the MachineDeployment topology, when the violation is one nodegroup's
}

// Error returns "<rule>: <message>", prefixed by the nodegroup when it has
// one (a Violation without a rule carries an error that is no rule's, such
// as an object that could not be read).
func (v *Violation) Error() string {
	if v == nil {
		return "<nil>"
	}
	text := v.Message
	if v.Rule != "" {
		text = v.Rule + ": " + text
	}
	if v.Nodegroup != "" {
		text = `MachineDeployment topology "` + v.Nodegroup + `": ` + text
	}
	return text
}

// Refusal is every violation of one decision. Its text is the one a cluster
// owner reads wherever the decision is made (admission, ValidateTopology,
// the attachment's conditions).
type Refusal []*Violation

// Error lists every violation, one per line.
func (r Refusal) Error() string {
	lines := make([]string, 0, len(r))
	for _, v := range r {
		lines = append(lines, "- "+v.Error())
	}
	return "sharedNetwork refused, nothing was changed:\n" + strings.Join(lines, "\n")
}

// Unwrap lets errors.As and errors.Is see each violation.
func (r Refusal) Unwrap() []error {
	out := make([]error, 0, len(r))
	for _, v := range r {
		out = append(out, v)
	}
	return out
}

// Has says whether a violation of rule is in the refusal.
func (r Refusal) Has(rule string) bool {
	for _, v := range r {
		if v.Rule == rule {
			return true
		}
	}
	return false
}

// OnlyCannotVerify says whether nothing was found wrong, only facts that
// could not be read: retrying may be enough.
func (r Refusal) OnlyCannotVerify() bool {
	for _, v := range r {
		if v.Rule != RuleCannotVerify {
			return false
		}
	}
	return len(r) > 0
}

// Err is the refusal as an error, nil when nothing was violated.
func (r Refusal) Err() error {
	if len(r) == 0 {
		return nil
	}
	return r
}

// list renders IDs for a message: "a, b, c", or "none" when empty.
func list(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

func contains(items []string, s string) bool {
	for _, i := range items {
		if i == s {
			return true
		}
	}
	return false
}

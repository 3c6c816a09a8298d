package rules

import "strings"

// Rule names, as used in Violation.Rule.
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
)

// Fields named in Violation.Field.
const (
	FieldName    = "sharedNetwork.name"
	FieldSubnet  = "sharedNetwork.subnet"
	FieldVersion = "spec.topology.version"
)

// Violation is a refused rule: which rule, what was found, and what to change.
type Violation struct {
	Rule    string // "granted", "one-subnet", "version", "overlap", "capacity", "mtu", "detach"
	Field   string // the variable/field path involved, e.g. "sharedNetwork.subnet"
	Message string // values found + the fix, one or two sentences, human readable
}

// Error returns "<rule>: <message>". The caller prefixes the
// MachineDeployment topology name.
func (v *Violation) Error() string {
	if v == nil {
		return "<nil>"
	}
	return v.Rule + ": " + v.Message
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

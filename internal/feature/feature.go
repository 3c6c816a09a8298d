// Package feature holds the manager's feature gates (--feature-gates).
package feature

import (
	"k8s.io/component-base/featuregate"
)

const (
	// WorkloadGuardrails installs, into every workload cluster with an
	// attached nodegroup, a ValidatingAdmissionPolicy refusing the seed's
	// load-balancer mistakes, and audits what already exists. Alpha and off
	// by default: it writes into clusters the cluster owners own.
	WorkloadGuardrails featuregate.Feature = "WorkloadGuardrails"
)

// MutableGates can be set from flags; Gates reads them.
var (
	MutableGates featuregate.MutableFeatureGate = featuregate.NewFeatureGate()
	Gates        featuregate.FeatureGate        = MutableGates
)

func init() {
	if err := MutableGates.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		WorkloadGuardrails: {Default: false, PreRelease: featuregate.Alpha},
	}); err != nil {
		panic(err)
	}
}

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

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

	"github.com/blang/semver/v4"
)

// MinimumKubernetesVersion is the first Kubernetes version on which a
// nodegroup can use a shared network.
const MinimumKubernetesVersion = "v1.35.0"

var minimumVersion = semver.MustParse(MinimumKubernetesVersion[1:])

// Version checks that the cluster's Kubernetes version (spec.topology.version)
// is MinimumKubernetesVersion or later.
//
// The version is parsed with semver.ParseTolerant ("v" prefix and a missing
// patch are accepted) and compared by semver precedence: build metadata is
// ignored (v1.35.0+build passes), and pre-releases of the minimum
// (v1.35.0-rc.1, v1.35.0-alpha.2) FAIL, because they precede v1.35.0 and the
// feature is only supported on released Kubernetes 1.35 or later. An empty or
// unparseable version fails.
func Version(version string) *Violation {
	fail := func(format string, a ...any) *Violation {
		return &Violation{Rule: RuleVersion, Field: FieldVersion, Message: fmt.Sprintf(format, a...)}
	}
	if version == "" {
		return fail("the cluster has no Kubernetes version; shared networks need %s or later, set spec.topology.version", MinimumKubernetesVersion)
	}
	v, err := semver.ParseTolerant(version)
	if err != nil {
		return fail("Kubernetes version %q cannot be parsed (%v); set spec.topology.version to a valid version, %s or later", version, err, MinimumKubernetesVersion)
	}
	if v.LT(minimumVersion) {
		pre := ""
		if len(v.Pre) > 0 {
			pre = " (a pre-release; only released versions are supported)"
		}
		return fail("Kubernetes version %s%s is older than %s, the first version supporting shared networks; upgrade the cluster (spec.topology.version) to %s or later first",
			version, pre, MinimumKubernetesVersion, MinimumKubernetesVersion)
	}
	return nil
}

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

import "fmt"

// MTU checks that the shared network has the same MTU as the cluster network.
// An unknown (zero or negative) MTU on either side fails: it cannot be checked.
func MTU(sharedNetwork string, sharedMTU, clusterMTU int) *Violation {
	fail := func(format string, a ...any) *Violation {
		return &Violation{Rule: RuleMTU, Field: FieldName, Message: fmt.Sprintf(format, a...)}
	}
	if sharedMTU <= 0 || clusterMTU <= 0 {
		return fail("MTU unknown, cannot check (network of SharedNetwork %q: %d, cluster network: %d); retry once both networks report an MTU", sharedNetwork, sharedMTU, clusterMTU)
	}
	if sharedMTU == clusterMTU {
		return nil
	}
	consequence := "both networks must have the same MTU"
	if sharedMTU < clusterMTU {
		consequence = "with a smaller MTU, pods on those nodes get a smaller MTU too, and large UDP packets to them are dropped"
	}
	return fail("network of SharedNetwork %q has MTU %d but the cluster network has MTU %d; %s. Set the shared network's MTU to %d in the VM project",
		sharedNetwork, sharedMTU, clusterMTU, consequence, clusterMTU)
}

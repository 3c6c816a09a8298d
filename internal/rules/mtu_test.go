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

import "testing"

func TestMTU(t *testing.T) {
	tests := []struct {
		name            string
		shared, cluster int
		wantRule        string
		wantIn          []string
	}{
		{name: "the same MTU as the cluster network", shared: 1500, cluster: 1500},
		{name: "a smaller MTU is refused with its consequence", shared: 1450, cluster: 1500,
			wantRule: RuleMTU, wantIn: []string{"1450", "1500", "pods on those nodes get a smaller MTU too, and large UDP packets to them are dropped", "Set the shared network's MTU to 1500"}},
		{name: "a larger MTU is refused too", shared: 9000, cluster: 1500,
			wantRule: RuleMTU, wantIn: []string{"9000", "Set the shared network's MTU to 1500"}},
		{name: "an unknown shared MTU cannot be checked", shared: 0, cluster: 1500, wantRule: RuleMTU, wantIn: []string{"MTU unknown, cannot check"}},
		{name: "an unknown cluster MTU cannot be checked", shared: 1500, cluster: 0, wantRule: RuleMTU, wantIn: []string{"MTU unknown, cannot check"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, MTU("vm-net", tt.shared, tt.cluster), tt.wantRule, tt.wantIn...)
		})
	}
}

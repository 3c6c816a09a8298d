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

package guardrails

import "testing"

func TestParamsOnShared(t *testing.T) {
	p := Params{SharedSubnets: []string{"s1"}, SharedNetworks: []string{"n1"}, SharedPorts: []string{"p1"}, ClusterSubnet: "c"}
	for _, tt := range []struct {
		annotations map[string]string
		want        bool
	}{
		{map[string]string{SubnetAnnotation: "s1"}, true},
		{map[string]string{NetworkAnnotation: "n1"}, true},
		{map[string]string{PortAnnotation: "p1"}, true},
		{map[string]string{SubnetAnnotation: "s2", NetworkAnnotation: "n2", PortAnnotation: "p2"}, false},
		{map[string]string{MemberSubnetAnnotation: "s1"}, false},
		{nil, false},
	} {
		if got := p.OnShared(tt.annotations); got != tt.want {
			t.Errorf("OnShared(%v) = %v, want %v", tt.annotations, got, tt.want)
		}
	}
}

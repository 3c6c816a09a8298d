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

import (
	"slices"
	"testing"
)

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

func TestObjectsCompileTheValuesIntoThePolicy(t *testing.T) {
	policy, binding, record := Objects(Params{SharedSubnets: []string{"s2", "s1", "s1"}, SharedNetworks: []string{"n1"},
		SharedPorts: []string{"p1", "p' || true || '"}, ClusterSubnet: "c"})
	if policy.Spec.ParamKind != nil || binding.Spec.ParamRef != nil {
		t.Errorf("the policy reads parameters (paramKind %v, paramRef %v): kube-apiserver may never resolve them again once unbound", policy.Spec.ParamKind, binding.Spec.ParamRef)
	}
	variables := map[string]string{}
	for _, v := range policy.Spec.Variables {
		variables[v.Name] = v.Expression
	}
	for name, want := range map[string]string{"shared": "['s1', 's2']", "sharedNetworks": "['n1']", "sharedPorts": "['p1']", "clusterSubnet": "'c'"} {
		if variables[name] != want {
			t.Errorf("variable %s = %q, want %q (sorted, once each, ID-like values only)", name, variables[name], want)
		}
	}
	if record.Data["sharedSubnets"] != "s1,s2" || record.Data["clusterSubnet"] != "c" {
		t.Errorf("the ConfigMap does not record the values: %v", record.Data)
	}
	_, _, empty := Objects(Params{})
	if p, _, _ := Objects(Params{}); len(empty.Data) == 0 || p.Spec.Variables[2].Expression != "[]" {
		t.Errorf("no shared subnet: an empty list, got %q", p.Spec.Variables[2].Expression)
	}
}

// TestParamsOfReadsBackTheRecord: what a failed read keeps is what the
// record says the policy was compiled with.
func TestParamsOfReadsBackTheRecord(t *testing.T) {
	p := Params{SharedSubnets: []string{"s1", "s2"}, SharedNetworks: []string{"n1"}, SharedPorts: []string{"p1", "p2"}, ClusterSubnet: "c"}
	_, _, record := Objects(p)
	got := ParamsOf(record)
	if !slices.Equal(got.SharedSubnets, p.SharedSubnets) || !slices.Equal(got.SharedNetworks, p.SharedNetworks) ||
		!slices.Equal(got.SharedPorts, p.SharedPorts) || got.ClusterSubnet != p.ClusterSubnet {
		t.Errorf("ParamsOf(Objects(%+v)) = %+v", p, got)
	}
	_, _, record = Objects(Params{})
	if got := ParamsOf(record); got.SharedPorts != nil || got.SharedNetworks != nil {
		t.Errorf("an empty record reads back values: %+v", got)
	}
}

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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGranted(t *testing.T) {
	teamA := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	allowed := []string{"subnet-1", "subnet-2"}
	tests := []struct {
		name     string
		selector *metav1.LabelSelector
		ns       string
		labels   map[string]string
		allowed  []string
		subnet   string
		wantRule string
		wantIn   []string
	}{
		{name: "a namespace selected by the SharedNetwork may use it", selector: teamA, ns: "ns-a", labels: map[string]string{"team": "a"}, allowed: allowed, subnet: "subnet-1"},
		{name: "an empty selector grants every namespace", selector: &metav1.LabelSelector{}, ns: "any", allowed: allowed, subnet: "subnet-2"},
		{name: "no subnet named yet is left to OneSubnet", selector: teamA, ns: "ns-a", labels: map[string]string{"team": "a"}, allowed: allowed},
		{name: "a namespace can be selected by its name label even when labels are not passed", ns: "ns-x",
			selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"ns-x"}}}},
			allowed:  allowed, subnet: "subnet-1"},
		{name: "a nil selector grants no namespace", ns: "ns-a", labels: map[string]string{"team": "a"}, allowed: allowed, subnet: "subnet-1",
			wantRule: RuleGranted, wantIn: []string{`"ns-a"`, "does not exist or is not granted"}},
		{name: "a namespace not selected is refused", selector: teamA, ns: "ns-b", labels: map[string]string{"team": "b"}, allowed: allowed, subnet: "subnet-1",
			wantRule: RuleGranted, wantIn: []string{`"ns-b"`, "does not exist or is not granted"}},
		{name: "an invalid selector grants nothing", ns: "ns-a",
			selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}},
			allowed:  allowed, subnet: "subnet-1", wantRule: RuleGranted, wantIn: []string{"does not exist or is not granted"}},
		{name: "a subnet not allowed is refused, listing the allowed ones", selector: teamA, ns: "ns-a", labels: map[string]string{"team": "a"}, allowed: allowed, subnet: "subnet-9",
			wantRule: RuleGranted, wantIn: []string{`"subnet-9"`, "subnet-1, subnet-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Granted("vm-net", tt.selector, tt.ns, tt.labels, tt.allowed, tt.subnet)
			expect(t, v, tt.wantRule, tt.wantIn...)
		})
	}
}

func TestGrantedFields(t *testing.T) {
	if v := Granted("vm-net", nil, "ns", nil, nil, ""); v == nil || v.Field != FieldName {
		t.Errorf("namespace refusal field = %v, want %s", v, FieldName)
	}
	if v := Granted("vm-net", &metav1.LabelSelector{}, "ns", nil, []string{"a"}, "b"); v == nil || v.Field != FieldSubnet {
		t.Errorf("subnet refusal field = %v, want %s", v, FieldSubnet)
	}
}

// TestANamespaceNotGrantedLearnsNothingOfTheSharedNetwork: to a namespace
// that is not granted, a SharedNetwork that exists reads exactly like one
// that does not (no name confirmed, no selector, no subnet), whichever way
// it is not granted.
func TestANamespaceNotGrantedLearnsNothingOfTheSharedNetwork(t *testing.T) {
	unknown := NotOffered("vm-net", "ns-b")
	for name, selector := range map[string]*metav1.LabelSelector{
		"not selected": {MatchLabels: map[string]string{"team": "a"}},
		"no selector":  nil,
		"invalid":      {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}},
	} {
		v := Granted("vm-net", selector, "ns-b", map[string]string{"team": "b"}, []string{"subnet-1"}, "subnet-9")
		if v == nil || *v != *unknown {
			t.Errorf("%s: %v, want the refusal of a SharedNetwork that does not exist: %v", name, v, unknown)
		}
	}
}

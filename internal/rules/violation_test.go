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
	"strings"
	"testing"
)

// expect checks a rule's result: nil when wantRule is "", else a violation of
// wantRule whose message contains every one of wantIn.
func expect(t *testing.T, v *Violation, wantRule string, wantIn ...string) {
	t.Helper()
	if wantRule == "" {
		if v != nil {
			t.Fatalf("want no violation, got %q", v.Error())
		}
		return
	}
	if v == nil {
		t.Fatalf("want a %q violation, got none", wantRule)
	}
	if v.Rule != wantRule {
		t.Errorf("rule = %q, want %q (%s)", v.Rule, wantRule, v.Error())
	}
	if v.Field == "" {
		t.Errorf("violation has no field: %s", v.Error())
	}
	for _, s := range wantIn {
		if !strings.Contains(v.Message, s) {
			t.Errorf("message %q does not contain %q", v.Message, s)
		}
	}
}

func TestViolationError(t *testing.T) {
	v := &Violation{Rule: RuleMTU, Field: FieldName, Message: "MTU differs"}
	if got, want := v.Error(), "mtu: MTU differs"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var nilV *Violation
	if got := nilV.Error(); got != "<nil>" {
		t.Errorf("nil Error() = %q", got)
	}
}

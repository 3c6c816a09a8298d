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
	"testing"

	. "github.com/onsi/gomega"
)

func TestShareQuota(t *testing.T) {
	for _, tc := range []struct {
		name     string
		quota    PolicyQuota
		newShare bool
		refused  bool
	}{
		{"a new share with a policy left", PolicyQuota{Used: 9, Limit: 10}, true, false},
		{"a new share with none left", PolicyQuota{Used: 10, Limit: 10}, true, true},
		{"a new share over a quota lowered below use", PolicyQuota{Used: 12, Limit: 10}, true, true},
		{"reusing the project's share needs no policy", PolicyQuota{Used: 10, Limit: 10}, false, false},
		{"an unlimited quota", PolicyQuota{Used: 500, Limit: -1}, true, false},
		{"a quota of zero", PolicyQuota{Used: 0, Limit: 0}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v := ShareQuota("vm-net", tc.quota, tc.newShare)
			if !tc.refused {
				g.Expect(v).ToNot(HaveOccurred())
				return
			}
			g.Expect(v).To(HaveOccurred())
			g.Expect(v.Rule).To(Equal(RuleShareQuota))
			g.Expect(v.Field).To(Equal(FieldName))
			g.Expect(v.Message).To(And(ContainSubstring("vm-net"),
				ContainSubstring(fmt.Sprintf("uses %d of %d RBAC policies", tc.quota.Used, tc.quota.Limit)),
				ContainSubstring("raise quota rbac_policy"), ContainSubstring("detach a project")))
		})
	}
}

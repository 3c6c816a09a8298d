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

func TestVersion(t *testing.T) {
	tests := []struct {
		version  string
		wantRule string
		wantIn   []string
	}{
		// Available on clusters running Kubernetes 1.35 or later.
		{version: "v1.35.0"},
		{version: "v1.35.3"},
		{version: "v1.36.0"},
		{version: "v2.0.0"},
		{version: "v1.35.0+build.1"},
		{version: "1.35.0"},
		{version: "v1.35"},
		{version: "v1.34.9", wantRule: RuleVersion, wantIn: []string{"v1.34.9", "v1.35.0"}},
		{version: "v1.29.0", wantRule: RuleVersion, wantIn: []string{"v1.29.0", "v1.35.0"}},
		// Pre-releases precede v1.35.0: only released versions are supported.
		{version: "v1.35.0-rc.1", wantRule: RuleVersion, wantIn: []string{"v1.35.0-rc.1", "pre-release"}},
		{version: "v1.35.0-alpha.2", wantRule: RuleVersion, wantIn: []string{"v1.35.0-alpha.2", "pre-release"}},
		{version: "v1.36.0-alpha.1"},
		{version: "", wantRule: RuleVersion, wantIn: []string{"no Kubernetes version", "v1.35.0"}},
		{version: "latest", wantRule: RuleVersion, wantIn: []string{`"latest"`, "cannot be parsed"}},
		{version: "v1.35.x", wantRule: RuleVersion, wantIn: []string{`"v1.35.x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			expect(t, Version(tt.version), tt.wantRule, tt.wantIn...)
		})
	}
}

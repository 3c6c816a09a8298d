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

package shipping

import (
	"path/filepath"
	"testing"

	e2eframework "sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/yaml"
)

// TestKindE2EConfig reads e2e/kind/config/e2e.yaml as CAPI's test framework
// does (defaults, paths relative to the file, Validate: one core, bootstrap
// and control-plane provider, every file it names exists) and checks it
// gives every placeholder of the cluster template a value. The suite itself
// needs a Docker engine and a cloud; `go test ./...` builds it (TestE2E skips).
func TestKindE2EConfig(t *testing.T) {
	file := path("e2e", "kind", "config", "e2e.yaml")
	cfg := &e2eframework.E2EConfig{}
	if err := yaml.UnmarshalStrict(mustRead(t, file), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Defaults()
	cfg.AbsPaths(filepath.Dir(file))
	if err := cfg.Validate(); err != nil {
		t.Fatalf("e2e/kind/config/e2e.yaml: %v", err)
	}
	if got := cfg.RuntimeExtensionProviders(); len(got) != 2 {
		t.Errorf("runtime extension providers %q: want capo-sharednet and ORC", got)
	}
	// Set by the suite (the clouds.yaml file as base64) or by clusterctl's flags.
	bySuite := map[string]bool{"OPENSTACK_CLOUD_YAML_B64": true, "CONTROL_PLANE_MACHINE_COUNT": true, "WORKER_MACHINE_COUNT": true}
	for name := range clusterVariables {
		if _, ok := cfg.Variables[name]; !ok && !bySuite[name] {
			t.Errorf("cluster template placeholder %s has no variable in e2e/kind/config/e2e.yaml", name)
		}
	}
	for _, name := range []string{"CLUSTER_TOPOLOGY", "EXP_RUNTIME_SDK"} {
		if cfg.Variables[name] != "true" {
			t.Errorf("%s=%q: CAPI must run with it for the extension", name, cfg.Variables[name])
		}
	}
}

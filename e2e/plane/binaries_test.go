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

package plane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// The plane's builds collect garbage less often, unless the user set GOGC:
// what a build's process sees is what exec.Cmd passes (the last value of a
// name wins).
func TestBuildsTakeGOGC400UnlessGOGCIsSet(t *testing.T) {
	gogc := func() string {
		cmd := exec.Command("sh", "-c", `printf %s "$GOGC"`)
		cmd.Env = BuildEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	t.Setenv("GOGC", "")
	if got := gogc(); got != BuildGOGC {
		t.Errorf("GOGC unset: a build runs with GOGC=%q, want %q", got, BuildGOGC)
	}
	t.Setenv("GOGC", "100")
	if got := gogc(); got != "100" {
		t.Errorf("GOGC=100 set by the user: a build runs with GOGC=%q, want the user's 100", got)
	}
}

// The builds the shell scripts run (the demo tool, the Kubernetes module)
// take the same default as the plane's: BuildGOGC is the one value, the
// scripts carry a copy because they run before any Go code.
func TestTheScriptsBuildWithBuildGOGC(t *testing.T) {
	root, err := providers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"hack/demo.sh", "hack/ensure-envtest-assets.sh"} {
		raw, err := os.ReadFile(filepath.Join(root, script))
		if err != nil {
			t.Fatal(err)
		}
		if want := "GOGC=${GOGC:-" + BuildGOGC + "} go build"; !strings.Contains(string(raw), want) {
			t.Errorf("%s: its go build does not run with %q (plane.BuildGOGC); set the same default there", script, want)
		}
	}
}

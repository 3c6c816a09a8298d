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
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// repoRoot is the folder holding go.mod (tests run in test/shipping).
var repoRoot = func() string {
	root, err := providers.RepoRoot()
	if err != nil {
		panic(err)
	}
	return root
}()

// path joins slash-separated parts onto the repository root.
func path(parts ...string) string {
	return filepath.Join(append([]string{repoRoot}, parts...)...)
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopEnvironment()
	os.Exit(code)
}

// run runs a command in dir and returns its stdout; a failure reports stderr.
func run(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	out, err := runErr(dir, env, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(dir string, env []string, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.Bytes(), nil
}

// moduleVersion is the version of a dependency that go.mod selects.
func moduleVersion(t *testing.T, module string) string {
	t.Helper()
	return strings.TrimSpace(string(run(t, repoRoot, nil, "go", "list", "-m", "-f", "{{.Version}}", module)))
}

// moduleDir downloads (if needed) one module version into the module cache and
// returns its folder. It does not touch go.mod.
func moduleDir(t *testing.T, module, version string) string {
	t.Helper()
	out := run(t, repoRoot, []string{"GOFLAGS=-mod=mod"}, "go", "mod", "download", "-json", module+"@"+version)
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == `"Dir"` {
			return strings.Trim(strings.TrimSpace(v), `",`)
		}
	}
	t.Fatalf("go mod download %s@%s: no Dir in %s", module, version, out)
	return ""
}

var (
	clusterctlOnce sync.Once
	clusterctlBin  string
	clusterctlErr  error
)

// clusterctl builds clusterctl from sigs.k8s.io/cluster-api/cmd/clusterctl at
// the CAPI version of go.mod into bin/tools/clusterctl-<version>, once; a
// binary that is there is reused.
func clusterctl(t *testing.T) string {
	t.Helper()
	version := moduleVersion(t, "sigs.k8s.io/cluster-api")
	clusterctlOnce.Do(func() {
		clusterctlBin = path("bin", "tools", "clusterctl-"+version)
		if _, err := os.Stat(clusterctlBin); err == nil {
			return
		}
		major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
		minor, _, _ = strings.Cut(minor, ".")
		pkg := "sigs.k8s.io/cluster-api/version"
		ldflags := fmt.Sprintf("-X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=%[3]s -X %[1]s.gitMinor=%[4]s", pkg, version, major, minor)
		tmp := clusterctlBin + ".tmp"
		if _, err := runErr(repoRoot, nil, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", tmp, "sigs.k8s.io/cluster-api/cmd/clusterctl"); err != nil {
			clusterctlErr = err
			return
		}
		clusterctlErr = os.Rename(tmp, clusterctlBin)
	})
	if clusterctlErr != nil {
		t.Fatalf("building clusterctl: %v", clusterctlErr)
	}
	return clusterctlBin
}

// releaseVersion is the version the release tests render; its series must be in metadata.yaml.
const releaseVersion = "v0.1.0"

var (
	releaseOnce sync.Once
	releaseDir  string
	releaseErr  error
)

// release runs hack/release-manifests.sh (what `make release-manifests` runs)
// once into a temporary folder and returns it.
func release(t *testing.T) string {
	t.Helper()
	releaseOnce.Do(func() {
		releaseDir, releaseErr = os.MkdirTemp("", "capo-sharednet-release-")
		if releaseErr != nil {
			return
		}
		_, releaseErr = runErr(repoRoot, nil, path("hack", "release-manifests.sh"), releaseVersion, releaseDir)
	})
	if releaseErr != nil {
		t.Fatalf("hack/release-manifests.sh: %v", releaseErr)
	}
	return releaseDir
}

// clusterctlEnv isolates clusterctl from the user's configuration and from
// the network: its own XDG folders, no version check against GitHub.
func clusterctlEnv(t *testing.T, home string, extra ...string) []string {
	t.Helper()
	return append([]string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"CLUSTERCTL_DISABLE_VERSIONCHECK=true",
		"GOPROXY=off",
	}, extra...)
}

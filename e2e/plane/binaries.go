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
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// resolveModules fills each provider's version and source folder from the
// repository's build list (go.mod), so the manifests installed are those of
// the managers built.
func resolveModules(root string, ps []*provider) error {
	for _, p := range ps {
		v, err := providers.ModuleVersion(root, p.Module)
		if err != nil {
			return err
		}
		p.version = v
		if p.modDir, err = providers.ModuleDir(root, p.Module); err != nil {
			return err
		}
	}
	return nil
}

// ensureBinary builds a provider's manager from its module source into
// binDir as <name>-manager-<version>, unless that file exists: a changed
// version in go.mod builds a new binary, an unchanged one is reused.
func ensureBinary(root, binDir string, p *provider, progress io.Writer) (string, error) {
	out := filepath.Join(binDir, fmt.Sprintf("%s-manager-%s", p.Name, p.version))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "building %s %s from source (go build %s; CAPI's manager takes 1-4 minutes cold on 2 cores)\n", p.Name, p.version, p.Main)
	start := time.Now()
	if err := goBuildIn(root, out, p.Main, "-ldflags=-s -w"); err != nil { // no DWARF: shorter links
		return "", err
	}
	fmt.Fprintf(progress, "built %s in %s\n", filepath.Base(out), time.Since(start).Round(time.Second))
	return out, nil
}

// buildExtension builds this repository's manager (main.go). The go build
// cache makes this quick when nothing changed; it is always run so the plane
// never runs a stale extension.
func buildExtension(root, binDir string) (string, error) {
	out := filepath.Join(binDir, "capo-sharednet")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	return out, goBuild(root, out, ".")
}

func goBuild(root, out, pkg string) error { return goBuildIn(root, out, pkg) }

// BuildGOGC is the GOGC of the plane's go builds when GOGC is not set: the
// compiler and the linker collect garbage a quarter as often. A cold compile
// of client-go and the apiserver library took 126 s instead of 150 s on two
// cores (800: 122 s), for a larger heap per compile. GOGC is not part of the
// build cache's keys: the packages are those of any other build.
// hack/ensure-envtest-assets.sh and hack/demo.sh use the same value
// (TestTheScriptsBuildWithBuildGOGC).
const BuildGOGC = "400"

// BuildEnv is the environment of a go build the plane or the demo runs: this
// process's, with GOGC=BuildGOGC unless GOGC is set. Only the builds get it,
// not the plane's processes.
func BuildEnv() []string {
	env := os.Environ()
	if os.Getenv("GOGC") == "" {
		env = append(env, "GOGC="+BuildGOGC)
	}
	return env
}

// goBuildIn builds pkg of the module in dir into out, with more go build flags.
func goBuildIn(dir, out, pkg string, flags ...string) error {
	tmp := fmt.Sprintf("%s.tmp-%d", out, os.Getpid()) // two planes may build at once
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", tmp, pkg)...)
	cmd.Dir = dir
	cmd.Env = BuildEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	return os.Rename(tmp, out)
}

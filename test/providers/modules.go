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

package providers

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Modules of the providers.
const (
	CAPIModule = "sigs.k8s.io/cluster-api"
	CAPOModule = "sigs.k8s.io/cluster-api-provider-openstack"
	ORCModule  = "github.com/k-orc/openstack-resource-controller/v2"
)

// Provider is one provider and where it keeps its manifests.
type Provider struct {
	// Name is short ("capi", "cabpk", ...), also the suffix of its webhook configurations'
	// names so that providers do not collide.
	Name   string
	Module string
	// Dir is the provider's folder inside its module ("" or e.g. "bootstrap/kubeadm").
	Dir string
	// Main is the provider's main package ("" for ORC, of which only the CRDs are used).
	Main string
}

// The providers, by what they do.
var (
	CAPI  = Provider{Name: "capi", Module: CAPIModule, Main: CAPIModule}
	CABPK = Provider{Name: "cabpk", Module: CAPIModule, Dir: "bootstrap/kubeadm", Main: CAPIModule + "/bootstrap/kubeadm"}
	KCP   = Provider{Name: "kcp", Module: CAPIModule, Dir: "controlplane/kubeadm", Main: CAPIModule + "/controlplane/kubeadm"}
	CAPO  = Provider{Name: "capo", Module: CAPOModule, Main: CAPOModule}
	// ORC's CRDs only: CAPO watches ORC Images and does not start without them.
	ORC = Provider{Name: "orc", Module: ORCModule}
)

// RepoRoot walks up from the working directory to the folder holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ModuleVersion is the version of a module in the build list of the repository at root.
func ModuleVersion(root, module string) (string, error) {
	return goList(root, "{{.Version}}", module)
}

// ModuleDir returns the source folder of a module of the build list, downloading it when it
// is not in the module cache yet.
func ModuleDir(root, module string) (string, error) {
	dir, err := goList(root, "{{.Dir}}", module)
	if err == nil {
		return dir, nil
	}
	dl := exec.Command("go", "mod", "download", module)
	dl.Dir = root
	if out, derr := dl.CombinedOutput(); derr != nil {
		return "", fmt.Errorf("%w; go mod download: %s", err, out)
	}
	return goList(root, "{{.Dir}}", module)
}

func goList(root, format, module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", format, module)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w: %s", module, err, strings.TrimSpace(stderr.String()))
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", fmt.Errorf("module %s is not downloaded (run go mod download)", module)
	}
	return v, nil
}

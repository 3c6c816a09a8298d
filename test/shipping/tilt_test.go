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
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/capo-sharednet/capo-sharednet/test/testenv"
	"sigs.k8s.io/yaml"
)

// tiltProvider is the format CAPI's Tiltfile (and its tilt-prepare tool) reads
// from a provider repository's tilt-provider.yaml; every field it knows.
type tiltProvider struct {
	Name   string `json:"name"`
	Config struct {
		Image                          string   `json:"image"`
		LiveReloadDeps                 []string `json:"live_reload_deps"`
		Label                          string   `json:"label"`
		GoMain                         string   `json:"go_main"`
		Context                        string   `json:"context"`
		Version                        string   `json:"version"`
		KustomizeFolder                string   `json:"kustomize_folder"`
		KustomizeOptions               []string `json:"kustomize_options"`
		ApplyProviderYAML              *bool    `json:"apply_provider_yaml"`
		AdditionalResources            []string `json:"additional_resources"`
		AdditionalDockerBuildCommands  string   `json:"additional_docker_build_commands"`
		AdditionalDockerHelperCommands string   `json:"additional_docker_helper_commands"`
		ResourceDeps                   []string `json:"resource_deps"`
	} `json:"config"`
}

// TestTiltProvider reads tilt-provider.yaml as CAPI's Tiltfile does and checks
// that every path it names exists, that its image is the one config/default
// deploys (else Tilt deploys the released image instead of its build), and
// that the manager builds with the exact command the Tiltfile runs.
func TestTiltProvider(t *testing.T) {
	var p tiltProvider
	if err := yaml.UnmarshalStrict(mustRead(t, path("tilt-provider.yaml")), &p); err != nil {
		t.Fatalf("tilt-provider.yaml (unknown fields are ignored by Tilt, so they are refused here): %v", err)
	}
	if p.Name != providerName {
		t.Errorf("name %q: CAPI's Tiltfile names the provider from it and the Namespace's label %s", p.Name, providerLabel)
	}
	c := p.Config
	if c.Image == "" || c.Label == "" {
		t.Fatalf("image %q and label %q are both needed", c.Image, c.Label)
	}
	context := path(filepath.FromSlash(c.Context))
	goMain := c.GoMain
	if goMain == "" {
		goMain = "main.go" // the Tiltfile's default
	}
	kustomizeFolder := c.KustomizeFolder
	if kustomizeFolder == "" {
		kustomizeFolder = "config/default"
	}
	for _, p := range append(append([]string{goMain, kustomizeFolder + "/kustomization.yaml"}, c.LiveReloadDeps...), c.AdditionalResources...) {
		if _, err := os.Stat(filepath.Join(context, filepath.FromSlash(p))); err != nil {
			t.Errorf("tilt-provider.yaml names %s, which does not exist", p)
		}
	}

	// config/manager sets the image config/default deploys; Tilt swaps its build in by name.
	var k struct {
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
		} `json:"images"`
	}
	if err := yaml.Unmarshal(mustRead(t, path("config", "manager", "kustomization.yaml")), &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Images) != 1 || k.Images[0].NewName != c.Image {
		t.Errorf("config/manager/kustomization.yaml images %+v: want newName %s, the image of tilt-provider.yaml", k.Images, c.Image)
	}

	// The build the Tiltfile runs (build_go_binary, no race detector, no debugger):
	//   cd <context>; CGO_ENABLED=0 GOOS=linux GOARCH=<arch> go build -gcflags '' -ldflags '-extldflags "-static"' -o .tiltbuild/bin/manager <go_main>
	testenv.SkipIfShort(t, "builds the manager as Tilt does")
	out := filepath.Join(t.TempDir(), "manager")
	run(t, context, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH},
		"go", "build", "-gcflags", "", "-ldflags", `-extldflags "-static"`, "-o", out, goMain)
	if !strings.HasSuffix(goMain, ".go") {
		t.Logf("go_main %s is a package path", goMain)
	}
}

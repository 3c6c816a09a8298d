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
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/capo-sharednet/capo-sharednet/test/loopback"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// What CAPI v1.12 does with a provider of tilt-settings.yaml, from its
// Tiltfile and hack/tools/internal/tilt-prepare/main.go:
//
//   - tilt-prepare runs `kustomize build <kustomize_options> <context>/<kustomize_folder>`,
//     substitutes ${VAR:=default} from kustomize_substitutions (drone/envsubst),
//     rewrites the container named "manager" of the Deployment labelled
//     cluster.x-k8s.io/provider (tiltPrepare below), adds a clusterctl Provider
//     object named from the Namespace's provider label, with `version`;
//   - the Tiltfile applies that output: the Deployment, the Provider and the
//     objects of additional_resources (plain YAML files, read as they are) form
//     the resource <label>_controller, which waits for resource_deps; every
//     other object goes to Tilt's "uncategorized" resource, applied at once;
//   - with debug.port it runs the manager under delve listening on :30000
//     (forwarded from the port), with debug.profiler_port it adds
//     --profiler-address=:6060 (forwarded from profiler_port, link
//     /debug/pprof), with debug.metrics_port it forwards container port 8080
//     (link /metrics).
const (
	tiltDelvePort    = "30000"
	tiltProfilerPort = "6060"
	tiltMetricsPort  = "8080"
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

// readTiltProvider reads tilt-provider.yaml; unknown fields are refused
// (Tilt ignores them, so a misspelt field would silently do nothing).
func readTiltProvider(t *testing.T) tiltProvider {
	t.Helper()
	var p tiltProvider
	if err := yaml.UnmarshalStrict(mustRead(t, path("tilt-provider.yaml")), &p); err != nil {
		t.Fatalf("tilt-provider.yaml (unknown fields are ignored by Tilt, so they are refused here): %v", err)
	}
	return p
}

// tiltContext is the folder the Tiltfile resolves the provider's paths in.
func (p tiltProvider) tiltContext() string { return path(filepath.FromSlash(p.Config.Context)) }

func (p tiltProvider) goMain() string {
	if p.Config.GoMain == "" {
		return "main.go" // the Tiltfile's default
	}
	return p.Config.GoMain
}

func (p tiltProvider) kustomizeFolder() string {
	if p.Config.KustomizeFolder == "" {
		return "config/default" // tilt-prepare's default
	}
	return p.Config.KustomizeFolder
}

// tiltSettings is the part of CAPI's tilt-settings.yaml that concerns this
// provider, as docs/tilt.md shows it.
type tiltSettings struct {
	ProviderRepos          []string             `json:"provider_repos"`
	EnableProviders        []string             `json:"enable_providers"`
	KustomizeSubstitutions map[string]string    `json:"kustomize_substitutions"`
	ExtraArgs              map[string][]string  `json:"extra_args"`
	Debug                  map[string]tiltDebug `json:"debug"`
	TemplateDirs           map[string][]string  `json:"template_dirs"`
}

// tiltDebug is one entry of debug in tilt-settings.yaml (tilt-prepare reads
// continue, port and profiler_port; the Tiltfile reads the ports).
type tiltDebug struct {
	Continue     *bool `json:"continue"`
	Port         int   `json:"port"`
	ProfilerPort int   `json:"profiler_port"`
	MetricsPort  int   `json:"metrics_port"`
	RaceDetector bool  `json:"race_detector"`
}

// documentedTiltSettings is the tilt-settings.yaml example of docs/tilt.md:
// the tests run with exactly what the documentation tells users to set.
func documentedTiltSettings(t *testing.T) tiltSettings {
	t.Helper()
	doc := string(mustRead(t, path("docs", "tilt.md")))
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		if !strings.Contains(block[1], "provider_repos:") {
			continue
		}
		var s tiltSettings
		if err := yaml.Unmarshal([]byte(block[1]), &s); err != nil {
			t.Fatalf("docs/tilt.md: the tilt-settings.yaml example does not parse: %v", err)
		}
		return s
	}
	t.Fatal("docs/tilt.md has no tilt-settings.yaml example (a yaml block with provider_repos)")
	return tiltSettings{}
}

// TestTiltProvider reads tilt-provider.yaml as CAPI's Tiltfile does and checks
// that every path it names exists, that its image is the one the kustomize
// folder deploys (else Tilt deploys the released image instead of its build),
// that its version is one clusterctl accepts, and that the manager builds with
// the exact command the Tiltfile runs and accepts every flag Tilt passes it,
// with and without debug.
func TestTiltProvider(t *testing.T) {
	p := readTiltProvider(t)
	if p.Name != providerName {
		t.Errorf("name %q: CAPI's Tiltfile names the provider from it and the Namespace's label %s", p.Name, providerLabel)
	}
	c := p.Config
	if c.Image == "" || c.Label == "" {
		t.Fatalf("image %q and label %q are both needed", c.Image, c.Label)
	}
	if c.ApplyProviderYAML != nil && !*c.ApplyProviderYAML {
		t.Error("apply_provider_yaml is false: Tilt would build the manager but deploy nothing")
	}
	paths := append(append([]string{p.goMain(), p.kustomizeFolder() + "/kustomization.yaml"}, c.LiveReloadDeps...), c.AdditionalResources...)
	for _, rel := range paths {
		if _, err := os.Stat(filepath.Join(p.tiltContext(), filepath.FromSlash(rel))); err != nil {
			t.Errorf("tilt-provider.yaml names %s, which does not exist", rel)
		}
	}
	// The Tiltfile reads each additional resource with read_file: a file, not a kustomization.
	for _, rel := range c.AdditionalResources {
		if fi, err := os.Stat(filepath.Join(p.tiltContext(), filepath.FromSlash(rel))); err == nil && fi.IsDir() {
			t.Errorf("additional_resources %s is a folder; the Tiltfile reads plain YAML files", rel)
		}
	}
	// The ExtensionConfig is validated by CAPI's webhook and the manager watches CAPO kinds.
	for _, dep := range []string{"capi_controller", "capo_controller"} {
		if !slices.Contains(c.ResourceDeps, dep) {
			t.Errorf("resource_deps %q lack %s", c.ResourceDeps, dep)
		}
	}

	// The clusterctl Provider object Tilt creates carries `version`; clusterctl
	// (describe, upgrade plan) needs a release series of metadata.yaml for it.
	if c.Version == "" {
		t.Error("no version: tilt-prepare then records CAPI's own (v1.12.99), a version metadata.yaml has no series for")
	} else if !inReleaseSeries(t, c.Version) {
		t.Errorf("version %s is in no release series of metadata.yaml", c.Version)
	}
	if s := readClusterctlSettings(t); s.Config.NextVersion != c.Version {
		t.Errorf("tilt-provider.yaml version %s, clusterctl-settings.json nextVersion %s: the same development build, the same version", c.Version, s.Config.NextVersion)
	}

	// config/manager sets the image the kustomize folder deploys; Tilt swaps its build in by name.
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

	// The manager as the Tiltfile builds it takes every argument Tilt gives it:
	// pflag fails on an unknown flag or a bad value before it reaches --help
	// (exit 2); with every argument accepted, --help exits 0.
	bin := tiltManager(t, p)
	settings := documentedTiltSettings(t)
	objs := tiltComponents(t, p, settings.KustomizeSubstitutions)
	debug := settings.Debug[providerName]
	for name, d := range map[string]*tiltDebug{"without debug": nil, "with the documented debug": &debug} {
		_, args := tiltPrepare(t, objs, d, settings.ExtraArgs[providerName])
		if _, err := runErr(t.TempDir(), nil, bin, append(args, "--help")...); err != nil {
			t.Errorf("%s, the manager refuses the arguments Tilt passes it: %v", name, err)
		}
	}
}

var (
	tiltManagerOnce sync.Once
	tiltManagerBin  string
	tiltManagerErr  error
)

// tiltManager builds the manager once with the command the Tiltfile runs
// (build_go_binary, no race detector, no debugger), into a temporary folder:
//
//	cd <context>; CGO_ENABLED=0 GOOS=linux GOARCH=<arch> go build -gcflags '' -ldflags '-extldflags "-static"' -o .tiltbuild/bin/manager <go_main>
func tiltManager(t *testing.T, p tiltProvider) string {
	t.Helper()
	testenv.SkipIfShort(t, "builds the manager as Tilt does")
	if runtime.GOOS != "linux" {
		t.Skip("the Tiltfile builds for GOOS=linux; the binary runs on Linux only")
	}
	tiltManagerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "capo-sharednet-tilt-")
		if err != nil {
			tiltManagerErr = err
			return
		}
		tiltManagerBin = filepath.Join(dir, "manager")
		_, tiltManagerErr = runErr(p.tiltContext(), []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH},
			"go", "build", "-gcflags", "", "-ldflags", `-extldflags "-static"`, "-o", tiltManagerBin, p.goMain())
	})
	if tiltManagerErr != nil {
		t.Fatalf("the Tiltfile's build of the manager: %v", tiltManagerErr)
	}
	return tiltManagerBin
}

// kustomizeBin is the kustomize the Makefile installs (bin/tools/kustomize-v5.7.0),
// installed with make when it is not there.
func kustomizeBin(t *testing.T) string {
	t.Helper()
	bin := path("bin", "tools", "kustomize-v5.7.0")
	if _, err := os.Stat(bin); err != nil {
		testenv.SkipIfShort(t, "installs kustomize")
		run(t, repoRoot, nil, "make", bin)
	}
	return bin
}

// kustomizeBuild is `kustomize build` of a folder of this repository.
func kustomizeBuild(t *testing.T, options []string, folder string) []byte {
	t.Helper()
	args := append(append([]string{"build"}, options...), path(filepath.FromSlash(folder)))
	return run(t, repoRoot, nil, kustomizeBin(t), args...)
}

// tiltComponents is the kustomize output tilt-prepare deploys, its variables
// substituted from the given kustomize_substitutions (else their defaults),
// as objects.
func tiltComponents(t *testing.T, p tiltProvider, substitutions map[string]string) []unstructured.Unstructured {
	t.Helper()
	return substituted(t, kustomizeBuild(t, p.Config.KustomizeOptions, p.kustomizeFolder()), substitutions)
}

func substituted(t *testing.T, raw []byte, substitutions map[string]string) []unstructured.Unstructured {
	t.Helper()
	out, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if v, ok := substitutions[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("%s not set", name)
	})
	if err != nil {
		t.Fatalf("substituting the kustomize output: %v", err)
	}
	objs, err := utilyaml.ToUnstructured(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// tiltPrepare returns the command and arguments of the manager container after
// CAPI v1.12's tilt-prepare (prepareWorkload) rewrote the provider's
// Deployment, given the provider's debug entry (nil: none) and extra_args. It
// fails the test where tilt-prepare would silently do nothing: no Deployment
// with the provider label, no container named manager.
func tiltPrepare(t *testing.T, objs []unstructured.Unstructured, debug *tiltDebug, extraArgs []string) ([]string, []string) {
	t.Helper()
	var found []corev1.Container
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		if _, ok := o.GetLabels()[clusterv1.ProviderNameLabel]; !ok {
			continue
		}
		var d appsv1.Deployment
		convert(t, o, &d)
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				found = append(found, c)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d containers named manager in Deployments labelled %s; tilt-prepare rewrites that container, the Tiltfile live-updates /manager in it", len(found), clusterv1.ProviderNameLabel)
	}
	container := found[0]
	cmd := []string{"sh", "/start.sh", "/manager"} // live_reload_deps are set
	args := append(slices.Clone(container.Args), extraArgs...)
	if debug != nil {
		cmd = []string{"sh", "/start.sh", "/dlv", "--accept-multiclient", "--api-version=2", "--headless=true", "exec"}
		if debug.Port > 0 {
			cmd = append(cmd, "--listen=:"+tiltDelvePort)
		}
		if debug.Continue == nil || *debug.Continue {
			cmd = append(cmd, "--continue")
		}
		cmd = append(cmd, "--", "/manager")
		if debug.ProfilerPort > 0 {
			args = append(args, "--profiler-address=:"+tiltProfilerPort)
		}
		for i, a := range args {
			if a == "--leader-elect" || a == "--leader-elect=true" {
				args[i] = "--leader-elect=false"
			}
		}
	}
	return cmd, args
}

// TestTiltComponents builds what Tilt deploys and checks it against
// config/default, what clusterctl installs: the kustomize folder is
// config/default without the ExtensionConfigs, and the additional resources
// bring back exactly those ExtensionConfigs (CA injection annotation included),
// so that it is applied with the manager, after CAPI, and never twice.
func TestTiltComponents(t *testing.T) {
	p := readTiltProvider(t)
	settings := documentedTiltSettings(t)
	tilt := tiltComponents(t, p, settings.KustomizeSubstitutions)
	released := substituted(t, kustomizeBuild(t, nil, "config/default"), settings.KustomizeSubstitutions)

	key := func(o unstructured.Unstructured) string {
		return o.GetAPIVersion() + " " + o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	var want, extensionConfigs []unstructured.Unstructured
	for _, o := range released {
		if o.GetKind() == "ExtensionConfig" {
			extensionConfigs = append(extensionConfigs, o)
			continue
		}
		want = append(want, o)
	}
	if len(extensionConfigs) != 2 {
		t.Fatalf("config/default holds %d ExtensionConfigs, want 2 (the topology handlers and the deletion hook; clusterctl users get them from the components)", len(extensionConfigs))
	}
	if len(tilt) != len(want) {
		var keys []string
		for _, o := range tilt {
			keys = append(keys, key(o))
		}
		t.Errorf("%s renders %d objects, config/default without its ExtensionConfigs %d: %q", p.kustomizeFolder(), len(tilt), len(want), keys)
	}
	byKey := map[string]unstructured.Unstructured{}
	for _, o := range tilt {
		byKey[key(o)] = o
	}
	for _, o := range want {
		got, ok := byKey[key(o)]
		if !ok {
			t.Errorf("%s lacks %s of config/default", p.kustomizeFolder(), key(o))
		} else if !reflect.DeepEqual(got.Object, o.Object) {
			t.Errorf("%s: %s differs from config/default's", p.kustomizeFolder(), key(o))
		}
	}

	// The additional resources: plain YAML, applied as they are.
	var additional []unstructured.Unstructured
	for _, rel := range p.Config.AdditionalResources {
		data := mustRead(t, filepath.Join(p.tiltContext(), filepath.FromSlash(rel)))
		if bytes.Contains(data, []byte("${")) {
			t.Errorf("%s holds a ${...} placeholder; Tilt applies additional resources without substitution", rel)
		}
		objs, err := utilyaml.ToUnstructured(data)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, o := range objs {
			if _, dup := byKey[key(o)]; dup {
				t.Errorf("%s: %s is also in the kustomize output: Tilt would apply it twice, once before CAPI", rel, key(o))
			}
		}
		additional = append(additional, objs...)
	}
	var ecs []unstructured.Unstructured
	for _, o := range additional {
		if o.GetKind() == "ExtensionConfig" {
			ecs = append(ecs, o)
		}
	}
	if len(ecs) != len(extensionConfigs) {
		t.Fatalf("the additional resources hold %d ExtensionConfigs, config/default %d", len(ecs), len(extensionConfigs))
	}
	for i := range ecs {
		if !reflect.DeepEqual(ecs[i].Object, extensionConfigs[i].Object) {
			a, _ := yaml.Marshal(ecs[i].Object)
			b, _ := yaml.Marshal(extensionConfigs[i].Object)
			t.Errorf("the ExtensionConfig Tilt applies:\n%s\ndiffers from config/default's:\n%s", a, b)
		}
	}

	// tilt-prepare names the clusterctl Provider from the Namespace's label.
	var nsLabels []string
	for _, o := range tilt {
		if o.GetKind() == "Namespace" {
			nsLabels = append(nsLabels, o.GetLabels()[clusterv1.ProviderNameLabel])
		}
	}
	if len(nsLabels) == 0 || nsLabels[0] != providerLabel {
		t.Errorf("Namespaces' provider labels %q: tilt-prepare makes the clusterctl Provider from the first, want %s", nsLabels, providerLabel)
	}

	// Debug as docs/tilt.md sets it: delve, the profiler, leader election off.
	debug, ok := settings.Debug[providerName]
	if !ok || debug.Port == 0 || debug.ProfilerPort == 0 || debug.MetricsPort == 0 {
		t.Fatalf("docs/tilt.md debug.%s %+v: the example sets port, profiler_port and metrics_port", providerName, debug)
	}
	cmd, args := tiltPrepare(t, tilt, &debug, settings.ExtraArgs[providerName])
	if !slices.Contains(cmd, "--listen=:"+tiltDelvePort) {
		t.Errorf("debug command %q does not run delve on :%s", cmd, tiltDelvePort)
	}
	if !slices.Contains(args, "--leader-elect=false") || slices.Contains(args, "--leader-elect") {
		t.Errorf("debug args %q: tilt-prepare turns exactly --leader-elect into --leader-elect=false; the Deployment must pass it so", args)
	}
	if got := lastFlag(args, "--profiler-address"); got != ":"+tiltProfilerPort {
		t.Errorf("debug args %q: --profiler-address %q, the Tiltfile forwards profiler_port to %s", args, got, tiltProfilerPort)
	}
	// metrics_port forwards container port 8080 over plain HTTP (link http://localhost:<port>/metrics).
	if got := lastFlag(args, "--diagnostics-address"); got != ":"+tiltMetricsPort {
		t.Errorf("with docs/tilt.md's settings the diagnostics address is %q; the Tiltfile forwards metrics_port to %s", got, tiltMetricsPort)
	}
	if got := lastFlag(args, "--insecure-diagnostics"); got != "true" {
		t.Errorf("with docs/tilt.md's settings --insecure-diagnostics=%q; the Tiltfile's metrics link is plain HTTP", got)
	}
}

// lastFlag is the value of the last --name=value in args (the one pflag keeps).
func lastFlag(args []string, name string) string {
	v := ""
	for _, a := range args {
		if rest, ok := strings.CutPrefix(a, name+"="); ok {
			v = rest
		}
	}
	return v
}

// TestTiltDebugManager runs the manager Tilt builds with the arguments Tilt's
// debug mode gives it (docs/tilt.md's settings) against a real API server and
// fetches what the Tilt UI links to: the profiler (profiler_port) and the
// metrics (metrics_port). Delve itself is not run. The ports are moved to free
// ports of 127.0.0.1 (TestTiltComponents checks the ports Tilt forwards to);
// --namespace and --watch-filter confine the controllers to nothing, so the
// run leaves the shared API server as it was.
func TestTiltDebugManager(t *testing.T) {
	testenv.SkipIfShort(t, "builds the manager and starts a kube-apiserver")
	p := readTiltProvider(t)
	settings := documentedTiltSettings(t)
	debug := settings.Debug[providerName]
	objs := tiltComponents(t, p, settings.KustomizeSubstitutions)
	_, args := tiltPrepare(t, objs, &debug, settings.ExtraArgs[providerName])
	bin := tiltManager(t, p)
	e := environment(t)
	ctx := context.Background()

	for i := range objs {
		if k := objs[i].GetKind(); k == "Namespace" || k == "CustomResourceDefinition" {
			apply(t, ctx, e.Client, objs[i].DeepCopy())
		}
	}
	profiler, diagnostics := strconv.Itoa(loopback.Port(t)), strconv.Itoa(loopback.Port(t))
	moved := map[string]string{
		"--profiler-address":    "127.0.0.1:" + profiler,
		"--diagnostics-address": "127.0.0.1:" + diagnostics,
		"--health-addr":         "127.0.0.1:" + strconv.Itoa(loopback.Port(t)),
		"--webhook-port":        strconv.Itoa(loopback.Port(t)),
		"--webhook-cert-dir":    e.CertDir,
	}
	for i, a := range args {
		if name, _, ok := strings.Cut(a, "="); ok {
			if v, ok := moved[name]; ok {
				args[i] = name + "=" + v
			}
		}
	}
	args = append(args, "--namespace=capo-sharednet-tilt-test", "--watch-filter=capo-sharednet-tilt-test")

	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig, "POD_NAMESPACE=capo-sharednet-system", "POD_NAME=capo-sharednet-tilt-test")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited //nolint:errcheck // killed: its exit status says nothing
	})

	get := func(url string) (int, string, error) {
		select {
		case err := <-exited:
			exited <- err
			return 0, "", fmt.Errorf("the manager exited (%v):\n%s", err, out.String())
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	for _, c := range []struct{ what, url, want string }{
		// The Tiltfile's links, with the forwarded port.
		{"profiler", "http://127.0.0.1:" + profiler + "/debug/pprof", "goroutine"},
		{"metrics", "http://127.0.0.1:" + diagnostics + "/metrics", "controller_runtime"},
	} {
		var last string
		deadline := time.Now().Add(90 * time.Second)
		for {
			code, body, err := get(c.url)
			if err == nil && code == http.StatusOK && strings.Contains(body, c.want) {
				break
			}
			last = fmt.Sprintf("status %d, error %v", code, err)
			if err != nil && strings.Contains(err.Error(), "the manager exited") {
				t.Fatalf("%s: %v", c.what, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s at %s: no 200 with %q after 90s (last: %s); manager output:\n%s", c.what, c.url, c.want, last, out.String())
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// TestTiltDelve checks that the delve tilt-provider.yaml installs into Tilt's
// image debugs what the Tiltfile builds: a manager built by the local go
// (here, the go running this test), at least go.mod's go version. delve
// refuses to exec a binary of a Go outside its range.
func TestTiltDelve(t *testing.T) {
	testenv.SkipIfShort(t, "downloads delve's module")
	p := readTiltProvider(t)
	m := regexp.MustCompile(`go install github\.com/go-delve/delve/cmd/dlv@(v[0-9.]+)`).FindStringSubmatch(p.Config.AdditionalDockerHelperCommands)
	if m == nil {
		t.Fatalf("additional_docker_helper_commands %q installs no pinned dlv; CAPI v1.12's own dlv v1.25 refuses Go 1.26 binaries", p.Config.AdditionalDockerHelperCommands)
	}
	compat := string(mustRead(t, filepath.Join(moduleDir(t, "github.com/go-delve/delve", m[1]), "pkg", "goversion", "compat.go")))
	constant := func(name string) int {
		c := regexp.MustCompile(name + `\s*=\s*([0-9]+)`).FindStringSubmatch(compat)
		if c == nil {
			t.Fatalf("delve %s: no %s in pkg/goversion/compat.go", m[1], name)
		}
		n, _ := strconv.Atoi(c[1])
		return n
	}
	minMinor, maxMinor := constant("MinSupportedVersionOfGoMinor"), constant("MaxSupportedVersionOfGoMinor")
	minor := func(v string) int {
		c := regexp.MustCompile(`^(?:go)?1\.([0-9]+)`).FindStringSubmatch(v)
		if c == nil {
			t.Fatalf("cannot read the Go version %q", v)
		}
		n, _ := strconv.Atoi(c[1])
		return n
	}
	local := strings.TrimSpace(string(run(t, repoRoot, nil, "go", "env", "GOVERSION")))
	var mod struct {
		Go string `json:"Go"`
	}
	if err := json.Unmarshal(run(t, repoRoot, nil, "go", "mod", "edit", "-json"), &mod); err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]string{"the local go": local, "go.mod's go": mod.Go} {
		if n := minor(v); n < minMinor || n > maxMinor {
			t.Errorf("%s is %s; dlv %s debugs Go 1.%d to 1.%d", what, v, m[1], minMinor, maxMinor)
		}
	}
}

// clusterctlSettings is the clusterctl-settings.json of a provider repository,
// as CAPI's cmd/clusterctl/hack/create-local-repository.py reads it.
type clusterctlSettings struct {
	Name   string `json:"name"`
	Config struct {
		ComponentsFile string `json:"componentsFile"`
		NextVersion    string `json:"nextVersion"`
		Type           string `json:"type"`
		ConfigFolder   string `json:"configFolder"`
	} `json:"config"`
}

func readClusterctlSettings(t *testing.T) clusterctlSettings {
	t.Helper()
	var s clusterctlSettings
	d := json.NewDecoder(bytes.NewReader(mustRead(t, path("clusterctl-settings.json"))))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		t.Fatalf("clusterctl-settings.json: %v", err)
	}
	return s
}

// inReleaseSeries reports whether metadata.yaml has the release series of a version.
func inReleaseSeries(t *testing.T, version string) bool {
	t.Helper()
	m := regexp.MustCompile(`^v([0-9]+)\.([0-9]+)\.[0-9]+`).FindStringSubmatch(version)
	if m == nil {
		return false
	}
	var md struct {
		ReleaseSeries []struct {
			Major int `json:"major"`
			Minor int `json:"minor"`
		} `json:"releaseSeries"`
	}
	if err := yaml.Unmarshal(mustRead(t, path("metadata.yaml")), &md); err != nil {
		t.Fatal(err)
	}
	for _, s := range md.ReleaseSeries {
		if strconv.Itoa(s.Major) == m[1] && strconv.Itoa(s.Minor) == m[2] {
			return true
		}
	}
	return false
}

// TestClusterctlSettings checks clusterctl-settings.json against what CAPI's
// create-local-repository.py does with it, then runs that script (from the
// CAPI module of go.mod) in a stand-in CAPI checkout and installs the result
// with clusterctl: `clusterctl generate provider --runtime-extension
// capo-sharednet:<nextVersion>` from the local repository it wrote.
func TestClusterctlSettings(t *testing.T) {
	s := readClusterctlSettings(t)
	// The script derives the provider's name and type from the label-style name.
	if s.Name != providerLabel {
		t.Errorf("name %q: the script reads <type prefix>-<name>; want %s (provider %s, RuntimeExtensionProvider)", s.Name, providerLabel, providerName)
	}
	if s.Config.Type != "RuntimeExtensionProvider" {
		t.Errorf("type %q, want RuntimeExtensionProvider", s.Config.Type)
	}
	// The file name a release publishes (hack/release-manifests.sh); clusterctl looks it up by name.
	if s.Config.ComponentsFile != "runtime-extension-components.yaml" || !bytes.Contains(mustRead(t, path("hack", "release-manifests.sh")), []byte(`"$out/`+s.Config.ComponentsFile+`"`)) {
		t.Errorf("componentsFile %q is not the file hack/release-manifests.sh writes", s.Config.ComponentsFile)
	}
	if !inReleaseSeries(t, s.Config.NextVersion) {
		t.Errorf("nextVersion %q is in no release series of metadata.yaml: clusterctl refuses it", s.Config.NextVersion)
	}
	folder := s.Config.ConfigFolder
	if folder == "" {
		folder = "config/default"
	}
	if _, err := os.Stat(path(filepath.FromSlash(folder), "kustomization.yaml")); err != nil {
		t.Errorf("configFolder %s has no kustomization.yaml", folder)
	}
	if t.Failed() {
		return
	}

	testenv.SkipIfShort(t, "builds clusterctl and runs CAPI's create-local-repository.py")
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to run create-local-repository.py")
	}
	if _, err := runErr(repoRoot, nil, "python3", "-c", "import distutils.dir_util"); err != nil {
		t.Skip("python3 has no distutils (removed in Python 3.12), which create-local-repository.py imports")
	}
	capiVersion := moduleVersion(t, "sigs.k8s.io/cluster-api")
	script := filepath.Join(moduleDir(t, "sigs.k8s.io/cluster-api", capiVersion), "cmd", "clusterctl", "hack", "create-local-repository.py")
	bin := clusterctl(t)

	// A stand-in for the cluster-api checkout the script runs in: its
	// clusterctl-settings.json, and the kustomize it calls.
	capi, home := t.TempDir(), t.TempDir()
	settings := fmt.Sprintf(`{"providers": [%q], "provider_repos": [%q]}`, s.Name, repoRoot)
	if err := os.WriteFile(filepath.Join(capi, "clusterctl-settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(capi, "hack", "tools", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(kustomizeBin(t), filepath.Join(capi, "hack", "tools", "bin", "kustomize")); err != nil {
		t.Fatal(err)
	}
	env := clusterctlEnv(t, home)
	printed := string(run(t, capi, env, "python3", script))
	if want := "--runtime-extension " + providerName + ":" + s.Config.NextVersion; !strings.Contains(printed, want) {
		t.Errorf("create-local-repository.py prints no %q:\n%s", want, printed)
	}
	config := filepath.Join(home, ".config", "cluster-api", "dev-repository", "config.yaml")
	out := run(t, home, env, bin, "generate", "provider", "--config", config,
		"--runtime-extension", providerName+":"+s.Config.NextVersion)
	objs, err := utilyaml.ToUnstructured(out)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	if kinds["ExtensionConfig"] != 2 || kinds["Deployment"] != 1 {
		t.Errorf("the local repository's components hold %v; want the two ExtensionConfigs and the Deployment", kinds)
	}
}

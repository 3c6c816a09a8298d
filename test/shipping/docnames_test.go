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
	"flag"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"sigs.k8s.io/cluster-api/util/flags"

	"github.com/capo-sharednet/capo-sharednet/hack/tools/reference-docs/gosource"
	"github.com/capo-sharednet/capo-sharednet/internal/feature"
	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// userDocs are the pages a user or an administrator reads.
func userDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(path("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, path("README.md"), path("e2e", "README.md"))
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[relPath(f)] = string(b)
	}
	return out
}

var (
	fence    = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
)

// code is what a page shows as code: its inline spans and the lines of its
// fenced blocks.
func code(page string) []string {
	var out []string
	for _, m := range fence.FindAllStringSubmatch(page, -1) {
		out = append(out, strings.Split(m[1], "\n")...)
	}
	for _, m := range codeSpan.FindAllStringSubmatch(fence.ReplaceAllString(page, ""), -1) {
		out = append(out, m[1])
	}
	return out
}

// makeTargets are the targets of the Makefile at file.
func makeTargets(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+):`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

// managerFlags are the manager's flags: main.go's own (pflag calls with a
// literal name) and those it takes from CAPI, component-base and klog.
func managerFlags(t *testing.T) map[string]bool {
	t.Helper()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	flags.AddManagerOptions(fs, &flags.ManagerOptions{})
	feature.MutableGates.AddFlag(fs)
	logsv1.AddFlags(logs.NewOptions(), fs)
	goFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
	out := map[string]bool{"kubeconfig": true} // controller-runtime's, on the Go flag set main adds
	fs.VisitAll(func(f *pflag.Flag) { out[f.Name] = true })
	files, err := gosource.ParseDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		ast.Inspect(f.File, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !strings.HasPrefix(gosource.SelectorName(call.Fun), "pflag.") {
				return true
			}
			for _, arg := range call.Args {
				if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					name, _ := strconv.Unquote(lit.Value)
					out[name] = true
					break
				}
			}
			return true
		})
	}
	if !out["deletion-hook-port"] || !out["diagnostics-address"] || !out["v"] {
		t.Fatalf("the manager's flags were not all found: %v", out)
	}
	return out
}

// apiNames are the string constants of the extension's API (its condition
// types and reasons among them) and of CAPI's core and runtime APIs.
func apiNames(t *testing.T) map[string]bool {
	t.Helper()
	capi, err := providers.ModuleDir(repoRoot, providers.CAPIModule)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, dir := range []string{path("api", "v1alpha1"), filepath.Join(capi, "api", "core", "v1beta2"), filepath.Join(capi, "api", "runtime", "v1beta2")} {
		files, err := gosource.ParseDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			ast.Inspect(f.File, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					out[s] = true
				}
				return true
			})
		}
	}
	return out
}

// crdFields are the spec and status paths of the extension's CRDs and of
// CAPI's, CAPO's and the Gateway API's (`spec.a.b`, arrays without their brackets); a map or an
// object of unknown fields adds `path.*`.
func crdFields(t *testing.T) map[string]bool {
	t.Helper()
	var crds []*apiextensionsv1.CustomResourceDefinition
	ours, err := filepath.Glob(path("config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ours {
		c, err := providers.ReadCRDs(f)
		if err != nil {
			t.Fatal(err)
		}
		crds = append(crds, c...)
	}
	gateway, err := providers.GatewayAPICRDs() // the Gateway the guardrails judge
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gateway {
		c, err := providers.ReadCRDs(f)
		if err != nil {
			t.Fatal(err)
		}
		crds = append(crds, c...)
	}
	for _, p := range []providers.Provider{providers.CAPI, providers.CABPK, providers.KCP, providers.CAPO} {
		dir, err := providers.ModuleDir(repoRoot, p.Module)
		if err != nil {
			t.Fatal(err)
		}
		m, err := providers.Load(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		crds = append(crds, m.CRDs...)
	}
	out := map[string]bool{}
	var walk func(prefix string, s apiextensionsv1.JSONSchemaProps)
	walk = func(prefix string, s apiextensionsv1.JSONSchemaProps) {
		out[prefix] = true
		if s.Items != nil && s.Items.Schema != nil {
			walk(prefix, *s.Items.Schema)
		}
		if s.AdditionalProperties != nil || (s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields) {
			out[prefix+".*"] = true
		}
		for name, p := range s.Properties {
			walk(prefix+"."+name, p)
		}
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			for _, top := range []string{"spec", "status"} {
				if s, ok := v.Schema.OpenAPIV3Schema.Properties[top]; ok {
					walk(top, s)
				}
			}
		}
	}
	return out
}

// known says whether fields has path or a map above it.
func known(fields map[string]bool, path string) bool {
	if fields[path] {
		return true
	}
	for i := strings.LastIndexByte(path, '.'); i > 0; i = strings.LastIndexByte(path[:i], '.') {
		if fields[path[:i]+".*"] {
			return true
		}
	}
	return false
}

var (
	makeCommand = regexp.MustCompile(`(?:^|[\s;&|(])make((?:\s+[A-Z_]+=\S+)*)((?:\s+[a-z][a-z0-9-]*)+)`)
	aFlag       = regexp.MustCompile(`^--([a-z][a-z0-9-]*)(?:[= ].*)?$`)
	aField      = regexp.MustCompile(`^(?:spec|status)(?:\.[a-zA-Z][a-zA-Z0-9]*(?:\[[^\]]*\])?)+$`)
	aMetric     = regexp.MustCompile(`\bcapo_sharednet_[a-z_]+[a-z]`)
	anIndex     = regexp.MustCompile(`\[[^\]]*\]`) // status.subnets[].cidr names status.subnets.cidr
	// "condition `X`", "reason `X`", "`X` condition", "reason: `X`".
	aCondition = regexp.MustCompile("(?:condition|reason)s?:? `([A-Z][A-Za-z]+)`|`([A-Z][A-Za-z]+)` (?:condition|reason)")
)

// TestTheDocsNameOnlyWhatExists: every make target, manager flag, field,
// condition, reason and metric the user docs name in code exists, so a
// rename in the code breaks this test, not the reader's command.
func TestTheDocsNameOnlyWhatExists(t *testing.T) {
	capi, err := providers.ModuleDir(repoRoot, providers.CAPIModule)
	if err != nil {
		t.Fatal(err)
	}
	// The Tilt guide runs CAPI's own targets in a cluster-api checkout.
	targets, capiTargets := makeTargets(t, path("Makefile")), makeTargets(t, filepath.Join(capi, "Makefile"))
	flagNames, names, fields, metrics := managerFlags(t), apiNames(t), crdFields(t), registeredMetrics(t)
	// A span that is only a flag names the manager's, but for these, of the
	// tools the docs explain (clusterctl, the CCM, kubelet, CAPI's and
	// kube-controller-manager's, the openstack client, kubectl).
	for _, other := range []string{
		"infrastructure", "from", "flavor", "kubernetes-version", "control-plane-machine-count", "worker-machine-count",
		"target-namespace", "list-variables", "include-crd", "cluster-name", "cloud-provider", "node-labels",
		"additional-sync-machine-labels", "use-service-account-credentials", "subnet-range", "host-route", "protocol", "from-file",
	} {
		if flagNames[other] {
			t.Errorf("--%s is the manager's now: take it off the list of other tools' flags", other)
		}
		flagNames[other] = true
	}
	var missing []string
	for doc, page := range userDocs(t) {
		for _, c := range code(page) {
			c = strings.TrimSpace(c)
			for _, m := range makeCommand.FindAllStringSubmatch(c, -1) {
				for _, target := range strings.Fields(m[2]) {
					capisOwn := doc == "docs/tilt.md" && capiTargets[target]
					if !targets[target] && !capisOwn {
						missing = append(missing, doc+": make target "+target+" (in `"+c+"`)")
					}
					break // the rest are its arguments' words, if any
				}
			}
			if m := aFlag.FindStringSubmatch(c); len(m) > 1 && !flagNames[m[1]] {
				missing = append(missing, doc+": manager flag --"+m[1])
			}
			if aField.MatchString(c) {
				path := anIndex.ReplaceAllString(c, "")
				if !known(fields, path) {
					missing = append(missing, doc+": field "+c)
				}
			}
		}
		for _, m := range aMetric.FindAllString(page, -1) {
			name := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if _, ok := metrics[name]; !ok {
					name = strings.TrimSuffix(name, suffix)
				}
			}
			if _, ok := metrics[name]; !ok {
				missing = append(missing, doc+": metric "+m)
			}
		}
		for _, m := range aCondition.FindAllStringSubmatch(page, -1) {
			if name := m[1] + m[2]; !names[name] {
				missing = append(missing, doc+": condition or reason "+name)
			}
		}
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	for _, m := range missing {
		t.Errorf("%s does not exist; rename it in the doc or restore it in the code", m)
	}
}

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
	"go/ast"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/capo-sharednet/capo-sharednet/hack/tools/reference-docs/gosource"
)

// registeredMetrics reads the metrics the shipped code creates
// (prometheus.New*(…Opts{Name: "…"}, []string{labels…})), name to labels:
// every Go package of the repository but the tests, tools and e2e suite.
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	skip := map[string]bool{".git": true, "test": true, "hack": true, "e2e": true, "bin": true, "_artifacts": true, "vendor": true}
	out := map[string][]string{}
	err := filepath.WalkDir(repoRoot, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if rel := relPath(dir); skip[strings.Split(rel, string(filepath.Separator))[0]] {
			return filepath.SkipDir
		}
		files, err := gosource.ParseDir(dir)
		if err != nil {
			return err
		}
		for _, f := range files {
			ast.Inspect(f.File, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !strings.HasPrefix(gosource.SelectorName(call.Fun), "prometheus.New") || len(call.Args) == 0 {
					return true
				}
				opts, ok := call.Args[0].(*ast.CompositeLit)
				if !ok {
					return true
				}
				name := ""
				for _, e := range opts.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Name" {
							if lit, ok := kv.Value.(*ast.BasicLit); ok {
								name, _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
				if name == "" {
					t.Errorf("%s: a metric whose name is not a string literal: write it as one, so the docs and this test can read it", relPath(f.Name))
					return true
				}
				labels := []string{}
				if len(call.Args) > 1 {
					if cl, ok := call.Args[1].(*ast.CompositeLit); ok {
						for _, e := range cl.Elts {
							if lit, ok := e.(*ast.BasicLit); ok {
								s, _ := strconv.Unquote(lit.Value)
								labels = append(labels, s)
							}
						}
					}
				}
				out[name] = labels
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("found no metric in the code: has the way metrics are made changed?")
	}
	return out
}

// prometheusRule is the part of monitoring.coreos.com/v1 PrometheusRule the
// example uses; an unknown field is an error (a typo Prometheus would drop).
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert       string            `json:"alert,omitempty"`
				Record      string            `json:"record,omitempty"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels,omitempty"`
				Annotations map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promMatchers = regexp.MustCompile(`\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "atan2": true}
	templateLabel = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// promNames splits a PromQL expression into the metric names it selects and
// the label names it matches, groups or joins on. Function names (an
// identifier before "("), keywords, strings, ranges and numbers are not
// metric names.
func promNames(expr string) (metrics, labels []string) {
	expr = promString.ReplaceAllString(expr, `""`)
	expr = promRange.ReplaceAllString(expr, "")
	for _, m := range promMatchers.FindAllStringSubmatch(expr, -1) {
		for _, l := range promMatcher.FindAllStringSubmatch(m[1], -1) {
			labels = append(labels, l[1])
		}
	}
	expr = promMatchers.ReplaceAllString(expr, " ")
	for _, m := range promGrouping.FindAllStringSubmatch(expr, -1) {
		labels = append(labels, promIdent.FindAllString(m[1], -1)...)
	}
	expr = promGrouping.ReplaceAllString(expr, " ")
	for _, loc := range promIdent.FindAllStringIndex(expr, -1) {
		word := expr[loc[0]:loc[1]]
		if promKeywords[strings.ToLower(word)] || loc[0] > 0 && (expr[loc[0]-1] >= '0' && expr[loc[0]-1] <= '9' || expr[loc[0]-1] == '.') {
			continue // a keyword, or the exponent or unit of a number (1e3, 5m)
		}
		if strings.HasPrefix(strings.TrimLeft(expr[loc[1]:], " \t\n"), "(") {
			continue // a function
		}
		metrics = append(metrics, word)
	}
	return metrics, labels
}

func TestPromNamesReadsMetricNamesOnly(t *testing.T) {
	metrics, labels := promNames(`sum by (subnet) (rate(a_total{job="x", le=~"1.*"}[5m])) / on(subnet) group_left b > 1e3 and c offset 5m`)
	if !slices.Equal(metrics, []string{"a_total", "b", "c"}) || !slices.Equal(labels, []string{"job", "le", "subnet", "subnet"}) {
		t.Errorf("metrics %q, labels %q", metrics, labels)
	}
}

// TestThePrometheusRuleAlertsOnMetricsTheCodeRegisters: the example
// PrometheusRule (docs/examples/prometheusrule.yaml, quoted in
// docs/monitoring.md) is a valid PrometheusRule whose every expression
// selects only metrics the code makes, by labels they have; renaming a
// metric or a label breaks this test. docs/monitoring.md describes every
// metric the code makes.
func TestThePrometheusRuleAlertsOnMetricsTheCodeRegisters(t *testing.T) {
	registered := registeredMetrics(t)
	file := mustRead(t, path("docs", "examples", "prometheusrule.yaml"))
	rule := &prometheusRule{}
	if err := yaml.UnmarshalStrict(file, rule); err != nil {
		t.Fatalf("docs/examples/prometheusrule.yaml: %v", err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" || rule.Metadata.Name == "" {
		t.Errorf("docs/examples/prometheusrule.yaml is a %s %s named %q, want a monitoring.coreos.com/v1 PrometheusRule with a name", rule.APIVersion, rule.Kind, rule.Metadata.Name)
	}
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			what := r.Alert + r.Record
			if (r.Alert == "") == (r.Record == "") || r.Expr == "" {
				t.Errorf("group %s: a rule needs an expr and exactly one of alert and record: %+v", g.Name, r)
				continue
			}
			alerts++
			metrics, labels := promNames(r.Expr)
			if len(metrics) == 0 {
				t.Errorf("%s: expression %q selects no metric", what, r.Expr)
			}
			known := map[string]bool{}
			for _, m := range metrics {
				ls, ok := registered[m]
				if !ok {
					t.Errorf("%s: expression %q uses metric %s, which the code does not make (it makes %s)", what, r.Expr, m, strings.Join(slices.Sorted(maps.Keys(registered)), ", "))
				}
				for _, l := range ls {
					known[l] = true
				}
			}
			for _, a := range r.Annotations {
				for _, m := range templateLabel.FindAllStringSubmatch(a, -1) {
					labels = append(labels, m[1])
				}
			}
			for _, l := range labels {
				if !known[l] {
					t.Errorf("%s: label %s is not a label of the metrics %q selects", what, l, r.Expr)
				}
			}
		}
	}
	if alerts < 2 {
		t.Errorf("docs/examples/prometheusrule.yaml has %d alerts, want at least the subnet that cannot fit its nodegroups and the free addresses low", alerts)
	}

	doc := string(mustRead(t, path("docs", "monitoring.md")))
	if !strings.Contains(doc, string(file)) {
		t.Error("docs/monitoring.md does not quote docs/examples/prometheusrule.yaml as it is: copy the file into its yaml block")
	}
	for name := range registered {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/monitoring.md does not describe metric `%s`", name)
		}
	}
}

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
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/capo-sharednet/capo-sharednet/hack/tools/reference-docs/gosource"
)

// refusal is one message a user can get, as written in the code.
type refusal struct {
	format, where string
}

// refusals collects the messages of the rules, the admission webhook, and the
// preflight and hook errors a user acts on (those that say nothing was
// changed, or name a missing object or the whole cluster).
func refusals(t *testing.T) ([]refusal, []string) {
	t.Helper()
	userFacing := regexp.MustCompile(`nothing was changed|does not exist|whole cluster|cannot be reached`)
	var out []refusal
	var ruleNames []string
	for _, dir := range []string{"rules", "webhooks", "preflight", "hooks"} {
		all := dir == "rules" || dir == "webhooks"
		files, err := gosource.ParseDir(path("internal", dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			ast.Inspect(f.File, func(n ast.Node) bool {
				switch v := n.(type) {
				case *ast.CallExpr:
					if len(v.Args) == 0 {
						return true
					}
					name := gosource.SelectorName(v.Fun)
					if id, ok := v.Fun.(*ast.Ident); ok {
						name = id.Name
					}
					if name != "fail" && name != "fmt.Sprintf" && name != "fmt.Errorf" && name != "errors.New" {
						return true
					}
					if lit, ok := v.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						if all || userFacing.MatchString(s) {
							out = append(out, refusal{s, relPath(f.Name)})
						}
					}
				case *ast.KeyValueExpr:
					key, ok := v.Key.(*ast.Ident)
					lit, isLit := v.Value.(*ast.BasicLit)
					if !ok || !isLit || lit.Kind != token.STRING {
						return true
					}
					s, _ := strconv.Unquote(lit.Value)
					switch key.Name {
					case "Message":
						out = append(out, refusal{s, relPath(f.Name)})
					case "Rule":
						ruleNames = append(ruleNames, s)
					}
				case *ast.ValueSpec:
					for i, id := range v.Names {
						if strings.HasPrefix(id.Name, "Rule") && i < len(v.Values) {
							if lit, ok := v.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								s, _ := strconv.Unquote(lit.Value)
								ruleNames = append(ruleNames, s)
							}
						}
					}
				}
				return true
			})
		}
	}
	return out, ruleNames
}

// literals are the runs of a format between its verbs.
func literals(format string) []string {
	var out []string
	for _, part := range regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`).Split(format, -1) {
		out = append(out, strings.TrimSpace(part))
	}
	return out
}

func relPath(p string) string {
	if r, err := filepath.Rel(repoRoot, p); err == nil {
		return r
	}
	return p
}

// longestLiteral is the longest run of a format between its verbs.
func longestLiteral(format string) string {
	longest := ""
	for _, part := range regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`).Split(format, -1) {
		if len(part) > len(longest) {
			longest = part
		}
	}
	return strings.TrimSpace(longest)
}

// TestTroubleshootingCoversEveryRefusal: every rule has a section and every
// message a user can be refused with is quoted in docs/troubleshooting.md.
func TestTroubleshootingCoversEveryRefusal(t *testing.T) {
	doc := string(mustRead(t, path("docs", "troubleshooting.md")))
	msgs, rules := refusals(t)
	if len(msgs) < 20 || len(rules) < 7 {
		t.Fatalf("found only %d messages and %d rules in the code: has it moved?", len(msgs), len(rules))
	}
	for _, r := range rules {
		if !strings.Contains(doc, "`"+r+":`") {
			t.Errorf("rule %q has no section (`%s:`) in docs/troubleshooting.md", r, r)
		}
	}
	for _, m := range msgs {
		if len(longestLiteral(m.format)) < 20 {
			continue // a fragment such as "%s (VIP %s"
		}
		for _, lit := range literals(m.format) {
			if len(lit) >= 12 && !strings.Contains(doc, lit) {
				t.Errorf("%s: message %q is not quoted in docs/troubleshooting.md (looked for %q)", m.where, m.format, lit)
			}
		}
	}
	// The variable's own CEL messages.
	holder, err := gosource.ReadCRD(path("internal", "variables", "zz_generated.schema.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range holder.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["value"].XValidations {
		for _, part := range strings.Split(v.MessageExpression, "'") {
			if len(part) >= 20 && !strings.Contains(part, "self.") && !strings.Contains(doc, strings.TrimSpace(part)) {
				t.Errorf("schema message %q is not quoted in docs/troubleshooting.md", part)
			}
		}
	}
}

// rbacRule is one (API group, resource, verb) the components grant.
type rbacRule struct{ group, resource, verb string }

// TestRBACIsExplained: docs/rbac.md explains every verb the released
// components grant the manager, row by row, and lists nothing that is not
// granted (a stale row fails too).
func TestRBACIsExplained(t *testing.T) {
	objs, err := utilyaml.ToUnstructured(mustRead(t, release(t)+"/runtime-extension-components.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	granted := map[rbacRule]bool{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			for _, g := range r["apiGroups"].([]any) {
				for _, res := range r["resources"].([]any) {
					for _, v := range r["verbs"].([]any) {
						group := g.(string)
						if group == "" {
							group = "core"
						}
						granted[rbacRule{group, res.(string), v.(string)}] = true
					}
				}
			}
		}
	}
	doc := string(mustRead(t, path("docs", "rbac.md")))
	// Rows: | `group` | `resource` | `verb` | why |
	row := regexp.MustCompile("(?m)^\\| `([^`]*)` \\| `([^`]*)` \\| `([^`]*)` \\|")
	explained := map[rbacRule]bool{}
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		explained[rbacRule{m[1], m[2], m[3]}] = true
	}
	for r := range granted {
		if !explained[r] {
			t.Errorf("the components grant %s %s %q, docs/rbac.md does not say why (add a row: | `%s` | `%s` | `%s` | why |)", r.verb, r.resource, r.group, r.group, r.resource, r.verb)
		}
	}
	for r := range explained {
		if !granted[r] {
			t.Errorf("docs/rbac.md explains %s %s %q, which the components no longer grant: remove the row", r.verb, r.resource, r.group)
		}
	}
}

// TestReleaseDocListsEveryAsset: docs/release.md names every file
// hack/release-manifests.sh writes (its header lists them as <out>/<file>).
func TestReleaseDocListsEveryAsset(t *testing.T) {
	script := string(mustRead(t, path("hack", "release-manifests.sh")))
	doc := string(mustRead(t, path("docs", "release.md")))
	assets := regexp.MustCompile(`<out>/(\S+)`).FindAllStringSubmatch(script, -1)
	if len(assets) < 4 {
		t.Fatalf("found %d assets in hack/release-manifests.sh: has its header moved?", len(assets))
	}
	for _, a := range assets {
		if !strings.Contains(doc, "`"+a[1]+"`") {
			t.Errorf("docs/release.md does not list %s, which hack/release-manifests.sh writes", a[1])
		}
	}
}

// TestCIRunsTheREADMECommand: .ci/run runs exactly the test command the
// README gives users, so what passes in CI is what a user runs.
func TestCIRunsTheREADMECommand(t *testing.T) {
	var command string
	for _, line := range strings.Split(string(mustRead(t, path(".ci", "run"))), "\n") {
		if strings.HasPrefix(line, "make ") {
			command = line
		}
	}
	if command == "" {
		t.Fatal(".ci/run runs no make command")
	}
	readme := string(mustRead(t, path("README.md")))
	start := strings.Index(readme, "```sh")
	if start < 0 {
		t.Fatal("README.md has no sh code block")
	}
	block, _, _ := strings.Cut(readme[start+len("```sh"):], "```")
	for _, line := range strings.Split(block, "\n") {
		if strings.TrimSpace(strings.SplitN(line, "#", 2)[0]) == command {
			return
		}
	}
	t.Errorf(".ci/run runs %q, which is not a command of README.md's first code block:\n%s", command, block)
}

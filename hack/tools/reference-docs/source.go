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

package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/capo-sharednet/capo-sharednet/hack/tools/reference-docs/gosource"
)

// goConsts maps qualifier+"Name" to the value of each string constant of the
// package in dir, and qualifier+"Name@file" to the file declaring it.
func goConsts(dir, qualifier string) (map[string]string, error) {
	files, err := gosource.ParseDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range files {
		for _, d := range f.File.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							v, _ := strconv.Unquote(lit.Value)
							out[qualifier+n.Name] = v
							out[qualifier+n.Name+"@file"] = filepath.Base(f.Name)
						}
					}
				}
			}
		}
	}
	return out, nil
}

type conditionRow struct{ object, condition, status, reason, message, where string }

// conditionsFromSource finds, in controllers/ and exp/, every call that passes
// a literal condition status (metav1.ConditionTrue/False/Unknown) followed by
// a reason and a message, with the condition type before it (setReady's type
// is Ready).
func (r repo) conditionsFromSource(consts map[string]string) ([]conditionRow, error) {
	var rows []conditionRow
	seen := map[string]bool{}
	var dirs []string
	for _, root := range []string{"controllers", "exp"} {
		_ = filepath.WalkDir(r.path(root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	for _, dir := range dirs {
		files, err := gosource.ParseDir(dir)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			rel := r.rel(f.Name)
			for _, d := range f.File.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					for i, arg := range call.Args {
						status := gosource.SelectorName(arg)
						if !strings.HasPrefix(status, "metav1.Condition") || status == "metav1.Condition" || i+2 >= len(call.Args) {
							continue
						}
						condType := ""
						if i > 0 {
							condType = consts[gosource.SelectorName(call.Args[i-1])]
						}
						object := ""
						if condType != "" {
							object = objectOfFile(consts[gosource.SelectorName(call.Args[i-1])+"@file"])
						} else if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "setReady" {
							condType, object = consts["sharednetv1.ReadyCondition"], "SharedNetwork"
						}
						if condType == "" {
							continue
						}
						if strings.HasPrefix(rel, "controllers/sharednetwork_") {
							object = "SharedNetwork" // its controller sets no other object's conditions
						}
						for _, reason := range stringValues(fn, call.Args[i+1], consts) {
							row := conditionRow{
								object: object, condition: condType, status: strings.TrimPrefix(status, "metav1.Condition"),
								reason: reason, message: messageOf(call.Args[i+2]), where: rel + ":" + fn.Name.Name,
							}
							key := row.object + row.condition + row.status + row.reason + row.message
							if !seen[key] {
								seen[key] = true
								rows = append(rows, row)
							}
						}
					}
					return true
				})
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.object != b.object {
			return a.object > b.object // SharedNetwork first
		}
		if a.condition != b.condition {
			return a.condition > b.condition
		}
		return a.status+a.reason > b.status+b.reason
	})
	return rows, nil
}

func objectOfFile(file string) string {
	switch file {
	case "sharednetwork_types.go":
		return "SharedNetwork"
	case "sharednetworkattachment_types.go":
		return "SharedNetworkAttachment"
	}
	return file
}

// stringValues resolves a reason argument: a literal, a constant, or a local
// variable (every string literal assigned to it in the function).
func stringValues(fn *ast.FuncDecl, e ast.Expr, consts map[string]string) []string {
	switch v := e.(type) {
	case *ast.BasicLit:
		s, _ := strconv.Unquote(v.Value)
		return []string{s}
	case *ast.SelectorExpr:
		if s, ok := consts[gosource.SelectorName(v)]; ok {
			return []string{s}
		}
	case *ast.Ident:
		var out []string
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok {
				return true
			}
			for i, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == v.Name && i < len(as.Rhs) {
					if lit, ok := as.Rhs[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						out = append(out, s)
					}
				}
			}
			return true
		})
		return out
	}
	return nil
}

// verbs are the verbs of a Printf format.
var verbs = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)

// messageOf renders a message argument: a literal, a Sprintf format with its
// verbs shown as …, or … for a computed message.
func messageOf(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.BasicLit:
		s, _ := strconv.Unquote(v.Value)
		return s
	case *ast.CallExpr:
		if gosource.SelectorName(v.Fun) == "fmt.Sprintf" && len(v.Args) > 0 {
			if lit, ok := v.Args[0].(*ast.BasicLit); ok {
				s, _ := strconv.Unquote(lit.Value)
				return verbs.ReplaceAllString(s, "…")
			}
		}
	case *ast.BinaryExpr:
		return messageOf(v.X) + messageOf(v.Y)
	}
	return "…"
}

// hooksFromSource reads the ExtensionHandler literals of internal/hooks:
// hook, handler name, timeout and failure policy.
func hooksFromSource(dir string) ([][4]string, error) {
	files, err := gosource.ParseDir(dir)
	if err != nil {
		return nil, err
	}
	consts, err := goConsts(dir, "")
	if err != nil {
		return nil, err
	}
	var out [][4]string
	for _, f := range files {
		ast.Inspect(f.File, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || len(cl.Elts) == 0 {
				return true
			}
			var row [4]string
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil {
					return true
				}
				switch key.Name {
				case "Hook":
					row[0] = strings.TrimPrefix(gosource.SelectorName(kv.Value), "runtimehooksv1.")
				case "Name":
					if id, ok := kv.Value.(*ast.Ident); ok {
						row[1] = consts[id.Name]
					}
				case "TimeoutSeconds":
					if c, ok := kv.Value.(*ast.CallExpr); ok && len(c.Args) == 1 {
						if lit, ok := c.Args[0].(*ast.BasicLit); ok {
							row[2] = lit.Value
						}
					}
				case "FailurePolicy":
					row[3] = "Fail"
					if id, ok := kv.Value.(*ast.Ident); ok && id.Name != "fail" {
						row[3] = id.Name
					}
				}
			}
			if row[0] != "" && row[1] != "" {
				out = append(out, row)
			}
			return true
		})
	}
	if len(out) == 0 {
		return nil, errors.New("no ExtensionHandler found in internal/hooks")
	}
	return out, nil
}

// metricsFromSource reads prometheus.New*(Opts{Name, Help}, labels) in dirs
// (a missing folder has none): name, type, labels and help.
func metricsFromSource(dirs ...string) ([][4]string, error) {
	var out [][4]string
	for _, dir := range dirs {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		files, err := gosource.ParseDir(dir)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			ast.Inspect(f.File, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !strings.HasPrefix(gosource.SelectorName(call.Fun), "prometheus.New") || len(call.Args) == 0 {
					return true
				}
				kind := strings.TrimSuffix(strings.TrimPrefix(gosource.SelectorName(call.Fun), "prometheus.New"), "Vec")
				opts, ok := call.Args[0].(*ast.CompositeLit)
				if !ok {
					return true
				}
				var name, help string
				for _, e := range opts.Elts {
					kv := e.(*ast.KeyValueExpr)
					lit, ok := kv.Value.(*ast.BasicLit)
					if !ok {
						continue
					}
					s, _ := strconv.Unquote(lit.Value)
					switch kv.Key.(*ast.Ident).Name {
					case "Name":
						name = s
					case "Help":
						help = s
					}
				}
				var labels []string
				if len(call.Args) > 1 {
					if cl, ok := call.Args[1].(*ast.CompositeLit); ok {
						for _, e := range cl.Elts {
							if lit, ok := e.(*ast.BasicLit); ok {
								s, _ := strconv.Unquote(lit.Value)
								labels = append(labels, "`"+s+"`")
							}
						}
					}
				}
				out = append(out, [4]string{name, strings.ToLower(kind), strings.Join(labels, ", "), cell(help)})
				return true
			})
		}
	}
	return out, nil
}

// featureGatesFromSource reads the FeatureSpec map of internal/feature: gate,
// default and stage.
func featureGatesFromSource(dir string) ([][3]string, error) {
	files, err := gosource.ParseDir(dir)
	if err != nil {
		return nil, err
	}
	var out [][3]string
	for _, f := range files {
		ast.Inspect(f.File, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			spec, ok := kv.Value.(*ast.CompositeLit)
			if !ok {
				return true
			}
			row := [3]string{}
			if id, ok := kv.Key.(*ast.Ident); ok {
				row[0] = id.Name
			}
			for _, e := range spec.Elts {
				field, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch field.Key.(*ast.Ident).Name {
				case "Default":
					row[1] = fmt.Sprint(field.Value.(*ast.Ident).Name)
				case "PreRelease":
					row[2] = strings.TrimPrefix(gosource.SelectorName(field.Value), "featuregate.")
				}
			}
			if row[0] != "" && row[2] != "" {
				out = append(out, row)
			}
			return true
		})
	}
	return out, nil
}

// placeholdersIn finds clusterctl placeholders ${NAME} and ${NAME:=default} in
// the YAML files under dir: name, default and the first file naming it.
func (r repo) placeholdersIn(dir string) ([][3]string, error) {
	re := regexp.MustCompile(`\$\{([A-Z0-9_]+)(?::=([^}]*))?\}`)
	var out [][3]string
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, [3]string{m[1], m[2], r.rel(p)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out, nil
}

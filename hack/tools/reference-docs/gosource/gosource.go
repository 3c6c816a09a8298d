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

// Package gosource reads the repository's own code and generated manifests as
// data: the reference generator (hack/tools/reference-docs) and the docs tests
// (test/shipping) both check the docs against what it finds.
package gosource

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// File is one parsed Go file.
type File struct {
	Name string
	File *ast.File
}

// ParseDir parses the Go files of dir, tests left out, in name order.
func ParseDir(dir string) ([]File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Name: name, File: f})
	}
	return out, nil
}

// SelectorName is "x.Name" for the expression x.Name, "" for anything else.
func SelectorName(e ast.Expr) string {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok {
			return x.Name + "." + sel.Sel.Name
		}
	}
	return ""
}

// ReadCRD reads a CustomResourceDefinition (controller-gen's output).
func ReadCRD(file string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return crd, nil
}

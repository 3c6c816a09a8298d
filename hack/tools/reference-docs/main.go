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

// Command reference-docs writes docs/reference.md from the code and the
// generated manifests, so the reference cannot drift from them: the variable
// schema (internal/variables/zz_generated.schema.yaml, made by controller-gen
// from the Go type), the CRDs' fields, phases and printer columns, every
// condition type, status and reason the controllers set (read from their
// source), the hooks with their timeouts and failure policies, the admission
// webhooks, the metrics, the feature gates and the components' placeholders.
// `make generate` runs it after controller-gen.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

func main() {
	out := flag.String("out", filepath.Join("docs", "reference.md"), "file to write, relative to the repository root unless absolute")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "reference-docs:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	root, err := providers.RepoRoot()
	if err != nil {
		return err
	}
	doc, err := generate(root)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	return os.WriteFile(out, doc, 0o644)
}

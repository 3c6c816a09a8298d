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
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryGoFileCarriesTheLicenceHeader: LICENSE is Apache-2.0 and every Go
// file of the module starts with hack/boilerplate/boilerplate.go.txt (after
// its build constraints), as in CAPI. The wrapper modules under hack/tools
// (their own go.mod) build other projects' code and are not checked.
func TestEveryGoFileCarriesTheLicenceHeader(t *testing.T) {
	if !strings.Contains(string(mustRead(t, path("LICENSE"))), "Apache License\n                           Version 2.0, January 2004") {
		t.Error("LICENSE is not the Apache License 2.0")
	}
	header := strings.TrimSpace(string(mustRead(t, path("hack", "boilerplate", "boilerplate.go.txt"))))
	checked := 0
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "_artifacts", ".tiltbuild":
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != repoRoot {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		text := string(raw)
		for strings.HasPrefix(text, "//go:build") {
			_, text, _ = strings.Cut(text, "\n")
			text = strings.TrimLeft(text, "\n")
		}
		if !strings.HasPrefix(text, header) {
			t.Errorf("%s does not start with hack/boilerplate/boilerplate.go.txt", relPath(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d Go files: has the tree moved?", checked)
	}
}

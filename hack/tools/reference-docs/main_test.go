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
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// TestReferenceIsCurrent fails when docs/reference.md is not what the
// generator makes of the code as it is now.
func TestReferenceIsCurrent(t *testing.T) {
	root, err := providers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Error("docs/reference.md is not what the code says: run `make generate` and commit the result")
	}
}

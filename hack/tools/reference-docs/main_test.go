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

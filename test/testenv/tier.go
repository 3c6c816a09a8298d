package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// The fast tier (`make test-unit`, `go test -short`) runs no kube-apiserver
// and no OpenStack test bed; `make test` runs everything.

// ExitIfShort, called first in a TestMain that starts a kube-apiserver, ends
// the test binary when the fast tier runs it.
func ExitIfShort() {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		fmt.Println("skipped in the fast tier (-short): these tests start a kube-apiserver; make test runs them")
		os.Exit(0)
	}
}

// SkipIfShort skips a test that needs a kube-apiserver, the test bed or a
// slow build when the fast tier runs it.
func SkipIfShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped in the fast tier (-short): %s; make test runs it", why)
	}
}

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

package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// The fast tier (`make test-unit`, `go test -short`) runs no kube-apiserver
// and no OpenStack test bed; `make test` runs everything.

// ExitIfShort ends the test binary when the fast tier runs it; a TestMain
// that starts a kube-apiserver calls it first.
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
func SkipIfShort(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("skipped in the fast tier (-short): %s; make test runs it", why)
	}
}

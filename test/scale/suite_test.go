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

package scale

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

var env *testenv.Environment

// optIn is the variable that runs the measure (about 5 minutes on two
// cores, most of it writing the objects): make bench sets it, make test
// does not.
const optIn = "CAPO_SHAREDNET_SCALE"

func optedIn() bool { return os.Getenv(optIn) == "1" }

func TestMain(m *testing.M) {
	testenv.ExitIfShort()
	if !optedIn() {
		os.Exit(m.Run()) // the tests skip themselves; no API server
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	env, err = testenv.StartWithExtension(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	return m.Run()
}

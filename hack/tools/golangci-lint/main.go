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

// Command golangci-lint is golangci-lint with kube-api-linter compiled in:
// what `golangci-lint custom` builds from a .custom-gcl.yml (as CAPI does),
// written out because that command clones golangci-lint with git, and the
// module proxy is all a build here may reach. `make lint` builds and runs it.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	// Registers the "kubeapilinter" module plugin (.golangci.yml).
	_ "sigs.k8s.io/kube-api-linter"
)

func main() {
	info := commands.BuildInfo{GoVersion: runtime.Version(), Version: "unknown", Commit: "?", Date: "(unknown)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/golangci/golangci-lint/v2" {
				info.Version = dep.Version[1:]
			}
		}
	}
	if err := commands.Execute(info); err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "The command is terminated due to an error: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}

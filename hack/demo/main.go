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

// Command demo shows capo-sharednet end to end on this machine: it brings up
// the local management plane (e2e/plane: real kube-apiserver, CAPI, CABPK,
// CAPO and this extension, against the OpenStack test bed), creates the
// sample cluster of templates/, attaches its nodegroup md-a to a shared
// network and shows the rollout as it goes. Everything stays running for you
// to look around; `demo down` removes it all.
//
//	demo up      (default) everything above; idempotent
//	demo down    delete the cluster and the shared network, stop the plane (and the test bed if demo started it)
//	demo plane   run the plane in the foreground (what `up` starts in the background)
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// dirs are the demo's files, all under _artifacts/demo (ignored by git).
type dirs struct {
	root  string
	base  string
	plane string
}

func (d *dirs) state() string   { return filepath.Join(d.plane, "plane.json") }
func (d *dirs) pidFile() string { return filepath.Join(d.base, "plane.pid") }
func (d *dirs) planeLog() string {
	return filepath.Join(d.base, "plane.log")
}
func (d *dirs) marker(name string) string { return filepath.Join(d.base, name) }

// log is a step's log file (apt's, a build's), shown whole when it fails.
func (d *dirs) log(name string) string { return filepath.Join(d.base, name) }

func main() {
	root, err := providers.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	base := filepath.Join(root, "_artifacts", "demo")
	d := &dirs{root: root, base: base, plane: filepath.Join(base, "plane")}
	if err := os.MkdirAll(base, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := "up"
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	switch cmd {
	case "up":
		err = up(d)
	case "down":
		err = down(d)
	case "plane":
		err = runPlane(d)
	default:
		err = fmt.Errorf("unknown command %q: use up, down or plane", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

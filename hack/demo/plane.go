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
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
)

// runPlane runs the local management plane in the foreground until SIGTERM
// or SIGINT (`demo up` starts it in the background; `demo down` stops it).
func runPlane(d *dirs) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	start := time.Now()
	// A plane left by a killed run: its processes are gone, its folder is stale.
	_ = os.RemoveAll(d.plane)
	// kube-apiserver, kube-controller-manager, etcd and the cloud controller
	// manager build alongside the managers: two builds fill two cores better
	// than one (links are serial), and the packages they share with the demo
	// tool, built before, come from the Go build cache.
	assets := make(chan error, 1)
	go func() {
		fmt.Printf("kube-apiserver, kube-controller-manager, etcd and the cloud controller manager: building alongside (once; log %s)\n", rel(d.root, d.log("k8s-build.log")))
		built := time.Now()
		err := runLogged(d.root, d.log("k8s-build.log"), exec.Command(filepath.Join(d.root, "hack", "ensure-envtest-assets.sh")))
		if err == nil {
			fmt.Printf("kube-apiserver, kube-controller-manager, etcd and the cloud controller manager ready (%s)\n", time.Since(built).Round(time.Second))
		}
		assets <- err
	}()
	p, err := plane.Start(ctx, plane.Options{Root: d.root, Dir: d.plane, Progress: os.Stdout, WaitForAssets: func() error { return <-assets }})
	if err != nil {
		return err
	}
	fmt.Printf("plane ready in %s (state: %s)\n", time.Since(start).Round(time.Second), d.state())
	<-ctx.Done()
	fmt.Println("stopping the plane")
	return p.Stop()
}

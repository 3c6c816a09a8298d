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
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/test/dataplane"
)

// down removes what up created: the cluster (CAPO deletes its servers, ports
// and network; BeforeClusterDelete its load balancers on the shared subnet),
// the SharedNetwork (its shares) and the VM project's network, then stops
// the plane, and the test bed when up started it.
func down(d *dirs) error {
	x := &demo{d: d, start: startTime(), bed: filepath.Join(d.root, "hack", "openstack-testbed", "testbed.sh")}
	ctx := context.Background()
	if pid := planePID(d); pid != 0 {
		if err := x.connect(); err != nil {
			return err
		}
		if err := x.deleteCluster(ctx); err != nil {
			return err
		}
		if err := x.deleteOffer(ctx); err != nil {
			return err
		}
		x.sayf("stopping the local management plane (pid %d)", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 60 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(time.Second)
		}
		if syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("the plane (pid %d) did not stop within a minute; see %s", pid, d.planeLog())
		}
	} else {
		x.sayf("no local management plane is running")
	}
	_ = os.Remove(d.pidFile())
	_ = os.RemoveAll(d.plane)
	if err := dataplane.Sweep(ctx, dataPathPrefix); err != nil { // also when the test bed is gone
		return fmt.Errorf("removing the demo's network namespaces: %w", err)
	}

	if out, err := exec.Command(x.bed, "clouds").Output(); err == nil {
		x.cloudsPath = strings.TrimSpace(string(out))
		if x.clouds, err = plane.ReadClouds(x.cloudsPath); err == nil {
			x.deleteVMNetwork(ctx)
		}
	}
	if _, err := os.Stat(d.marker("testbed-started-by-demo")); err == nil {
		x.sayf("stopping the OpenStack test bed (the demo started it)")
		if err := runLogged(d.root, d.log("testbed.log"), exec.Command(x.bed, "stop")); err != nil {
			return err
		}
		for _, f := range []string{"testbed-started-by-demo", "testbed.rc", "testbed.pid"} {
			_ = os.Remove(d.marker(f))
		}
	}
	if left := leftovers(d.root); len(left) > 0 {
		return fmt.Errorf("still running after the plane stopped: %s", strings.Join(left, "; "))
	}
	x.sayf("all gone: no process of the plane runs (nor holds its ports)")
	return nil
}

// leftovers are the processes still running a binary the plane built (under
// bin/), with their pids: none, after a clean stop.
func leftovers(root string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		exe, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(exe, filepath.Join(root, "bin")+string(filepath.Separator)) ||
			strings.HasSuffix(exe, string(filepath.Separator)+"demo") {
			continue
		}
		out = append(out, fmt.Sprintf("%s (pid %s)", rel(root, exe), filepath.Base(filepath.Dir(p))))
	}
	return out
}

func (x *demo) deleteCluster(ctx context.Context) error {
	c := &clusterv1.Cluster{}
	key := client.ObjectKey{Namespace: demoNamespace, Name: demoCluster}
	if err := x.plane.Client.Get(ctx, key, c); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	x.sayf("deleting Cluster %s/%s", demoNamespace, demoCluster)
	if err := x.plane.Client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	s := newStatus(x)
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		err := x.plane.Client.Get(ctx, key, c)
		if apierrors.IsNotFound(err) {
			s.done("cluster deleted")
			return nil
		}
		ms := &clusterv1.MachineList{}
		_ = x.plane.Client.List(ctx, ms, client.InNamespace(demoNamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: demoCluster})
		s.show(fmt.Sprintf("deleting cluster %s: %d machines left", demoCluster, len(ms.Items)))
	}
	return fmt.Errorf("cluster %s not deleted within 10 minutes: %w", demoCluster, errTimeout)
}

func (x *demo) deleteOffer(ctx context.Context) error {
	sn := &sharednetv1.SharedNetwork{}
	key := client.ObjectKey{Name: demoNetwork}
	if err := x.plane.Client.Get(ctx, key, sn); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	x.sayf("deleting SharedNetwork %s (its finalizer removes the shares it holds)", demoNetwork)
	if err := x.plane.Client.Delete(ctx, sn); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if err := x.plane.Client.Get(ctx, key, sn); apierrors.IsNotFound(err) {
			return nil
		}
	}
	return fmt.Errorf("SharedNetwork %s not deleted within 3 minutes: %w", demoNetwork, errTimeout)
}

func (x *demo) deleteVMNetwork(ctx context.Context) {
	vm, err := plane.NewCloud(ctx, x.clouds, plane.VMCloud)
	if err != nil {
		x.sayf("VM project not reachable (%v): network %s left as it is", err, vmNetworkName)
		return
	}
	if err := x.removeDataPath(ctx, vm); err != nil {
		x.sayf("the data path's VM and namespaces: %v", err)
	} else {
		x.sayf("the data path's namespaces, veths and VM removed")
	}
	pages, err := networks.List(vm.Network, networks.ListOpts{Name: vmNetworkName, ProjectID: vm.ProjectID}).AllPages(ctx)
	if err != nil {
		return
	}
	all, _ := networks.ExtractNetworks(pages)
	for _, n := range all {
		if err := plane.DeleteVMNetwork(ctx, vm, n.ID, 2*time.Minute); err != nil {
			x.sayf("VM project network %s: %v", vmNetworkName, err)
			continue
		}
		x.sayf("VM project network %s deleted", vmNetworkName)
	}
}

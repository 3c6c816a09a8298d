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
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
)

// status is a progress display: on a terminal one line rewritten in place
// (finished lines stay), elsewhere one line per change.
type status struct {
	x    *demo
	tty  bool
	last string
}

func newStatus(x *demo) *status { return &status{x: x, tty: term.IsTerminal(int(os.Stdout.Fd()))} }

func (s *status) show(line string) {
	if line == s.last {
		if s.tty { // keep the clock moving
			fmt.Printf("\r\033[K[%s] %s", s.x.clock(), line)
		}
		return
	}
	s.last = line
	if s.tty {
		fmt.Printf("\r\033[K[%s] %s", s.x.clock(), line)
		return
	}
	s.x.sayf("%s", line)
}

// done ends the in-place line.
func (s *status) done(line string) {
	if s.tty {
		fmt.Print("\r\033[K")
	}
	s.x.sayf("%s", line)
}

// waitWorkers shows the nodegroups coming up until every worker Machine runs
// (a Nova server, a Node registered by the node simulator).
func (x *demo) waitWorkers(ctx context.Context, cluster *clusterv1.Cluster) error {
	s := newStatus(x)
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		var parts []string
		ready := true
		for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
			ms, err := x.plane.Machines(ctx, cluster.Namespace, cluster.Name, md.Name)
			if err != nil {
				return err
			}
			running := 0
			for _, m := range ms {
				if m.Phase == string(clusterv1.MachinePhaseRunning) {
					running++
				}
			}
			want := int(plane.Replicas(cluster, md.Name))
			if running != want || len(ms) != want {
				ready = false
			}
			parts = append(parts, fmt.Sprintf("%s %d/%d running", md.Name, running, want))
		}
		line := "cluster " + cluster.Name + ": " + strings.Join(parts, ", ")
		if ready {
			s.done(line)
			return nil
		}
		s.show(line)
		time.Sleep(time.Second)
	}
	return fmt.Errorf("the workers of cluster %s did not come up in 10 minutes: %w (see %s)", cluster.Name, errTimeout, x.plane.Logs())
}

// watchAttach shows the attachment until every machine of md-a has been
// replaced and has its address on the shared subnet.
func (x *demo) watchAttach(ctx context.Context, before []plane.Machine, n plane.VMNetwork) error {
	old := map[string]bool{}
	for _, m := range before {
		old[m.UID] = true
	}
	cluster := &clusterv1.Cluster{}
	if err := x.plane.Client.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: demoCluster}, cluster); err != nil {
		return err
	}
	want := int(plane.Replicas(cluster, attachTo))
	s := newStatus(x)
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		a, err := x.plane.Attachment(ctx, demoNamespace, demoCluster, attachTo)
		if err != nil {
			return err
		}
		ms, err := x.plane.Machines(ctx, demoNamespace, demoCluster, attachTo)
		if err != nil {
			return err
		}
		replaced, oldLeft := 0, 0
		for _, m := range ms {
			switch {
			case old[m.UID]:
				oldLeft++
			case m.Phase == string(clusterv1.MachinePhaseRunning):
				replaced++
			}
		}
		phase, addrs := "-", []string{}
		if a != nil && a.Status.Phase != "" {
			phase = string(a.Status.Phase)
		}
		if a != nil {
			for _, node := range a.Status.Nodes {
				if node.Address != "" {
					addrs = append(addrs, node.Address)
				}
			}
		}
		sort.Strings(addrs)
		if len(before) == 0 && a != nil {
			// Attached before this run: show the attachment's own count.
			replaced = int(ptr.Deref(a.Status.AttachedNodes, 0))
		}
		line := fmt.Sprintf("%s: phase %-10s machines replaced %d/%d (old left %d)  shared addresses [%s]",
			attachTo, phase, replaced, want, oldLeft, strings.Join(addrs, " "))
		if phase == string(sharednetv1.PhaseAttached) && oldLeft == 0 && replaced == want && len(addrs) == want {
			s.done(line)
			x.sayf("attached: every node of %s has an address on %s (%s)", attachTo, n.CIDR, n.SubnetID)
			return nil
		}
		s.show(line)
		time.Sleep(time.Second)
	}
	return fmt.Errorf("%s was not attached within 10 minutes: %w (see kubectl get sna -n %s, %s)", attachTo, errTimeout, demoNamespace, x.plane.Logs())
}

// lookAround prints the commands to inspect what runs and the one that
// removes it all.
func (x *demo) lookAround(n plane.VMNetwork) {
	clouds := strings.TrimSuffix(x.cloudsPath, "\n")
	fmt.Printf(`
Everything keeps running. Look around (kubectl is Kubernetes' own, built into bin/; openstack is the test bed's):

  export PATH=%[9]s:$PATH KUBECONFIG=%[1]s
  kubectl get sharednetworks
  kubectl get sharednetworkattachments -n %[2]s          # phase, nodes attached, message
  kubectl get cluster,machinedeployments,machines -n %[2]s
  kubectl get openstackmachines -n %[2]s -o wide
  kubectl --kubeconfig %[3]s get nodes -o wide   # registered by the node simulator (a stand-in for kubelets), initialized by the real CCM
  kubectl --kubeconfig %[3]s get service my-service   # EXTERNAL-IP: the internal load balancer's VIP on the shared subnet
  (cd %[10]s && go tool clusterctl describe cluster %[7]s -n %[2]s)   # CAPI's view (builds clusterctl once)

  export OS_CLIENT_CONFIG_FILE=%[4]s
  openstack --os-cloud vm-project port list --network %[5]s   # md-a's ports on the shared subnet, seen by the VM project
  openstack --os-cloud admin network rbac list --long           # the share (access_as_shared) to cluster-project
  openstack --os-cloud cluster-project server list
  openstack --os-cloud cluster-project loadbalancer list        # the Service's load balancer, made by the CCM

  logs of every component: %[6]s
  detach: remove md-a's sharedNetwork override:  kubectl edit cluster %[7]s -n %[2]s

Tear it all down (cluster, shared network, plane%[8]s):  make demo-down
`, x.plane.Kubeconfig, demoNamespace, x.plane.WorkloadKubeconfig, clouds, vmNetworkName, rel(x.d.root, x.plane.Logs()), demoCluster, x.bedNote(),
		filepath.Join(x.d.root, "bin"), x.d.root)
	x.sayf("demo ready")
}

func (x *demo) bedNote() string {
	if _, err := os.Stat(x.d.marker("testbed-started-by-demo")); err == nil {
		return ", OpenStack test bed"
	}
	return ""
}

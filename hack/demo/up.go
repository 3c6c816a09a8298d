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
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// What the demo creates.
const (
	demoNamespace = "demo"
	demoCluster   = "demo"
	demoNetwork   = "vm-net" // the SharedNetwork
	vmNetworkName = "demo-vm-net"
	vmSubnetCIDR  = "172.31.0.0/24" // overlaps none of the cluster's ranges
	workers       = 2
	attachTo      = "md-a"
)

type demo struct {
	d          *dirs
	start      time.Time
	plane      *plane.Plane // a client-only view of the running plane
	clouds     []byte
	cloudsPath string
	bed        string // testbed.sh
}

func (x *demo) sayf(format string, args ...any) {
	fmt.Printf("[%s] %s\n", x.clock(), fmt.Sprintf(format, args...))
}

// clock is the time since the command started, as mm:ss.
func (x *demo) clock() string {
	d := time.Since(x.start).Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

func up(d *dirs) error {
	x := &demo{d: d, start: startTime(), bed: filepath.Join(d.root, "hack", "openstack-testbed", "testbed.sh")}
	ctx := context.Background()

	// 1. The OpenStack test bed: hack/demo.sh installs and starts it in the
	// background (apt waits on the network, the builds below on the CPU).
	bed := x.testbed()
	// 2. The plane, in the background: the managers, kube-apiserver,
	// kube-controller-manager and etcd built from source (once), then started.
	if err := x.ensurePlane(); err != nil {
		return err
	}
	if err := x.connect(); err != nil {
		return err
	}
	// kubectl for the commands printed at the end, built while the cluster comes up.
	kubectl := x.buildKubectl()
	// 3. OpenStack from here on.
	if err := bed(); err != nil {
		return err
	}
	// 4. The administrator offers a VM-project network.
	vm, err := plane.NewCloud(ctx, x.clouds, plane.VMCloud)
	if err != nil {
		return err
	}
	n, err := plane.EnsureVMNetwork(ctx, vm, plane.VMNetworkOpts{Name: vmNetworkName, CIDR: vmSubnetCIDR})
	if err != nil {
		return err
	}
	x.sayf("VM project network %s: %s, subnet %s (%s), MTU %d", vmNetworkName, n.NetworkID, n.SubnetID, n.CIDR, n.MTU)
	if _, err := x.plane.OfferNetwork(ctx, demoNetwork, n, x.clouds, nil); err != nil {
		return err
	}
	x.sayf("SharedNetwork %s offered to namespaces labelled %s=true", demoNetwork, plane.GrantLabel)

	// 5. The cluster owner's ClusterClass and Cluster, from templates/.
	if err := x.plane.Namespace(ctx, demoNamespace, map[string]string{plane.GrantLabel: "true"}); err != nil {
		return err
	}
	cc, err := x.plane.ClusterClass(demoNamespace)
	if err != nil {
		return err
	}
	for _, o := range cc {
		if err := x.plane.Apply(ctx, o); err != nil {
			return err
		}
	}
	if err := x.plane.WaitForClusterClass(ctx, demoNamespace, plane.ClusterClassName); err != nil {
		return err
	}
	secret, cluster, err := x.plane.RenderCluster(plane.ClusterVariables{
		Name: demoCluster, Namespace: demoNamespace, CloudsYAML: x.clouds, Workers: workers,
		SharedNetwork: demoNetwork, Subnet: n.SubnetID,
	})
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(cluster)
	existing := &clusterv1.Cluster{}
	switch err := x.plane.Client.Get(ctx, key, existing); {
	case apierrors.IsNotFound(err):
		// Created without the override, so the attach below is a change of a
		// running cluster: md-a's nodes are replaced once.
		variables.SetOverride(cluster, attachTo, nil)
		if err := x.plane.Apply(ctx, secret, cluster); err != nil {
			return err
		}
		x.sayf("Cluster %s/%s created from %s (md-a and md-b, %d workers each)", demoNamespace, demoCluster, plane.ClusterTemplateFile, workers)
	case err != nil:
		return err
	default:
		cluster = existing
	}
	if err := x.waitWorkers(ctx, cluster); err != nil {
		return err
	}

	// 6. Attach md-a.
	before, err := x.plane.Machines(ctx, demoNamespace, demoCluster, attachTo)
	if err != nil {
		return err
	}
	value := plane.SharedNetworkValue(demoNetwork, n.SubnetID)
	if !hasValue(cluster, attachTo) {
		if err := x.plane.UpdateCluster(ctx, key, func(c *clusterv1.Cluster) { variables.SetOverride(c, attachTo, value) }); err != nil {
			return fmt.Errorf("attaching %s: %w", attachTo, err)
		}
		x.sayf("attach: set sharedNetwork=%s on MachineDeployment topology %s", value, attachTo)
	} else {
		x.sayf("md-a already carries sharedNetwork: showing where it stands")
		before = nil // no rollout started by this run
	}
	if err := x.watchAttach(ctx, before, n); err != nil {
		return err
	}
	// 7. The packet: md-a's node reaches a VM of the VM project, md-b's does not.
	if err := x.dataPath(ctx, n); err != nil {
		return fmt.Errorf("the data path: %w", err)
	}

	// 8. The guide's Service: the real cloud controller manager gives it an
	// internal load balancer on the shared subnet.
	if err := x.guideService(ctx, n); err != nil {
		return err
	}
	if err := <-kubectl; err != nil {
		return err
	}
	x.lookAround(n)
	return nil
}

// startTime is when make demo started (hack/demo.sh's clock), or now.
func startTime() time.Time {
	if sec, err := strconv.ParseInt(os.Getenv("CAPO_SHAREDNET_DEMO_START"), 10, 64); err == nil {
		return time.Unix(sec, 0)
	}
	return time.Now()
}

// demoService is the guide's Service in the workload cluster.
var demoService = client.ObjectKey{Namespace: "default", Name: "my-service"}

// guideService creates the guide's Service (three annotations) in the
// workload cluster and prints the VIP the cloud controller manager gives it.
func (x *demo) guideService(ctx context.Context, n plane.VMNetwork) error {
	subnetID, _, err := x.plane.ClusterSubnet(ctx, demoNamespace, demoCluster)
	if err != nil {
		return err
	}
	svc := plane.GuideService(demoService, n.SubnetID, subnetID)
	if err := x.plane.WorkloadClient.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Service %s in the workload cluster: %w", demoService, err)
	}
	x.sayf("Service %s (type LoadBalancer, the guide's three annotations) in the workload cluster: waiting for the OpenStack cloud controller manager", demoService)
	vip, err := x.plane.WaitForLoadBalancerIP(ctx, demoService, 3*time.Minute)
	if err != nil {
		return err
	}
	where := "NOT on the shared subnet"
	if a, err := netip.ParseAddr(vip); err == nil && netip.MustParsePrefix(n.CIDR).Contains(a) {
		where = "on the shared subnet"
	}
	x.sayf("internal load balancer of %s: VIP %s, %s %s (%s); its members are the nodes on the cluster subnet", demoService, vip, where, n.CIDR, n.SubnetID)
	return nil
}

// hasValue says whether the topology carries a sharedNetwork value.
func hasValue(c *clusterv1.Cluster, topology string) bool {
	groups, err := variables.Nodegroups(c)
	_, ok := groups[topology]
	return err == nil && ok
}

// testbed finds the OpenStack test bed running, or being brought up in the
// background by hack/demo.sh, or (run without it) brings it up in the
// foreground. It returns the wait for it, which also reads its clouds.yaml.
func (x *demo) testbed() func() error {
	ready := func() error {
		out, err := exec.Command(x.bed, "clouds").Output()
		if err != nil {
			return fmt.Errorf("testbed.sh clouds: %w", err)
		}
		x.cloudsPath = strings.TrimSpace(string(out))
		x.clouds, err = plane.ReadClouds(x.cloudsPath)
		return err
	}
	if err := exec.Command(x.bed, "status").Run(); err == nil {
		x.sayf("OpenStack test bed: running")
		return ready
	}
	rc, log := x.d.log("testbed.rc"), rel(x.d.root, x.d.log("testbed.log"))
	if !x.testbedInBackground() {
		return func() error {
			x.sayf("OpenStack test bed: installing (apt-get, once) and starting; log %s", log)
			if err := os.WriteFile(x.d.marker("testbed-started-by-demo"), nil, 0o644); err != nil {
				return err
			}
			for _, step := range []string{"install", "start"} {
				if err := runLogged(x.d.root, x.d.log("testbed.log"), exec.Command(x.bed, step)); err != nil {
					return err
				}
			}
			return ready()
		}
	}
	return func() error {
		s := newStatus(x)
		for deadline := time.Now().Add(20 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			raw, err := os.ReadFile(rc)
			if err != nil {
				s.show("OpenStack test bed: waiting for its install and start (log " + log + ")")
				continue
			}
			if code := strings.TrimSpace(string(raw)); code != "0" {
				s.done("OpenStack test bed: failed (exit " + code + "); its log follows")
				showLog(x.d.log("testbed.log"))
				return fmt.Errorf("the OpenStack test bed did not come up; see %s", log)
			}
			s.done("OpenStack test bed: running")
			return ready()
		}
		return fmt.Errorf("the OpenStack test bed was not up within 20 minutes: %w (see %s)", errTimeout, log)
	}
}

// testbedInBackground says whether hack/demo.sh is bringing the test bed up,
// or has (its rc file is there).
func (x *demo) testbedInBackground() bool {
	if _, err := os.Stat(x.d.log("testbed.rc")); err == nil {
		return true
	}
	raw, err := os.ReadFile(x.d.log("testbed.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	return err == nil && pid > 0 && syscall.Kill(pid, 0) == nil
}

// buildKubectl builds Kubernetes' kubectl (hack/tools/k8s, the module of
// kube-apiserver's build, so its packages are mostly compiled by then) into
// bin/ unless it is there, in the background.
func (x *demo) buildKubectl() <-chan error {
	done := make(chan error, 1)
	out := filepath.Join(x.d.root, "bin", "kubectl")
	if _, err := os.Stat(out); err == nil {
		done <- nil
		return done
	}
	x.sayf("kubectl: building into bin/ in the background (once); log %s", rel(x.d.root, x.d.log("kubectl-build.log")))
	dir := filepath.Join(x.d.root, "hack", "tools", "k8s")
	go func() {
		// Stamped with its Kubernetes version, as upstream's build does, so
		// kubectl version shows no skew against the plane's API servers.
		raw, err := exec.Command("go", "-C", dir, "list", "-m", "-f", "{{.Version}}", "k8s.io/kubectl").Output()
		if err != nil {
			done <- fmt.Errorf("reading kubectl's version from %s: %w", dir, err)
			return
		}
		v := "v1." + strings.TrimPrefix(strings.TrimSpace(string(raw)), "v0.")
		ldflags := "-s -w"
		for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
			ldflags += fmt.Sprintf(" -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s", pkg, v, pkg, pkg, strings.Split(v, ".")[1])
		}
		// At the lowest priority: the cluster coming up meanwhile waits on
		// its processes, kubectl takes the cycles they leave.
		cmd := exec.Command("nice", "-n", "19", "go", "build", "-ldflags", ldflags, "-o", out, "./kubectl")
		cmd.Env = plane.BuildEnv()
		done <- runLogged(dir, x.d.log("kubectl-build.log"), cmd)
	}()
	return done
}

// planePID is the pid of the running plane, 0 when none runs.
func planePID(d *dirs) int {
	raw, err := os.ReadFile(d.pidFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	if _, err := os.Stat(d.state()); err != nil {
		return 0
	}
	return pid
}

// ensurePlane starts `demo plane` in its own session (it outlives this
// command) unless it runs, and waits until it has written its state.
func (x *demo) ensurePlane() error {
	if pid := planePID(x.d); pid != 0 {
		x.sayf("local management plane: running (pid %d)", pid)
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	_ = os.Remove(x.d.state())
	logFile, err := os.Create(x.d.planeLog())
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(self, "plane")
	cmd.Dir = x.d.root
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(x.d.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	x.sayf("local management plane: starting (pid %d, log %s); the first run builds its parts from source; next: the VM project's network", cmd.Process.Pid, rel(x.d.root, x.d.planeLog()))
	shown := 0
	for {
		// Relay the plane's progress lines.
		if f, err := os.Open(x.d.planeLog()); err == nil {
			sc := bufio.NewScanner(f)
			i := 0
			for sc.Scan() {
				if i >= shown {
					x.sayf("  plane: %s", sc.Text())
					shown++
				}
				i++
			}
			_ = f.Close()
		}
		if _, err := os.Stat(x.d.state()); err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the plane stopped (%v); see %s", err, x.d.planeLog())
		case <-time.After(time.Second):
		}
	}
}

// connect reads the running plane's state and builds clients.
func (x *demo) connect() error {
	raw, err := os.ReadFile(x.d.state())
	if err != nil {
		return err
	}
	var st plane.State
	if err := json.Unmarshal(raw, &st); err != nil {
		return err
	}
	p, err := plane.Connect(x.d.root, st)
	if err != nil {
		return err
	}
	x.plane = p
	return nil
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// runLogged runs a command with its output in the log file; when it fails,
// the log is shown whole.
func runLogged(dir, logPath string, cmd *exec.Cmd) error {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		showLog(logPath)
		return fmt.Errorf("%s %s: %w (log %s, above)", filepath.Base(cmd.Path), strings.Join(cmd.Args[1:], " "), err, logPath)
	}
	return nil
}

// showLog copies a log to stderr.
func showLog(path string) {
	if f, err := os.Open(path); err == nil {
		_, _ = io.Copy(os.Stderr, f)
		_ = f.Close()
	}
}

var errTimeout = errors.New("timed out")

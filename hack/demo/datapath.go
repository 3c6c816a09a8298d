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
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"

	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/test/dataplane"
)

const (
	// dataPathPrefix names the network namespaces the demo plugs servers
	// in; make demo-down removes every one.
	dataPathPrefix = "capo-demo-"
	// demoVM names the VM of the VM project, its port and its security group.
	demoVM = "capo-demo-vm"
)

// dataPath shows the packet the product exists for: a VM of the VM project
// on the shared subnet, its security group holding the guide's rule, and
// one node of md-a and one of md-b, each plugged on this machine as Nova
// would plug them (test/dataplane). md-a's node asks the VM, which answers
// with the source address it saw; md-b's node gets no answer. The
// namespaces stay for a look around (ip netns exec ...) until make
// demo-down.
func (x *demo) dataPath(ctx context.Context, n plane.VMNetwork) error {
	if os.Geteuid() != 0 {
		x.sayf("the data path: skipped, plugging servers needs root")
		return nil
	}
	admin, err := plane.NewCloud(ctx, x.clouds, plane.AdminCloud)
	if err != nil {
		return err
	}
	vm, err := plane.NewCloud(ctx, x.clouds, plane.VMCloud)
	if err != nil {
		return err
	}
	if err := x.removeDataPath(ctx, vm); err != nil {
		return err
	}
	sg, err := plane.EmptySecurityGroup(ctx, vm, demoVM)
	if err != nil {
		return err
	}
	if _, err := rules.Create(ctx, vm.Network, rules.CreateOpts{SecGroupID: sg, Direction: rules.DirIngress, EtherType: rules.EtherType4, RemoteIPPrefix: n.CIDR}).Extract(); err != nil {
		return err
	}
	mdA, err := x.plane.Machines(ctx, demoNamespace, demoCluster, attachTo)
	if err != nil || len(mdA) == 0 {
		return errors.Join(err, fmt.Errorf("no machine of %s", attachTo))
	}
	mdB, err := x.plane.Machines(ctx, demoNamespace, demoCluster, "md-b")
	if err != nil || len(mdB) == 0 {
		return errors.Join(err, errors.New("no machine of md-b"))
	}
	theVM, err := plane.BootVM(ctx, vm, admin, n, demoVM, plane.ServerID(mdA[0].ProviderID), sg)
	if err != nil {
		return fmt.Errorf("the VM: %w", err)
	}
	defer theVM.Responder.Close() // the namespaces stay; the answering ends with the demo
	x.sayf("VM %s of the VM project: %s on the shared subnet, its security group admitting %s (the guide's rule), answering on port %d",
		demoVM, theVM.Links[0].Addr.Addr(), n.CIDR, plane.VMPort)
	nodeA, _, err := x.plane.PlugMachine(ctx, admin, demoNamespace, mdA[0], dataPathPrefix+"md-a")
	if err != nil {
		return err
	}
	l, _ := nodeA.Link(n.NetworkID)
	// The agent applies the rule to a tap it found a moment ago: ask for 30 s.
	var seen netip.Addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		if seen, err = dataplane.Ask(nodeA.Namespace, theVM.Responder.Addr, 3*time.Second); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("md-a's node %s asked the VM and got no answer: %w", mdA[0].Name, err)
	}
	x.sayf("md-a's node %s -> VM %s: the VM answered, it saw the request come from %s (the node's address on the shared subnet is %s)",
		mdA[0].Name, theVM.Responder.Addr, seen, l.Addr.Addr())
	nodeB, _, err := x.plane.PlugMachine(ctx, admin, demoNamespace, mdB[0], dataPathPrefix+"md-b")
	if err != nil {
		return err
	}
	_, err = dataplane.Ask(nodeB.Namespace, theVM.Responder.Addr, 3*time.Second)
	if err == nil {
		return fmt.Errorf("md-b's node %s reached the VM, though md-b is not attached", mdB[0].Name)
	}
	x.sayf("md-b's node %s -> VM %s: no answer (%v): md-b has no port on the shared network", mdB[0].Name, theVM.Responder.Addr, err)
	x.sayf("look around: ip netns exec %s ping %s   (namespaces %s{md-a,md-b,vm}: removed by make demo-down)",
		nodeA.Namespace, theVM.Links[0].Addr.Addr(), dataPathPrefix)
	return nil
}

// removeDataPath removes what dataPath made: the namespaces (and so the
// veths), then the VM's server, port and security group.
func (x *demo) removeDataPath(ctx context.Context, vm *plane.Cloud) error {
	if err := dataplane.Sweep(ctx, dataPathPrefix); err != nil {
		return fmt.Errorf("removing the demo's network namespaces: %w", err)
	}
	return plane.DeleteVMs(ctx, vm, demoVM)
}

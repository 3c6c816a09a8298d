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

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/test/dataplane"
)

// dataPathPrefix starts the name of every network namespace the suite
// makes, so a run sweeps what a killed earlier run left.
const dataPathPrefix = "capo-e2e-"

// dropWait is how long a request waits for an answer before it counts as
// dropped: the test bed answers on loopback in milliseconds.
const dropWait = 3 * time.Second

// needDataPath fails the spec when this machine cannot plug servers (make
// test runs as root with the test bed's packages installed).
func needDataPath() {
	GinkgoHelper()
	if os.Geteuid() != 0 {
		Fail("the data path needs root for network namespaces and veths (make test runs as root)")
	}
}

// plugMachine plugs a Machine's server (test/dataplane) and runs its route
// commands; it is unplugged when the spec ends.
func plugMachine(ctx SpecContext, ns string, m plane.Machine, name string) *dataplane.Host {
	GinkgoHelper()
	h, out, err := pl.PlugMachine(ctx, admin, ns, m, dataPathPrefix+name)
	Expect(err).NotTo(HaveOccurred(), "route commands printed: %s", out)
	DeferCleanup(func(ctx SpecContext) { Expect(h.Unplug(ctx)).To(Succeed()) }, NodeTimeout(time.Minute))
	if out != "" {
		fmt.Fprintf(GinkgoWriter, "%s: %s", m.Name, out)
	}
	return h
}

// unreachable asserts that nothing the namespace sends to the VM (TCP,
// UDP, ICMP) reaches it: each request goes out and gets no answer (not an
// error of the harness), and the VM saw nothing new.
func unreachable(ctx context.Context, from dataplane.Namespace, vm *plane.VM, why string) {
	GinkgoHelper()
	before := len(vm.Responder.Seen())
	to := vm.Responder.Addr
	_, err := dataplane.Ask(from, to, dropWait)
	Expect(dataplane.IsDropped(err)).To(BeTrue(), "TCP from %s to the VM gets no answer (%s): %v", from, why, err)
	_, err = dataplane.AskUDP(from, to, dropWait)
	Expect(dataplane.IsDropped(err)).To(BeTrue(), "UDP from %s to the VM gets no answer (%s): %v", from, why, err)
	answered, err := from.Ping(ctx, to.Addr().String(), 56)
	Expect(err).NotTo(HaveOccurred())
	Expect(answered).To(BeFalse(), "ICMP from %s to the VM gets no answer: %s", from, why)
	Expect(vm.Responder.Seen()[before:]).To(BeEmpty(), "nothing from %s crossed the bridge to the VM: %s", from, why)
}

// sharedAddress is the node's address on the shared subnet.
func sharedAddress(h *dataplane.Host, vmNet plane.VMNetwork) netip.Addr {
	GinkgoHelper()
	l, ok := h.Link(vmNet.NetworkID)
	Expect(ok).To(BeTrue(), "server %s has a port on the shared network", h.ServerID)
	return l.Addr.Addr()
}

// podAddress is an address of the cluster's pod range, as Calico gives a
// pod on the node.
func podAddress(ctx context.Context, key client.ObjectKey) (netip.Prefix, netip.Addr) {
	GinkgoHelper()
	c := &clusterv1.Cluster{}
	Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
	Expect(c.Spec.ClusterNetwork.Pods.CIDRBlocks).NotTo(BeEmpty(), "the cluster's pod range")
	pods := netip.MustParsePrefix(c.Spec.ClusterNetwork.Pods.CIDRBlocks[0])
	addr := pods.Addr()
	for range 7 {
		addr = addr.Next()
	}
	return pods, addr
}

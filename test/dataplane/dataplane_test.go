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

package dataplane_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	. "github.com/onsi/gomega"

	"github.com/capo-sharednet/capo-sharednet/test/dataplane"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
)

const (
	cidr     = "10.91.0.0/24"
	podCIDR  = "192.168.91.0/24"
	podAddr  = "192.168.91.7"
	listenOn = 8080
	wait     = 3 * time.Second
)

// TestTheTestBedsFirewallDecidesWhatReachesAPluggedServer proves the harness
// and the test bed under the e2e's data-path spec, without a cluster: two
// servers plugged as Nova would plug them, the target's security group
// admitting nothing, then the subnet; a pod behind the client reaching the
// target only when masqueraded (port security drops its own address).
func TestTheTestBedsFirewallDecidesWhatReachesAPluggedServer(t *testing.T) {
	if os.Getenv(testbed.CloudsEnv) == "" {
		t.Skipf("needs the OpenStack test bed (%s)", testbed.CloudsEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and veths")
	}
	for _, tool := range []string{"ip", "iptables", "ping", "cloud-init", "mariadb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (hack/openstack-testbed/testbed.sh install installs it)", tool)
		}
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := testbed.NewClients(t, testbed.ClusterProject)
	admin := testbed.NewClients(t, testbed.Admin)
	// hack/test.sh runs one package at a time: what a killed run left is swept.
	const prefix = "capo-dpt-"
	g.Expect(dataplane.Sweep(ctx, prefix)).To(Succeed())
	t.Cleanup(func() { g.Expect(dataplane.Sweep(context.Background(), prefix)).To(Succeed()) })

	n, err := networks.Create(ctx, c.Network, networks.CreateOpts{Name: testbed.Name(t, "net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(context.Background(), c.Network, n.ID).ExtractErr() })
	s, err := subnets.Create(ctx, c.Network, subnets.CreateOpts{NetworkID: n.ID, CIDR: cidr, IPVersion: 4, Name: testbed.Name(t, "subnet")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	closed, err := groups.Create(ctx, c.Network, groups.CreateOpts{Name: testbed.Name(t, "closed")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = groups.Delete(context.Background(), c.Network, closed.ID).ExtractErr() })

	pages, err := images.List(c.Image, images.ListOpts{Name: "testbed-image"}).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	imgs, err := images.ExtractImages(pages)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(imgs).NotTo(BeEmpty(), "the test bed's image")
	boot := func(name string, groupIDs []string) (*dataplane.Host, ports.Port) {
		p, err := ports.Create(ctx, c.Network, ports.CreateOpts{NetworkID: n.ID, Name: testbed.Name(t, name), SecurityGroups: &groupIDs}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = ports.Delete(context.Background(), c.Network, p.ID).ExtractErr() })
		id, err := dataplane.BootServer(ctx, c.Compute, testbed.Name(t, name), imgs[0].ID, "1", p.ID)
		t.Cleanup(func() { _ = dataplane.DeleteServer(context.Background(), c.Compute, id) })
		g.Expect(err).NotTo(HaveOccurred())
		h, err := dataplane.Plug(ctx, admin.Network, id, prefix+name)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { g.Expect(h.Unplug(context.Background())).To(Succeed()) })
		return h, *p
	}
	// The client's group admits its own traffic back (egress is open, and
	// the firewall is stateful); the target's admits nothing yet.
	client, clientPort := boot("client", []string{closed.ID})
	target, targetPort := boot("target", []string{closed.ID})
	g.Expect(dataplane.WaitActive(ctx, admin.Network, time.Minute, clientPort.ID, targetPort.ID)).To(Succeed(), "the agent plugged both taps")
	g.Expect(client.Links).To(HaveLen(1))
	g.Expect(client.Links[0].Tap).To(Equal("tap" + clientPort.ID[:11]))
	g.Expect(client.Links[0].MAC).To(Equal(clientPort.MACAddress))
	g.Expect(client.Links[0].Addr.Addr().String()).To(Equal(clientPort.FixedIPs[0].IPAddress))
	routes, err := client.Routes(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(routes).To(ContainElement(dataplane.Route{Dst: "default", Gateway: s.GatewayIP, Dev: "eth0", Protocol: "dhcp"}), "what Neutron's DHCP gives")

	targetAddr := target.Links[0].Addr.Addr()
	r, err := dataplane.Serve(target.Namespace, netip.AddrPortFrom(targetAddr, listenOn))
	g.Expect(err).NotTo(HaveOccurred())
	defer r.Close()
	to := netip.AddrPortFrom(targetAddr, listenOn)

	t.Log("the target's security group admits nothing: TCP, UDP and ICMP are dropped")
	_, err = dataplane.Ask(client.Namespace, to, wait)
	g.Expect(dataplane.IsTimeout(err)).To(BeTrue(), "dropped, not refused: %v", err)
	_, err = dataplane.AskUDP(client.Namespace, to, wait)
	g.Expect(dataplane.IsTimeout(err)).To(BeTrue(), "%v", err)
	g.Expect(client.Ping(ctx, targetAddr.String(), 56)).To(BeFalse(), "sent, no answer")
	g.Expect(r.Seen()).To(BeEmpty())

	t.Log("an ingress rule for the subnet's range: TCP, UDP and ICMP pass, the target sees the client's address")
	_, err = rules.Create(ctx, c.Network, rules.CreateOpts{SecGroupID: closed.ID, Direction: rules.DirIngress, EtherType: rules.EtherType4, RemoteIPPrefix: cidr}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	clientAddr := client.Links[0].Addr.Addr()
	g.Eventually(func() (netip.Addr, error) { return dataplane.Ask(client.Namespace, to, wait) }, time.Minute, time.Second).Should(Equal(clientAddr))
	g.Expect(dataplane.AskUDP(client.Namespace, to, wait)).To(Equal(clientAddr))
	mtu := client.Links[0].MTU
	g.Expect(client.Ping(ctx, targetAddr.String(), 56)).To(BeTrue())
	g.Expect(client.Ping(ctx, targetAddr.String(), mtu-28)).To(BeTrue(), "a packet of the network's MTU (%d) with DF set", mtu)
	g.Expect(client.Ping(ctx, targetAddr.String(), mtu-27)).To(BeFalse(), "one byte more does not pass with DF set")

	t.Log("a pod behind the client: dropped by port security with its own address, passes masqueraded")
	pod, err := client.AddPod(ctx, netip.MustParseAddr(podAddr))
	g.Expect(err).NotTo(HaveOccurred())
	before := len(r.Seen())
	_, err = dataplane.AskUDP(pod, to, wait)
	g.Expect(dataplane.IsTimeout(err)).To(BeTrue(), "%v", err)
	g.Expect(r.Seen()).To(HaveLen(before), "nothing from the pod's own address crossed the bridge")
	g.Expect(client.Masquerade(ctx, netip.MustParsePrefix(podCIDR), true)).To(Succeed())
	g.Expect(dataplane.Ask(pod, to, wait)).To(Equal(clientAddr))
	g.Expect(dataplane.AskUDP(pod, to, wait)).To(Equal(clientAddr))

	t.Log("unplugged: the namespaces and the taps are gone")
	g.Expect(client.Unplug(ctx)).To(Succeed())
	for _, name := range []string{"/run/netns/" + string(client.Namespace), "/run/netns/" + string(pod), "/sys/class/net/" + client.Links[0].Tap} {
		_, err := os.Stat(name)
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "%s is gone", name)
	}
}

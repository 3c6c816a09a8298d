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

// Package noderoutes proves, without booting a node, what an attached node's
// network looks like: the network_data.json Nova serves for a server with a
// port on the cluster network and a port on a shared subnet with a gateway
// and a host route, rendered by cloud-init's own converter into netplan,
// then changed by the route script the extension puts into the nodegroup's
// bootstrap configuration (run in a network namespace of its own, with
// veth interfaces standing for the server's two). The node keeps exactly one
// default route, via the cluster network, and the route to the VM project's
// other subnet.
package noderoutes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/capo-sharednet/capo-sharednet/internal/patches/nodeconfig"
	"github.com/capo-sharednet/capo-sharednet/test/dataplane"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
)

const (
	sharedCIDR    = "10.77.0.0/24"
	sharedGateway = "10.77.0.1"
	// The VM project's other subnet, reached through the shared subnet.
	vmSubnet, vmRouter = "10.78.0.0/24", "10.77.0.254"
	clusterCIDR        = "10.76.0.0/24"
	// Another subnet of the shared network, which Neutron's DHCP makes
	// on-link.
	onLink         = "10.79.0.0/24"
	clusterGateway = "10.76.0.1"
)

// networkData is what Nova serves the server as network_data.json.
func networkData(t *testing.T, serverID string) []byte {
	t.Helper()
	out, err := dataplane.NetworkData(context.Background(), serverID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// netplanFile is the part of a netplan file the test reads.
type netplanFile struct {
	Network struct {
		Ethernets map[string]struct {
			Match     struct{ MACAddress string } `json:"match"`
			Addresses []string                    `json:"addresses"`
			DHCP4     bool                        `json:"dhcp4"`
			Overrides struct {
				UseRoutes *bool `json:"use-routes"`
			} `json:"dhcp4-overrides"`
			Gateway4 string                            `json:"gateway4"`
			Routes   []struct{ To, Via, Scope string } `json:"routes"`
		} `json:"ethernets"`
	} `json:"network"`
}

// defaultRoutes are the MACs of the interfaces a node with this netplan
// configuration takes a default route from: a static one, gateway4, or DHCP
// routes (Neutron's DHCP gives the subnet's gateway as the router).
func defaultRoutes(t *testing.T, path string) (macs []string, routes map[string][]string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f netplanFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	routes = map[string][]string{}
	for _, e := range f.Network.Ethernets {
		mac := strings.ToLower(e.Match.MACAddress)
		defaults := e.Gateway4 != "" || (e.DHCP4 && (e.Overrides.UseRoutes == nil || *e.Overrides.UseRoutes))
		for _, r := range e.Routes {
			if r.To == "default" || r.To == "0.0.0.0/0" {
				defaults = true
				continue
			}
			if r.Via == "" {
				routes[mac] = append(routes[mac], r.To+" scope "+r.Scope)
				continue
			}
			routes[mac] = append(routes[mac], r.To+" via "+r.Via)
		}
		if defaults {
			macs = append(macs, mac)
		}
	}
	return macs, routes
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (hack/openstack-testbed/testbed.sh install installs it)", tool)
		}
	}
}

func TestAnAttachedNodeKeepsOneDefaultRouteViaTheClusterNetwork(t *testing.T) {
	// Neutron's DHCP hands out the gateway (Nova serves type ipv4_dhcp), or
	// Nova serves the address and a default route (DHCP disabled).
	t.Run("the shared subnet with DHCP", func(t *testing.T) { attachedNode(t, true) })
	t.Run("the shared subnet without DHCP: a static configuration", func(t *testing.T) { attachedNode(t, false) })
}

func attachedNode(t *testing.T, dhcp bool) {
	t.Helper()
	if os.Getenv(testbed.CloudsEnv) == "" {
		t.Skipf("needs the OpenStack test bed (%s)", testbed.CloudsEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace of its own")
	}
	need(t, "cloud-init", "netplan", "unshare", "ip", "mariadb")
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := testbed.NewClients(t, testbed.ClusterProject)

	// Both networks in the cluster's project: how the shared network came
	// to be usable (a share) does not change what Nova serves.
	network := func(cidr, gateway string, dhcp bool, hostRoutes []subnets.HostRoute) (string, string) {
		n, err := networks.Create(ctx, c.Network, networks.CreateOpts{Name: testbed.Name(t, "net")}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = networks.Delete(context.Background(), c.Network, n.ID).ExtractErr() })
		s, err := subnets.Create(ctx, c.Network, subnets.CreateOpts{NetworkID: n.ID, CIDR: cidr, IPVersion: 4, GatewayIP: &gateway,
			EnableDHCP: &dhcp, HostRoutes: hostRoutes, Name: testbed.Name(t, "subnet")}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = subnets.Delete(context.Background(), c.Network, s.ID).ExtractErr() })
		return n.ID, s.ID
	}
	clusterNet, _ := network(clusterCIDR, clusterGateway, true, nil)
	sharedNet, _ := network(sharedCIDR, sharedGateway, dhcp, []subnets.HostRoute{{DestinationCIDR: vmSubnet, NextHop: vmRouter}})

	pages, err := images.List(c.Image, images.ListOpts{Name: "testbed-image"}).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	imgs, err := images.ExtractImages(pages)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(imgs).NotTo(BeEmpty(), "the test bed's image")
	srv, err := servers.Create(ctx, c.Compute, servers.CreateOpts{Name: testbed.Name(t, "node"), ImageRef: imgs[0].ID, FlavorRef: "1",
		Networks: []servers.Network{{UUID: clusterNet}, {UUID: sharedNet}}}, nil).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = dataplane.DeleteServer(context.Background(), c.Compute, srv.ID) })
	g.Expect(dataplane.WaitServerActive(ctx, c.Compute, srv.ID)).To(Succeed())

	// The server's two ports: their MACs and addresses name the interfaces.
	pages, err = ports.List(c.Network, ports.ListOpts{DeviceID: srv.ID}).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	ps, err := ports.ExtractPorts(pages)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ps).To(HaveLen(2))
	var clusterPort, sharedPort ports.Port
	for _, p := range ps {
		if p.NetworkID == clusterNet {
			clusterPort = p
		} else {
			sharedPort = p
		}
	}

	dir := t.TempDir()
	nd := filepath.Join(dir, "network_data.json")
	g.Expect(os.WriteFile(nd, networkData(t, srv.ID), 0o600)).To(Succeed())
	t.Logf("network_data.json served for server %s:\n%s", srv.ID, must(os.ReadFile(nd)))
	root := filepath.Join(dir, "root")
	// The node's NICs, as the kernel names them in the order Nova plugs the ports.
	convert := exec.CommandContext(ctx, "cloud-init", "devel", "net-convert", "-p", nd, "-k", "network_data.json", "-d", root, "-D", "ubuntu", "-O", "netplan",
		"-m", "eth0,"+clusterPort.MACAddress, "-m", "eth1,"+sharedPort.MACAddress)
	out, err := convert.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "cloud-init devel net-convert: %s", out)
	netplan := filepath.Join(root, "etc", "netplan", "50-cloud-init.yaml")

	By := func(s string) { t.Log(s) }
	By("as cloud-init renders it, the node takes a default route from both interfaces")
	defaults, _ := defaultRoutes(t, netplan)
	g.Expect(defaults).To(ConsistOf(clusterPort.MACAddress, sharedPort.MACAddress), "%s", must(os.ReadFile(netplan)))

	By("with the extension's route script run before kubeadm join, one: via the cluster network")
	script := filepath.Join(dir, "capo-sharednet-routes")
	add := nodeconfig.For("vm-net", sharedCIDR)
	g.Expect(os.WriteFile(script, []byte(add.Script), 0o755)).To(Succeed())
	g.Expect(add.Command).To(Equal(nodeconfig.ScriptPath + " " + sharedCIDR))
	node := fmt.Sprintf(`set -e
ip link add eth0 address %[1]s type veth peer name peer0 && ip link set peer0 up && ip link set eth0 up && ip addr add %[2]s/24 dev eth0
ip link add eth1 address %[3]s type veth peer name peer1 && ip link set peer1 up && ip link set eth1 up && ip addr add %[4]s/24 dev eth1
ip route add default via %[5]s dev eth0 proto dhcp metric 100
ip route append default via %[6]s dev eth1 proto %[12]s metric 100
ip route add %[7]s via %[8]s dev eth1 proto %[12]s
ip route add %[13]s dev eth1 proto %[12]s scope link
mkdir -p %[9]s.none
NETPLAN_DIR=%[9]s.none /usr/bin/python3 %[10]s %[11]s
ip -4 route show default dev eth1 | grep -q %[6]s
NETPLAN_DIR=%[9]s /usr/bin/python3 %[10]s %[11]s
echo ---
ip -j -4 route show`, clusterPort.MACAddress, clusterPort.FixedIPs[0].IPAddress, sharedPort.MACAddress, sharedPort.FixedIPs[0].IPAddress,
		clusterGateway, sharedGateway, vmSubnet, vmRouter, filepath.Dir(netplan), script, sharedCIDR, map[bool]string{true: "dhcp", false: "static"}[dhcp], onLink)
	out, err = exec.CommandContext(ctx, "unshare", "--net", "sh", "-c", node).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "the script in a network namespace: %s", out)
	logged, live, _ := strings.Cut(string(out), "---\n")
	g.Expect(logged).To(ContainSubstring("no netplan configuration of eth1"), "without netplan, the live routes are left alone (a DHCP renewal would bring the default back)")
	g.Expect(logged).To(ContainSubstring("eth1 (" + sharedPort.MACAddress + ") on " + sharedCIDR + " keeps no default route"))

	By("the configuration a reboot or a DHCP renewal applies")
	defaults, routes := defaultRoutes(t, netplan)
	g.Expect(defaults).To(Equal([]string{clusterPort.MACAddress}), "%s", must(os.ReadFile(netplan)))
	g.Expect(routes[sharedPort.MACAddress]).To(ContainElement(vmSubnet+" via "+vmRouter), "the route to the VM project's other subnet stays")
	if dhcp {
		g.Expect(routes[sharedPort.MACAddress]).To(ContainElement(onLink+" scope link"), "Neutron's on-link route to another subnet of the network stays")
	}
	gen := exec.CommandContext(ctx, "netplan", "generate", "--root-dir", root)
	out, err = gen.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "netplan generate: %s", out)
	g.Expect(networkdDefaults(t, root)).To(Equal(1), "systemd-networkd gets one default route: %s", networkdFiles(t, root))

	By("the routes the node has now")
	var table []struct{ Dst, Gateway, Dev string }
	g.Expect(json.Unmarshal([]byte(live), &table)).To(Succeed(), live)
	var liveDefaults []string
	toVMs := false
	for _, r := range table {
		if r.Dst == "default" {
			liveDefaults = append(liveDefaults, r.Dev+" via "+r.Gateway)
		}
		toVMs = toVMs || (r.Dst == vmSubnet && r.Gateway == vmRouter && r.Dev == "eth1")
	}
	g.Expect(liveDefaults).To(Equal([]string{"eth0 via " + clusterGateway}))
	g.Expect(toVMs).To(BeTrue(), "%v", table)
	g.Expect(netip.MustParsePrefix(sharedCIDR).Contains(netip.MustParseAddr(sharedPort.FixedIPs[0].IPAddress))).To(BeTrue())
}

// networkdDefaults counts what gives systemd-networkd a default route in the
// .network files netplan generated: a [Route] without a Destination (or to
// 0.0.0.0/0), and DHCP whose routes are used.
func networkdDefaults(t *testing.T, root string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "run", "systemd", "network", "*.network"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no .network file generated under %s: %v", root, err)
	}
	n := 0
	for _, f := range files {
		// Section name -> its lines, for the sections the count reads.
		sections := map[string][]string{}
		var routes [][]string
		name := ""
		for _, line := range strings.Split(string(must(os.ReadFile(f))), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "["):
				name = strings.Trim(line, "[]")
				if name == "Route" {
					routes = append(routes, nil)
				}
			case line == "":
			case name == "Route":
				routes[len(routes)-1] = append(routes[len(routes)-1], line)
			default:
				sections[name] = append(sections[name], line)
			}
		}
		for _, r := range routes {
			if !slices.ContainsFunc(r, func(l string) bool { return strings.HasPrefix(l, "Destination=") && l != "Destination=0.0.0.0/0" }) {
				n++
			}
		}
		dhcp := slices.Contains(sections["Network"], "DHCP=ipv4") || slices.Contains(sections["Network"], "DHCP=yes")
		// [DHCP]: the older name of [DHCPv4], which netplan still writes.
		noRoutes := slices.Contains(sections["DHCPv4"], "UseRoutes=false") || slices.Contains(sections["DHCP"], "UseRoutes=false")
		if dhcp && !noRoutes {
			n++
		}
	}
	return n
}

// networkdFiles is what netplan generated, for a failure's message.
func networkdFiles(t *testing.T, root string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "run", "systemd", "network", "*.network"))
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "\n# %s\n%s", filepath.Base(f), must(os.ReadFile(f)))
	}
	return b.String()
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

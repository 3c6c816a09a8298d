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

// Package dataplane is a test harness (not product code): it gives a Nova
// server of the OpenStack test bed, which the fake virt driver boots
// nothing for, the network a real compute host would give it, so packets
// cross Neutron's real bridges and the linuxbridge agent's firewall.
//
// For each of the server's ports, as Nova's os-vif linux_bridge plugin and
// libvirt do: a veth whose host end is named tap<port ID[:11]> and is put
// into the network's bridge brq<network ID[:11]>, and whose other end is the
// server's NIC (eth0, eth1, ... in the order of its network_data.json) with
// the port's MAC, in a network namespace of the server's own. The NICs are
// configured as cloud-init configures them from the server's
// network_data.json (cloud-init's own converter renders it to netplan; DHCP
// answers are what Neutron's DHCP agent would give). The agent then finds
// the taps, applies the ports' security groups and port security, and
// reports the ports ACTIVE.
//
// Every namespace, veth and bridge it makes carries a name the harness can
// find again (Sweep), so nothing outlives a failed run.
package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/capo-sharednet/capo-sharednet/internal/patches/nodeconfig"
)

// Link is one NIC of a plugged server and the Neutron port behind it.
type Link struct {
	// Name is the NIC in the server's namespace (eth0, eth1, ...).
	Name, MAC                   string
	PortID, NetworkID, SubnetID string
	// Tap and Bridge are the host's side, as os-vif names them.
	Tap, Bridge string
	// Addr is the port's address with its subnet's prefix length.
	Addr netip.Prefix
	MTU  int
}

// Host is a Nova server plugged on this machine.
type Host struct {
	Namespace
	ServerID string
	Links    []Link
	// NetplanDir holds the netplan configuration cloud-init rendered (the
	// route script edits it as it edits /etc/netplan on a node).
	NetplanDir string
	dir        string
	bridges    []string
	pods       []Namespace
}

// Link is the NIC on a network, if the server has a port on it.
func (h *Host) Link(networkID string) (Link, bool) {
	i := slices.IndexFunc(h.Links, func(l Link) bool { return l.NetworkID == networkID })
	if i < 0 {
		return Link{}, false
	}
	return h.Links[i], true
}

// Tap is the host end of a port's veth, as os-vif names it.
func Tap(portID string) string { return "tap" + portID[:11] }

// Bridge is a network's bridge, as the linuxbridge agent names it.
func Bridge(networkID string) string { return "brq" + networkID[:11] }

// Plug gives a server of the test bed its network on this machine, in the
// namespace name (which must start with a prefix a Sweep removes). network
// must be able to read the server's ports and their subnets (the admin
// credential). On an error, whatever was made is removed again.
func Plug(ctx context.Context, network *gophercloud.ServiceClient, serverID, name string) (h *Host, err error) {
	h = &Host{Namespace: Namespace(name), ServerID: serverID}
	defer func() {
		if err != nil {
			_ = h.Unplug(context.WithoutCancel(ctx))
			h = nil
		}
	}()
	if h.dir, err = os.MkdirTemp("", "dataplane-"+name+"-"); err != nil {
		return h, err
	}
	nd, err := NetworkData(ctx, serverID)
	if err != nil {
		return h, err
	}
	order, err := linkOrder(nd)
	if err != nil {
		return h, err
	}
	pages, err := ports.List(network, ports.ListOpts{DeviceID: serverID}).AllPages(ctx)
	if err != nil {
		return h, fmt.Errorf("listing the ports of server %s: %w", serverID, err)
	}
	all, err := ports.ExtractPorts(pages)
	if err != nil {
		return h, err
	}
	if len(all) != len(order) {
		return h, fmt.Errorf("server %s has %d ports in Neutron and %d links in its network_data.json", serverID, len(all), len(order))
	}
	var macs []string
	for i, mac := range order {
		j := slices.IndexFunc(all, func(p ports.Port) bool { return strings.EqualFold(p.MACAddress, mac) })
		if j < 0 {
			return h, fmt.Errorf("server %s: no port has MAC %s of its network_data.json", serverID, mac)
		}
		l, err := describe(ctx, network, all[j], fmt.Sprintf("eth%d", i))
		if err != nil {
			return h, err
		}
		h.Links = append(h.Links, l)
		macs = append(macs, "-m", l.Name+","+l.MAC)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "network_data.json"), nd, 0o600); err != nil {
		return h, err
	}
	root := filepath.Join(h.dir, "root")
	convert := exec.CommandContext(ctx, "cloud-init", append([]string{"devel", "net-convert", "-p", filepath.Join(h.dir, "network_data.json"),
		"-k", "network_data.json", "-d", root, "-D", "ubuntu", "-O", "netplan"}, macs...)...)
	if out, err := convert.CombinedOutput(); err != nil {
		return h, fmt.Errorf("cloud-init devel net-convert: %w: %s", err, out)
	}
	h.NetplanDir = filepath.Join(root, "etc", "netplan")
	if err := run(ctx, "ip", "netns", "add", name); err != nil {
		return h, err
	}
	for _, l := range h.Links {
		if err := h.plugLink(ctx, l); err != nil {
			return h, err
		}
	}
	if err := h.configure(ctx, network); err != nil {
		return h, err
	}
	return h, nil
}

// describe reads what plugging a port needs: its network's MTU and its
// address on its subnet.
func describe(ctx context.Context, network *gophercloud.ServiceClient, p ports.Port, nic string) (Link, error) {
	l := Link{Name: nic, MAC: strings.ToLower(p.MACAddress), PortID: p.ID, NetworkID: p.NetworkID, Tap: Tap(p.ID), Bridge: Bridge(p.NetworkID)}
	if len(p.FixedIPs) == 0 {
		return l, fmt.Errorf("port %s has no address", p.ID)
	}
	l.SubnetID = p.FixedIPs[0].SubnetID
	s, err := subnets.Get(ctx, network, l.SubnetID).Extract()
	if err != nil {
		return l, fmt.Errorf("subnet %s of port %s: %w", l.SubnetID, p.ID, err)
	}
	prefix, err := netip.ParsePrefix(s.CIDR)
	if err != nil {
		return l, err
	}
	addr, err := netip.ParseAddr(p.FixedIPs[0].IPAddress)
	if err != nil {
		return l, err
	}
	l.Addr = netip.PrefixFrom(addr, prefix.Bits())
	var mtu struct {
		MTU int `json:"mtu"`
	}
	if err := networks.Get(ctx, network, p.NetworkID).ExtractInto(&mtu); err != nil {
		return l, fmt.Errorf("network %s of port %s: %w", p.NetworkID, p.ID, err)
	}
	l.MTU = mtu.MTU
	return l, nil
}

// plugLink is os-vif's linux_bridge plug and libvirt's tap: the bridge
// made when missing, the tap in it, the NIC in the server's namespace.
func (h *Host) plugLink(ctx context.Context, l Link) error {
	if _, err := os.Stat("/sys/class/net/" + l.Bridge); os.IsNotExist(err) {
		if err := run(ctx, "ip", "link", "add", l.Bridge, "type", "bridge"); err != nil {
			return err
		}
		h.bridges = append(h.bridges, l.Bridge)
	}
	mtu := fmt.Sprint(l.MTU)
	for _, args := range [][]string{
		{"link", "add", l.Tap, "mtu", mtu, "type", "veth", "peer", "name", l.Name, "netns", string(h.Namespace)},
		{"link", "set", l.Tap, "master", l.Bridge},
		{"link", "set", l.Tap, "up"},
		{"link", "set", l.Bridge, "up"},
		{"-n", string(h.Namespace), "link", "set", l.Name, "address", l.MAC, "mtu", mtu},
	} {
		if err := run(ctx, "ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// netplan is the part of cloud-init's netplan output the harness applies.
type netplan struct {
	Network struct {
		Ethernets map[string]struct {
			Match struct {
				MACAddress string `json:"macaddress"`
			} `json:"match"`
			Addresses []string `json:"addresses"`
			DHCP4     bool     `json:"dhcp4"`
			Gateway4  string   `json:"gateway4"`
			MTU       int      `json:"mtu"`
			Routes    []struct {
				To, Via string
			} `json:"routes"`
		} `json:"ethernets"`
	} `json:"network"`
}

// configure brings the NICs up as the node's systemd-networkd would with
// cloud-init's netplan: static addresses and routes as written; a DHCP NIC
// gets what Neutron's DHCP agent answers (the port's address, the network's
// MTU, a default route through the subnet's gateway, its host routes, the
// network's other subnets on link), marked proto dhcp.
func (h *Host) configure(ctx context.Context, network *gophercloud.ServiceClient) error {
	files, err := filepath.Glob(filepath.Join(h.NetplanDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("cloud-init rendered no netplan configuration into %s: %v", h.NetplanDir, err)
	}
	script := []string{"ip link set lo up"}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var np netplan
		if err := yaml.Unmarshal(raw, &np); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, eth := range np.Network.Ethernets {
			i := slices.IndexFunc(h.Links, func(l Link) bool { return strings.EqualFold(l.MAC, eth.Match.MACAddress) })
			if i < 0 {
				continue
			}
			l := h.Links[i]
			if eth.MTU > 0 {
				script = append(script, fmt.Sprintf("ip link set %s mtu %d", l.Name, eth.MTU))
			}
			script = append(script, "ip link set "+l.Name+" up")
			if eth.DHCP4 {
				dhcp, err := dhcpAnswer(ctx, network, l)
				if err != nil {
					return err
				}
				script = append(script, dhcp...)
				continue
			}
			for _, a := range eth.Addresses {
				script = append(script, fmt.Sprintf("ip addr add %s dev %s", a, l.Name))
			}
			if eth.Gateway4 != "" {
				script = append(script, fmt.Sprintf("ip route append default via %s dev %s proto static metric 100", eth.Gateway4, l.Name))
			}
			for _, r := range eth.Routes {
				to := r.To
				if to == "0.0.0.0/0" {
					to = "default"
				}
				script = append(script, fmt.Sprintf("ip route append %s via %s dev %s proto static metric 100", to, r.Via, l.Name))
			}
		}
	}
	if out, err := h.Sh(ctx, strings.Join(script, "\n")); err != nil {
		return fmt.Errorf("configuring %s as its netplan says: %w: %s", h.Namespace, err, out)
	}
	return nil
}

// dhcpAnswer is the configuration Neutron's DHCP agent gives a port, as
// systemd-networkd applies it.
func dhcpAnswer(ctx context.Context, network *gophercloud.ServiceClient, l Link) ([]string, error) {
	s, err := subnets.Get(ctx, network, l.SubnetID).Extract()
	if err != nil {
		return nil, err
	}
	out := []string{
		fmt.Sprintf("ip link set %s mtu %d", l.Name, l.MTU),
		fmt.Sprintf("ip addr add %s dev %s", l.Addr, l.Name),
	}
	if s.GatewayIP != "" {
		// networkd adds a route to the gateway itself, and to each DNS server
		// off the subnet through it (RoutesToDNS).
		out = append(out, fmt.Sprintf("ip route append %s dev %s proto dhcp scope link metric 100", s.GatewayIP, l.Name),
			fmt.Sprintf("ip route append default via %s dev %s proto dhcp metric 100", s.GatewayIP, l.Name))
		for _, dns := range s.DNSNameservers {
			if a, err := netip.ParseAddr(dns); err == nil && a.Is4() && !l.Addr.Masked().Contains(a) {
				out = append(out, fmt.Sprintf("ip route append %s via %s dev %s proto dhcp metric 100", a, s.GatewayIP, l.Name))
			}
		}
	}
	for _, r := range s.HostRoutes {
		out = append(out, fmt.Sprintf("ip route append %s via %s dev %s proto dhcp metric 100", r.DestinationCIDR, r.NextHop, l.Name))
	}
	pages, err := subnets.List(network, subnets.ListOpts{NetworkID: l.NetworkID}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	others, err := subnets.ExtractSubnets(pages)
	if err != nil {
		return nil, err
	}
	for _, o := range others {
		if o.ID != s.ID && o.IPVersion == 4 {
			out = append(out, fmt.Sprintf("ip route append %s dev %s proto dhcp scope link metric 100", o.CIDR, l.Name))
		}
	}
	return out, nil
}

// RunRouteCommands runs the route commands the extension rendered into a
// nodegroup's KubeadmConfig (its preKubeadmCommands that run one of its
// files), as cloud-init runs them before kubeadm join: the file's content
// and the command exactly as rendered, the file at a path of the harness's
// instead of the node's, and NETPLAN_DIR pointing at the server's rendered
// netplan. It returns what they printed; none run when the configuration
// has no route commands (a nodegroup that is not attached).
func (h *Host) RunRouteCommands(ctx context.Context, spec bootstrapv1.KubeadmConfigSpec) (string, error) {
	var out strings.Builder
	for _, c := range spec.PreKubeadmCommands {
		if !strings.HasPrefix(c, nodeconfig.ScriptPath+" ") {
			continue
		}
		i := slices.IndexFunc(spec.Files, func(f bootstrapv1.File) bool { return f.Path == nodeconfig.ScriptPath })
		if i < 0 {
			return out.String(), fmt.Errorf("preKubeadmCommands run %s, which the configuration's files do not hold", nodeconfig.ScriptPath)
		}
		script := filepath.Join(h.dir, filepath.Base(nodeconfig.ScriptPath))
		if err := os.WriteFile(script, []byte(spec.Files[i].Content), 0o755); err != nil {
			return out.String(), err
		}
		cmd := script + strings.TrimPrefix(c, nodeconfig.ScriptPath)
		got, err := h.Exec(ctx, "env", "NETPLAN_DIR="+h.NetplanDir, "sh", "-c", cmd)
		out.Write(got)
		if err != nil {
			return out.String(), err
		}
	}
	return out.String(), nil
}

// Unplug removes the server's namespace (and with it its veths), its pods'
// namespaces, and the bridges Plug made that hold no tap any more.
func (h *Host) Unplug(ctx context.Context) error {
	var errs []error
	for _, p := range h.pods {
		errs = append(errs, deleteNamespace(ctx, p))
	}
	errs = append(errs, deleteNamespace(ctx, h.Namespace))
	for _, l := range h.Links { // normally gone with the namespace's end of the veth
		if err := run(ctx, "ip", "link", "delete", l.Tap); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	for _, b := range h.bridges {
		errs = append(errs, deleteBridgeWithoutTaps(ctx, b))
	}
	if h.dir != "" {
		errs = append(errs, os.RemoveAll(h.dir))
	}
	return errors.Join(errs...)
}

// deleteBridgeWithoutTaps deletes a bridge whose ports are only the agent's
// vxlan interface (deleted with it), so a later plug finds a fresh one.
func deleteBridgeWithoutTaps(ctx context.Context, bridge string) error {
	members, err := filepath.Glob("/sys/class/net/" + bridge + "/brif/*")
	if err != nil {
		return err
	}
	var vxlans []string
	for _, m := range members {
		name := filepath.Base(m)
		if strings.HasPrefix(name, "tap") {
			return nil // another server's port is still plugged
		}
		if strings.HasPrefix(name, "vxlan-") {
			vxlans = append(vxlans, name)
		}
	}
	if _, err := os.Stat("/sys/class/net/" + bridge); os.IsNotExist(err) {
		return nil
	}
	errs := []error{run(ctx, "ip", "link", "delete", bridge)}
	for _, v := range vxlans {
		errs = append(errs, run(ctx, "ip", "link", "delete", v))
	}
	return errors.Join(errs...)
}

// Sweep removes what an earlier run left: the namespaces whose names start
// with prefix (and so their veths: deleting one end of a veth deletes the
// tap), then the network bridges that hold no tap any more.
func Sweep(ctx context.Context, prefix string) error {
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			errs = append(errs, deleteNamespace(ctx, Namespace(e.Name())))
		}
	}
	bridges, err := filepath.Glob("/sys/class/net/brq*")
	if err != nil {
		return err
	}
	for _, b := range bridges {
		errs = append(errs, deleteBridgeWithoutTaps(ctx, filepath.Base(b)))
	}
	return errors.Join(errs...)
}

// WaitActive waits until Neutron reports each port ACTIVE: the agent found
// its tap, applied its security groups and told the server.
func WaitActive(ctx context.Context, network *gophercloud.ServiceClient, timeout time.Duration, portIDs ...string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	status := map[string]string{}
	for {
		pending := 0
		for _, id := range portIDs {
			p, err := ports.Get(ctx, network, id).Extract()
			if err != nil {
				status[id] = err.Error()
				pending++
				continue
			}
			status[id] = p.Status
			if p.Status != "ACTIVE" {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ports not ACTIVE within %s (the linuxbridge agent plugs taps every 2 s; see its log): %v", timeout, status)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// BootServer boots a server on the given ports (the flavor's ID and the
// image's) and waits until Nova reports it ACTIVE: the fake driver boots
// nothing, and its ports are bound to the test bed's host, ready to plug.
func BootServer(ctx context.Context, compute *gophercloud.ServiceClient, name, imageID, flavorID string, portIDs ...string) (string, error) {
	var nets []servers.Network
	for _, p := range portIDs {
		nets = append(nets, servers.Network{Port: p})
	}
	srv, err := servers.Create(ctx, compute, servers.CreateOpts{Name: name, ImageRef: imageID, FlavorRef: flavorID, Networks: nets}, nil).Extract()
	if err != nil {
		return "", fmt.Errorf("booting server %s: %w", name, err)
	}
	return srv.ID, WaitServerActive(ctx, compute, srv.ID)
}

// WaitServerActive waits, two minutes at most, until Nova reports the
// server ACTIVE; an error when it goes to ERROR.
func WaitServerActive(ctx context.Context, compute *gophercloud.ServiceClient, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		s, err := servers.Get(ctx, compute, id).Extract()
		switch {
		case err == nil && s.Status == "ACTIVE":
			return nil
		case err == nil && s.Status == "ERROR":
			return fmt.Errorf("server %s went to ERROR: %v", id, s.Fault)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server %s not ACTIVE within 2 minutes", id)
		case <-time.After(time.Second):
		}
	}
}

// DeleteServer deletes a server and waits, a minute at most, until Nova no
// longer knows it (its ports are then unbound or deleted).
func DeleteServer(ctx context.Context, compute *gophercloud.ServiceClient, id string) error {
	if err := servers.Delete(ctx, compute, id).ExtractErr(); err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if _, err := servers.Get(ctx, compute, id).Extract(); gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server %s still there a minute after its deletion", id)
		case <-time.After(time.Second):
		}
	}
}

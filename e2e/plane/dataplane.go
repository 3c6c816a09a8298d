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

package plane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capo-sharednet/capo-sharednet/test/dataplane"
)

// VMPort is the port the VM's responder listens on.
const VMPort = 8080

// PlugMachine plugs the Nova server of a Machine on this machine
// (test/dataplane) in the network namespace name, runs the route commands
// the extension rendered into the Machine's KubeadmConfig (none for a
// nodegroup that is not attached), and waits until Neutron reports its
// ports ACTIVE. It returns the plugged server and what the route commands
// printed.
func (p *Plane) PlugMachine(ctx context.Context, admin *Cloud, namespace string, m Machine, name string) (*dataplane.Host, string, error) {
	machine := &clusterv1.Machine{}
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Name}, machine); err != nil {
		return nil, "", err
	}
	ref := machine.Spec.Bootstrap.ConfigRef
	if ref.Kind != "KubeadmConfig" || ref.Name == "" {
		return nil, "", fmt.Errorf("machine %s has no KubeadmConfig", m.Name)
	}
	config := &bootstrapv1.KubeadmConfig{}
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, config); err != nil {
		return nil, "", err
	}
	h, err := dataplane.Plug(ctx, admin.Network, ServerID(m.ProviderID), name)
	if err != nil {
		return nil, "", fmt.Errorf("plugging machine %s: %w", m.Name, err)
	}
	out, err := h.RunRouteCommands(ctx, config.Spec)
	if err == nil {
		err = waitLinksActive(ctx, admin, h)
	}
	if err != nil {
		_ = h.Unplug(context.WithoutCancel(ctx))
		return nil, out, fmt.Errorf("machine %s: %w", m.Name, err)
	}
	return h, out, nil
}

func waitLinksActive(ctx context.Context, admin *Cloud, h *dataplane.Host) error {
	var ids []string
	for _, l := range h.Links {
		ids = append(ids, l.PortID)
	}
	return dataplane.WaitActive(ctx, admin.Network, time.Minute, ids...)
}

// VM is a server of the VM project on a shared subnet, plugged on this
// machine, answering on VMPort (TCP and UDP) with the source address it
// saw.
type VM struct {
	*dataplane.Host
	Responder        *dataplane.Responder
	ServerID, PortID string
	vm               *Cloud
}

// BootVM makes a VM of the VM project: a port on the subnet in the given
// security groups of the VM project, a server on it (the image of
// imageFrom, another server), plugged in the namespace name, and its
// responder.
func BootVM(ctx context.Context, vm, admin *Cloud, network VMNetwork, name, imageFrom string, groupIDs ...string) (out *VM, err error) {
	out = &VM{vm: vm}
	defer func() {
		if err != nil {
			_ = out.Close(context.WithoutCancel(ctx))
			out = nil
		}
	}()
	src, err := servers.Get(ctx, admin.Compute, imageFrom).Extract()
	if err != nil {
		return out, err
	}
	imageID, _ := src.Image["id"].(string)
	flavorID, err := flavorID(ctx, vm, TestbedFlavor)
	if err != nil {
		return out, err
	}
	port, err := ports.Create(ctx, vm.Network, ports.CreateOpts{Name: name, NetworkID: network.NetworkID,
		FixedIPs: []ports.IP{{SubnetID: network.SubnetID}}, SecurityGroups: &groupIDs}).Extract()
	if err != nil {
		return out, fmt.Errorf("the VM's port: %w", err)
	}
	out.PortID = port.ID
	if out.ServerID, err = dataplane.BootServer(ctx, vm.Compute, name, imageID, flavorID, port.ID); err != nil {
		return out, err
	}
	if out.Host, err = dataplane.Plug(ctx, admin.Network, out.ServerID, name); err != nil {
		return out, err
	}
	if err := waitLinksActive(ctx, admin, out.Host); err != nil {
		return out, err
	}
	out.Responder, err = dataplane.Serve(out.Namespace, netip.AddrPortFrom(out.Links[0].Addr.Addr(), VMPort))
	return out, err
}

// Close stops the responder, unplugs the VM and deletes its server and port.
func (v *VM) Close(ctx context.Context) error {
	if v.Responder != nil {
		v.Responder.Close()
	}
	var errs []error
	if v.Host != nil {
		errs = append(errs, v.Unplug(ctx))
	}
	if v.ServerID != "" {
		errs = append(errs, dataplane.DeleteServer(ctx, v.vm.Compute, v.ServerID))
	}
	if v.PortID != "" {
		if err := ports.Delete(ctx, v.vm.Network, v.PortID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func flavorID(ctx context.Context, c *Cloud, name string) (string, error) {
	pages, err := flavors.ListDetail(c.Compute, flavors.ListOpts{}).AllPages(ctx)
	if err != nil {
		return "", err
	}
	all, err := flavors.ExtractFlavors(pages)
	if err != nil {
		return "", err
	}
	for _, f := range all {
		if f.Name == name {
			return f.ID, nil
		}
	}
	return "", fmt.Errorf("no flavor %s in Nova", name)
}

// EmptySecurityGroup is a security group of the cloud's project with no
// ingress rule (Neutron gives a new group egress rules only).
func EmptySecurityGroup(ctx context.Context, c *Cloud, name string) (string, error) {
	g, err := groups.Create(ctx, c.Network, groups.CreateOpts{Name: name, Description: "capo-sharednet local plane: the VMs the cluster should reach"}).Extract()
	if err != nil {
		return "", err
	}
	return g.ID, nil
}

// DeleteVMs deletes the servers, ports and security groups of the cloud's
// project that carry name (what BootVM and EmptySecurityGroup made under it
// in an earlier run), servers first.
func DeleteVMs(ctx context.Context, c *Cloud, name string) error {
	var errs []error
	if pages, err := servers.List(c.Compute, servers.ListOpts{Name: "^" + name + "$"}).AllPages(ctx); err != nil {
		errs = append(errs, err)
	} else if all, err := servers.ExtractServers(pages); err != nil {
		errs = append(errs, err)
	} else {
		for _, s := range all {
			errs = append(errs, dataplane.DeleteServer(ctx, c.Compute, s.ID))
		}
	}
	if pages, err := ports.List(c.Network, ports.ListOpts{Name: name, ProjectID: c.ProjectID}).AllPages(ctx); err != nil {
		errs = append(errs, err)
	} else if all, err := ports.ExtractPorts(pages); err != nil {
		errs = append(errs, err)
	} else {
		for _, p := range all {
			errs = append(errs, ports.Delete(ctx, c.Network, p.ID).ExtractErr())
		}
	}
	if pages, err := groups.List(c.Network, groups.ListOpts{Name: name, ProjectID: c.ProjectID}).AllPages(ctx); err != nil {
		errs = append(errs, err)
	} else if all, err := groups.ExtractGroups(pages); err != nil {
		errs = append(errs, err)
	} else {
		for _, g := range all {
			errs = append(errs, groups.Delete(ctx, c.Network, g.ID).ExtractErr())
		}
	}
	return errors.Join(errs...)
}

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
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// GrantLabel is the namespace label the SharedNetworks of the demo and the
// suite select their consumers with.
const GrantLabel = "sharednet.capo.io/vm-net"

// VMNetwork is a network of the VM project with one subnet.
type VMNetwork struct {
	NetworkID, SubnetID, CIDR string
	MTU                       int
}

// VMNetworkOpts describe a network the VM project creates.
type VMNetworkOpts struct {
	Name string
	CIDR string
	// MTU of the network; Neutron's default (1450 on the test bed's vxlan) when 0.
	MTU int
	// Pool, when set, is the only allocation pool ("start-end").
	Pool []string
}

// EnsureVMNetwork finds the VM project's network by name or creates it with
// one subnet.
func EnsureVMNetwork(ctx context.Context, vm *Cloud, o VMNetworkOpts) (VMNetwork, error) {
	pages, err := networks.List(vm.Network, networks.ListOpts{Name: o.Name, ProjectID: vm.ProjectID}).AllPages(ctx)
	if err != nil {
		return VMNetwork{}, err
	}
	existing, err := networks.ExtractNetworks(pages)
	if err != nil {
		return VMNetwork{}, err
	}
	var n *networks.Network
	if len(existing) > 0 {
		n = &existing[0]
	} else {
		opts := networks.CreateOpts{Name: o.Name, Description: "VM project network (capo-sharednet local plane)"}
		var created *networks.Network
		if o.MTU > 0 {
			created, err = networks.Create(ctx, vm.Network, mtuOpts{opts, o.MTU}).Extract()
		} else {
			created, err = networks.Create(ctx, vm.Network, opts).Extract()
		}
		if err != nil {
			return VMNetwork{}, fmt.Errorf("creating network %s: %w", o.Name, err)
		}
		n = created
	}
	out := VMNetwork{NetworkID: n.ID}
	var mtu struct {
		MTU int `json:"mtu"`
	}
	if err := networks.Get(ctx, vm.Network, n.ID).ExtractInto(&mtu); err != nil {
		return VMNetwork{}, err
	}
	out.MTU = mtu.MTU
	spages, err := subnets.List(vm.Network, subnets.ListOpts{NetworkID: n.ID}).AllPages(ctx)
	if err != nil {
		return VMNetwork{}, err
	}
	subs, err := subnets.ExtractSubnets(spages)
	if err != nil {
		return VMNetwork{}, err
	}
	if len(subs) > 0 {
		out.SubnetID, out.CIDR = subs[0].ID, subs[0].CIDR
		return out, nil
	}
	opts := subnets.CreateOpts{NetworkID: n.ID, Name: o.Name + "-subnet", CIDR: o.CIDR, IPVersion: gophercloud.IPv4}
	if len(o.Pool) == 2 {
		opts.AllocationPools = []subnets.AllocationPool{{Start: o.Pool[0], End: o.Pool[1]}}
	}
	s, err := subnets.Create(ctx, vm.Network, opts).Extract()
	if err != nil {
		return VMNetwork{}, fmt.Errorf("creating subnet %s on %s: %w", o.CIDR, o.Name, err)
	}
	out.SubnetID, out.CIDR = s.ID, s.CIDR
	return out, nil
}

// mtuOpts adds the network's MTU (the net-mtu-writable extension).
type mtuOpts struct {
	networks.CreateOpts
	MTU int
}

func (o mtuOpts) ToNetworkCreateMap() (map[string]any, error) {
	m, err := o.CreateOpts.ToNetworkCreateMap()
	if err != nil {
		return nil, err
	}
	m["network"].(map[string]any)["mtu"] = o.MTU
	return m, nil
}

// DeleteVMNetwork deletes a VM-project network as its owner would, retrying
// while Neutron still reports it in use (ports of the cluster's project being
// removed). It succeeds when the network is gone.
func DeleteVMNetwork(ctx context.Context, vm *Cloud, networkID string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		last = networks.Delete(ctx, vm.Network, networkID).ExtractErr()
		return last == nil || gophercloud.ResponseCodeIs(last, 404), nil
	})
	if err != nil {
		return fmt.Errorf("deleting network %s: %v (%w)", networkID, last, err)
	}
	return nil
}

// OfferNetwork is what the management-cluster administrator does: the VM
// project's credential as a Secret in the extension's namespace, and a
// SharedNetwork offering the network's subnets to the namespaces labelled
// GrantLabel=true (or to selector, when given).
func (p *Plane) OfferNetwork(ctx context.Context, name string, n VMNetwork, cloudsYAML []byte, selector *metav1.LabelSelector, subnetIDs ...string) (*sharednetv1.SharedNetwork, error) {
	clouds, err := OneCloud(cloudsYAML, VMCloud, VMCloud)
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "vm-project-" + name},
		Data:       map[string][]byte{openstack.CloudsSecretKey: clouds},
	}
	if err := p.Apply(ctx, sec); err != nil {
		return nil, err
	}
	if selector == nil {
		selector = &metav1.LabelSelector{MatchLabels: map[string]string{GrantLabel: "true"}}
	}
	if len(subnetIDs) == 0 {
		subnetIDs = []string{n.SubnetID}
	}
	sn := &sharednetv1.SharedNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: sharednetv1.SharedNetworkSpec{
			Identity:          sharednetv1.VMProjectIdentity{SecretName: sec.Name, CloudName: VMCloud},
			NetworkID:         n.NetworkID,
			Subnets:           subnetIDs,
			NamespaceSelector: selector,
		},
	}
	if err := p.Apply(ctx, sn); err != nil {
		return nil, err
	}
	// The controller reads the facts from Neutron; admission needs them.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := p.Client.Get(ctx, client.ObjectKeyFromObject(sn), sn); err != nil {
			return false, err
		}
		for _, id := range subnetIDs {
			if _, ok := sn.Status.Subnet(id); !ok {
				return false, nil
			}
		}
		return sn.Status.MTU > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("SharedNetwork %s has no facts from Neutron (conditions %+v): %w", name, sn.Status.Conditions, err)
	}
	return sn, nil
}

// Namespace creates a namespace with the given labels (if missing).
func (p *Plane) Namespace(ctx context.Context, name string, labels map[string]string) error {
	return p.Apply(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
}

// UpdateCluster re-reads the Cluster, applies change and updates it,
// retrying on conflicts. An admission refusal is returned as it is.
func (p *Plane) UpdateCluster(ctx context.Context, key client.ObjectKey, change func(*clusterv1.Cluster)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := &clusterv1.Cluster{}
		if err := p.Client.Get(ctx, key, c); err != nil {
			return err
		}
		change(c)
		return p.Client.Update(ctx, c)
	})
}

// SharedNetworkValue is the variable's value (JSON of the API type) for a
// network and subnet (subnet may be empty).
func SharedNetworkValue(name, subnet string) []byte {
	raw, err := json.Marshal(sharednetv1.SharedNetworkVariable{Name: name, Subnet: subnet})
	utilruntime.Must(err) // two strings always marshal
	return raw
}

// Machine is one Machine of a nodegroup as a rollout sees it.
type Machine struct {
	Name, UID, Phase, ProviderID string
	// Version is the Kubernetes version the Machine runs.
	Version string
	Created time.Time
}

// Machines lists the Machines of one MachineDeployment topology (or of the
// control plane when topology is ""), sorted by name.
func (p *Plane) Machines(ctx context.Context, namespace, cluster, topology string) ([]Machine, error) {
	labels := client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}
	if topology != "" {
		labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] = topology
	} else {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	list := &clusterv1.MachineList{}
	if err := p.Client.List(ctx, list, client.InNamespace(namespace), labels); err != nil {
		return nil, err
	}
	var out []Machine
	for _, m := range list.Items {
		out = append(out, Machine{
			Name: m.Name, UID: string(m.UID), Phase: m.Status.Phase, ProviderID: m.Spec.ProviderID,
			Version: m.Spec.Version, Created: m.CreationTimestamp.Time,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// providerIDPrefix starts the providerID CAPO gives a Machine (and a kubelet
// with the OpenStack CCM a Node): openstack:///<Nova server ID>.
const providerIDPrefix = "openstack:///"

// ServerID is the Nova server ID of an openstack:/// provider ID.
func ServerID(providerID string) string { return strings.TrimPrefix(providerID, providerIDPrefix) }

// PortsOnNetwork lists the ports on a network (as admin sees them), by device
// (server) ID.
func PortsOnNetwork(ctx context.Context, admin *Cloud, networkID string) (map[string][]ports.Port, error) {
	pages, err := ports.List(admin.Network, ports.ListOpts{NetworkID: networkID}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	all, err := ports.ExtractPorts(pages)
	if err != nil {
		return nil, err
	}
	out := map[string][]ports.Port{}
	for _, port := range all {
		out[port.DeviceID] = append(out[port.DeviceID], port)
	}
	return out, nil
}

// Attachment reads a nodegroup's SharedNetworkAttachment (nil when none).
func (p *Plane) Attachment(ctx context.Context, namespace, cluster, topology string) (*sharednetv1.SharedNetworkAttachment, error) {
	a := &sharednetv1.SharedNetworkAttachment{}
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: sharednetv1.AttachmentName(cluster, topology)}, a)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return a, err
}

// Replicas is a MachineDeployment topology's replica count.
func Replicas(c *clusterv1.Cluster, topology string) int32 {
	for _, md := range c.Spec.Topology.Workers.MachineDeployments {
		if md.Name == topology {
			return ptr.Deref(md.Replicas, 1)
		}
	}
	return 0
}

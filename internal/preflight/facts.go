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

package preflight

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/attachments"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/networkfacts"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// AttachFacts gathers what attaching nodegroup topology of cluster to value
// is judged on. A network the namespace is not granted is not looked at any
// further: the VM project's credential is never used for it.
func (c *Checker) AttachFacts(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable, scope Scope) (rules.Nodegroup, error) {
	n := nodegroup(cluster, topology, value, rules.CheckAttach)
	sn, err := c.sharedNetwork(ctx, value.Name)
	if err != nil || sn == nil {
		return n, err
	}
	if granted, err := c.granted(ctx, &n, sn); !granted || err != nil {
		return n, err
	}
	status := &sn.Status
	if scope == All {
		if status, n.CannotVerify = c.statusFor(ctx, sn); n.CannotVerify != "" {
			return n, nil
		}
	}
	subnet, ok := c.subnet(&n, sn, status)
	if !ok {
		return n, nil
	}
	network, err := c.clusterNetwork(ctx, cluster)
	if err != nil {
		return n, err
	}
	ranges, err := c.clusterRanges(ctx, cluster, network, topology, subnet)
	if err != nil {
		return n, err
	}
	n.Ranges = &ranges
	if scope == Static {
		return n, nil
	}
	// The cluster network's MTU: Neutron's once CAPO made it, the one the
	// Cluster asks for before; when neither is known (a new cluster leaving
	// it to Neutron) the attachment controller checks it before it shares.
	n.ClusterMTU = network.requestedMTU
	if done, err := c.liveFacts(ctx, &n, cluster, sn); done || err != nil {
		return n, err
	}
	n.Size, n.Others, err = c.capacityFacts(ctx, cluster, topology, sn, subnet)
	return n, err
}

// growFacts gathers what an attached nodegroup is judged on when it grows
// (live: the SharedNetwork's facts current or read from Neutron, the
// cluster's project asked for its MTU and port quota) or when the
// controller checks that it still fits (not live: judged only on current
// status, the cluster network's MTU when it can be read, no quota).
func (c *Checker) growFacts(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable, live bool) (rules.Nodegroup, error) {
	n := nodegroup(cluster, topology, value, rules.CheckFit)
	sn, err := c.sharedNetwork(ctx, value.Name)
	if err != nil || sn == nil {
		return n, err
	}
	status := &sn.Status
	if live {
		n.Check = rules.CheckGrow
		if granted, err := c.granted(ctx, &n, sn); !granted || err != nil {
			return n, err
		}
		if status, n.CannotVerify = c.statusFor(ctx, sn); n.CannotVerify != "" {
			return n, nil
		}
	}
	subnet, ok := c.subnet(&n, sn, status)
	if !ok {
		return n, nil
	}
	if live {
		if done, err := c.liveFacts(ctx, &n, cluster, sn); done || err != nil {
			return n, err
		}
	} else {
		n.ClusterMTU = c.clusterMTU(ctx, cluster)
	}
	n.Size, n.Others, err = c.capacityFacts(ctx, cluster, topology, sn, subnet)
	return n, err
}

// detachFacts gathers the cluster's load balancers on the subnet of
// nodegroup topology's attachment; attached is false when it has none.
func (c *Checker) detachFacts(ctx context.Context, cluster *clusterv1.Cluster, topology string) (n rules.Nodegroup, attached bool, err error) {
	n = rules.Nodegroup{Name: topology, Check: rules.CheckDetach, Namespace: cluster.Namespace, Cluster: cluster.Name}
	attachment, err := attachments.Get(ctx, c.Reader, cluster.Namespace, cluster.Name, topology)
	if attachment == nil || err != nil {
		return n, false, err
	}
	n.DetachSubnet = attachment.Spec.Subnet
	n.LoadBalancers = attachment.Status.LoadBalancers
	if c.Cloud == nil || cluster.Spec.InfrastructureRef.Name == "" {
		return n, true, nil
	}
	// The status may be a minute old: ask Octavia now.
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	session, _, err := c.Cloud.ForCluster(ctx, cluster)
	if err != nil {
		n.CannotAsk = fmt.Sprintf("cannot ask the cluster's OpenStack project, so the detach cannot be checked; nothing was changed, retry when it answers: %v", err)
		return n, true, nil
	}
	found, err := session.OnSubnet(ctx, attachment.Spec.Subnet)
	if err != nil {
		n.CannotAsk = fmt.Sprintf("cannot list the load balancers on subnet %s, so the detach cannot be checked; nothing was changed: %v", attachment.Spec.Subnet, err)
		return n, true, nil
	}
	n.LoadBalancers, _ = LoadBalancersOf(cluster, found)
	return n, true, nil
}

// granted records the namespace's labels and the SharedNetwork in n and
// says whether the namespace may use it: a network it may not use is not
// looked at any further (the VM project's credential is never used for it).
func (c *Checker) granted(ctx context.Context, n *rules.Nodegroup, sn *sharednetv1.SharedNetwork) (bool, error) {
	labels, err := namespaceLabels(ctx, c.Reader, n.Namespace)
	if err != nil {
		return false, err
	}
	n.NamespaceLabels = labels
	// Only the grant: facts of the network (its subnets' CIDRs) are not
	// the business of a namespace it may not be granted to, not even in
	// a cannot-verify message; subnet() reads them once it is granted.
	n.Network = &rules.Network{Name: sn.Name, NamespaceSelector: sn.Spec.NamespaceSelector, AllowedSubnets: sn.Spec.Subnets}
	return rules.Granted(sn.Name, sn.Spec.NamespaceSelector, n.Namespace, labels, sn.Spec.Subnets, n.Subnet) == nil, nil
}

// namespaceLabels are the labels of namespace, which grants select on.
func namespaceLabels(ctx context.Context, reader client.Reader, namespace string) (map[string]string, error) {
	ns := &corev1.Namespace{}
	if err := reader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	return ns.Labels, nil
}

// nodegroup starts the facts of one nodegroup with what the Cluster says.
func nodegroup(cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable, check rules.Check) rules.Nodegroup {
	return rules.Nodegroup{Name: topology, Check: check, Namespace: cluster.Namespace, Cluster: cluster.Name,
		SharedNetwork: value.Name, Subnet: value.Subnet}
}

// subnet records the network's facts in n and names the subnet the
// nodegroup uses; false when there is none to judge further (no facts yet,
// or the one-subnet rule refuses).
func (c *Checker) subnet(n *rules.Nodegroup, sn *sharednetv1.SharedNetwork, status *sharednetv1.SharedNetworkStatus) (string, bool) {
	if n.Network, n.CannotVerify = networkOf(sn, status); n.CannotVerify != "" {
		return "", false
	}
	if len(status.Subnets) == 0 {
		n.CannotVerify = fmt.Sprintf("facts of SharedNetwork %s are not known yet (its controller has not read them from Neutron: see `kubectl get sharednetwork %s`); nothing was changed, retry when it is Ready", sn.Name, sn.Name)
		return "", false
	}
	subnet, v := rules.OneSubnet(sn.Name, status.SubnetIDs(), sn.Spec.Subnets, n.Subnet)
	return subnet, v == nil
}

// networkOf is what the rules know of a SharedNetwork with status.
func networkOf(sn *sharednetv1.SharedNetwork, status *sharednetv1.SharedNetworkStatus) (*rules.Network, string) {
	nw := &rules.Network{Name: sn.Name, NamespaceSelector: sn.Spec.NamespaceSelector, AllowedSubnets: sn.Spec.Subnets, MTU: int(status.MTU)}
	for _, s := range status.Subnets {
		cidr, err := netip.ParsePrefix(s.CIDR)
		if err != nil {
			return nw, fmt.Sprintf("SharedNetwork %s status: subnet %s has CIDR %q (%v); nothing was changed, retry when its controller has read it again", sn.Name, s.ID, s.CIDR, err)
		}
		nw.Subnets = append(nw.Subnets, rules.Subnet{ID: s.ID, CIDR: cidr, FreeAddresses: int(ptr.Deref(s.FreeAddresses, 0))})
	}
	return nw, ""
}

// sharedNetwork reads a SharedNetwork; nil when none has that name.
func (c *Checker) sharedNetwork(ctx context.Context, name string) (*sharednetv1.SharedNetwork, error) {
	sn := &sharednetv1.SharedNetwork{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: name}, sn); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading SharedNetwork %s: %w", name, err)
	}
	return sn, nil
}

// statusFor is the SharedNetwork's facts to decide on: its status when it
// is Ready, for its current spec, and refreshed within MaxFactAge;
// otherwise Neutron's answer now, with the VM project's credential and
// bounded by CloudTimeout. A decision is never made on stale facts: when
// Neutron cannot be asked either, the second result says why.
func (c *Checker) statusFor(ctx context.Context, sn *sharednetv1.SharedNetwork) (*sharednetv1.SharedNetworkStatus, string) {
	if c.fresh(sn) {
		return &sn.Status, ""
	}
	cannotVerify := fmt.Sprintf("the facts of SharedNetwork %s are not current (see `kubectl get sharednetwork %s`) and its network cannot be read right now; nothing was changed, retry later", sn.Name, sn.Name)
	if c.Cloud == nil {
		return nil, cannotVerify
	}
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	vm, err := c.Cloud.ForSharedNetwork(ctx, sn)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("reading a SharedNetwork's facts for admission", "sharedNetwork", sn.Name, "error", err.Error())
		return nil, cannotVerify
	}
	facts, err := networkfacts.Read(ctx, vm, sn)
	var notOnNetwork *networkfacts.SubnetsNotOnNetworkError
	if err != nil && !errors.As(err, &notOnNetwork) {
		// The VM project's errors are the administrator's, not the tenant's.
		ctrl.LoggerFrom(ctx).Info("reading a SharedNetwork's facts for admission", "sharedNetwork", sn.Name, "error", err.Error())
		return nil, cannotVerify
	}
	return &facts, ""
}

// liveFacts asks the cluster's project, with a short timeout, for what
// only it knows: that the SharedNetwork's Keystone vouches for it, its
// network's MTU and its port quota. A cluster whose
// OpenStackCluster does not exist yet (it is being created) has no project
// to ask: nothing is added, and the attachment controller asks before it
// shares. done is true when nothing more should be gathered: the project
// cannot be asked (an unchecked change is never admitted) or belongs to
// another cloud.
func (c *Checker) liveFacts(ctx context.Context, n *rules.Nodegroup, cluster *clusterv1.Cluster, sn *sharednetv1.SharedNetwork) (done bool, err error) {
	if c.Cloud == nil || cluster.Spec.InfrastructureRef.Name == "" {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	session, osc, err := c.Cloud.ForCluster(ctx, cluster)
	if err != nil {
		n.CannotAsk = fmt.Sprintf("cannot ask the cluster's OpenStack project, so the attach cannot be checked; nothing was changed, retry when it answers: %v", err)
		return true, nil
	}
	if n.ForeignCloud, n.CannotAsk = c.sameCloud(ctx, sn, session); n.ForeignCloud != "" || n.CannotAsk != "" {
		return true, nil
	}
	if osc.Status.Network != nil && osc.Status.Network.ID != "" {
		network, err := session.Network(ctx, osc.Status.Network.ID)
		if err != nil {
			n.CannotAsk = fmt.Sprintf("cannot read the cluster network's MTU; nothing was changed: %v", err)
			return true, nil
		}
		n.ClusterMTU = network.MTU
	}
	quota, err := session.Ports(ctx)
	if err != nil {
		n.CannotAsk = fmt.Sprintf("cannot read the cluster project's port quota; nothing was changed: %v", err)
		return true, nil
	}
	n.PortQuotaFree = quota.Free()
	return false, nil
}

// clusterMTU is the cluster network's MTU as Neutron says now; 0 when it
// cannot be told (not judged).
func (c *Checker) clusterMTU(ctx context.Context, cluster *clusterv1.Cluster) int {
	if c.Cloud == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	session, osc, err := c.Cloud.ForCluster(ctx, cluster)
	if err != nil || osc.Status.Network == nil || osc.Status.Network.ID == "" {
		return 0
	}
	network, err := session.Network(ctx, osc.Status.Network.ID)
	if err != nil {
		return 0
	}
	return network.MTU
}

// sameCloud asks whether the SharedNetwork's Keystone vouches for the
// cluster's credential (credentials.VerifiedProject): otherwise the network
// would be shared with whatever project a Keystone of the tenant's choosing
// claims. foreign says why it does not; cannotVerify why it could not be
// asked (the VM project's own errors are the administrator's, reported in
// the SharedNetwork's status, not the cluster owner's).
func (c *Checker) sameCloud(ctx context.Context, sn *sharednetv1.SharedNetwork, cluster openstack.ClusterCloud) (foreign, cannotVerify string) {
	cannot := fmt.Sprintf("cannot verify the cluster's project with SharedNetwork %s's cloud right now; nothing was changed, retry later", sn.Name)
	vm, err := c.Cloud.ForSharedNetwork(ctx, sn)
	if err != nil {
		return "", cannot
	}
	if _, err := credentials.VerifiedProject(ctx, cluster, vm); err != nil {
		var other *credentials.ForeignKeystoneError
		if errors.As(err, &other) {
			return err.Error(), ""
		}
		return "", cannot
	}
	return "", ""
}

// clusterRanges are the address ranges of the cluster a shared subnet must
// not overlap: pods, services (kubeadm's default when unset), the cluster
// network subnets CAPO uses (clusterNetwork) and the shared subnets of the
// cluster's other nodegroups.
func (c *Checker) clusterRanges(ctx context.Context, cluster *clusterv1.Cluster, network clusterNetwork, topology, subnetID string) (rules.ClusterRanges, error) {
	var r rules.ClusterRanges
	var err error
	if r.Pods, err = rules.ParsePrefixes(cluster.Spec.ClusterNetwork.Pods.CIDRBlocks); err != nil {
		return r, fmt.Errorf("spec.clusterNetwork.pods.cidrBlocks: %w", err)
	}
	if r.Services, err = rules.ParsePrefixes(cluster.Spec.ClusterNetwork.Services.CIDRBlocks); err != nil {
		return r, fmt.Errorf("spec.clusterNetwork.services.cidrBlocks: %w", err)
	}
	if r.NodeSubnets, err = rules.ParsePrefixes(network.subnetCIDRs); err != nil {
		return r, fmt.Errorf("cluster network subnets: %w", err)
	}
	values, err := variables.Nodegroups(cluster)
	if err != nil {
		return r, err
	}
	for _, other := range sortedKeys(values) {
		value := values[other]
		if other == topology {
			continue
		}
		sn, err := c.sharedNetwork(ctx, value.Name)
		if err != nil || sn == nil {
			continue // that nodegroup's own check reports it
		}
		subnet, v := rules.OneSubnet(sn.Name, sn.Status.SubnetIDs(), sn.Spec.Subnets, value.Subnet)
		if v != nil || subnet == subnetID {
			continue // two nodegroups may share one subnet
		}
		if facts, ok := sn.Status.Subnet(subnet); ok {
			if p, err := netip.ParsePrefix(facts.CIDR); err == nil {
				r.OtherShared = append(r.OtherShared, rules.NamedPrefix{Name: fmt.Sprintf("the shared subnet %s of nodegroup %s", subnet, other), Prefix: p})
			}
		}
	}
	return r, nil
}

// clusterNetwork is what the rules know of the cluster network: from the
// OpenStackCluster once it exists, else from what the Cluster asks for.
type clusterNetwork struct {
	subnetCIDRs []string
	// requestedMTU is spec.networkMTU of a Cluster being created (0: Neutron
	// decides, known only once CAPO made the network).
	requestedMTU int
	// osc is the OpenStackCluster, nil while it does not exist.
	osc *infrav1.OpenStackCluster
}

func (c *Checker) clusterNetwork(ctx context.Context, cluster *clusterv1.Cluster) (clusterNetwork, error) {
	var out clusterNetwork
	list := &infrav1.OpenStackClusterList{}
	if err := c.Reader.List(ctx, list, client.InNamespace(cluster.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}); err != nil {
		return out, fmt.Errorf("listing OpenStackClusters of cluster %s: %w", cluster.Name, err)
	}
	for i := range list.Items {
		osc := &list.Items[i]
		out.osc = osc
		for _, s := range osc.Spec.ManagedSubnets {
			out.subnetCIDRs = append(out.subnetCIDRs, s.CIDR)
		}
		if osc.Status.Network != nil {
			for _, s := range osc.Status.Network.Subnets {
				out.subnetCIDRs = append(out.subnetCIDRs, s.CIDR)
			}
		}
	}
	if out.osc != nil {
		return out, nil
	}
	// Not created yet: what the topology controller will create, from the
	// class's template and the Cluster's variables.
	cc := &clusterv1.ClusterClass{}
	key := cluster.GetClassKey()
	if err := c.Reader.Get(ctx, key, cc); err != nil {
		if apierrors.IsNotFound(err) {
			return out, nil // CAPI's own webhook refuses an unknown class
		}
		return out, fmt.Errorf("reading ClusterClass %s: %w", key, err)
	}
	ref := cc.Spec.Infrastructure.TemplateRef
	if ref.Kind != "OpenStackClusterTemplate" {
		return out, nil
	}
	tmpl := &infrav1.OpenStackClusterTemplate{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: ref.Name}, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			return out, nil
		}
		return out, fmt.Errorf("reading OpenStackClusterTemplate %s/%s: %w", cc.Namespace, ref.Name, err)
	}
	spec, err := desiredInfraCluster(cc, tmpl, cluster)
	if err != nil {
		// Not decidable here; the attachment controller checks the real
		// OpenStackCluster before it shares.
		ctrl.LoggerFrom(ctx).Info("cannot apply the ClusterClass's patches to its OpenStackClusterTemplate; the node subnet is checked before the share", "clusterClass", key, "error", err.Error())
		return out, nil
	}
	for _, s := range spec.ManagedSubnets {
		out.subnetCIDRs = append(out.subnetCIDRs, s.CIDR)
	}
	if spec.NetworkMTU != nil {
		out.requestedMTU = *spec.NetworkMTU
	}
	return out, nil
}

// capacityFacts sizes the nodegroup and every other nodegroup, of every
// cluster, whose variable names this subnet.
func (c *Checker) capacityFacts(ctx context.Context, cluster *clusterv1.Cluster, topology string, sn *sharednetv1.SharedNetwork, subnet string) (*rules.Size, []rules.Consumer, error) {
	self := sizeOf(cluster, topology)
	var err error
	if self.Attached, err = attachedAddresses(ctx, c.Reader, cluster, topology); err != nil {
		return nil, nil, err
	}
	except := rules.ConsumerName(cluster.Namespace, cluster.Name, topology)
	var others []rules.Consumer
	if c.Consumers != nil {
		others, err = c.Consumers.SubnetConsumers(sn, subnet, except)
	}
	// Until the table has read every object (a replica that just started),
	// list them: the same answer, from the cache, which waits for its sync.
	if c.Consumers == nil || errors.Is(err, ErrConsumersNotRead) {
		others, err = SubnetConsumers(ctx, c.Reader, sn, subnet, except)
	}
	if err != nil {
		return nil, nil, err
	}
	return self, others, nil
}

// attachedAddresses are the addresses a nodegroup holds on its subnet.
func attachedAddresses(ctx context.Context, reader client.Reader, cluster *clusterv1.Cluster, topology string) (int, error) {
	attachment, err := attachments.Get(ctx, reader, cluster.Namespace, cluster.Name, topology)
	if attachment == nil {
		return 0, err
	}
	return len(attachment.Status.Nodes), nil
}

// sizeOf is the size facts of nodegroup topology: its max size (the
// autoscaler's annotation, else replicas), its failure domain and the
// cluster's. A nodegroup the Cluster no longer has takes nothing.
func sizeOf(cluster *clusterv1.Cluster, topology string) *rules.Size {
	s := &rules.Size{ClusterFailureDomains: len(cluster.Status.FailureDomains), Replicas: ptr.To[int32](0)}
	for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
		if md.Name == topology {
			s.Annotations, s.Replicas, s.FailureDomain = md.Metadata.Annotations, md.Replicas, md.FailureDomain
		}
	}
	return s
}

// Granted says whether SharedNetwork sn grants subnet to the clusters of
// namespace, read now: the namespace selector and the subnet allow-list.
// The attachment controller (before it shares) and GeneratePatches (before
// it emits a new port) ask it.
func Granted(ctx context.Context, reader client.Reader, sn *sharednetv1.SharedNetwork, namespace, subnet string) error {
	labels, err := namespaceLabels(ctx, reader, namespace)
	if err != nil {
		return err
	}
	v := rules.Granted(sn.Name, sn.Spec.NamespaceSelector, namespace, labels, sn.Spec.Subnets, subnet)
	if v == nil {
		return nil // not the typed nil of *Violation
	}
	return v
}

// LoadBalancersOf splits found by whose they are for the cluster: its own
// (its CCM made them, alone or with another cluster's Service), with the
// Service each was made for, and those no CCM made (reported, never
// deleted). Other clusters' load balancers are in neither.
func LoadBalancersOf(cluster *clusterv1.Cluster, found []openstack.LoadBalancer) (own, unattributed []sharednetv1.LoadBalancer) {
	name := ccm.ClusterName(cluster.Namespace, cluster.Name)
	for _, lb := range found {
		switch ccm.OwnerOf(name, lb.Name, lb.Tags) {
		case ccm.ThisCluster, ccm.Shared:
			// The Service from the name, or from this cluster's tag on a
			// load balancer another cluster made.
			service := ""
			for _, s := range append([]string{lb.Name}, lb.Tags...) {
				if service = ccm.ServiceOf(name, s); service != "" {
					break
				}
			}
			own = append(own, sharednetv1.LoadBalancer{ID: lb.ID, Name: lb.Name, VIP: lb.VIP, Service: service})
		case ccm.Unattributed:
			unattributed = append(unattributed, sharednetv1.LoadBalancer{ID: lb.ID, Name: lb.Name, VIP: lb.VIP})
		}
	}
	return own, unattributed
}

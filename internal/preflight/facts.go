// Package preflight gathers the facts the rules need for one nodegroup from
// Kubernetes objects (the Cluster, its ClusterClass templates, CAPO's
// OpenStackCluster, SharedNetwork status kept current by the controller) and
// runs the rules of internal/rules on them. Admission and ValidateTopology
// share it, so a rule cannot say yes in one place and no in the other.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/networkfacts"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// Checker runs the preflight rules.
type Checker struct {
	// Reader reads Kubernetes objects (the manager's cache).
	Reader client.Reader
	// Cloud opens sessions for the rules that need a live answer (the
	// cluster network's MTU, the port quota, load balancers on the subnet).
	Cloud credentials.Clouds
	// CloudTimeout bounds those live lookups; 5s when zero.
	CloudTimeout time.Duration
	// MaxFactAge is how old SharedNetwork.status may be to decide on
	// (DefaultMaxFactAge when zero); older facts are read from Neutron.
	MaxFactAge time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// DefaultMaxFactAge is the SharedNetwork controller's resync (5 minutes)
// plus a minute of slack: a status older than that means the controller is
// not keeping it current.
const DefaultMaxFactAge = 6 * time.Minute

// Facts are the SharedNetwork's facts to decide on: its status when it is
// Ready, for its current spec, and refreshed within MaxFactAge; otherwise
// Neutron's answer now, with the VM project's credential and bounded by
// CloudTimeout. A decision is never made on stale facts: when Neutron cannot
// be asked either, the change is refused with "cannot verify".
func (c *Checker) Facts(ctx context.Context, sn *sharednetv1.SharedNetwork) (*sharednetv1.SharedNetworkStatus, error) {
	if c.fresh(sn) {
		return &sn.Status, nil
	}
	cannotVerify := fmt.Errorf("cannot verify: the facts of SharedNetwork %s are not current (see `kubectl get sharednetwork %s`) and its network cannot be read right now; nothing was changed, retry later", sn.Name, sn.Name)
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
	return &facts, nil
}

func (c *Checker) fresh(sn *sharednetv1.SharedNetwork) bool {
	maxAge := c.MaxFactAge
	if maxAge <= 0 {
		maxAge = DefaultMaxFactAge
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	return sn.FreshFor(now(), maxAge) > 0
}

// sharedNetwork reads a SharedNetwork; a missing one is a user error.
func (c *Checker) sharedNetwork(ctx context.Context, name string) (*sharednetv1.SharedNetwork, error) {
	sn := &sharednetv1.SharedNetwork{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: name}, sn); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &rules.Violation{Rule: "granted", Field: "sharedNetwork.name",
				Message: fmt.Sprintf("SharedNetwork %q does not exist; ask the management-cluster administrator which shared networks your namespace may use (kubectl get sharednetworks)", name)}
		}
		return nil, fmt.Errorf("reading SharedNetwork %s: %w", name, err)
	}
	return sn, nil
}

// clusterRanges are the address ranges of the cluster a shared subnet must not
// overlap: pods, services (kubeadm's default when unset), the cluster network
// subnets CAPO uses (clusterNetwork) and the shared subnets
// of the cluster's other nodegroups.
func (c *Checker) clusterRanges(ctx context.Context, cluster *clusterv1.Cluster, network clusterNetwork, topology, subnetID string, values map[string]sharednetv1.SharedNetworkVariable) (rules.ClusterRanges, error) {
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
	for other, value := range values {
		if other == topology {
			continue
		}
		sn, err := c.sharedNetwork(ctx, value.Name)
		if err != nil {
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

// consumers are every nodegroup, of every cluster, whose variable names this
// subnet, except the one being checked.
func (c *Checker) consumers(ctx context.Context, sn *sharednetv1.SharedNetwork, subnet string, except client.ObjectKey, exceptTopology string) ([]rules.Consumer, error) {
	clusters := &clusterv1.ClusterList{}
	if err := c.Reader.List(ctx, clusters); err != nil {
		return nil, fmt.Errorf("listing Clusters: %w", err)
	}
	var out []rules.Consumer
	for i := range clusters.Items {
		cl := &clusters.Items[i]
		values, err := variables.Nodegroups(cl)
		if err != nil {
			continue
		}
		for topology, value := range values {
			if client.ObjectKeyFromObject(cl) == except && topology == exceptTopology {
				continue
			}
			if value.Name != sn.Name {
				continue
			}
			s, v := rules.OneSubnet(sn.Name, sn.Status.SubnetIDs(), sn.Spec.Subnets, value.Subnet)
			if v != nil || s != subnet {
				continue
			}
			consumer, err := c.consumer(ctx, cl, topology)
			if err != nil {
				return nil, err
			}
			out = append(out, consumer)
		}
	}
	return out, nil
}

// consumer sizes one nodegroup: max size, zones and addresses it holds.
func (c *Checker) consumer(ctx context.Context, cluster *clusterv1.Cluster, topology string) (rules.Consumer, error) {
	consumer := rules.Consumer{Name: fmt.Sprintf("%s/%s/%s", cluster.Namespace, cluster.Name, topology)}
	var err error
	if consumer.MaxSize, consumer.Zones, err = Size(cluster, topology); err != nil {
		return consumer, err
	}
	attachment := &sharednetv1.SharedNetworkAttachment{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: sharednetv1.AttachmentName(cluster.Name, topology)}
	if err := c.Reader.Get(ctx, key, attachment); err == nil {
		consumer.Attached = len(attachment.Status.Nodes)
	} else if !apierrors.IsNotFound(err) {
		return consumer, fmt.Errorf("reading SharedNetworkAttachment %s: %w", key, err)
	}
	return consumer, nil
}

// Size is how much of a shared subnet a nodegroup may take: its maximum
// size (the autoscaler's max-size annotation, else replicas) and the
// availability zones its nodes land in (rules.Zones).
func Size(cluster *clusterv1.Cluster, topology string) (maxSize, zones int, err error) {
	for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
		if md.Name != topology {
			continue
		}
		if maxSize, err = rules.MaxSize(md.Metadata.Annotations, md.Replicas); err != nil {
			return 0, 0, err
		}
		return maxSize, rules.Zones(md.FailureDomain, len(cluster.Status.FailureDomains)), nil
	}
	return 0, rules.Zones("", len(cluster.Status.FailureDomains)), nil
}

// Granted says whether SharedNetwork sn grants subnet to the clusters of
// namespace, read now: the namespace selector and the subnet allow-list.
// Admission, the attachment controller (before it shares) and
// GeneratePatches (before it emits a new port) all ask it.
func Granted(ctx context.Context, reader client.Reader, sn *sharednetv1.SharedNetwork, namespace, subnet string) error {
	ns := &corev1.Namespace{}
	if err := reader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	if v := rules.Granted(sn.Name, sn.Spec.NamespaceSelector, namespace, ns.Labels, sn.Spec.Subnets, subnet); v != nil {
		return v
	}
	return nil
}

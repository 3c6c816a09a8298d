// Package preflight gathers the facts the rules need for one nodegroup from
// Kubernetes objects (the Cluster, its ClusterClass templates, CAPO's
// OpenStackCluster, SharedNetwork status kept current by the controller) and
// runs the rules of internal/rules on them. Admission and ValidateTopology
// share it, so a rule cannot say yes in one place and no in the other.
package preflight

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
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
// subnets CAPO uses (from the OpenStackCluster, or from the ClusterClass's
// OpenStackClusterTemplate before the cluster exists) and the shared subnets
// of the cluster's other nodegroups.
func (c *Checker) clusterRanges(ctx context.Context, cluster *clusterv1.Cluster, topology, subnetID string, values map[string]sharednetv1.SharedNetworkVariable) (rules.ClusterRanges, error) {
	var r rules.ClusterRanges
	var err error
	if r.Pods, err = rules.ParsePrefixes(cluster.Spec.ClusterNetwork.Pods.CIDRBlocks); err != nil {
		return r, fmt.Errorf("spec.clusterNetwork.pods.cidrBlocks: %w", err)
	}
	if r.Services, err = rules.ParsePrefixes(cluster.Spec.ClusterNetwork.Services.CIDRBlocks); err != nil {
		return r, fmt.Errorf("spec.clusterNetwork.services.cidrBlocks: %w", err)
	}
	nodeCIDRs, err := c.nodeSubnetCIDRs(ctx, cluster)
	if err != nil {
		return r, err
	}
	if r.NodeSubnets, err = rules.ParsePrefixes(nodeCIDRs); err != nil {
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

func (c *Checker) nodeSubnetCIDRs(ctx context.Context, cluster *clusterv1.Cluster) ([]string, error) {
	var cidrs []string
	list := &infrav1.OpenStackClusterList{}
	if err := c.Reader.List(ctx, list, client.InNamespace(cluster.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}); err != nil {
		return nil, fmt.Errorf("listing OpenStackClusters of cluster %s: %w", cluster.Name, err)
	}
	for _, osc := range list.Items {
		for _, s := range osc.Spec.ManagedSubnets {
			cidrs = append(cidrs, s.CIDR)
		}
		if osc.Status.Network != nil {
			for _, s := range osc.Status.Network.Subnets {
				cidrs = append(cidrs, s.CIDR)
			}
		}
	}
	if len(list.Items) > 0 {
		return cidrs, nil
	}
	// Not created yet: the template the topology controller will create it from.
	cc := &clusterv1.ClusterClass{}
	key := cluster.GetClassKey()
	if err := c.Reader.Get(ctx, key, cc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil // CAPI's own webhook refuses an unknown class
		}
		return nil, fmt.Errorf("reading ClusterClass %s: %w", key, err)
	}
	ref := cc.Spec.Infrastructure.TemplateRef
	if ref.Kind != "OpenStackClusterTemplate" {
		return nil, nil
	}
	tmpl := &infrav1.OpenStackClusterTemplate{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: ref.Name}, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading OpenStackClusterTemplate %s/%s: %w", cc.Namespace, ref.Name, err)
	}
	for _, s := range tmpl.Spec.Template.Spec.ManagedSubnets {
		cidrs = append(cidrs, s.CIDR)
	}
	return cidrs, nil
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
	consumer := rules.Consumer{Name: fmt.Sprintf("%s/%s/%s", cluster.Namespace, cluster.Name, topology), Zones: 1}
	for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
		if md.Name != topology {
			continue
		}
		size, err := rules.MaxSize(md.Metadata.Annotations, md.Replicas)
		if err != nil {
			return consumer, fmt.Errorf("nodegroup %s: %w", consumer.Name, err)
		}
		consumer.MaxSize = size
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

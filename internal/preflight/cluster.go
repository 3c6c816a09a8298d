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
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/classpatches"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

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

// clusterNetwork reads the cluster network once per question.
func (c *Checker) clusterNetwork(ctx context.Context, g *gathering) (*clusterNetwork, error) {
	if g.network != nil {
		return g.network, nil
	}
	cluster := g.q.Cluster
	out := &clusterNetwork{}
	list := &infrav1.OpenStackClusterList{}
	if err := c.Reader.List(ctx, list, client.InNamespace(cluster.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}); err != nil {
		return nil, fmt.Errorf("listing OpenStackClusters of cluster %s: %w", cluster.Name, err)
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
	if out.osc == nil {
		spec, err := c.desiredInfraCluster(ctx, cluster)
		if err != nil {
			return nil, err
		}
		if spec != nil {
			for _, s := range spec.ManagedSubnets {
				out.subnetCIDRs = append(out.subnetCIDRs, s.CIDR)
			}
			if spec.NetworkMTU != nil {
				out.requestedMTU = *spec.NetworkMTU
			}
		}
	}
	g.network = out
	return out, nil
}

// desiredInfraCluster is the OpenStackCluster spec the topology controller
// will create for a Cluster that has none yet, from the class's template
// and the Cluster's variables; nil when it cannot be told here (the
// attachment controller checks the real OpenStackCluster before it shares).
func (c *Checker) desiredInfraCluster(ctx context.Context, cluster *clusterv1.Cluster) (*infrav1.OpenStackClusterSpec, error) {
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
	// The class's templates are the tenant's: evaluated with bounds (time,
	// iterations, output, allocation), on this goroutine.
	spec, err := classpatches.DesiredInfraCluster(ctx, cc, tmpl, cluster)
	if err != nil {
		// Not decidable here (a class that cannot be evaluated, or one a
		// bound stopped); the attachment controller checks the real
		// OpenStackCluster before it shares, as for an external patch.
		ctrl.LoggerFrom(ctx).Info("cannot apply the ClusterClass's patches to its OpenStackClusterTemplate; the node subnet is checked before the share", "clusterClass", key, "error", err.Error())
		return nil, nil
	}
	return &spec, nil
}

// ranges records the address ranges of the cluster a shared subnet must
// not overlap: pods, services (kubeadm's default when unset), the cluster
// network subnets CAPO uses and the shared subnets of the cluster's other
// nodegroups.
func (c *Checker) ranges(ctx context.Context, g *gathering) (bool, error) {
	network, err := c.clusterNetwork(ctx, g)
	if err != nil {
		return false, err
	}
	cluster := g.q.Cluster
	var r rules.ClusterRanges
	if r.Pods, err = rules.ParsePrefixes(cluster.Spec.ClusterNetwork.Pods.CIDRBlocks); err != nil {
		return false, fmt.Errorf("spec.clusterNetwork.pods.cidrBlocks: %w", err)
	}
	if r.Services, err = rules.ParsePrefixes(cluster.Spec.ClusterNetwork.Services.CIDRBlocks); err != nil {
		return false, fmt.Errorf("spec.clusterNetwork.services.cidrBlocks: %w", err)
	}
	if r.NodeSubnets, err = rules.ParsePrefixes(network.subnetCIDRs); err != nil {
		return false, fmt.Errorf("cluster network subnets: %w", err)
	}
	if r.OtherShared, err = c.otherShared(ctx, cluster, g.q.Nodegroup, g.subnet); err != nil {
		return false, err
	}
	g.n.Ranges = &r
	return true, nil
}

// otherShared are the shared subnets of the cluster's other nodegroups
// (two nodegroups may share one subnet).
func (c *Checker) otherShared(ctx context.Context, cluster *clusterv1.Cluster, topology, subnetID string) ([]rules.NamedPrefix, error) {
	values, err := variables.Nodegroups(cluster)
	if err != nil {
		return nil, err
	}
	var out []rules.NamedPrefix
	for _, other := range sortedKeys(values) {
		value := values[other]
		if other == topology {
			continue
		}
		sn := &sharednetv1.SharedNetwork{}
		if err := c.Reader.Get(ctx, client.ObjectKey{Name: value.Name}, sn); err != nil {
			if apierrors.IsNotFound(err) {
				continue // that nodegroup's own check reports it
			}
			return nil, fmt.Errorf("reading SharedNetwork %s of nodegroup %s: %w", value.Name, other, err)
		}
		subnet, v := rules.OneSubnet(sn.Name, sn.Status.SubnetIDs(), sn.Spec.Subnets, value.Subnet)
		facts, ok := sn.Status.Subnet(subnet)
		if v != nil || subnet == subnetID || !ok {
			continue
		}
		p, err := netip.ParsePrefix(facts.CIDR)
		if err != nil {
			return nil, fmt.Errorf("SharedNetwork %s status: subnet %s of nodegroup %s has CIDR %q: %w", sn.Name, subnet, other, facts.CIDR, err)
		}
		out = append(out, rules.NamedPrefix{Name: fmt.Sprintf("the shared subnet %s of nodegroup %s", subnet, other), Prefix: p})
	}
	return out, nil
}

package preflight

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// Scope says which rules to run: admission runs all of them, ValidateTopology
// only those that hold without fresh cloud facts.
type Scope int

const (
	// Static rules: granted, one subnet, version, overlap.
	Static Scope = iota
	// All rules: Static plus capacity.
	All
)

// NodegroupError is a refusal for one MachineDeployment topology.
type NodegroupError struct {
	Topology string
	Err      error
}

func (e *NodegroupError) Error() string {
	return fmt.Sprintf("MachineDeployment topology %q: %v", e.Topology, e.Err)
}

func (e *NodegroupError) Unwrap() error { return e.Err }

// ClusterLevel refuses a cluster-wide `sharedNetwork` value: the seed
// attaches one nodegroup, never the whole cluster.
func ClusterLevel(cluster *clusterv1.Cluster) error {
	v, err := variables.FromClusterVariables(cluster.Spec.Topology.Variables)
	if err != nil {
		return err
	}
	if v == nil {
		return nil
	}
	return &rules.Violation{Rule: "one-nodegroup", Field: "spec.topology.variables[sharedNetwork]",
		Message: "sharedNetwork is set for the whole cluster; a shared network is attached to one nodegroup: move the value to spec.topology.workers.machineDeployments[].variables.overrides of that MachineDeployment topology"}
}

// Attach runs the rules for attaching nodegroup topology of cluster to value.
// Every violation found is returned, joined, each naming the nodegroup.
func (c *Checker) Attach(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable, scope Scope) error {
	if err := c.attach(ctx, cluster, topology, value, scope); err != nil {
		return &NodegroupError{Topology: topology, Err: err}
	}
	return nil
}

func (c *Checker) attach(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable, scope Scope) error {
	var errs []error
	if v := rules.Version(cluster.Spec.Topology.Version); v != nil {
		errs = append(errs, v)
	}
	sn, err := c.sharedNetwork(ctx, value.Name)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	nsLabels, err := c.namespaceLabels(ctx, cluster.Namespace)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if v := rules.Granted(sn.Name, sn.Spec.NamespaceSelector, cluster.Namespace, nsLabels, sn.Spec.Subnets, value.Subnet); v != nil {
		// Nothing else of an ungranted network is the cluster owner's business.
		return errors.Join(append(errs, v)...)
	}
	if len(sn.Status.Subnets) == 0 {
		return errors.Join(append(errs, fmt.Errorf("facts of SharedNetwork %s are not known yet (its controller has not read them from Neutron: see `kubectl get sharednetwork %s`); nothing was changed, retry when it is Ready", sn.Name, sn.Name))...)
	}
	subnet, v := rules.OneSubnet(sn.Name, statusSubnetIDs(sn), sn.Spec.Subnets, value.Subnet)
	if v != nil {
		return errors.Join(append(errs, v)...)
	}
	facts, _ := sn.Status.Subnet(subnet)
	shared, err := netip.ParsePrefix(facts.CIDR)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("SharedNetwork %s status: subnet %s has CIDR %q: %w", sn.Name, subnet, facts.CIDR, err))...)
	}
	values, err := variables.Nodegroups(cluster)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	ranges, err := c.clusterRanges(ctx, cluster, topology, subnet, values)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if v := rules.Overlap(shared, ranges); v != nil {
		errs = append(errs, v)
	}
	if scope == All {
		if err := c.capacity(ctx, cluster, topology, sn, subnet, facts); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Checker) capacity(ctx context.Context, cluster *clusterv1.Cluster, topology string, sn *sharednetv1.SharedNetwork, subnet string, facts sharednetv1.SubnetStatus) error {
	others, err := c.consumers(ctx, sn, subnet, client.ObjectKeyFromObject(cluster), topology)
	if err != nil {
		return err
	}
	self, err := c.consumer(ctx, cluster, topology)
	if err != nil {
		return err
	}
	if v := rules.Capacity(rules.CapacityInput{Subnet: subnet, FreeAddresses: int(facts.FreeAddresses), New: self, Others: others}); v != nil {
		return v
	}
	return nil
}

// Detach runs the detach rule for nodegroup topology of cluster: refused
// while load balancers have their VIP on the shared subnet.
func (c *Checker) Detach(ctx context.Context, cluster *clusterv1.Cluster, topology string) error {
	attachment := &sharednetv1.SharedNetworkAttachment{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: sharednetv1.AttachmentName(cluster.Name, topology)}
	if err := c.Reader.Get(ctx, key, attachment); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil // never attached: nothing can be on the subnet
		}
		return &NodegroupError{Topology: topology, Err: fmt.Errorf("reading SharedNetworkAttachment %s: %w", key, err)}
	}
	lbs := make([]rules.LoadBalancer, 0, len(attachment.Status.LoadBalancers))
	for _, lb := range attachment.Status.LoadBalancers {
		lbs = append(lbs, rules.LoadBalancer{Name: lb.Name, ID: lb.ID, VIP: lb.VIP, Service: lb.Service})
	}
	if v := rules.Detach(attachment.Spec.Subnet, lbs); v != nil {
		return &NodegroupError{Topology: topology, Err: v}
	}
	return nil
}

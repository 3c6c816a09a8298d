package preflight

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
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
	if err := Granted(ctx, c.Reader, sn, cluster.Namespace, value.Subnet); err != nil {
		// Nothing else of an ungranted network is the cluster owner's business.
		return errors.Join(append(errs, err)...)
	}
	status := &sn.Status
	if scope == All {
		if status, err = c.Facts(ctx, sn); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	if len(status.Subnets) == 0 {
		return errors.Join(append(errs, fmt.Errorf("facts of SharedNetwork %s are not known yet (its controller has not read them from Neutron: see `kubectl get sharednetwork %s`); nothing was changed, retry when it is Ready", sn.Name, sn.Name))...)
	}
	subnet, v := rules.OneSubnet(sn.Name, status.SubnetIDs(), sn.Spec.Subnets, value.Subnet)
	if v != nil {
		return errors.Join(append(errs, v)...)
	}
	facts, _ := status.Subnet(subnet)
	shared, err := netip.ParsePrefix(facts.CIDR)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("SharedNetwork %s status: subnet %s has CIDR %q: %w", sn.Name, subnet, facts.CIDR, err))...)
	}
	values, err := variables.Nodegroups(cluster)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	network, err := c.clusterNetwork(ctx, cluster)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	ranges, err := c.clusterRanges(ctx, cluster, network, topology, subnet, values)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if v := rules.Overlap(shared, ranges); v != nil {
		errs = append(errs, v)
	}
	if scope == All {
		live, err := c.live(ctx, cluster, sn)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		// The cluster network's MTU: Neutron's once CAPO made it, the one
		// the Cluster asks for before; when neither is known (a new cluster
		// leaving it to Neutron) the attachment controller checks it before
		// it shares.
		clusterMTU := network.requestedMTU
		if live != nil && live.networkMTU > 0 {
			clusterMTU = live.networkMTU
		}
		if clusterMTU > 0 {
			if v := rules.MTU(sn.Name, int(status.MTU), clusterMTU); v != nil {
				errs = append(errs, v)
			}
		}
		if err := c.capacity(ctx, cluster, topology, sn, subnet, facts, live); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Grow runs the rules a nodegroup that is already attached needs when it
// grows (replicas, the autoscaler's max size, its zones): capacity for the
// new size against every other consumer of the subnet, and the MTU, so a
// cloud that changed since the attach refuses the growth with the reason.
// The caller decides what growth is (Grows).
func (c *Checker) Grow(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable) error {
	if err := c.grow(ctx, cluster, topology, value); err != nil {
		return &NodegroupError{Topology: topology, Err: err}
	}
	return nil
}

func (c *Checker) grow(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable) error {
	sn, err := c.sharedNetwork(ctx, value.Name)
	if err != nil {
		return err
	}
	status, err := c.Facts(ctx, sn)
	if err != nil {
		return err
	}
	subnet, v := rules.OneSubnet(sn.Name, status.SubnetIDs(), sn.Spec.Subnets, value.Subnet)
	if v != nil {
		return v
	}
	facts, _ := status.Subnet(subnet)
	live, err := c.live(ctx, cluster, sn)
	if err != nil {
		return err
	}
	var errs []error
	if live != nil && live.networkMTU > 0 {
		if v := rules.MTU(sn.Name, int(status.MTU), live.networkMTU); v != nil {
			errs = append(errs, v)
		}
	}
	if err := c.capacity(ctx, cluster, topology, sn, subnet, facts, live); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// StillFits checks an attached nodegroup against the cloud as it is now:
// the shared network's MTU against the cluster network's, and room on the
// subnet for what every consumer may still take. The attachment controller
// reports the answer (condition CloudFits) and never acts on it: a cloud that
// changed must not wedge or roll a running cluster. It asks the cluster's
// project for its network only; facts older than MaxFactAge are not judged
// (nil).
func (c *Checker) StillFits(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable) error {
	sn, err := c.sharedNetwork(ctx, value.Name)
	if err != nil || !c.fresh(sn) {
		return nil
	}
	subnet, v := rules.OneSubnet(sn.Name, sn.Status.SubnetIDs(), sn.Spec.Subnets, value.Subnet)
	if v != nil {
		return v
	}
	facts, _ := sn.Status.Subnet(subnet)
	var errs []error
	if c.Cloud != nil {
		ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
		defer cancel()
		if session, osc, err := c.Cloud.ForCluster(ctx, cluster); err == nil && osc.Status.Network != nil && osc.Status.Network.ID != "" {
			if network, err := session.Network(ctx, osc.Status.Network.ID); err == nil {
				if v := rules.MTU(sn.Name, int(sn.Status.MTU), network.MTU); v != nil {
					errs = append(errs, v)
				}
			}
		}
	}
	if err := c.capacity(ctx, cluster, topology, sn, subnet, facts, nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Grows says whether nodegroup topology may take more of its shared subnet
// in cluster than in old: a larger max size or more zones. A size that is
// not a number is reported as an error naming the field.
func Grows(old, cluster *clusterv1.Cluster, topology string) (bool, error) {
	maxSize, zones, err := Size(cluster, topology)
	if err != nil {
		return false, &NodegroupError{Topology: topology, Err: err}
	}
	oldMax, _, err := Size(old, topology)
	if err != nil {
		return true, nil // the old size was unreadable: check the new one
	}
	// Zones are the Cluster's in both: only the nodegroup's own change counts.
	oldZones := rules.Zones(failureDomain(old, topology), len(cluster.Status.FailureDomains))
	return rules.Consumer{MaxSize: maxSize, Zones: zones}.Need() > rules.Consumer{MaxSize: oldMax, Zones: oldZones}.Need(), nil
}

func failureDomain(cluster *clusterv1.Cluster, topology string) string {
	for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
		if md.Name == topology {
			return md.FailureDomain
		}
	}
	return ""
}

// NotReadyError says the cluster is not far enough for the check before the
// share: it is retried, nothing is refused.
type NotReadyError struct{ Reason string }

func (e *NotReadyError) Error() string { return e.Reason }

// BeforeShare runs every rule for a nodegroup about to be shared, on the
// cluster as CAPO made it: the rules admission could not decide for a
// Cluster being created (the cluster network's MTU, the project's port
// quota, the same cloud) and the others again, on real facts. The
// attachment controller calls it before it shares: a violation means no
// share, no port and no rollout. A *NotReadyError while the cluster network
// does not exist yet.
func (c *Checker) BeforeShare(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable) error {
	network, err := c.clusterNetwork(ctx, cluster)
	if err != nil {
		return err
	}
	if network.osc == nil || network.osc.Status.Network == nil || network.osc.Status.Network.ID == "" || cluster.Spec.InfrastructureRef.Name == "" {
		return &NotReadyError{Reason: fmt.Sprintf("waiting for CAPO to create the cluster network (OpenStackCluster of cluster %s) before the rules can be checked", cluster.Name)}
	}
	return c.Attach(ctx, cluster, topology, value, All)
}

// sameCloud refuses a cluster whose credential the SharedNetwork's Keystone
// does not vouch for (credentials.VerifiedProject): the network would be
// shared with whatever project a Keystone of the tenant's choosing claims.
// The attachment controller asks again before it shares, also for a cluster
// that had no OpenStackCluster yet when it was admitted.
func (c *Checker) sameCloud(ctx context.Context, sn *sharednetv1.SharedNetwork, cluster openstack.ClusterCloud) error {
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	// The VM project's own errors are the administrator's (SharedNetwork
	// status and events), not the cluster owner's.
	cannotVerify := fmt.Errorf("cannot verify the cluster's project with SharedNetwork %s's cloud right now; nothing was changed, retry later", sn.Name)
	vm, err := c.Cloud.ForSharedNetwork(ctx, sn)
	if err != nil {
		return cannotVerify
	}
	if _, err := credentials.VerifiedProject(ctx, cluster, vm); err != nil {
		var foreign *credentials.ForeignKeystoneError
		if errors.As(err, &foreign) {
			return &rules.Violation{Rule: rules.RuleSameCloud, Field: "OpenStackCluster spec.identityRef", Message: err.Error()}
		}
		return cannotVerify
	}
	return nil
}

func (c *Checker) cloudTimeout() time.Duration {
	if c.CloudTimeout > 0 {
		return c.CloudTimeout
	}
	return 5 * time.Second
}

// liveFacts are the answers only the cluster's project can give.
type liveFacts struct {
	networkMTU    int  // 0 while the cluster network does not exist
	portQuotaFree *int // nil when unlimited
	session       openstack.ClusterCloud
}

// live asks the cluster's project, with a short timeout. A cluster whose
// OpenStackCluster does not exist yet (it is being created) has no project
// to ask: nil, and the attachment controller checks again before sharing.
// A cluster that has one but cannot be asked is refused: an unchecked
// attach is never accepted.
//
// For an attach (sn set) the cluster's cloud is verified first
// (sameCloud): nothing else is asked of a cloud the SharedNetwork's
// Keystone does not vouch for.
func (c *Checker) live(ctx context.Context, cluster *clusterv1.Cluster, sn *sharednetv1.SharedNetwork) (*liveFacts, error) {
	if c.Cloud == nil || cluster.Spec.InfrastructureRef.Name == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cloudTimeout())
	defer cancel()
	session, osc, err := c.Cloud.ForCluster(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("cannot ask the cluster's OpenStack project, so the attach cannot be checked; nothing was changed, retry when it answers: %w", err)
	}
	if sn != nil {
		if err := c.sameCloud(ctx, sn, session); err != nil {
			return nil, err
		}
	}
	out := &liveFacts{session: session}
	if osc.Status.Network != nil && osc.Status.Network.ID != "" {
		network, err := session.Network(ctx, osc.Status.Network.ID)
		if err != nil {
			return nil, fmt.Errorf("cannot read the cluster network's MTU; nothing was changed: %w", err)
		}
		out.networkMTU = network.MTU
	}
	quota, err := session.Ports(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot read the cluster project's port quota; nothing was changed: %w", err)
	}
	out.portQuotaFree = quota.Free()
	return out, nil
}

func (c *Checker) capacity(ctx context.Context, cluster *clusterv1.Cluster, topology string, sn *sharednetv1.SharedNetwork, subnet string, facts sharednetv1.SubnetStatus, live *liveFacts) error {
	others, err := c.consumers(ctx, sn, subnet, client.ObjectKeyFromObject(cluster), topology)
	if err != nil {
		return err
	}
	self, err := c.consumer(ctx, cluster, topology)
	if err != nil {
		return err
	}
	in := rules.CapacityInput{Subnet: subnet, FreeAddresses: int(facts.FreeAddresses), New: self, Others: others}
	if live != nil {
		in.PortQuotaFree = live.portQuotaFree
	}
	if v := rules.Capacity(in); v != nil {
		return v
	}
	return nil
}

// Detach runs the detach rule for nodegroup topology of cluster: refused
// while load balancers of this cluster (made by its CCM, internal/ccm) have
// their VIP on the shared subnet. Other clusters' load balancers on the same
// subnet never block it.
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
	// The status may be a minute old: ask Octavia now.
	live, err := c.live(ctx, cluster, nil)
	if err != nil {
		return &NodegroupError{Topology: topology, Err: err}
	}
	if live != nil {
		found, err := live.session.OnSubnet(ctx, attachment.Spec.Subnet)
		if err != nil {
			return &NodegroupError{Topology: topology, Err: fmt.Errorf("cannot list the load balancers on subnet %s, so the detach cannot be checked; nothing was changed: %w", attachment.Spec.Subnet, err)}
		}
		lbs = lbs[:0]
		own, _ := LoadBalancersOf(cluster, found)
		for _, lb := range own {
			lbs = append(lbs, rules.LoadBalancer{Name: lb.Name, ID: lb.ID, VIP: lb.VIP, Service: lb.Service})
		}
	}
	if v := rules.Detach(attachment.Spec.Subnet, lbs); v != nil {
		return &NodegroupError{Topology: topology, Err: v}
	}
	return nil
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

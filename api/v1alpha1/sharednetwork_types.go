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

package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ready condition of a SharedNetwork and its reasons, each one a person can act on.
const (
	ReadyCondition = "Ready"

	ReasonFactsCurrent         = "FactsCurrent"
	ReasonCredentialsInvalid   = "CredentialsInvalid"
	ReasonNetworkNotFound      = "NetworkNotFound"
	ReasonSubnetNotOnNetwork   = "SubnetNotOnNetwork"
	ReasonOpenStackUnavailable = "OpenStackUnavailable"
	ReasonInUse                = "InUse"
)

// SharedNetworkFinalizer keeps a SharedNetwork while nodegroups use it: their
// shares can only be released with its credential.
const SharedNetworkFinalizer = "sharednet.capo.io/sharednetwork"

// SharedNetworkSpec is what a management-cluster administrator offers: one
// network of a VM project, the subnets of it that nodegroups may use, and the
// namespaces whose clusters may use it.
// +kubebuilder:validation:XValidation:rule="!has(self.loadBalancerAddresses) || !has(self.subnets) || self.loadBalancerAddresses.all(r, r.subnet in self.subnets)",message="spec.loadBalancerAddresses[].subnet must be one of spec.subnets: addresses are kept on the subnets nodegroups may use; add the subnet to spec.subnets or remove its entry"
type SharedNetworkSpec struct {
	// identity is the VM project's credential. The Secret lives in the
	// extension's namespace and is never copied into a cluster's namespace.
	// +required
	Identity VMProjectIdentity `json:"identity,omitempty,omitzero"`

	// networkID is the Neutron ID of the network in the VM project. It is
	// immutable: changing it would move running nodegroups to another network.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.networkID is immutable: changing it would silently move the attached nodegroups to another network. To offer another network, create a new SharedNetwork for it, move each nodegroup (remove its sharedNetwork variable, then set it to the new SharedNetwork), then delete this one"
	// +kubebuilder:validation:MinLength=36
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
	NetworkID string `json:"networkID,omitempty"`

	// subnets are the IDs of the subnets of that network that nodegroups may
	// be attached to.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=36
	// +kubebuilder:validation:items:MaxLength=36
	// +kubebuilder:validation:items:Pattern=`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
	Subnets []string `json:"subnets,omitempty"`

	// namespaceSelector selects the namespaces whose clusters may use this
	// network. An empty selector selects every namespace; when unset no
	// namespace may use it.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// loadBalancerAddresses keeps addresses of subnets free for the internal
	// load balancers the clusters' Services put there: the capacity rule
	// counts them as reserved, so nodegroups cannot take the addresses the
	// next load balancer needs (its VIP, plus its amphorae's VRRP ports:
	// amphora SINGLE 1, ACTIVE_STANDBY 2; the OVN provider none). Addresses
	// load balancers already hold are used addresses, not part of it.
	// +optional
	// +listType=map
	// +listMapKey=subnet
	// +kubebuilder:validation:MaxItems=64
	LoadBalancerAddresses []LoadBalancerAddresses `json:"loadBalancerAddresses,omitempty"`
}

// LoadBalancerAddresses keeps addresses of one subnet for load balancers.
type LoadBalancerAddresses struct {
	// subnet is an entry of spec.subnets.
	// +required
	// +kubebuilder:validation:MinLength=36
	// +kubebuilder:validation:MaxLength=36
	Subnet string `json:"subnet,omitempty"`

	// keep is how many free addresses of the subnet nodegroups may not take:
	// for N more load balancers, N x (1 VIP + 2 VRRP ports) with amphora
	// ACTIVE_STANDBY, N x 2 with SINGLE, N with the OVN provider.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	Keep int32 `json:"keep,omitempty"`
}

// VMProjectIdentity references a clouds.yaml Secret in the extension's
// namespace, in the shape CAPO's identityRef uses.
type VMProjectIdentity struct {
	// secretName is the name of a Secret with a `clouds.yaml` key (and an
	// optional `cacert` key) in the extension's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// cloudName is the entry of clouds.yaml to use.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	CloudName string `json:"cloudName,omitempty"`
}

// SharedNetworkStatus holds the cloud facts the rules need, refreshed from
// Neutron by the controller, so admission and hooks need no OpenStack call.
// +kubebuilder:validation:MinProperties=1
type SharedNetworkStatus struct {
	// conditions represents the observations of a SharedNetwork's current state.
	// Known condition types are Ready (whether the facts could be read from Neutron)
	// and Paused (CAPI's paused annotation on the SharedNetwork: nothing is read or finalized).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// mtu of the network, as Neutron reports it; unset until it is read.
	// +optional
	// +kubebuilder:validation:Minimum=68
	// +kubebuilder:validation:Maximum=65535
	MTU int32 `json:"mtu,omitempty"`

	// subnets are the facts of each allowed subnet (spec.subnets has at most 64).
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=64
	Subnets []SubnetStatus `json:"subnets,omitempty"`

	// shares are the Neutron RBAC policies (access_as_shared) this network
	// holds, one per cluster project.
	// +optional
	// +listType=map
	// +listMapKey=projectID
	// +kubebuilder:validation:MaxItems=10000
	Shares []Share `json:"shares,omitempty"`

	// rbacPolicies is the VM project's Neutron quota of RBAC policies, which
	// every share takes one of, across all its networks; unset while it is
	// not known (never read, or the VM credential may not read its quota).
	// +optional
	RBACPolicies QuotaUsage `json:"rbacPolicies,omitempty,omitzero"`

	// consumers are the nodegroups attached or being attached. Sized for a
	// management cluster whose nodegroups all use one network (500 clusters
	// of 4 nodegroups fit several times over).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	Consumers []Consumer `json:"consumers,omitempty"`

	// lastRefreshTime is when the facts were last read from Neutron.
	// +optional
	LastRefreshTime *metav1.Time `json:"lastRefreshTime,omitempty"`

	// observedGeneration is the generation these facts were read for.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// observedIdentityVersion is the resourceVersion of the credential Secret
	// the facts were read with: a changed Secret is read again at once.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ObservedIdentityVersion string `json:"observedIdentityVersion,omitempty"`
}

// SubnetStatus are the facts of one subnet.
type SubnetStatus struct {
	// id of the subnet (a Neutron ID).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ID string `json:"id,omitempty"`

	// cidr of the subnet (43 characters hold an IPv6 prefix).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=43
	CIDR string `json:"cidr,omitempty"`

	// ipVersion is 4 or 6.
	// +optional
	// +kubebuilder:validation:Minimum=4
	// +kubebuilder:validation:Maximum=6
	// +kubebuilder:validation:Enum=4;6
	IPVersion int32 `json:"ipVersion,omitempty"`

	// allocationPools of the subnet.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	AllocationPools []AllocationPool `json:"allocationPools,omitempty"`

	// usedAddresses in the allocation pools; 0 when none is used.
	// +optional
	// +kubebuilder:validation:Minimum=0
	UsedAddresses *int64 `json:"usedAddresses,omitempty"`

	// freeAddresses in the allocation pools (pool size minus used); 0 when
	// the subnet is full.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FreeAddresses *int64 `json:"freeAddresses,omitempty"`

	// loadBalancerAddresses are the addresses load balancers' ports hold on
	// the subnet (VIPs and amphorae's VRRP ports, of every project): part of
	// usedAddresses.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LoadBalancerAddresses *int64 `json:"loadBalancerAddresses,omitempty"`

	// vmPorts counts the VM project's own ports on the subnet, whose
	// security groups decide whether its virtual machines answer the nodes
	// (which reach them from their shared-subnet addresses): not Neutron's
	// own ports (device owner network:*), load balancers' or ports bound to
	// nothing (no device owner); the nodes'
	// ports are their clusters' projects'. Unset when the credential may not
	// list the ports or the security group rules. Every attachment on the
	// subnet reports it in its status.vmIngress.
	// +optional
	// +kubebuilder:validation:Minimum=0
	VMPorts *int32 `json:"vmPorts,omitempty"`

	// admittingVMPorts counts those of vmPorts that accept traffic from the
	// whole subnet: port security disabled, or a security group with an
	// ingress rule of the subnet's IP version whose remote IP prefix
	// contains the subnet, or with neither a remote IP prefix nor a remote
	// group (from anywhere). A rule with a remote group does not admit the
	// nodes. Any protocol counts: a rule for TCP 22 lets only TCP 22
	// through. Unset when vmPorts is.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AdmittingVMPorts *int32 `json:"admittingVMPorts,omitempty"`

	// admittingIngressRules counts the distinct ingress rules, of the
	// security groups of the VM ports on the subnet, that admit the whole
	// subnet (as admittingVMPorts reads them). Unset when vmPorts is.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AdmittingIngressRules *int32 `json:"admittingIngressRules,omitempty"`

	// gatewayIP is the subnet's gateway; unset when it has none. Nova hands
	// a node a default route through it on its second interface, which the
	// route script of the nodegroup's bootstrap configuration removes before
	// the node joins (docs/design.md).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=39
	GatewayIP string `json:"gatewayIP,omitempty"`

	// hostRoutes are the routes Neutron hands out with the subnet's
	// addresses: how a node reaches the network's other subnets.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	HostRoutes []HostRoute `json:"hostRoutes,omitempty"`
}

// QuotaUsage is one Neutron quota and what is used of it.
type QuotaUsage struct {
	// used is how many exist (with those Neutron reserved for requests in
	// flight).
	// +required
	// +kubebuilder:validation:Minimum=0
	Used *int32 `json:"used,omitempty"`

	// limit is the quota; -1 means unlimited.
	// +required
	// +kubebuilder:validation:Minimum=-1
	Limit *int32 `json:"limit,omitempty"`
}

// HostRoute is a route Neutron hands out with a subnet's addresses.
type HostRoute struct {
	// destination is a CIDR (43 characters hold an IPv6 prefix).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=43
	Destination string `json:"destination,omitempty"`

	// nextHop is the router's address on the subnet.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=39
	NextHop string `json:"nextHop,omitempty"`
}

// AllocationPool is a range of addresses Neutron hands out.
type AllocationPool struct {
	// start is the first address of the range (39 characters hold an IPv6 address).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=39
	Start string `json:"start,omitempty"`

	// end is the last address of the range.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=39
	End string `json:"end,omitempty"`
}

// Share is one RBAC policy sharing the network with a cluster project.
type Share struct {
	// projectID is the cluster's project the network is shared with.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ProjectID string `json:"projectID,omitempty"`

	// rbacPolicyID is the Neutron RBAC policy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	RBACPolicyID string `json:"rbacPolicyID,omitempty"`

	// seal is set on an attachment's status.share only, by the extension: an
	// HMAC-SHA256 of the record (the attachment's namespace, name and UID,
	// its SharedNetwork and network, projectID and rbacPolicyID) with a key
	// only the extension holds. The detach trusts the recorded project only
	// when the seal matches; a record without one, or with one that does not
	// match, names no project the extension unshares. Never set on a
	// SharedNetwork's shares.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Seal string `json:"seal,omitempty"`
}

// Consumer is one nodegroup using the network.
type Consumer struct {
	// namespace of the nodegroup's Cluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// cluster is the name of the Cluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// machineDeployment is the name of the nodegroup's MachineDeployment
	// topology (spec.topology.workers.machineDeployments[].name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MachineDeployment string `json:"machineDeployment,omitempty"`

	// subnet is the ID of the shared subnet the nodegroup is attached to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Subnet string `json:"subnet,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.spec.networkID`
// +kubebuilder:printcolumn:name="MTU",type=integer,JSONPath=`.status.mtu`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SharedNetwork is a network of a VM project that an administrator offers to
// the nodegroups of the clusters of some namespaces.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.consumers) || size(oldSelf.status.consumers) == 0 || self.spec.identity == oldSelf.spec.identity",message="spec.identity cannot change while nodegroups use this SharedNetwork (status.consumers): their shares were made, and can only be released, with this credential. To rotate the credential, update the Secret's clouds.yaml in place; to move to another VM project's credential, detach the nodegroups first"
type SharedNetwork struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object's metadata.
	// More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the network offered and to whom.
	// +required
	Spec SharedNetworkSpec `json:"spec,omitempty,omitzero"`
	// status is what the controller last read from Neutron.
	// +optional
	Status SharedNetworkStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// SharedNetworkList is a list of SharedNetworks.
type SharedNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SharedNetwork `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SharedNetwork{}, &SharedNetworkList{})
}

// FreshFor is how much longer the facts in status may be decided on, given
// they hold for maxAge after a read: zero when they are older, not Ready, or
// read for an older spec.
func (sn *SharedNetwork) FreshFor(now time.Time, maxAge time.Duration) time.Duration {
	if !meta.IsStatusConditionTrue(sn.Status.Conditions, ReadyCondition) || sn.Status.LastRefreshTime == nil ||
		sn.Status.ObservedGeneration != sn.Generation {
		return 0
	}
	return max(0, maxAge-now.Sub(sn.Status.LastRefreshTime.Time))
}

// KeptForLoadBalancers is how many free addresses of subnet nodegroups may
// not take (spec.loadBalancerAddresses); 0 when none are kept.
func (s *SharedNetworkSpec) KeptForLoadBalancers(subnet string) int {
	for _, k := range s.LoadBalancerAddresses {
		if k.Subnet == subnet {
			return int(k.Keep)
		}
	}
	return 0
}

// SubnetIDs are the IDs of the subnets whose facts are known.
func (s *SharedNetworkStatus) SubnetIDs() []string {
	ids := make([]string, 0, len(s.Subnets))
	for _, subnet := range s.Subnets {
		ids = append(ids, subnet.ID)
	}
	return ids
}

// Subnet returns the facts of the subnet with that ID, if known.
func (s *SharedNetworkStatus) Subnet(id string) (SubnetStatus, bool) {
	for _, subnet := range s.Subnets {
		if subnet.ID == id {
			return subnet, true
		}
	}
	return SubnetStatus{}, false
}

// GetConditions returns the SharedNetwork's conditions (CAPI's conditions.Getter).
func (sn *SharedNetwork) GetConditions() []metav1.Condition {
	return sn.Status.Conditions
}

// SetConditions sets the SharedNetwork's conditions (CAPI's conditions.Setter).
func (sn *SharedNetwork) SetConditions(conditions []metav1.Condition) {
	sn.Status.Conditions = conditions
}

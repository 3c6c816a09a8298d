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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AttachmentPhase is where a nodegroup's attachment stands.
// +kubebuilder:validation:Enum=Validating;Sharing;RollingOut;Attached;Detaching;DetachBlocked;Detached
type AttachmentPhase string

// The phases of an attachment, in the order the seed describes them.
const (
	PhaseValidating    AttachmentPhase = "Validating"
	PhaseSharing       AttachmentPhase = "Sharing"
	PhaseRollingOut    AttachmentPhase = "RollingOut"
	PhaseAttached      AttachmentPhase = "Attached"
	PhaseDetaching     AttachmentPhase = "Detaching"
	PhaseDetachBlocked AttachmentPhase = "DetachBlocked"
	PhaseDetached      AttachmentPhase = "Detached"
)

// Condition types of an attachment, v1beta2 style (metav1.Condition). The
// attachment controller owns Ready, Shared, Attached, Granted, CloudFits,
// Paused and Deleting; the workload guardrails own WorkloadGuarded; the
// BeforeClusterDelete hook owns LoadBalancersRemoved. Each writer patches
// only its own (CAPI's patch helper with owned conditions).
const (
	// AttachmentReadyCondition summarizes Shared, Attached, Granted,
	// CloudFits and Deleting (CAPI's util/conditions summary): True once the
	// nodegroup is attached and nothing is wrong.
	AttachmentReadyCondition = ReadyCondition
	// SharedCondition is True once the network is shared with the cluster's project.
	SharedCondition = "Shared"
	// AttachedCondition is True once every node of the nodegroup has its shared-subnet address.
	AttachedCondition = "Attached"
	// GrantedCondition is False when the SharedNetwork no longer grants the
	// subnet to the cluster's namespace (revoked after the attach).
	GrantedCondition = "Granted"
	// LoadBalancersRemovedCondition is False when the cluster's deletion went
	// on without removing its load balancers on the shared subnet.
	LoadBalancersRemovedCondition = "LoadBalancersRemoved"
	// CloudFitsCondition is False when the cloud changed after the attach
	// so that the rules no longer hold (the shared network's MTU, the room
	// on its subnet): reported, never acted on; the next growth is refused.
	CloudFitsCondition = "CloudFits"
	// PausedCondition is True while the Cluster is paused (spec.paused or
	// CAPI's paused annotation on the Cluster or the attachment): nothing is
	// shared, rolled or unshared. CAPI's condition type.
	PausedCondition = "Paused"
	// DeletingCondition is True while the nodegroup is being detached (its
	// variable removed, the attachment or the Cluster deleted). CAPI's
	// condition type; negative polarity in Ready.
	DeletingCondition = "Deleting"
	// WorkloadGuardedCondition is the workload guardrails' finding: True when
	// the policy is installed and no Service, Gateway or Node of the workload
	// cluster breaks its rules. Not part of Ready: turning the feature gate
	// on or off never changes whether an attachment is Ready.
	WorkloadGuardedCondition = "WorkloadGuarded"
)

// Reasons of an attachment's conditions.
const (
	// Ready's reasons (the summary).
	ReasonReady        = "Ready"
	ReasonNotReady     = "NotReady"
	ReasonReadyUnknown = "ReadyUnknown"

	// Shared's reasons.
	ReasonShared                    = "Shared"
	ReasonShareFailed               = "ShareFailed"
	ReasonNotGranted                = "NotGranted"
	ReasonClusterCredentialsInvalid = "ClusterCredentialsInvalid"
	ReasonForeignKeystone           = "ForeignKeystone"
	// ReasonProjectChanged: the cluster's credential now authenticates to
	// another project than the one the network was shared with.
	ReasonProjectChanged = "ProjectChanged"
	// ReasonRBACPolicyQuotaExceeded: Neutron refused the share, the VM
	// project has no RBAC policy left (rule share-quota, judged too late).
	ReasonRBACPolicyQuotaExceeded = "RBACPolicyQuotaExceeded"
	// ReasonWaitingForClusterNetwork: the rules run before the share need
	// the cluster network CAPO creates.
	ReasonWaitingForClusterNetwork = "WaitingForClusterNetwork"
	// ReasonRuleViolated: a rule refused the attach before the share (a
	// Cluster created with the variable, whose cloud admission could not ask).
	ReasonRuleViolated = "RuleViolated"
	// ReasonCannotCheck: the rules could not be checked (a cloud that does
	// not answer); retried.
	ReasonCannotCheck = "CannotCheck"
	// ReasonPortsRemain: Neutron refused the unshare (409) while the
	// cluster's project has ports on the network: not yet, retried.
	ReasonPortsRemain = "PortsRemain"
	// ReasonLoadBalancersRemain: the unshare waits for load balancers on
	// the shared subnet (phase DetachBlocked).
	ReasonLoadBalancersRemain = "LoadBalancersRemain"
	ReasonUnshareFailed       = "UnshareFailed"
	ReasonUnshared            = "Unshared"

	// Attached's reasons.
	ReasonAttached   = "Attached"
	ReasonRollingOut = "RollingOut"
	ReasonDetaching  = "Detaching"

	// Granted's reasons.
	ReasonGranted      = "Granted"
	ReasonGrantRevoked = "GrantRevoked"

	// CloudFits' reasons.
	// ReasonCloudChanged: the cloud changed after the attach (MTU, room on
	// the subnet); the nodes keep their port, growth is refused.
	ReasonCloudChanged = "CloudChanged"
	// ReasonCloudFits: the shared network still fits the nodegroup.
	ReasonCloudFits = "CloudFits"

	// LoadBalancersRemoved's reason (also a Warning Event on the Cluster).
	ReasonLeftBehind = "LeftBehind"

	// Paused' reasons, CAPI's.
	ReasonPaused    = "Paused"
	ReasonNotPaused = "NotPaused"

	// Deleting's reasons, CAPI's.
	ReasonDeleting    = "Deleting"
	ReasonNotDeleting = "NotDeleting"

	// WorkloadGuarded's reasons.
	ReasonGuarded               = "Guarded"
	ReasonWorkloadMisconfigured = "WorkloadMisconfigured"
	// ReasonWorkloadUnchecked: WorkloadGuarded is Unknown, the workload
	// cluster's Nodes could not all be read, or a value of the policy could
	// not be read (the installed policy keeps its recorded values).
	ReasonWorkloadUnchecked = "WorkloadUnchecked"
)

// Reasons of Events that are no condition's.
const (
	// EventAttaching: the attachment of a nodegroup was created.
	EventAttaching = "Attaching"
	// EventVMProjectFailed: a call with the VM project's credential failed
	// (on the SharedNetwork, for the administrator only).
	EventVMProjectFailed = "VMProjectFailed"
	// EventShareNotReleased: a detach let an attachment go whose recorded
	// share it could not check (on the SharedNetwork, for the administrator).
	EventShareNotReleased = "ShareNotReleased"
)

// SharedNetworkAttachmentSpec identifies the nodegroup and what it asked for.
type SharedNetworkAttachmentSpec struct {
	// clusterName is the Cluster in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClusterName string `json:"clusterName,omitempty"`

	// machineDeploymentTopology is the name of the MachineDeployment topology
	// (spec.topology.workers.machineDeployments[].name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MachineDeploymentTopology string `json:"machineDeploymentTopology,omitempty"`

	// sharedNetwork is the SharedNetwork named by the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SharedNetwork string `json:"sharedNetwork,omitempty"`

	// subnet is the shared subnet the nodes get their second address on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Subnet string `json:"subnet,omitempty"`
}

// SharedNetworkAttachmentStatus tells a cluster owner where the nodegroup stands.
// +kubebuilder:validation:MinProperties=1
type SharedNetworkAttachmentStatus struct {
	// conditions represents the observations of an attachment's current state.
	// Known condition types are Ready (the summary), Shared, Attached, Granted,
	// CloudFits, Paused, Deleting, WorkloadGuarded, LoadBalancersRemoved.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// phase of the attachment.
	// +optional
	Phase AttachmentPhase `json:"phase,omitempty"`

	// share is the RBAC policy sharing the network with the cluster's project;
	// set once the share exists in Neutron. GeneratePatches emits the port
	// only once it is set (or the nodegroup already has the port).
	// +optional
	Share *Share `json:"share,omitempty"`

	// desiredNodes is the nodegroup's replica count.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DesiredNodes *int32 `json:"desiredNodes,omitempty"`

	// attachedNodes is how many of them have their shared-subnet address.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AttachedNodes *int32 `json:"attachedNodes,omitempty"`

	// nodes and their addresses on the shared subnet.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	Nodes []AttachedNode `json:"nodes,omitempty"`

	// loadBalancers of this cluster (made by its cloud controller manager,
	// named and tagged kube_service_<namespace>.<cluster>_...) with their VIP
	// on the shared subnet: while any exists the nodegroup cannot be detached.
	// Other clusters' load balancers on the same subnet are not listed.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	LoadBalancers []LoadBalancer `json:"loadBalancers,omitempty"`

	// subnetLoadBalancerAddresses are the addresses load balancers' ports
	// (VIPs and amphorae's VRRP ports, of every cluster) hold on the shared
	// subnet, as the SharedNetwork last read them: the nodegroup's nodes
	// and those load balancers share the subnet's allocation pools.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SubnetLoadBalancerAddresses *int64 `json:"subnetLoadBalancerAddresses,omitempty"`

	// unattributedLoadBalancers are load balancers of the cluster's project
	// on the shared subnet that no cluster's cloud controller manager made
	// (no kube_service_ name or tag): reported, never deleted by the
	// extension. They keep the network shared until someone deletes them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	UnattributedLoadBalancers []LoadBalancer `json:"unattributedLoadBalancers,omitempty"`

	// workload reports what the workload-cluster guardrails found (when the
	// WorkloadGuardrails feature is on).
	// +optional
	Workload WorkloadStatus `json:"workload,omitempty,omitzero"`

	// vmIngress says whether the security groups of the VM project's ports
	// on the shared subnet admit it, so the VMs accept traffic from the nodes.
	// +optional
	VMIngress VMIngressStatus `json:"vmIngress,omitempty,omitzero"`

	// message is a one-line summary for people, often the message of a
	// condition that is not True: it has a condition message's limit.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`

	// observedGeneration is the generation last reconciled.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// WorkloadPolicyState says whether the guardrails' ValidatingAdmissionPolicy
// is in place in the workload cluster.
// +kubebuilder:validation:Enum=Installed;NotInstalled
type WorkloadPolicyState string

// The states of the guardrails' policy.
const (
	// WorkloadPolicyInstalled: the ValidatingAdmissionPolicy and its binding are in place.
	WorkloadPolicyInstalled WorkloadPolicyState = "Installed"
	// WorkloadPolicyNotInstalled: the policy is not (yet) in place.
	WorkloadPolicyNotInstalled WorkloadPolicyState = "NotInstalled"
)

// WorkloadStatus is what the guardrails see in the workload cluster.
type WorkloadStatus struct {
	// policy is Installed once the ValidatingAdmissionPolicy is in place.
	// +required
	Policy WorkloadPolicyState `json:"policy,omitempty"`

	// misconfigured are Services and Gateways, created before the policy,
	// that break its rules.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	Misconfigured []WorkloadObjectIssue `json:"misconfigured,omitempty"`

	// unaccountedLoadBalancers are load balancers on the shared subnet that
	// no Service or Gateway of the cluster accounts for, each as its name
	// and VIP ("<name> (VIP <address>)": 255 + 46 characters at most).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=512
	UnaccountedLoadBalancers []string `json:"unaccountedLoadBalancers,omitempty"`

	// nodes whose addresses are wrong (InternalIP not on the cluster
	// network, or the shared-subnet address missing).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	Nodes []WorkloadObjectIssue `json:"nodes,omitempty"`
}

// WorkloadObjectIssue is one object of the workload cluster and what is wrong with it.
type WorkloadObjectIssue struct {
	// kind of the object (Service, Gateway, Node).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`

	// namespace of the object; unset for a cluster-scoped one (a Node).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// reason is what is wrong with it, and the fix.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=10240
	Reason string `json:"reason,omitempty"`
}

// VMIngressAdmission says whether the VM project's virtual machines on the
// shared subnet accept traffic from the nodes: whether the security groups
// of its ports there admit the whole subnet.
// +kubebuilder:validation:Enum=Admitted;Partial;Refused;NoVMPorts
type VMIngressAdmission string

// The answers of the VM project's ports on the shared subnet.
const (
	// VMIngressAdmitted: every VM port on the shared subnet (at least one) accepts traffic from the whole subnet.
	VMIngressAdmitted VMIngressAdmission = "Admitted"
	// VMIngressPartial: some of the VM ports on the shared subnet do, the others do not.
	VMIngressPartial VMIngressAdmission = "Partial"
	// VMIngressRefused: none of the VM ports on the shared subnet (at least one) does.
	VMIngressRefused VMIngressAdmission = "Refused"
	// VMIngressNoVMPorts: the VM project has no port on the shared subnet (besides Neutron's and load balancers').
	VMIngressNoVMPorts VMIngressAdmission = "NoVMPorts"
)

// VMIngressStatus is the VM-side reminder of the seed made concrete: what
// the security groups of the VM project's ports on the shared subnet let in
// from the nodes. Counts only: the VM project's port, group and rule IDs
// are not shown, the attachment is in the cluster owner's namespace.
type VMIngressStatus struct {
	// admission is Admitted when every VM port on the shared subnet accepts
	// traffic from the whole subnet, Partial when some do, Refused when
	// none does, NoVMPorts when the VM project has no port there. A port
	// accepts it with port security disabled, or with a security group
	// holding an ingress rule of the subnet's IP version whose remote IP
	// prefix contains the subnet, or with neither a remote IP prefix nor a
	// remote group. Any protocol counts: a rule for TCP 22 lets only TCP 22
	// through.
	// +required
	Admission VMIngressAdmission `json:"admission,omitempty"`

	// message is the answer in one line, e.g. "2 of 3 VM ports on the subnet
	// accept traffic from the nodes".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// vmPorts is how many ports the VM project has on the shared subnet (its
	// virtual machines'; not Neutron's own, load balancers' or ports bound to nothing).
	// +optional
	// +kubebuilder:validation:Minimum=0
	VMPorts *int32 `json:"vmPorts,omitempty"`

	// admittingVMPorts is how many of the VM ports (vmPorts) accept traffic
	// from the whole shared subnet.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AdmittingVMPorts *int32 `json:"admittingVMPorts,omitempty"`

	// admittingRules is how many distinct ingress rules of the VM ports'
	// security groups admit the whole shared subnet. Counts only: the VM
	// project's port, group and rule IDs are not shown here, the attachment
	// is in the cluster owner's namespace.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AdmittingRules *int32 `json:"admittingRules,omitempty"`

	// suggestion is the command a VM-project owner would run when not every
	// VM port accepts traffic from the nodes.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=10240
	Suggestion string `json:"suggestion,omitempty"`
}

// AttachedNode is one machine of the nodegroup and its shared-subnet address.
type AttachedNode struct {
	// machine is the name of the Machine.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Machine string `json:"machine,omitempty"`

	// node is the name of the Machine's Node, once it has one.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node,omitempty"`

	// address is the Machine's address on the shared subnet, once it has one
	// (39 characters hold an IPv6 address).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=39
	Address string `json:"address,omitempty"`
}

// LoadBalancer is an Octavia load balancer with its VIP on the shared subnet.
type LoadBalancer struct {
	// id of the load balancer (an Octavia ID).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ID string `json:"id,omitempty"`

	// name of the load balancer; Octavia allows none.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name,omitempty"`

	// vip is the load balancer's address on the shared subnet.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=39
	VIP string `json:"vip,omitempty"`

	// service is namespace/name of the Service (or Gateway) the cloud
	// controller manager created it for, when known (63 + 1 + 253 characters).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Service string `json:"service,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sna,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Nodegroup",type=string,JSONPath=`.spec.machineDeploymentTopology`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Subnet",type=string,JSONPath=`.spec.subnet`
// +kubebuilder:printcolumn:name="Attached",type=integer,JSONPath=`.status.attachedNodes`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredNodes`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SharedNetworkAttachment is one nodegroup (MachineDeployment topology) of one
// cluster attached to a SharedNetwork. The controller creates and owns it.
type SharedNetworkAttachment struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object's metadata.
	// More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the nodegroup and the shared network and subnet it asked for.
	// +required
	Spec SharedNetworkAttachmentSpec `json:"spec,omitempty,omitzero"`
	// status is where the attachment stands.
	// +optional
	Status SharedNetworkAttachmentStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// SharedNetworkAttachmentList is a list of SharedNetworkAttachments.
type SharedNetworkAttachmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SharedNetworkAttachment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SharedNetworkAttachment{}, &SharedNetworkAttachmentList{})
}

// AttachmentName is the name of the attachment of a cluster's MachineDeployment topology.
func AttachmentName(cluster, machineDeploymentTopology string) string {
	return cluster + "-" + machineDeploymentTopology
}

// AttachmentKey is where the attachment of nodegroup (MachineDeployment
// topology) topology of cluster lives: the cluster's namespace and
// AttachmentName. internal/attachments.Get is how the extension reads it
// (it also checks the pair in the spec: names joined with a dash collide).
func AttachmentKey(cluster metav1.Object, topology string) types.NamespacedName {
	return types.NamespacedName{Namespace: cluster.GetNamespace(), Name: AttachmentName(cluster.GetName(), topology)}
}

// ShareEstablished says whether the network is shared with the cluster's project.
func (a *SharedNetworkAttachment) ShareEstablished() bool {
	return a.Status.Share != nil && a.Status.Share.RBACPolicyID != ""
}

// GetConditions returns the attachment's conditions (CAPI's conditions.Getter).
func (a *SharedNetworkAttachment) GetConditions() []metav1.Condition {
	return a.Status.Conditions
}

// SetConditions sets the attachment's conditions (CAPI's conditions.Setter).
func (a *SharedNetworkAttachment) SetConditions(conditions []metav1.Condition) {
	a.Status.Conditions = conditions
}

// NewCondition is a condition of the given type, status, reason and message;
// CAPI's conditions.Set fills in its generation and transition time.
func NewCondition(conditionType string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: conditionType, Status: status, Reason: reason, Message: message}
}

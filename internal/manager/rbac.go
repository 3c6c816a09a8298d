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

package manager

// What the manager reads and writes; controller-gen turns these markers into
// config/rbac/role.yaml (docs/rbac.md says why each verb is needed).
//
// +kubebuilder:rbac:groups=sharednet.capo.io,resources=sharednetworks,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=sharednet.capo.io,resources=sharednetworkattachments,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=sharednet.capo.io,resources=sharednetworks/status,verbs=patch
// The attachment controller, the guardrails and BeforeClusterDelete patch
// their own fields and conditions (CAPI's patch helper).
// +kubebuilder:rbac:groups=sharednet.capo.io,resources=sharednetworkattachments/status,verbs=patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusterclasses;machinedeployments;machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=patch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=openstackclusters;openstackclustertemplates;openstackmachinetemplates;openstackmachines,verbs=get;list;watch
// CAPO's ClusterIdentity (identityRef type ClusterIdentity), resolved by CAPO's own code.
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=openstackclusteridentities,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=capo-sharednet-system,resources=secrets,verbs=get;list;watch
// The key that seals the attachments' share records (internal/records) is
// made once, in the extension's namespace only; never updated or deleted.
// +kubebuilder:rbac:groups="",namespace=capo-sharednet-system,resources=secrets,verbs=create
// The cluster's own identity Secret (CAPO's identityRef) is read, never listed nor copied.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// The detach trusts an attachment's sealed record only while the shipped
// admission policy that protects it is in place (controllers.PolicyGuard).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get
// The credential and size webhooks are scoped to the namespaces whose
// clusters use a shared network (controllers.NamespaceScope); only the
// extension's own configuration, by name (the cache lists and watches it
// with a metadata.name field selector, which resourceNames allows).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;patch,resourceNames=capo-sharednet-validating-webhook-configuration
// So is the ExtensionConfig of BeforeClusterDelete: an outage holds the
// deletion of attached clusters only.
// +kubebuilder:rbac:groups=runtime.cluster.x-k8s.io,resources=extensionconfigs,verbs=get;list;watch;patch,resourceNames=capo-sharednet-deletion
// The diagnostics endpoint authenticates and authorizes its callers
// (controller-runtime's filters, CAPI's util/flags).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// CAPI's ClusterCache (WorkloadGuardrails) reads each cluster's kubeconfig Secret (get, above) and leases nothing.

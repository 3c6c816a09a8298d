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

package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/topologymutation"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/attachments"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/nodeconfig"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

const (
	machineDeploymentInfraRefPath     = "spec.template.spec.infrastructureRef"
	machineDeploymentBootstrapRefPath = "spec.template.spec.bootstrap.configRef"
)

// GeneratePatches adds the shared port to the OpenStackMachineTemplate of each
// MachineDeployment topology whose override sets `sharedNetwork`, and to no
// other template. It is sticky and deterministic: the port is emitted iff the
// variable is set AND (the share is established OR the MachineDeployment's
// current template already carries a shared port OR the MachineDeployment is
// being created), and a port is only ever dropped from a nodegroup none of
// whose machines has a server. A transient error, a restart or a lost status
// therefore never drops a port (that would be a second, unwanted rollout); an
// error fails the call instead, which leaves every template as it is. The
// nodegroup's KubeadmConfigTemplate gains the node label and the route
// script with the port (bootstrapFor), so both templates rotate together.
func (h *Handlers) GeneratePatches(ctx context.Context, req *runtimehooksv1.GeneratePatchesRequest, resp *runtimehooksv1.GeneratePatchesResponse) {
	log := ctrl.LoggerFrom(ctx)
	cluster, err := clusterBuiltins(req.Variables)
	if err != nil {
		fail(resp, err)
		return
	}
	reads := &callReads{resolved: map[sharednetv1.SharedNetworkVariable]preflight.Resolution{}}
	// The infrastructure templates first: each nodegroup's port decides
	// what its bootstrap template carries, patched in the same call so that
	// CAPI rotates both in one MachineDeployment update (one rollout).
	decided := map[string]attachDecision{}
	for i := range req.Items {
		item := &req.Items[i]
		if !isMachineDeploymentInfraTemplate(item.HolderReference) {
			continue
		}
		d, err := h.sharedPortFor(ctx, reads, cluster, item)
		if err != nil {
			fail(resp, fmt.Errorf("cluster %s/%s, %s: %w", cluster.Namespace, cluster.Name, item.HolderReference.Name, err))
			return
		}
		if d.port == nil {
			continue
		}
		decided[item.HolderReference.Name] = d
		ops, err := sharedport.Inject(item.Object.Raw, *d.port)
		if err != nil {
			fail(resp, err)
			return
		}
		log.V(4).Info("adding the shared port", "machineDeployment", item.HolderReference.Name)
		if !respond(resp, item, ops) {
			return
		}
	}
	for i := range req.Items {
		item := &req.Items[i]
		d, ok := decided[item.HolderReference.Name]
		if !ok || !isMachineDeploymentBootstrapTemplate(item.HolderReference) || !isKubeadmConfigTemplate(item.Object.Raw) {
			continue
		}
		additions, err := h.bootstrapFor(ctx, item.HolderReference, d)
		if err != nil {
			fail(resp, fmt.Errorf("cluster %s/%s, %s: %w", cluster.Namespace, cluster.Name, item.HolderReference.Name, err))
			return
		}
		if additions == nil {
			continue
		}
		ops, err := nodeconfig.Inject(item.Object.Raw, *additions)
		if err != nil {
			fail(resp, err)
			return
		}
		log.V(4).Info("adding the node label and the route script", "machineDeployment", item.HolderReference.Name)
		if !respond(resp, item, ops) {
			return
		}
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

func isMachineDeploymentInfraTemplate(ref runtimehooksv1.HolderReference) bool {
	return ref.Kind == "MachineDeployment" && ref.FieldPath == machineDeploymentInfraRefPath
}

func isMachineDeploymentBootstrapTemplate(ref runtimehooksv1.HolderReference) bool {
	return ref.Kind == "MachineDeployment" && ref.FieldPath == machineDeploymentBootstrapRefPath
}

// isKubeadmConfigTemplate says whether a bootstrap template is kubeadm's:
// another bootstrap provider's gets neither label nor script.
func isKubeadmConfigTemplate(raw []byte) bool {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	return err == nil && gv.Group == bootstrapv1.GroupVersion.Group && meta.Kind == "KubeadmConfigTemplate"
}

// respond adds the JSON patch of one template to the response; false (and a
// failed response) if it cannot be written.
func respond(resp *runtimehooksv1.GeneratePatchesResponse, item *runtimehooksv1.GeneratePatchesRequestItem, ops []sharedport.Operation) bool {
	patch, err := json.Marshal(ops)
	if err != nil {
		fail(resp, err)
		return false
	}
	resp.Items = append(resp.Items, runtimehooksv1.GeneratePatchesResponseItem{
		UID: item.UID, PatchType: runtimehooksv1.JSONPatchType, Patch: patch,
	})
	return true
}

// attachDecision is a nodegroup's shared port, and the SharedNetwork it was
// resolved from this call (nil when the port is the one the nodegroup
// carries).
type attachDecision struct {
	port          *infrav1.PortOpts
	sharedNetwork *sharednetv1.SharedNetwork
}

// bootstrapFor decides what the bootstrap template of a nodegroup with a
// shared port carries: this version's label and route script when its
// infrastructure template changes in this call (the nodegroup rolls anyway:
// created, attached, or moved), else exactly what its current bootstrap
// template carries, so that neither an upgrade of the extension nor a
// nodegroup attached before it replaces a node. A current template not in
// the cache yet fails the call (CAPI retries it): read as "carries nothing",
// it would rotate the templates a second time.
func (h *Handlers) bootstrapFor(ctx context.Context, holder runtimehooksv1.HolderReference, d attachDecision) (*nodeconfig.Additions, error) {
	md, current, err := h.currentTemplates(ctx, holder)
	switch {
	case md == nil && err == nil:
		return freshAdditions(d) // being created
	case md == nil:
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("reading the nodegroup's current OpenStackMachineTemplate %s (retrying): %w", md.Spec.Template.Spec.InfrastructureRef.Name, err)
	}
	spec := md.Spec.Template.Spec
	if carried := sharedport.Carried(current.Spec.Template.Spec.Ports); carried == nil || !apiequality.Semantic.DeepEqual(*carried, *d.port) {
		return freshAdditions(d)
	}
	if spec.Bootstrap.ConfigRef.Kind != "KubeadmConfigTemplate" || spec.Bootstrap.ConfigRef.Name == "" {
		return nil, nil
	}
	kct := &bootstrapv1.KubeadmConfigTemplate{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: spec.Bootstrap.ConfigRef.Name}, kct); err != nil {
		return nil, fmt.Errorf("reading the nodegroup's current KubeadmConfigTemplate %s (retrying): %w", spec.Bootstrap.ConfigRef.Name, err)
	}
	return nodeconfig.Carried(kct), nil
}

// freshAdditions is what this version adds for the decided port. The route
// script needs the subnet's CIDR: a SharedNetwork that has not read its
// subnet yet fails the call rather than give the nodegroup the label
// without the script for good.
func freshAdditions(d attachDecision) (*nodeconfig.Additions, error) {
	if d.sharedNetwork == nil {
		return nil, nil
	}
	cidr := subnetCIDR(d.sharedNetwork, d.port)
	if cidr == "" {
		return nil, fmt.Errorf("SharedNetwork %s has not read the subnet of the port from Neutron yet (its Ready condition says why); retrying", d.sharedNetwork.Name)
	}
	return ptr.To(nodeconfig.For(d.sharedNetwork.Name, cidr)), nil
}

// subnetCIDR is the CIDR of the port's subnet as the SharedNetwork last read
// it; "" when not read.
func subnetCIDR(sn *sharednetv1.SharedNetwork, port *infrav1.PortOpts) string {
	if len(port.FixedIPs) == 0 || port.FixedIPs[0].Subnet == nil {
		return ""
	}
	id := ptr.Deref(port.FixedIPs[0].Subnet.ID, "")
	for _, s := range sn.Status.Subnets {
		if s.ID == id {
			return s.CIDR
		}
	}
	return ""
}

// sharedPortFor decides the port of one MachineDeployment's template (none:
// a nil port).
func (h *Handlers) sharedPortFor(ctx context.Context, reads *callReads, cluster *runtimehooksv1.ClusterBuiltins, item *runtimehooksv1.GeneratePatchesRequestItem) (attachDecision, error) {
	// Only the MachineDeployment's own overrides count: a cluster-level value
	// (refused at admission) attaches nothing.
	none := attachDecision{}
	value, err := variables.FromHookVariables(item.Variables)
	if err != nil || value == nil {
		return none, err
	}
	md, err := machineDeploymentBuiltins(item.Variables)
	if err != nil {
		return none, err
	}
	attachment, err := h.attachmentOf(ctx, cluster, md.TopologyName)
	if err != nil {
		return none, err
	}
	if spec := attachment.Spec; attachment.ShareEstablished() && spec.SharedNetwork == value.Name &&
		spec.Subnet != "" && (value.Subnet == "" || spec.Subnet == value.Subnet) {
		// Shared with the cluster's project for this nodegroup.
		res, err := h.resolve(ctx, reads, cluster.Namespace, sharednetv1.SharedNetworkVariable{Name: value.Name, Subnet: spec.Subnet})
		if desired := grantedPort(res, spec.Subnet); desired != nil || err != nil {
			return attachDecision{port: desired, sharedNetwork: res.SharedNetwork}, err
		}
	}
	// Read only now: a nodegroup whose share is established (every attached
	// one in steady state) gets the port of the share whatever its template
	// carries.
	carried, exists, err := h.carriedPort(ctx, item.HolderReference)
	if err != nil {
		return none, err
	}
	refused := refusedBeforeShare(attachment)
	if carried != nil {
		// Not (yet, or no longer) established: keep whatever the nodegroup
		// runs with, so nothing rolls until the share is in place. The one
		// exception is a port given to a nodegroup at its creation whose
		// attach was then refused before the share (e.g. the MTU Neutron
		// chose): it goes while none of the nodegroup's machines has a
		// server, so no node is ever replaced for it.
		if refused {
			running, err := h.anyServer(ctx, item.HolderReference)
			if err != nil || !running {
				return none, err
			}
		}
		return attachDecision{port: carried}, nil
	}
	if !exists && !refused {
		// A nodegroup being created (with its Cluster, or added to one) gets
		// the port at once, so its machines are created once, with it.
		// CAPO can only create the port once the network is shared with the
		// cluster's project: seconds after the cluster network exists, and
		// before the first worker server (CAPI creates no worker machine
		// until the control plane is up); until then it retries.
		// No port for a value that names no subnet: admission and the
		// attachment's Shared condition report it.
		res, err := h.resolve(ctx, reads, cluster.Namespace, *value)
		return attachDecision{port: grantedPort(res, res.Subnet), sharedNetwork: res.SharedNetwork}, err
	}
	return none, nil
}

// callReads memoises what the nodegroups of one GeneratePatches call
// resolve alike: each value's SharedNetwork, subnet and grant to the
// cluster's namespace. A cluster of many nodegroups on a handful of networks
// reads (and deep-copies out of the cache) each network and the namespace
// once per call instead of once per nodegroup, and all its nodegroups are
// judged on the same version of them. Errors are not kept: one fails the
// whole call.
type callReads struct {
	resolved map[sharednetv1.SharedNetworkVariable]preflight.Resolution
}

// resolve is the decision service's Resolve, once per value and call.
func (h *Handlers) resolve(ctx context.Context, reads *callReads, namespace string, value sharednetv1.SharedNetworkVariable) (preflight.Resolution, error) {
	if res, ok := reads.resolved[value]; ok {
		return res, nil
	}
	res, err := h.preflight().Resolve(ctx, namespace, value)
	if err != nil {
		return res, err
	}
	reads.resolved[value] = res
	return res, nil
}

// attachmentOf is the nodegroup's SharedNetworkAttachment; an empty one when
// it has none.
func (h *Handlers) attachmentOf(ctx context.Context, cluster *runtimehooksv1.ClusterBuiltins, topologyName string) (*sharednetv1.SharedNetworkAttachment, error) {
	attachment, err := attachments.Get(ctx, h.Reader, cluster.Namespace, cluster.Name, topologyName)
	if attachment == nil {
		return &sharednetv1.SharedNetworkAttachment{}, err
	}
	return attachment, nil
}

// refusedBeforeShare says the attach was refused before any share was made:
// a rule, the grant or the cluster's cloud.
func refusedBeforeShare(attachment *sharednetv1.SharedNetworkAttachment) bool {
	if attachment.ShareEstablished() {
		return false
	}
	shared := meta.FindStatusCondition(attachment.Status.Conditions, sharednetv1.SharedCondition)
	if shared == nil || shared.Status != metav1.ConditionFalse {
		return false
	}
	switch shared.Reason {
	case sharednetv1.ReasonRuleViolated, sharednetv1.ReasonNotGranted, sharednetv1.ReasonForeignKeystone:
		return true
	}
	return false
}

// anyServer says whether a machine of the MachineDeployment has a server
// (a provider ID): such a nodegroup runs, and keeps its port.
func (h *Handlers) anyServer(ctx context.Context, holder runtimehooksv1.HolderReference) (bool, error) {
	machines := &clusterv1.MachineList{}
	if err := h.Reader.List(ctx, machines, client.InNamespace(holder.Namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: holder.Name}); err != nil {
		return false, err
	}
	for _, m := range machines.Items {
		if m.Spec.ProviderID != "" {
			return true, nil
		}
	}
	return false, nil
}

// grantedPort is the port on subnet of the resolved SharedNetwork, or nil.
// A new port only under a grant that holds now: a status written by
// someone else, or a grant revoked since, attaches nothing new (a port the
// nodegroup already runs with stays, see sharedPortFor).
func grantedPort(res preflight.Resolution, subnet string) *infrav1.PortOpts {
	if !res.Granted() || subnet == "" {
		return nil
	}
	return ptr.To(sharedport.Port(res.SharedNetwork.Name, res.SharedNetwork.Spec.NetworkID, subnet))
}

// carriedPort is the shared port of the MachineDeployment's current
// OpenStackMachineTemplate, or nil; exists says whether the
// MachineDeployment exists (false while CAPI is creating it).
func (h *Handlers) carriedPort(ctx context.Context, holder runtimehooksv1.HolderReference) (port *infrav1.PortOpts, exists bool, err error) {
	md, osmt, err := h.currentTemplates(ctx, holder)
	switch {
	case md == nil:
		return nil, false, err
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case err != nil:
		return nil, true, err
	}
	return sharedport.Carried(osmt.Spec.Template.Spec.Ports), true, nil
}

// currentTemplates reads the MachineDeployment the holder names (nil while
// CAPI is creating it) and its current OpenStackMachineTemplate (empty when
// it names none). The template's read error is returned as is: what a
// template not found means is the caller's to say.
func (h *Handlers) currentTemplates(ctx context.Context, holder runtimehooksv1.HolderReference) (*clusterv1.MachineDeployment, *infrav1.OpenStackMachineTemplate, error) {
	md := &clusterv1.MachineDeployment{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: holder.Namespace, Name: holder.Name}, md); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	osmt := &infrav1.OpenStackMachineTemplate{}
	ref := md.Spec.Template.Spec.InfrastructureRef
	if ref.Kind != "OpenStackMachineTemplate" || ref.Name == "" {
		return md, osmt, nil
	}
	return md, osmt, h.Reader.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: ref.Name}, osmt)
}

// clusterBuiltins is builtin.cluster of a hook request's variables.
func clusterBuiltins(vars []runtimehooksv1.Variable) (*runtimehooksv1.ClusterBuiltins, error) {
	b, err := builtins(vars)
	if err == nil && b.Cluster == nil {
		err = errNotSet
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s.cluster: %w", runtimehooksv1.BuiltinsName, err)
	}
	return b.Cluster, nil
}

// machineDeploymentBuiltins is builtin.machineDeployment of a hook request
// item's variables.
func machineDeploymentBuiltins(vars []runtimehooksv1.Variable) (*runtimehooksv1.MachineDeploymentBuiltins, error) {
	b, err := builtins(vars)
	if err == nil && b.MachineDeployment == nil {
		err = errNotSet
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s.machineDeployment: %w", runtimehooksv1.BuiltinsName, err)
	}
	return b.MachineDeployment, nil
}

var errNotSet = errors.New("not set")

// builtins is the `builtin` variable among variables, found by CAPI's
// topologymutation.GetVariable and decoded whole. Not by GetVariable's path
// ("builtin.machineDeployment"): that parses and re-encodes the variable
// per nodegroup, +10-13% on GeneratePatches (docs/design.md).
func builtins(vars []runtimehooksv1.Variable) (*runtimehooksv1.Builtins, error) {
	value, err := topologymutation.GetVariable(topologymutation.ToMap(vars), runtimehooksv1.BuiltinsName)
	if err != nil {
		return nil, err
	}
	b := &runtimehooksv1.Builtins{}
	if err := json.Unmarshal(value.Raw, b); err != nil {
		return nil, err
	}
	return b, nil
}

type failer interface {
	SetStatus(runtimehooksv1.ResponseStatus)
	SetMessage(string)
}

func fail(resp failer, err error) {
	resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
	resp.SetMessage(err.Error())
}

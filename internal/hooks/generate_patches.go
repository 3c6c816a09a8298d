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
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/attachments"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

const machineDeploymentInfraRefPath = "spec.template.spec.infrastructureRef"

// GeneratePatches adds the shared port to the OpenStackMachineTemplate of each
// MachineDeployment topology whose override sets `sharedNetwork`, and to no
// other template. It is sticky and deterministic: the port is emitted iff the
// variable is set AND (the share is established OR the MachineDeployment's
// current template already carries a shared port OR the MachineDeployment is
// being created), and a port is only ever dropped from a nodegroup none of
// whose machines has a server. A transient error, a restart or a lost status
// therefore never drops a port (that would be a second, unwanted rollout); an
// error fails the call instead, which leaves every template as it is.
func (h *Handlers) GeneratePatches(ctx context.Context, req *runtimehooksv1.GeneratePatchesRequest, resp *runtimehooksv1.GeneratePatchesResponse) {
	log := ctrl.LoggerFrom(ctx)
	cluster, err := builtins(req.Variables)
	if err != nil || cluster.Cluster == nil {
		fail(resp, fmt.Errorf("reading builtin.cluster: %v", err))
		return
	}
	reads := &callReads{resolved: map[sharednetv1.SharedNetworkVariable]preflight.Resolution{}}
	for i := range req.Items {
		item := &req.Items[i]
		if !isMachineDeploymentInfraTemplate(item.HolderReference) {
			continue
		}
		port, err := h.sharedPortFor(ctx, reads, cluster.Cluster, item)
		if err != nil {
			fail(resp, fmt.Errorf("cluster %s/%s, %s: %w", cluster.Cluster.Namespace, cluster.Cluster.Name, item.HolderReference.Name, err))
			return
		}
		if port == nil {
			continue
		}
		ops, err := sharedport.Inject(item.Object.Raw, *port)
		if err != nil {
			fail(resp, err)
			return
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			fail(resp, err)
			return
		}
		log.V(4).Info("adding the shared port", "machineDeployment", item.HolderReference.Name)
		resp.Items = append(resp.Items, runtimehooksv1.GeneratePatchesResponseItem{
			UID: item.UID, PatchType: runtimehooksv1.JSONPatchType, Patch: patch,
		})
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

func isMachineDeploymentInfraTemplate(ref runtimehooksv1.HolderReference) bool {
	return ref.Kind == "MachineDeployment" && ref.FieldPath == machineDeploymentInfraRefPath
}

// sharedPortFor decides the port of one MachineDeployment's template, or nil.
func (h *Handlers) sharedPortFor(ctx context.Context, reads *callReads, cluster *runtimehooksv1.ClusterBuiltins, item *runtimehooksv1.GeneratePatchesRequestItem) (*infrav1.PortOpts, error) {
	// Only the MachineDeployment's own overrides count: a cluster-level value
	// (refused at admission) attaches nothing.
	value, err := variables.FromHookVariables(item.Variables)
	if err != nil || value == nil {
		return nil, err
	}
	md, err := builtins(item.Variables)
	if err != nil || md.MachineDeployment == nil {
		return nil, fmt.Errorf("reading builtin.machineDeployment: %v", err)
	}
	attachment, err := h.attachmentOf(ctx, cluster, md.MachineDeployment.TopologyName)
	if err != nil {
		return nil, err
	}
	if spec := attachment.Spec; attachment.ShareEstablished() && spec.SharedNetwork == value.Name &&
		spec.Subnet != "" && (value.Subnet == "" || spec.Subnet == value.Subnet) {
		// Shared with the cluster's project for this nodegroup.
		res, err := h.resolve(ctx, reads, cluster.Namespace, sharednetv1.SharedNetworkVariable{Name: value.Name, Subnet: spec.Subnet})
		if desired := grantedPort(res, spec.Subnet); desired != nil || err != nil {
			return desired, err
		}
	}
	// Read only now: a nodegroup whose share is established (every attached
	// one in steady state) gets the port of the share whatever its template
	// carries.
	carried, exists, err := h.carriedPort(ctx, item.HolderReference)
	if err != nil {
		return nil, err
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
				return nil, err
			}
		}
		return carried, nil
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
		return grantedPort(res, res.Subnet), err
	}
	return nil, nil
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
	md := &clusterv1.MachineDeployment{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: holder.Namespace, Name: holder.Name}, md); err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	ref := md.Spec.Template.Spec.InfrastructureRef
	if ref.Kind != "OpenStackMachineTemplate" || ref.Name == "" {
		return nil, true, nil
	}
	osmt := &infrav1.OpenStackMachineTemplate{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: ref.Name}, osmt); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, nil
		}
		return nil, true, err
	}
	return sharedport.Carried(osmt.Spec.Template.Spec.Ports), true, nil
}

func builtins(vars []runtimehooksv1.Variable) (*runtimehooksv1.Builtins, error) {
	for _, v := range vars {
		if v.Name == runtimehooksv1.BuiltinsName {
			b := &runtimehooksv1.Builtins{}
			if err := json.Unmarshal(v.Value.Raw, b); err != nil {
				return nil, err
			}
			return b, nil
		}
	}
	return &runtimehooksv1.Builtins{}, nil
}

type failer interface {
	SetStatus(runtimehooksv1.ResponseStatus)
	SetMessage(string)
}

func fail(resp failer, err error) {
	resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
	resp.SetMessage(err.Error())
}

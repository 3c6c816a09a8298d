package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

const machineDeploymentInfraRefPath = "spec.template.spec.infrastructureRef"

// GeneratePatches adds the shared port to the OpenStackMachineTemplate of each
// MachineDeployment topology whose override sets `sharedNetwork`, and to no
// other template. It is sticky and deterministic: the port is emitted iff the
// variable is set AND (the share is established OR the MachineDeployment's
// current template already carries a shared port). A transient error, a
// restart or a lost status therefore never drops a port (that would be a
// second, unwanted rollout); an error fails the call instead, which leaves
// every template as it is.
func (h *Handlers) GeneratePatches(ctx context.Context, req *runtimehooksv1.GeneratePatchesRequest, resp *runtimehooksv1.GeneratePatchesResponse) {
	log := ctrl.LoggerFrom(ctx)
	cluster, err := builtins(req.Variables)
	if err != nil || cluster.Cluster == nil {
		fail(resp, fmt.Errorf("reading builtin.cluster: %v", err))
		return
	}
	for i := range req.Items {
		item := &req.Items[i]
		if !isMachineDeploymentInfraTemplate(item.HolderReference) {
			continue
		}
		port, err := h.sharedPortFor(ctx, cluster.Cluster, item)
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
func (h *Handlers) sharedPortFor(ctx context.Context, cluster *runtimehooksv1.ClusterBuiltins, item *runtimehooksv1.GeneratePatchesRequestItem) (*infrav1.PortOpts, error) {
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
	carried, err := h.carriedPort(ctx, item.HolderReference)
	if err != nil {
		return nil, err
	}
	desired, err := h.establishedPort(ctx, cluster, md.MachineDeployment.TopologyName, *value)
	if err != nil {
		return nil, err
	}
	if desired != nil {
		return desired, nil
	}
	// Not (yet, or no longer) established: keep whatever the nodegroup runs
	// with, so nothing rolls until the share is in place.
	return carried, nil
}

// establishedPort is the port for value when the network is shared with the
// cluster's project for this nodegroup, else nil.
func (h *Handlers) establishedPort(ctx context.Context, cluster *runtimehooksv1.ClusterBuiltins, topologyName string, value sharednetv1.SharedNetworkVariable) (*infrav1.PortOpts, error) {
	attachment := &sharednetv1.SharedNetworkAttachment{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: sharednetv1.AttachmentName(cluster.Name, topologyName)}
	if err := h.Reader.Get(ctx, key, attachment); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	spec := attachment.Spec
	if spec.ClusterName != cluster.Name || spec.MachineDeploymentTopology != topologyName ||
		spec.SharedNetwork != value.Name || (value.Subnet != "" && spec.Subnet != value.Subnet) ||
		spec.Subnet == "" || !attachment.ShareEstablished() {
		return nil, nil
	}
	sn := &sharednetv1.SharedNetwork{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: value.Name}, sn); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	// A new port only under a grant that holds now: a status written by
	// someone else, or a grant revoked since, attaches nothing new (a port
	// the nodegroup already runs with stays, see sharedPortFor).
	if err := preflight.Granted(ctx, h.Reader, sn, cluster.Namespace, spec.Subnet); err != nil {
		var v *rules.Violation
		if errors.As(err, &v) {
			return nil, nil
		}
		return nil, err
	}
	port := sharedport.Port(sn.Name, sn.Spec.NetworkID, spec.Subnet)
	return &port, nil
}

// carriedPort is the shared port of the MachineDeployment's current
// OpenStackMachineTemplate, or nil (also for a MachineDeployment that does not
// exist yet).
func (h *Handlers) carriedPort(ctx context.Context, holder runtimehooksv1.HolderReference) (*infrav1.PortOpts, error) {
	md := &clusterv1.MachineDeployment{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: holder.Namespace, Name: holder.Name}, md); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	ref := md.Spec.Template.Spec.InfrastructureRef
	if ref.Kind != "OpenStackMachineTemplate" || ref.Name == "" {
		return nil, nil
	}
	osmt := &infrav1.OpenStackMachineTemplate{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: ref.Name}, osmt); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return sharedport.Carried(osmt.Spec.Template.Spec.Ports), nil
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

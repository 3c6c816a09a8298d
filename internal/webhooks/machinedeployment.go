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

package webhooks

import (
	"cmp"
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// MachineDeploymentPath is where the nodegroup size webhook is served.
const MachineDeploymentPath = "/validate-sharednet-machinedeployment"

// SizeGuard holds the MachineDeployment of an attached nodegroup to the size
// its Cluster's topology gives it (replicas, or the autoscaler's max size),
// which admission judged against the shared subnet's room: by every path
// that writes its replicas (the topology controller, kubectl edit, kubectl
// scale and the autoscaler through the scale subresource). Without it, a
// nodegroup attached with replicas 3 could be scaled to 30 and its nodes
// left without an address.
//
// The webhook configuration sends only growth (more replicas) and a change
// of the label that names the nodegroup, in the namespaces where a cluster
// uses a shared network (NamespaceScope keeps that selector).
type SizeGuard struct {
	// Reader reads the Cluster and the MachineDeployment live: the topology
	// controller scales right after a Cluster change, before a cache hears it.
	Reader  client.Reader
	Decoder admission.Decoder
}

// NewMachineDeploymentWebhook returns the webhook to register at MachineDeploymentPath.
func NewMachineDeploymentWebhook(reader client.Reader, scheme *runtime.Scheme) *admission.Webhook {
	return &admission.Webhook{Handler: &SizeGuard{Reader: reader, Decoder: admission.NewDecoder(scheme)}}
}

// Handle implements admission.Handler.
func (g *SizeGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	change, err := g.decode(ctx, req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if change == nil {
		return admission.Allowed("")
	}
	msg, err := g.judge(ctx, change)
	switch {
	case err != nil:
		// Fail closed: a size that cannot be checked is not taken.
		return admission.Errored(http.StatusInternalServerError, err)
	case msg != "":
		return admission.Denied(msg)
	}
	return admission.Allowed("")
}

// resize is a MachineDeployment change the guard judges.
type resize struct {
	md               *clusterv1.MachineDeployment // as it was
	field            string                       // what the user wrote: spec.replicas of the scale subresource or of the object
	replicas         *int32                       // the new value
	before           *int32
	topology, oldTop string // the nodegroup label, new and old
}

// decode reads a MachineDeployment update or a scale of one.
func (g *SizeGuard) decode(ctx context.Context, req admission.Request) (*resize, error) {
	if req.SubResource == "scale" {
		scale, old := &autoscalingv1.Scale{}, &autoscalingv1.Scale{}
		if err := g.Decoder.DecodeRaw(req.Object, scale); err != nil {
			return nil, err
		}
		if err := g.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return nil, err
		}
		md := &clusterv1.MachineDeployment{}
		if err := g.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, md); err != nil {
			return nil, fmt.Errorf("reading MachineDeployment %s/%s: %w", req.Namespace, req.Name, err)
		}
		top := md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]
		return &resize{md: md, field: "spec.replicas (scale)", replicas: &scale.Spec.Replicas, before: &old.Spec.Replicas, topology: top, oldTop: top}, nil
	}
	md, old := &clusterv1.MachineDeployment{}, &clusterv1.MachineDeployment{}
	if err := g.Decoder.DecodeRaw(req.Object, md); err != nil {
		return nil, err
	}
	if err := g.Decoder.DecodeRaw(req.OldObject, old); err != nil {
		return nil, err
	}
	return &resize{md: old, field: "spec.replicas", replicas: md.Spec.Replicas, before: old.Spec.Replicas,
		topology: md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel], oldTop: old.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]}, nil
}

// judge says why the change is refused ("" when it is not).
func (g *SizeGuard) judge(ctx context.Context, c *resize) (string, error) {
	if c.oldTop == "" || c.md.Spec.ClusterName == "" {
		return "", nil // not a nodegroup of a Cluster's topology
	}
	cluster := &clusterv1.Cluster{}
	if err := g.Reader.Get(ctx, client.ObjectKey{Namespace: c.md.Namespace, Name: c.md.Spec.ClusterName}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading Cluster %s/%s: %w", c.md.Namespace, c.md.Spec.ClusterName, err)
	}
	values, err := variables.Nodegroups(cluster)
	if err != nil {
		return fmt.Sprintf("the sharedNetwork variable of Cluster %s cannot be read (%v), so the size of MachineDeployment %s cannot be checked; fix the variable first",
			cluster.Name, err, c.md.Name), nil
	}
	value, attached := values[c.oldTop]
	if !attached {
		return "", nil
	}
	name := fmt.Sprintf("MachineDeployment %s (nodegroup %s of Cluster %s, attached to SharedNetwork %s)", c.md.Name, c.oldTop, cluster.Name, value.Name)
	if c.topology != c.oldTop {
		return fmt.Sprintf("%s: metadata.labels[%s] may not change from %q to %q: it is how the nodegroup's size is held to its subnet; leave the label as CAPI set it",
			name, clusterv1.ClusterTopologyMachineDeploymentNameLabel, c.oldTop, c.topology), nil
	}
	if c.replicas == nil || c.before != nil && *c.replicas <= *c.before {
		return "", nil
	}
	size := consumers.SizeOf(cluster, c.oldTop)
	unbounded := rules.Sized(size.Annotations, size.Replicas)
	maxSize, notACount := rules.MaxSize(size.Annotations, size.Replicas)
	if why := cmp.Or(unbounded, notACount); why != nil {
		return fmt.Sprintf("%s: %s %d refused: %s", name, c.field, *c.replicas, why.Message), nil //nolint:nilerr // the violation is the refusal
	}
	if int(*c.replicas) > maxSize {
		return fmt.Sprintf("%s: %s %d is more than the %d nodes the Cluster's topology gives the nodegroup (its replicas or the autoscaler's %s), "+
			"the size its room on the shared subnet was checked for; scale to %d or fewer, or raise the nodegroup's replicas or max size in the Cluster's topology "+
			"(the extension then checks the subnet's room)",
			name, c.field, *c.replicas, maxSize, clusterv1.AutoscalerMaxSizeAnnotation, maxSize), nil
	}
	return "", nil
}

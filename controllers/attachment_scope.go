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

package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/patch"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
)

// nodegroupScope is what one reconcile of one nodegroup reads once and
// writes once, as CAPO's scopes are: its Cluster, its SharedNetwork, its
// attachment with the patch helper that writes it, and its rollout as
// measured.
type nodegroupScope struct {
	// cluster is nil once the Cluster is gone.
	cluster  *clusterv1.Cluster
	topology string
	sn       *sharednetv1.SharedNetwork
	a        *sharednetv1.SharedNetworkAttachment
	// helper writes a; nil once it was written for good.
	helper   *patch.Helper
	measured *measurement
	// judged is set when this reconcile's check before the share judged
	// the nodegroup on the cloud as it is: CloudFits needs no second look.
	judged bool
}

// measurement is the nodegroup's rollout and whether its current template
// carries the shared port.
type measurement struct {
	rollout Rollout
	carries bool
}

// newScope starts a scope over attachment a, whose patch helper writes
// what the reconcile finds.
func (r *AttachmentReconciler) newScope(cluster *clusterv1.Cluster, sn *sharednetv1.SharedNetwork, a *sharednetv1.SharedNetworkAttachment) (*nodegroupScope, error) {
	helper, err := patch.NewHelper(a, r.Client)
	if err != nil {
		return nil, err
	}
	return &nodegroupScope{cluster: cluster, topology: a.Spec.MachineDeploymentTopology, sn: sn, a: a, helper: helper}, nil
}

// close writes the attachment, unless it was written for good already.
func (r *AttachmentReconciler) close(ctx context.Context, s *nodegroupScope, reterr *error) {
	if s.helper != nil {
		*reterr = errors.Join(*reterr, r.patchAttachment(ctx, s.helper, s.cluster, s.a))
	}
}

// flush writes the attachment now (a share or an unshare must be recorded
// before what follows it); again, when more is written afterwards.
func (r *AttachmentReconciler) flush(ctx context.Context, s *nodegroupScope, again bool) error {
	err := r.patchAttachment(ctx, s.helper, s.cluster, s.a)
	if s.helper = nil; err != nil || !again {
		return err
	}
	s.helper, err = patch.NewHelper(s.a, r.Client)
	return err
}

// ensureAttachment creates the nodegroup's attachment, or brings its spec
// to the value's SharedNetwork and subnet.
func (r *AttachmentReconciler) ensureAttachment(ctx context.Context, cluster *clusterv1.Cluster, topology, network, subnet string, a *sharednetv1.SharedNetworkAttachment) (*sharednetv1.SharedNetworkAttachment, error) {
	spec := sharednetv1.SharedNetworkAttachmentSpec{ClusterName: cluster.Name, MachineDeploymentTopology: topology, SharedNetwork: network, Subnet: subnet}
	if a != nil {
		if a.Spec != spec {
			a.Spec = spec // a new subnet of the same network: the share stays, the port changes
			if err := r.Client.Update(ctx, a); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	key := sharednetv1.AttachmentKey(cluster, topology)
	a = &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{
		Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
	}, Spec: spec}
	if v, ok := cluster.Labels[clusterv1.WatchLabel]; ok {
		a.Labels[clusterv1.WatchLabel] = v // the same instance detaches it after the Cluster is gone
	}
	controllerutil.AddFinalizer(a, AttachmentFinalizer)
	if err := controllerutil.SetOwnerReference(cluster, a, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, a); err != nil {
		return nil, fmt.Errorf("creating SharedNetworkAttachment %s: %w", a.Name, err)
	}
	r.Recorder.Eventf(cluster, corev1.EventTypeNormal, sharednetv1.EventAttaching, "nodegroup %s: attaching to SharedNetwork %s, subnet %s", topology, network, subnet)
	return a, nil
}

// subnetUnknownError: the SharedNetwork's facts have no usable CIDR for
// the attachment's subnet, so which nodes hold an address on it cannot be
// told.
type subnetUnknownError struct{ sharedNetwork, subnet, why string }

func (e *subnetUnknownError) Error() string {
	return fmt.Sprintf("cannot tell which nodes hold an address on subnet %s: SharedNetwork %s %s (see `kubectl get sharednetwork %s`)", e.subnet, e.sharedNetwork, e.why, e.sharedNetwork)
}

// measure reads the nodegroup's MachineDeployment, machines and
// OpenStackMachines once per reconcile; a *subnetUnknownError when the
// subnet's CIDR is not known.
func (r *AttachmentReconciler) measure(ctx context.Context, s *nodegroupScope) (measurement, error) {
	if s.measured != nil {
		return *s.measured, nil
	}
	facts, ok := s.sn.Status.Subnet(s.a.Spec.Subnet)
	if !ok {
		return measurement{}, &subnetUnknownError{sharedNetwork: s.sn.Name, subnet: s.a.Spec.Subnet, why: "has no facts of it"}
	}
	prefix, err := netip.ParsePrefix(facts.CIDR)
	if err != nil {
		return measurement{}, &subnetUnknownError{sharedNetwork: s.sn.Name, subnet: s.a.Spec.Subnet, why: fmt.Sprintf("reports CIDR %q for it", facts.CIDR)}
	}
	m, err := r.measureOn(ctx, s.cluster.Namespace, s.cluster.Name, s.topology, prefix)
	if err == nil {
		s.measured = &m
	}
	return m, err
}

func (r *AttachmentReconciler) measureOn(ctx context.Context, namespace, cluster, topology string, subnet netip.Prefix) (measurement, error) {
	mds := &clusterv1.MachineDeploymentList{}
	if err := r.Client.List(ctx, mds, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology}); err != nil || len(mds.Items) == 0 {
		return measurement{}, err
	}
	md := &mds.Items[0]
	var m measurement
	tmpl := &infrav1.OpenStackMachineTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: md.Spec.Template.Spec.InfrastructureRef.Name}, tmpl); err == nil {
		m.carries = sharedport.Carried(tmpl.Spec.Template.Spec.Ports) != nil
	} else if !apierrors.IsNotFound(err) {
		return measurement{}, err
	}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
		return measurement{}, err
	}
	osms := &infrav1.OpenStackMachineList{}
	if err := r.Client.List(ctx, osms, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return measurement{}, err
	}
	byName := map[string]*infrav1.OpenStackMachine{}
	for i := range osms.Items {
		byName[osms.Items[i].Name] = &osms.Items[i]
	}
	m.rollout = MeasureRollout(md, machines.Items, byName, subnet)
	return m, nil
}

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
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// detach walks a nodegroup whose variable was removed (or whose cluster is
// being deleted) towards Detached: wait for the rollout without the port,
// unshare when no other attachment of the project uses the share, then let
// the attachment go. Neutron refusing the unshare (409) means "not yet".
func (r *AttachmentReconciler) detach(ctx context.Context, cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment) (_ reconcile.Result, reterr error) {
	sn := &sharednetv1.SharedNetwork{}
	s, err := r.newScope(cluster, sn, a)
	if err != nil {
		return reconcile.Result{}, err
	}
	defer r.close(ctx, s, &reterr)
	conditions.Set(a, deletingCondition(cluster, a)) // written even when the SharedNetwork cannot be read
	if err := r.Client.Get(ctx, client.ObjectKey{Name: a.Spec.SharedNetwork}, sn); err != nil {
		return reconcile.Result{}, fmt.Errorf("attachment %s: SharedNetwork %s: %w", a.Name, a.Spec.SharedNetwork, err)
	}
	if cluster != nil && cluster.DeletionTimestamp.IsZero() {
		a.Status.Phase = sharednetv1.PhaseDetaching
		if done, err := r.rolledWithoutPort(ctx, s); !done || err != nil {
			return reconcile.Result{RequeueAfter: pollRollout}, err
		}
	}
	if err := r.unshare(ctx, cluster, sn, a); err != nil {
		r.observeLoadBalancers(ctx, cluster, sn, a)
		r.unshareRefused(cluster, a, err)
		return reconcile.Result{RequeueAfter: pollRollout}, nil
	}
	a.Status.Phase = sharednetv1.PhaseDetached
	a.Status.Share = nil
	r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonUnshared, "the nodegroup is detached and the network is no longer shared for it")
	// Record the unshare before the nudge and the release: a restart in
	// between never reads a share that is gone, and the release below
	// changes only metadata, which this helper must not patch.
	if err := r.flush(ctx, s, false); err != nil {
		return reconcile.Result{}, err
	}
	if cluster != nil && cluster.DeletionTimestamp.IsZero() {
		if err := r.nudge(ctx, cluster, a.Spec.MachineDeploymentTopology, ""); err != nil {
			return reconcile.Result{}, err
		}
	}
	// The attachment goes; until it is gone its status says Detached.
	return reconcile.Result{}, r.release(ctx, a)
}

// rolledWithoutPort says whether the nodegroup's rollout without the port
// is over: its template has no port and no node holds an address on the
// subnet. When the subnet's CIDR is not known (the administrator took it
// off the SharedNetwork), every machine on the port-free template is
// enough; Neutron still refuses the unshare while a port remains.
func (r *AttachmentReconciler) rolledWithoutPort(ctx context.Context, s *nodegroupScope) (bool, error) {
	m, err := r.measure(ctx, s)
	var unknown *subnetUnknownError
	if errors.As(err, &unknown) {
		m, err = r.measureOn(ctx, s.cluster.Namespace, s.cluster.Name, s.topology, netip.Prefix{})
		if err == nil && (m.carries || m.rollout.OnCurrentTemplate != m.rollout.Machines) {
			r.condition(s.a, s.cluster, sharednetv1.AttachedCondition, metav1.ConditionFalse, sharednetv1.ReasonDetaching,
				fmt.Sprintf("rolling out without the shared port: %d/%d machines replaced (%s)", m.rollout.OnCurrentTemplate, m.rollout.Machines, unknown.Error()))
			return false, nil
		}
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	s.a.Status.Nodes, s.a.Status.AttachedNodes = m.rollout.Nodes, ptr.To(int32(len(m.rollout.Nodes)))
	if !m.rollout.Detached(m.carries) {
		r.condition(s.a, s.cluster, sharednetv1.AttachedCondition, metav1.ConditionFalse, sharednetv1.ReasonDetaching,
			fmt.Sprintf("rolling out without the shared port: %d node(s) still have an address on subnet %s", len(m.rollout.Nodes), s.a.Spec.Subnet))
		return false, nil
	}
	return true, nil
}

// unshareRefused says why the share is kept: Neutron's 409 (ports of the
// cluster's project remain on the network) is "not yet", named after the
// load balancers that hold it when there are any.
func (r *AttachmentReconciler) unshareRefused(cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment, err error) {
	switch {
	case !openstack.IsInUse(err):
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonUnshareFailed, err.Error())
	case len(a.Status.LoadBalancers) > 0:
		a.Status.Phase = sharednetv1.PhaseDetachBlocked
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonLoadBalancersRemain,
			"load balancers of this cluster still have their address on the shared subnet: "+describe(a.Status.LoadBalancers)+"; delete their Services and Gateways")
	case len(a.Status.UnattributedLoadBalancers) > 0:
		a.Status.Phase = sharednetv1.PhaseDetachBlocked
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonLoadBalancersRemain,
			"load balancers that no cluster's cloud controller manager made still have their address on the shared subnet: "+describe(a.Status.UnattributedLoadBalancers)+"; delete them (openstack loadbalancer delete --cascade <id>)")
	default:
		a.Status.Phase = sharednetv1.PhaseDetaching
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonPortsRemain,
			"Neutron keeps the share while the cluster's project has ports on the network (nodes being deleted, load balancer VIPs)")
	}
}

// deletingCondition is CAPI's Deleting condition of an attachment being
// detached, saying why.
func deletingCondition(cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment) metav1.Condition {
	why := "its sharedNetwork variable was removed"
	switch {
	case cluster == nil || !cluster.DeletionTimestamp.IsZero():
		why = "the Cluster is being deleted"
	case !a.DeletionTimestamp.IsZero():
		why = "the SharedNetworkAttachment is being deleted"
	}
	return sharednetv1.NewCondition(sharednetv1.DeletingCondition, metav1.ConditionTrue, sharednetv1.ReasonDeleting, "the nodegroup is being detached: "+why)
}

// release removes the finalizer of an attachment whose share is released
// and deletes it when nobody did yet.
func (r *AttachmentReconciler) release(ctx context.Context, a *sharednetv1.SharedNetworkAttachment) error {
	r.observed.Delete(a.UID)
	// The object as it is now (its status was just written), not a: a
	// conflict is retried by the next reconcile, which finds it unshared.
	latest := &sharednetv1.SharedNetworkAttachment{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(a), latest); err != nil {
		return client.IgnoreNotFound(err)
	}
	if controllerutil.RemoveFinalizer(latest, AttachmentFinalizer) {
		if err := r.Client.Update(ctx, latest); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if latest.DeletionTimestamp.IsZero() {
		return client.IgnoreNotFound(r.Client.Delete(ctx, latest))
	}
	return nil
}

// unshare deletes the shares this attachment stands for, as Neutron knows
// them: the policies of (this SharedNetwork's network, project) for the
// project the attachment recorded at the share, and for the one the VM
// project's Keystone vouches for now, unless another live attachment of the
// same project uses it.
//
// Both, because a cluster's credential can be pointed at another project
// after the attach (identity switch): the record still names the share the
// extension made, and the verified project covers a share made just before
// a lost record. The record is used only when it carries the extension's
// seal and the shipped admission policy keeps everyone else from writing it
// (trustedRecord); it alone is enough for a cluster being deleted or gone,
// whose credential may never come back. A live cluster also has its project
// verified first: it can fix its credential. The policy IDs deleted are
// Neutron's answer, never the status's.
func (r *AttachmentReconciler) unshare(ctx context.Context, cluster *clusterv1.Cluster, sn *sharednetv1.SharedNetwork, a *sharednetv1.SharedNetworkAttachment) error {
	recorded, untrusted := r.trustedRecord(ctx, sn, a)
	vm, err := r.Credentials.ForSharedNetwork(ctx, sn)
	if err != nil {
		if recorded == "" && a.Status.Share == nil && (cluster == nil || !cluster.DeletionTimestamp.IsZero()) {
			return nil // nothing recorded, and no cluster to ask: nothing to find
		}
		// A share may remain (recorded, or a live cluster's lost status): retry.
		return r.vmProjectFailed(ctx, sn, "opening the VM project to unshare", err)
	}
	projects := []string{}
	if recorded != "" {
		projects = append(projects, recorded)
	}
	if cluster != nil {
		verified, err := r.verifiedProject(ctx, cluster, vm)
		switch {
		case err == nil:
			if verified != recorded {
				projects = append(projects, verified)
			}
		case cluster.DeletionTimestamp.IsZero():
			// A live cluster can fix its credential: its share is found
			// by the project its Keystone vouches for, never by a status
			// alone.
			return fmt.Errorf("the cluster's project cannot be verified, so its share is not released yet (retrying): %w", err)
		}
	}
	if a.Status.Share != nil && recorded == "" && !slices.Contains(projects, a.Status.Share.ProjectID) {
		// A record that cannot be trusted names a project nobody vouches
		// for now: tell the administrator, who can check the share by hand.
		administratorEvent(r.Recorder, extensionNamespace(r.Namespace), sn, corev1.EventTypeWarning, sharednetv1.EventShareNotReleased,
			fmt.Sprintf("attachment %s/%s records a share with project %s that is not released: the record is not trusted (%s), "+
				"and the cluster's credential is not verified for that project (or cannot be verified); check with openstack network rbac list --target-project %s",
				a.Namespace, a.Name, a.Status.Share.ProjectID, untrusted, a.Status.Share.ProjectID))
	}
	defer r.lockNetwork(sn.Spec.NetworkID)()
	for _, project := range projects {
		if err := r.unshareProject(ctx, vm, sn, a, project); err != nil {
			return err
		}
	}
	return nil
}

// unshareProject deletes the share of (the SharedNetwork's network,
// project) unless another live attachment of project uses it.
func (r *AttachmentReconciler) unshareProject(ctx context.Context, vm openstack.VMCloud, sn *sharednetv1.SharedNetwork, a *sharednetv1.SharedNetworkAttachment, project string) error {
	if r.shareUsedElsewhere(ctx, a, sn, project) {
		return nil
	}
	policy, err := vm.FindShare(ctx, sn.Spec.NetworkID, project)
	if err != nil {
		return r.vmProjectFailed(ctx, sn, "finding the share to unshare", err)
	}
	if policy == "" {
		return nil // already gone
	}
	if err := vm.Unshare(ctx, policy); err != nil {
		if openstack.IsInUse(err) {
			return err
		}
		return r.vmProjectFailed(ctx, sn, "unsharing the network", err)
	}
	return nil
}

func (r *AttachmentReconciler) verifiedProject(ctx context.Context, cluster *clusterv1.Cluster, vm openstack.VMCloud) (string, error) {
	clusterCloud, _, err := credentials.In(ctx, r.Credentials).ForCluster(ctx, cluster)
	if err != nil {
		return "", err
	}
	return credentials.VerifiedProject(ctx, clusterCloud, vm)
}

// shareUsedElsewhere says whether another live attachment holds the share
// of (network, project): one share per (network, project).
func (r *AttachmentReconciler) shareUsedElsewhere(ctx context.Context, a *sharednetv1.SharedNetworkAttachment, sn *sharednetv1.SharedNetwork, project string) bool {
	all := &sharednetv1.SharedNetworkAttachmentList{}
	if err := r.Client.List(ctx, all); err != nil {
		return true // when in doubt, keep the share
	}
	for _, other := range all.Items {
		if (other.Namespace == a.Namespace && other.Name == a.Name) || !other.DeletionTimestamp.IsZero() || other.Status.Share == nil || other.Status.Share.ProjectID != project {
			continue
		}
		if other.Spec.SharedNetwork == sn.Name {
			return true
		}
		otherSN := &sharednetv1.SharedNetwork{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: other.Spec.SharedNetwork}, otherSN); err != nil || otherSN.Spec.NetworkID == sn.Spec.NetworkID {
			return true
		}
	}
	return false
}

func describe(lbs []sharednetv1.LoadBalancer) string {
	parts := make([]string, 0, len(lbs))
	for _, lb := range lbs {
		s := fmt.Sprintf("%s (VIP %s", lb.Name, lb.VIP)
		if lb.Service != "" {
			s += ", Service " + lb.Service
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}

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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
)

// observeRollout fills nodes and load balancers and sets the phase of a
// nodegroup being attached.
func (r *AttachmentReconciler) observeRollout(ctx context.Context, s *nodegroupScope) (reconcile.Result, error) {
	a, cluster := s.a, s.cluster
	m, err := r.measure(ctx, s)
	var unknown *subnetUnknownError
	if errors.As(err, &unknown) {
		r.condition(a, cluster, sharednetv1.AttachedCondition, metav1.ConditionFalse, sharednetv1.ReasonCannotCheck, unknown.Error()+"; retrying")
		return reconcile.Result{RequeueAfter: pollRollout}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	rollout := m.rollout
	a.Status.DesiredNodes = ptr.To(rollout.Desired)
	a.Status.AttachedNodes = ptr.To(int32(len(rollout.Nodes)))
	a.Status.Nodes = rollout.Nodes
	// The cloud is observed again when the SharedNetwork's facts were read
	// since the last look (each resync), and once more as the nodegroup
	// becomes Attached; not on every reconcile its machines' events cause,
	// while it rolls out or once Attached (a 2-node rollout is some sixty
	// reconciles), nor when only the SharedNetwork's consumers changed.
	last, ok := r.observed.Load(a.UID)
	// The time is kept to the second: with the generation and the
	// credential's version the facts were read for, two reads in one second
	// (a spec changed right after a resync) still tell apart.
	refreshed := fmt.Sprintf("%d/%s", s.sn.Status.ObservedGeneration, s.sn.Status.ObservedIdentityVersion)
	if t := s.sn.Status.LastRefreshTime; t != nil {
		refreshed += "/" + t.UTC().Format(time.RFC3339Nano)
	}
	becomingAttached := rollout.Attached(m.carries) && a.Status.Phase != sharednetv1.PhaseAttached
	if facts, known := s.sn.Status.Subnet(a.Spec.Subnet); known {
		a.Status.SubnetLoadBalancerAddresses = facts.LoadBalancerAddresses
	}
	if !ok || last != refreshed || becomingAttached {
		r.observeLoadBalancers(ctx, cluster, s.sn, a)
		r.observeCloudFits(ctx, s)
		r.observeProject(ctx, s)
		r.observed.Store(a.UID, refreshed)
	}
	if rollout.Attached(m.carries) {
		a.Status.Phase = sharednetv1.PhaseAttached
		a.Status.Message = fmt.Sprintf("%d/%d nodes have an address on subnet %s", len(rollout.Nodes), rollout.Desired, a.Spec.Subnet)
		r.condition(a, cluster, sharednetv1.AttachedCondition, metav1.ConditionTrue, sharednetv1.ReasonAttached, a.Status.Message)
		return reconcile.Result{RequeueAfter: pollCloud}, nil
	}
	a.Status.Phase = sharednetv1.PhaseRollingOut
	a.Status.Message = fmt.Sprintf("rolling out: %d/%d nodes replaced, %d with an address on subnet %s", rollout.OnCurrentTemplate, rollout.Desired, len(rollout.Nodes), a.Spec.Subnet)
	r.condition(a, cluster, sharednetv1.AttachedCondition, metav1.ConditionFalse, sharednetv1.ReasonRollingOut, a.Status.Message)
	return reconcile.Result{RequeueAfter: pollRollout}, nil
}

// observeCloudFits reports a cloud that changed after the attach (the shared
// network's MTU, room on its subnet): a condition and an Event, never a
// rollout; admission refuses the nodegroup's next growth for the same reason.
// A check that cannot be made keeps the condition as it was, and is logged.
func (r *AttachmentReconciler) observeCloudFits(ctx context.Context, s *nodegroupScope) {
	a, cluster := s.a, s.cluster
	var refusal rules.Refusal
	// A reconcile that just shared judged every rule of an attach, a
	// superset of still-fits: no second judgement.
	if !s.judged {
		value := sharednetv1.SharedNetworkVariable{Name: a.Spec.SharedNetwork, Subnet: a.Spec.Subnet}
		d, err := r.checker().Decide(ctx, preflight.Question{Ask: preflight.StillFits, Cluster: cluster, Nodegroup: s.topology, Value: value})
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("cannot check that the nodegroup still fits its subnet; CloudFits keeps its last value", "attachment", klog.KObj(a), "error", err.Error())
			return
		}
		refusal = d.Refusal
	}
	if len(refusal) > 0 {
		r.condition(a, cluster, sharednetv1.CloudFitsCondition, metav1.ConditionFalse, sharednetv1.ReasonCloudChanged,
			"the cloud changed after the attach: "+refusal.Error()+"; the nodes keep their port and nothing rolls, but the nodegroup cannot grow until this is fixed")
		return
	}
	// Fits, or facts too old to judge (the SharedNetwork's Ready says why).
	r.condition(a, cluster, sharednetv1.CloudFitsCondition, metav1.ConditionTrue, sharednetv1.ReasonCloudFits,
		fmt.Sprintf("subnet %s of SharedNetwork %s still fits the nodegroup", a.Spec.Subnet, a.Spec.SharedNetwork))
}

// observeProject reports a nodegroup whose cluster's credential now
// authenticates to another project than the one its share was made for (an
// identity switch after the attach): machines CAPO makes in that project get
// no shared port. Nothing is shared or unshared for it; the detach releases
// the recorded share (and any of the new project). A check that cannot be
// made changes nothing, and is logged.
//
// A record whose project the VM project's Keystone vouches for now, but
// whose seal does not match (written before records were sealed, or while
// the key could not be read), is sealed here: the extension vouches for it
// on the verified project, never on the status's word.
func (r *AttachmentReconciler) observeProject(ctx context.Context, s *nodegroupScope) {
	a, cluster := s.a, s.cluster
	if s.judged || !a.ShareEstablished() {
		return // a reconcile that just shared verified the project
	}
	vm, err := r.Credentials.ForSharedNetwork(ctx, s.sn)
	verified := ""
	if err == nil {
		verified, err = r.verifiedProject(ctx, cluster, vm)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("cannot verify the cluster's project; Shared keeps its last value", "attachment", klog.KObj(a), "error", err.Error())
		return
	}
	recorded := a.Status.Share.ProjectID
	if verified != recorded {
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonProjectChanged, fmt.Sprintf(
			"the network is shared with project %s, the one this nodegroup attached with, but the cluster's credential now authenticates to project %s: "+
				"machines created there get no shared port. Point the credential back at project %s, or remove the sharedNetwork variable (the detach unshares project %s) and set it again",
			recorded, verified, recorded, recorded))
		return
	}
	if ok, _ := r.sealed(ctx, s.sn, a); !ok {
		r.sealShare(ctx, s.sn, a)
	}
	if c := conditions.Get(a, sharednetv1.SharedCondition); c != nil && c.Reason == sharednetv1.ReasonProjectChanged {
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionTrue, sharednetv1.ReasonShared, sharedMessage(s.sn, a.Status.Share))
	}
}

// observeLoadBalancers lists this cluster's LBs on the subnet (the detach
// rule and the cluster owner both need them) and those nobody can be
// attributed to; other clusters' LBs on the same subnet are not listed. A
// cluster whose credential is not of sn's cloud is asked nothing. A failed
// look keeps the last known list (a failure is not "none") and is logged.
func (r *AttachmentReconciler) observeLoadBalancers(ctx context.Context, cluster *clusterv1.Cluster, sn *sharednetv1.SharedNetwork, a *sharednetv1.SharedNetworkAttachment) {
	if cluster == nil {
		return
	}
	// Octavia's URL comes from the cluster's catalog: asked only on the VM project's cloud.
	cloud, err := credentials.ClusterOnCloudOf(ctx, credentials.In(ctx, r.Credentials), cluster, sn)
	if err == nil {
		var found ccm.Attributed
		if found, err = ccm.LoadBalancersOn(ctx, cloud, cluster, a.Spec.Subnet); err == nil {
			a.Status.LoadBalancers, a.Status.UnattributedLoadBalancers = found.Own, found.Unattributed
			return
		}
	}
	ctrl.LoggerFrom(ctx).Info("cannot list the cluster's load balancers on the shared subnet; keeping the last list", "attachment", klog.KObj(a), "error", err.Error())
}

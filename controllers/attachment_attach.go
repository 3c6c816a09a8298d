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
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
)

// attach walks one nodegroup towards Attached: attachment, check, share,
// nudge, rollout. What it found is written once at the end (and the share
// once before the nudge); a failed write is returned.
func (r *AttachmentReconciler) attach(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable, a *sharednetv1.SharedNetworkAttachment) (_ reconcile.Result, reterr error) {
	res, err := r.checker().Resolve(ctx, cluster.Namespace, value)
	switch {
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("nodegroup %s: %w", topology, err)
	case res.SharedNetwork == nil:
		return reconcile.Result{}, fmt.Errorf("nodegroup %s: SharedNetwork %s does not exist", topology, value.Name)
	case res.NoSubnet != nil:
		return reconcile.Result{RequeueAfter: pollCloud}, fmt.Errorf("nodegroup %s: %w", topology, res.NoSubnet)
	}
	if a == nil && !res.Granted() {
		// No attachment (the record of a share, and what scopes the deletion
		// hook to this namespace) for a namespace the SharedNetwork does not
		// grant: admission refused it, so this is a grant revoked since or an
		// extension that was down. The Cluster is told why.
		r.Recorder.Eventf(cluster, corev1.EventTypeWarning, sharednetv1.ReasonNotGranted, "nodegroup %s: not attached: %s", topology, res.NotGranted.Error())
		return reconcile.Result{RequeueAfter: pollCloud}, nil
	}
	if a, err = r.ensureAttachment(ctx, cluster, topology, res.SharedNetwork.Name, res.Subnet, a); err != nil {
		return reconcile.Result{}, err
	}
	s, err := r.newScope(cluster, res.SharedNetwork, a)
	if err != nil {
		return reconcile.Result{}, err
	}
	defer r.close(ctx, s, &reterr)
	if a.Status.Phase == "" {
		a.Status.Phase = sharednetv1.PhaseValidating
	}
	conditions.Set(a, sharednetv1.NewCondition(sharednetv1.DeletingCondition, metav1.ConditionFalse, sharednetv1.ReasonNotDeleting, ""))

	// The grant is checked where the VM project's power is used, not only
	// at admission: a revoked grant makes no new share, and an attachment
	// already in place is reported, never rolled (GeneratePatches keeps the
	// port its nodes run with).
	if !res.Granted() {
		if !a.ShareEstablished() {
			a.Status.Phase = sharednetv1.PhaseValidating
			r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonNotGranted, "not shared: "+res.NotGranted.Error())
			return reconcile.Result{RequeueAfter: pollCloud}, nil
		}
		r.condition(a, cluster, sharednetv1.GrantedCondition, metav1.ConditionFalse, sharednetv1.ReasonGrantRevoked,
			"the grant was revoked after the attach: "+res.NotGranted.Error()+"; the nodes keep their port (no rollout), no new nodegroup can attach, and removing the variable detaches")
	} else {
		r.condition(a, cluster, sharednetv1.GrantedCondition, metav1.ConditionTrue, sharednetv1.ReasonGranted, fmt.Sprintf("namespace %s may use subnet %s of SharedNetwork %s", cluster.Namespace, res.Subnet, res.SharedNetwork.Name))
		if result, stop, err := r.ensureShare(ctx, s, value, res); stop || err != nil {
			return result, err
		}
	}
	if !a.ShareEstablished() {
		return reconcile.Result{RequeueAfter: pollCloud}, nil
	}
	if err := r.nudge(ctx, cluster, topology, a.Status.Share.RBACPolicyID); err != nil {
		return reconcile.Result{}, err
	}
	return r.observeRollout(ctx, s)
}

// ensureShare makes the share of a granted nodegroup once every rule
// holds, and again when someone deleted it; stop is true when the attach
// goes no further this time.
func (r *AttachmentReconciler) ensureShare(ctx context.Context, s *nodegroupScope, value sharednetv1.SharedNetworkVariable, res preflight.Resolution) (_ reconcile.Result, stop bool, _ error) {
	project := ""
	if !s.a.ShareEstablished() {
		// Every rule again, on the cluster CAPO made: a violation means no
		// share, no port, no rollout. A nodegroup whose nodes already have
		// their address lost only its status: its share is found again,
		// whatever the cloud says now.
		running, err := r.runsWithPort(ctx, s)
		if err != nil {
			return reconcile.Result{}, true, err
		}
		if !running {
			d, result, ok := r.checkBeforeShare(ctx, s, value, res)
			if !ok {
				return result, true, nil
			}
			project, s.judged = d.Project, true // one token validation and one judgement per share
		}
	}
	if s.a.ShareEstablished() && !shareLost(s.sn, s.a) {
		return reconcile.Result{}, false, nil
	}
	s.a.Status.Phase = sharednetv1.PhaseSharing
	share, release, err := r.share(ctx, s.cluster, s.sn, project)
	defer release()
	if err != nil {
		var refused *shareRefusedError
		var noPolicyLeft *noPolicyLeftError
		switch {
		case errors.As(err, &noPolicyLeft):
			r.condition(s.a, s.cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonRBACPolicyQuotaExceeded, err.Error())
		case errors.As(err, &refused):
			r.condition(s.a, s.cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, refused.reason, err.Error())
		default:
			r.condition(s.a, s.cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonShareFailed, err.Error())
		}
		return reconcile.Result{RequeueAfter: pollRollout}, true, nil
	}
	s.a.Status.Share = share
	r.sealShare(ctx, s.sn, s.a)
	r.condition(s.a, s.cluster, sharednetv1.SharedCondition, metav1.ConditionTrue, sharednetv1.ReasonShared, sharedMessage(s.sn, share))
	// Record the share before the nudge (GeneratePatches reads it), and
	// before another cluster's detach may judge whether the share is used.
	if err := r.flush(ctx, s, true); err != nil {
		return reconcile.Result{}, true, err
	}
	return reconcile.Result{}, false, nil
}

func sharedMessage(sn *sharednetv1.SharedNetwork, share *sharednetv1.Share) string {
	return fmt.Sprintf("network %s is shared with the cluster's project %s (RBAC policy %s)", sn.Spec.NetworkID, share.ProjectID, share.RBACPolicyID)
}

// runsWithPort says whether the nodegroup's current template carries the
// shared port and a node already has its address on the subnet.
func (r *AttachmentReconciler) runsWithPort(ctx context.Context, s *nodegroupScope) (bool, error) {
	m, err := r.measure(ctx, s)
	var unknown *subnetUnknownError
	if errors.As(err, &unknown) {
		return false, nil // not known to run with it: the rules report the facts
	}
	return m.carries && len(m.rollout.Nodes) > 0, err
}

// checkBeforeShare asks the decision service before the share and records
// why an attach does not go on; ok is false until every rule holds.
func (r *AttachmentReconciler) checkBeforeShare(ctx context.Context, s *nodegroupScope, value sharednetv1.SharedNetworkVariable, res preflight.Resolution) (preflight.Decision, reconcile.Result, bool) {
	d, err := r.checker().Decide(ctx, preflight.Question{Ask: preflight.BeforeShare, Cluster: s.cluster, Nodegroup: s.topology, Value: value, Resolved: &res})
	if err == nil && d.Waiting == "" && len(d.Refusal) == 0 {
		return d, reconcile.Result{}, true
	}
	a, cluster := s.a, s.cluster
	a.Status.Phase = sharednetv1.PhaseValidating
	switch {
	case err != nil:
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonCannotCheck,
			fmt.Sprintf("not shared yet: MachineDeployment topology %q: %v", s.topology, err))
	case d.Waiting != "":
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonWaitingForClusterNetwork, "not shared yet: "+d.Waiting)
		return d, reconcile.Result{RequeueAfter: pollRollout}, false
	case !d.Refusal.OnlyCannotVerify():
		// The same words admission uses; it is tried again, so fixing the
		// cloud (or removing the variable) is enough.
		problems := make([]string, 0, len(d.Refusal))
		for _, v := range d.Refusal {
			problems = append(problems, v.Error())
		}
		message := "nothing was shared (no port, no rollout): " + strings.Join(problems, "; ") + "; fix it (or remove the variable) and the attach is tried again"
		if d.Refusal.Has(rules.RuleSameCloud) {
			r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonForeignKeystone, message)
		} else {
			r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonRuleViolated, message)
		}
	default:
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonCannotCheck, "not shared yet: "+d.Refusal.Error())
	}
	return d, reconcile.Result{RequeueAfter: pollCloud}, false
}

// shareLost says the SharedNetwork's facts, read after the share was
// recorded, no longer hold it: someone deleted the RBAC policy behind the
// extension's back. Share (find-or-create) then makes it again.
func shareLost(sn *sharednetv1.SharedNetwork, a *sharednetv1.SharedNetworkAttachment) bool {
	if !a.ShareEstablished() || sn.Status.LastRefreshTime == nil || !meta.IsStatusConditionTrue(sn.Status.Conditions, sharednetv1.ReadyCondition) {
		return false
	}
	shared := meta.FindStatusCondition(a.Status.Conditions, sharednetv1.SharedCondition)
	if shared == nil || !sn.Status.LastRefreshTime.After(shared.LastTransitionTime.Time) {
		return false // facts older than the share say nothing about it
	}
	for _, s := range sn.Status.Shares {
		if s.ProjectID == a.Status.Share.ProjectID {
			return false
		}
	}
	return true
}

// shareRefusedError is a share the extension will not make, with the
// condition reason that says why.
type shareRefusedError struct {
	reason string
	err    error
}

func (e *shareRefusedError) Error() string { return e.err.Error() }
func (e *shareRefusedError) Unwrap() error { return e.err }

// noPolicyLeftError is Neutron refusing the share for the VM project's
// RBAC policy quota, in the cluster owner's words.
type noPolicyLeftError struct{ error }

// share finds or creates the RBAC share of the SharedNetwork's network with
// the cluster's project, with the VM project's credential. The project is
// the one the SharedNetwork's own Keystone vouches for
// (credentials.VerifiedProject), never what the cluster's credential alone
// claims: project when the check before the share just verified it,
// verified here otherwise (a share found lost, a status lost).
//
// The share is made holding the network's lock (after the tenant's cloud was
// asked, so a slow one holds nobody else), which the caller releases once it
// has recorded the share: a concurrent detach of another cluster of the same
// project then sees the record before it judges the share unused.
func (r *AttachmentReconciler) share(ctx context.Context, cluster *clusterv1.Cluster, sn *sharednetv1.SharedNetwork, project string) (_ *sharednetv1.Share, release func(), _ error) {
	release = func() {}
	var clusterCloud openstack.Identity
	if project == "" {
		c, _, err := credentials.In(ctx, r.Credentials).ForCluster(ctx, cluster)
		if err != nil {
			return nil, release, &shareRefusedError{reason: sharednetv1.ReasonClusterCredentialsInvalid, err: fmt.Errorf("the cluster's OpenStack credential cannot be used: %w", err)}
		}
		clusterCloud = c
	}
	vm, err := r.Credentials.ForSharedNetwork(ctx, sn)
	if err != nil {
		return nil, release, r.vmProjectFailed(ctx, sn, "opening the VM project", err)
	}
	if project == "" {
		if project, err = credentials.VerifiedProject(ctx, clusterCloud, vm); err != nil {
			return nil, release, &shareRefusedError{reason: sharednetv1.ReasonForeignKeystone, err: fmt.Errorf("%w; nothing was shared", err)}
		}
	}
	release = r.lockNetwork(sn.Spec.NetworkID)
	policy, err := vm.Share(ctx, sn.Spec.NetworkID, project)
	var overQuota *openstack.OverQuotaError
	if errors.As(err, &overQuota) {
		// Admission judged the quota on facts up to a resync old (or could
		// not read it): the owner learns what the rule would have said.
		_ = r.vmProjectFailed(ctx, sn, "sharing the network", err)
		return nil, release, &noPolicyLeftError{fmt.Errorf(
			"sharing SharedNetwork %s with this cluster's project needs one more RBAC policy, but Neutron refused it: the VM project has used its quota; "+
				"ask the cloud operator to raise quota rbac_policy of the VM project, or detach a project that no longer needs a network of it; retrying", sn.Name)}
	}
	if err != nil {
		return nil, release, r.vmProjectFailed(ctx, sn, "sharing the network", err)
	}
	return &sharednetv1.Share{ProjectID: project, RBACPolicyID: policy}, release, nil
}

// vmProjectFailed records the VM project's error where the administrator
// sees it (an Event on the cluster-scoped SharedNetwork, the log) and returns
// what the cluster owner may read: no VM project ID, Keystone URL or Secret.
func (r *AttachmentReconciler) vmProjectFailed(ctx context.Context, sn *sharednetv1.SharedNetwork, doing string, err error) error {
	ctrl.LoggerFrom(ctx).Error(err, doing, "sharedNetwork", sn.Name)
	namespace := extensionNamespace(r.Namespace)
	administratorEvent(r.Recorder, namespace, sn, corev1.EventTypeWarning, sharednetv1.EventVMProjectFailed, fmt.Sprintf("%s: %v", doing, err))
	return fmt.Errorf("%s with the VM project's credential failed; the administrator sees why in the Events of SharedNetwork %s (kubectl get events -n %s --field-selector involvedObject.name=%s); retrying", doing, sn.Name, namespace, sn.Name)
}

// nudge records the share on the Cluster; the change makes CAPI's topology
// controller reconcile, and GeneratePatches then emits the port.
func (r *AttachmentReconciler) nudge(ctx context.Context, cluster *clusterv1.Cluster, topology, value string) error {
	key := sharedAnnotationPrefix + topology
	if cluster.Annotations[key] == value {
		return nil
	}
	patch := client.MergeFrom(cluster.DeepCopy())
	if value == "" {
		delete(cluster.Annotations, key)
	} else {
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[key] = value
	}
	return r.Client.Patch(ctx, cluster, patch)
}

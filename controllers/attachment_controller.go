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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/internal/watchfilter"
)

const (
	// AttachmentFinalizer keeps an attachment until its share is released.
	AttachmentFinalizer = "sharednet.capo.io/attachment"
	// sharedAnnotationPrefix + topology on the Cluster records the share a
	// nodegroup got; changing it is the nudge that makes CAPI's topology
	// controller call GeneratePatches again.
	sharedAnnotationPrefix = "sharednet.capo.io/shared."

	pollRollout = 10 * time.Second
	pollCloud   = time.Minute
)

// AttachmentReconciler drives each nodegroup whose `sharedNetwork` variable
// is set through share, rollout, detach and unshare, recording it in a
// SharedNetworkAttachment. It reconciles Clusters and works per
// MachineDeployment topology; every step is idempotent, so a restart at any
// point converges without a second share or a second rollout.
type AttachmentReconciler struct {
	Client client.Client
	// Credentials opens sessions with the cluster's and the VM project's credentials.
	Credentials credentials.Clouds
	Recorder    record.EventRecorder
	// Checker runs the rules before a share; one over Client and
	// Credentials when nil.
	Checker *preflight.Checker
	// WatchFilterValue is CAPI's --watch-filter: only Clusters (and, once
	// their Cluster is gone, attachments) with that watch label are
	// reconciled; every one when empty.
	WatchFilterValue string

	// observed holds, per attachment UID, the resourceVersion of the
	// SharedNetwork its cloud observations (load balancers, CloudFits) were
	// made at. An Attached nodegroup is observed again when the SharedNetwork
	// is written again (each resync), not on every reconcile its machines'
	// events cause: at scale those calls would grow with the events. Lost
	// with the process: a new leader observes each attachment once.
	observed sync.Map
}

func (r *AttachmentReconciler) checker() *preflight.Checker {
	if r.Checker == nil {
		r.Checker = &preflight.Checker{Reader: r.Client, Cloud: r.Credentials}
	}
	return r.Checker
}

// SetupWithManager registers the reconciler.
func (r *AttachmentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byClusterLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[clusterv1.ClusterNameLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&sharednetv1.SharedNetworkAttachment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: o.(*sharednetv1.SharedNetworkAttachment).Spec.ClusterName}}}
		})).
		// A SharedNetwork's new facts (an administrator fixed its MTU or
		// pool) let a refused attach go on, and a cloud that changed shows.
		Watches(&sharednetv1.SharedNetwork{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			var out []reconcile.Request
			for _, c := range o.(*sharednetv1.SharedNetwork).Status.Consumers {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: c.Cluster}})
			}
			return out
		})).
		Watches(&clusterv1.MachineDeployment{}, byClusterLabel).
		Watches(&clusterv1.Machine{}, byClusterLabel).
		Watches(&infrav1.OpenStackMachine{}, byClusterLabel).
		Named("sharednetworkattachment").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *AttachmentReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		cluster = nil
	}
	if cluster != nil && !watchfilter.Matches(cluster, r.WatchFilterValue) {
		return reconcile.Result{}, nil // another instance's (--watch-filter)
	}
	attachments := &sharednetv1.SharedNetworkAttachmentList{}
	if err := r.Client.List(ctx, attachments, client.InNamespace(req.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: req.Name}); err != nil {
		return reconcile.Result{}, err
	}
	if cluster == nil {
		// The Cluster's label is gone with it: its attachments carry a copy.
		attachments.Items = slices.DeleteFunc(attachments.Items, func(a sharednetv1.SharedNetworkAttachment) bool {
			return !watchfilter.Matches(&a, r.WatchFilterValue)
		})
	}
	var errs []error
	byTopology := map[string]*sharednetv1.SharedNetworkAttachment{}
	paused := map[string]bool{}
	for i := range attachments.Items {
		a := &attachments.Items[i]
		if c := pausedCondition(cluster, a); c.Status == metav1.ConditionTrue {
			paused[a.Spec.MachineDeploymentTopology] = true
			errs = append(errs, r.recordPaused(ctx, a, c))
			continue
		}
		byTopology[a.Spec.MachineDeploymentTopology] = a
	}
	// A paused Cluster (e.g. during clusterctl move) is left alone, as CAPI's
	// contract asks: no attachment is created, shared, rolled or unshared.
	if clusterPaused(cluster) {
		return reconcile.Result{}, errors.Join(errs...)
	}

	values := map[string]sharednetv1.SharedNetworkVariable{}
	if cluster != nil && cluster.DeletionTimestamp.IsZero() && cluster.Spec.Topology.IsDefined() {
		var err error
		if values, err = variables.Nodegroups(cluster); err != nil {
			return reconcile.Result{}, err
		}
	}

	var result reconcile.Result
	for topology, value := range values {
		if paused[topology] {
			continue
		}
		res, err := r.attach(ctx, cluster, topology, value, byTopology[topology])
		errs, result = append(errs, err), earliest(result, res)
	}
	for topology, attachment := range byTopology {
		if _, wanted := values[topology]; wanted && attachment.DeletionTimestamp.IsZero() {
			continue
		}
		res, err := r.detach(ctx, cluster, attachment)
		errs, result = append(errs, err), earliest(result, res)
	}
	return result, errors.Join(errs...)
}

func earliest(a, b reconcile.Result) reconcile.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter != 0 && b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}

// attach walks one nodegroup towards Attached: attachment, share, nudge,
// rollout. What it found is written once at the end (and the share once
// before the nudge); a failed write is returned.
func (r *AttachmentReconciler) attach(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable, a *sharednetv1.SharedNetworkAttachment) (_ reconcile.Result, reterr error) {
	sn := &sharednetv1.SharedNetwork{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: value.Name}, sn); err != nil {
		return reconcile.Result{}, fmt.Errorf("nodegroup %s: SharedNetwork %s: %w", topology, value.Name, err)
	}
	subnet, v := rules.OneSubnet(sn.Name, sn.Status.SubnetIDs(), sn.Spec.Subnets, value.Subnet)
	if v != nil {
		return reconcile.Result{RequeueAfter: pollCloud}, fmt.Errorf("nodegroup %s: %w", topology, v)
	}
	a, err := r.ensureAttachment(ctx, cluster, topology, sn.Name, subnet, a)
	if err != nil {
		return reconcile.Result{}, err
	}
	helper, err := patch.NewHelper(a, r.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	defer func() {
		if helper != nil {
			reterr = errors.Join(reterr, r.patchAttachment(ctx, helper, cluster, a))
		}
	}()
	if a.Status.Phase == "" {
		a.Status.Phase = sharednetv1.PhaseValidating
	}
	conditions.Set(a, sharednetv1.NewCondition(sharednetv1.DeletingCondition, metav1.ConditionFalse, sharednetv1.ReasonNotDeleting, ""))

	// The grant is checked where the VM project's power is used, not only
	// at admission: a revoked grant makes no new share, and an attachment
	// already in place is reported, never rolled (GeneratePatches keeps the
	// port its nodes run with).
	if err := preflight.Granted(ctx, r.Client, sn, cluster.Namespace, subnet); err != nil {
		if !a.ShareEstablished() {
			a.Status.Phase = sharednetv1.PhaseValidating
			r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonNotGranted, "not shared: "+err.Error())
			return reconcile.Result{RequeueAfter: pollCloud}, nil
		}
		r.condition(a, cluster, sharednetv1.GrantedCondition, metav1.ConditionFalse, sharednetv1.ReasonGrantRevoked,
			"the grant was revoked after the attach: "+err.Error()+"; the nodes keep their port (no rollout), no new nodegroup can attach, and removing the variable detaches")
	} else {
		r.condition(a, cluster, sharednetv1.GrantedCondition, metav1.ConditionTrue, sharednetv1.ReasonGranted, fmt.Sprintf("namespace %s may use subnet %s of SharedNetwork %s", cluster.Namespace, subnet, sn.Name))
		if !a.ShareEstablished() {
			// What admission could not decide for a Cluster being created
			// (its network's MTU, its project's quota, its cloud) and every
			// other rule again, on the cluster CAPO made: a violation means
			// no share, no port, no rollout. A nodegroup whose nodes already
			// have their address lost only its status: its share is found
			// again below, whatever the cloud says now.
			running, err := r.runsWithPort(ctx, cluster, topology, sn, subnet)
			if err != nil {
				return reconcile.Result{}, err
			}
			if !running {
				if res, checked := r.checkBeforeShare(ctx, cluster, topology, value, a); !checked {
					return res, nil
				}
			}
		}
		if !a.ShareEstablished() || shareLost(sn, a) {
			a.Status.Phase = sharednetv1.PhaseSharing
			share, err := r.share(ctx, cluster, sn)
			if err != nil {
				var refused *shareRefusedError
				if errors.As(err, &refused) {
					r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, refused.reason, err.Error())
				} else {
					r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonShareFailed, err.Error())
				}
				return reconcile.Result{RequeueAfter: pollRollout}, nil
			}
			a.Status.Share = share
			r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionTrue, sharednetv1.ReasonShared,
				fmt.Sprintf("network %s is shared with the cluster's project %s (RBAC policy %s)", sn.Spec.NetworkID, share.ProjectID, share.RBACPolicyID))
			// Record the share before the nudge: GeneratePatches reads it.
			err = r.patchAttachment(ctx, helper, cluster, a)
			if helper = nil; err != nil {
				return reconcile.Result{}, err
			}
			if helper, err = patch.NewHelper(a, r.Client); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	if !a.ShareEstablished() {
		return reconcile.Result{RequeueAfter: pollCloud}, nil
	}
	if err := r.nudge(ctx, cluster, topology, a.Status.Share.RBACPolicyID); err != nil {
		return reconcile.Result{}, err
	}
	return r.observeRollout(ctx, cluster, topology, sn, a, true)
}

// runsWithPort says whether the nodegroup's current template carries the
// shared port and a node already has its address on the subnet.
func (r *AttachmentReconciler) runsWithPort(ctx context.Context, cluster *clusterv1.Cluster, topology string, sn *sharednetv1.SharedNetwork, subnet string) (bool, error) {
	facts, ok := sn.Status.Subnet(subnet)
	if !ok {
		return false, nil
	}
	prefix, err := netip.ParsePrefix(facts.CIDR)
	if err != nil {
		return false, nil //nolint:nilerr // no usable facts: not known to run with the port (the rules report the CIDR)
	}
	rollout, carries, err := r.measure(ctx, cluster.Namespace, cluster.Name, topology, prefix)
	return carries && len(rollout.Nodes) > 0, err
}

// checkBeforeShare runs preflight.BeforeShare and records why an attach
// does not go on; checked is false until every rule holds.
func (r *AttachmentReconciler) checkBeforeShare(ctx context.Context, cluster *clusterv1.Cluster, topology string, value sharednetv1.SharedNetworkVariable, a *sharednetv1.SharedNetworkAttachment) (reconcile.Result, bool) {
	err := r.checker().BeforeShare(ctx, cluster, topology, value)
	if err == nil {
		return reconcile.Result{}, true
	}
	a.Status.Phase = sharednetv1.PhaseValidating
	var notReady *preflight.NotReadyError
	var refusal rules.Refusal
	switch {
	case errors.As(err, &notReady):
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonWaitingForClusterNetwork, "not shared yet: "+notReady.Reason)
		return reconcile.Result{RequeueAfter: pollRollout}, false
	case errors.As(err, &refusal) && !refusal.OnlyCannotVerify():
		// The same words admission uses; it is tried again, so fixing the
		// cloud (or removing the variable) is enough.
		problems := make([]string, 0, len(refusal))
		for _, v := range refusal {
			problems = append(problems, v.Error())
		}
		message := "nothing was shared (no port, no rollout): " + strings.Join(problems, "; ") + "; fix it (or remove the variable) and the attach is tried again"
		if refusal.Has(rules.RuleSameCloud) {
			r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonForeignKeystone, message)
		} else {
			r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonRuleViolated, message)
		}
	default:
		r.condition(a, cluster, sharednetv1.SharedCondition, metav1.ConditionFalse, sharednetv1.ReasonCannotCheck, "not shared yet: "+err.Error())
	}
	return reconcile.Result{RequeueAfter: pollCloud}, false
}

// observeRollout fills nodes and load balancers and sets the phase.
func (r *AttachmentReconciler) observeRollout(ctx context.Context, cluster *clusterv1.Cluster, topology string, sn *sharednetv1.SharedNetwork, a *sharednetv1.SharedNetworkAttachment, attaching bool) (reconcile.Result, error) {
	facts, _ := sn.Status.Subnet(a.Spec.Subnet)
	prefix, _ := netip.ParsePrefix(facts.CIDR)
	rollout, carries, err := r.measure(ctx, cluster.Namespace, cluster.Name, topology, prefix)
	if err != nil {
		return reconcile.Result{}, err
	}
	a.Status.DesiredNodes = ptr.To(rollout.Desired)
	a.Status.AttachedNodes = ptr.To(int32(len(rollout.Nodes)))
	a.Status.Nodes = rollout.Nodes
	// The cloud is observed again when the SharedNetwork was written since
	// the last look (each resync), and once more as the nodegroup becomes
	// Attached; not on every reconcile its machines' events cause, while it
	// rolls out or once Attached (a 2-node rollout is some sixty reconciles).
	// A detach looks every time.
	last, ok := r.observed.Load(a.UID)
	becomingAttached := attaching && rollout.Attached(carries) && a.Status.Phase != sharednetv1.PhaseAttached
	detaching := !attaching && a.Status.Phase != sharednetv1.PhaseAttached
	if !ok || last != sn.ResourceVersion || becomingAttached || detaching {
		r.observeLoadBalancers(ctx, cluster, a)
		if attaching && cluster != nil {
			r.observeCloudFits(ctx, cluster, topology, a)
		}
		r.observed.Store(a.UID, sn.ResourceVersion)
	}
	switch {
	case attaching && rollout.Attached(carries):
		a.Status.Phase = sharednetv1.PhaseAttached
		a.Status.Message = fmt.Sprintf("%d/%d nodes have an address on subnet %s", len(rollout.Nodes), rollout.Desired, a.Spec.Subnet)
		r.condition(a, cluster, sharednetv1.AttachedCondition, metav1.ConditionTrue, sharednetv1.ReasonAttached, a.Status.Message)
		return reconcile.Result{RequeueAfter: pollCloud}, nil
	case attaching:
		a.Status.Phase = sharednetv1.PhaseRollingOut
		a.Status.Message = fmt.Sprintf("rolling out: %d/%d nodes replaced, %d with an address on subnet %s", rollout.OnCurrentTemplate, rollout.Desired, len(rollout.Nodes), a.Spec.Subnet)
		r.condition(a, cluster, sharednetv1.AttachedCondition, metav1.ConditionFalse, sharednetv1.ReasonRollingOut, a.Status.Message)
	}
	return reconcile.Result{RequeueAfter: pollRollout}, nil
}

// observeCloudFits reports a cloud that changed after the attach (the shared
// network's MTU, room on its subnet): a condition and an Event, never a
// rollout; admission refuses the nodegroup's next growth for the same reason.
func (r *AttachmentReconciler) observeCloudFits(ctx context.Context, cluster *clusterv1.Cluster, topology string, a *sharednetv1.SharedNetworkAttachment) {
	value := sharednetv1.SharedNetworkVariable{Name: a.Spec.SharedNetwork, Subnet: a.Spec.Subnet}
	err := r.checker().StillFits(ctx, cluster, topology, value)
	var violation *rules.Violation
	switch {
	case err == nil:
		r.condition(a, cluster, sharednetv1.CloudFitsCondition, metav1.ConditionTrue, sharednetv1.ReasonCloudFits,
			fmt.Sprintf("subnet %s of SharedNetwork %s still fits the nodegroup", a.Spec.Subnet, a.Spec.SharedNetwork))
	case errors.As(err, &violation):
		r.condition(a, cluster, sharednetv1.CloudFitsCondition, metav1.ConditionFalse, sharednetv1.ReasonCloudChanged,
			"the cloud changed after the attach: "+err.Error()+"; the nodes keep their port and nothing rolls, but the nodegroup cannot grow until this is fixed")
	}
}

// measure reads the nodegroup's MachineDeployment, machines and
// OpenStackMachines; carries says whether its current template has the port.
func (r *AttachmentReconciler) measure(ctx context.Context, namespace, cluster, topology string, subnet netip.Prefix) (Rollout, bool, error) {
	mds := &clusterv1.MachineDeploymentList{}
	if err := r.Client.List(ctx, mds, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology}); err != nil {
		return Rollout{}, false, err
	}
	if len(mds.Items) == 0 {
		return Rollout{}, false, nil
	}
	md := &mds.Items[0]
	carries := false
	tmpl := &infrav1.OpenStackMachineTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: md.Spec.Template.Spec.InfrastructureRef.Name}, tmpl); err == nil {
		carries = sharedport.Carried(tmpl.Spec.Template.Spec.Ports) != nil
	} else if !apierrors.IsNotFound(err) {
		return Rollout{}, false, err
	}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
		return Rollout{}, false, err
	}
	osms := &infrav1.OpenStackMachineList{}
	if err := r.Client.List(ctx, osms, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return Rollout{}, false, err
	}
	byName := map[string]*infrav1.OpenStackMachine{}
	for i := range osms.Items {
		byName[osms.Items[i].Name] = &osms.Items[i]
	}
	return MeasureRollout(md, machines.Items, byName, subnet), carries, nil
}

// observeLoadBalancers lists this cluster's LBs on the subnet (the detach
// rule and the cluster owner both need them) and those nobody can be
// attributed to; other clusters' LBs on the same subnet are not listed.
func (r *AttachmentReconciler) observeLoadBalancers(ctx context.Context, cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment) {
	if cluster == nil {
		return
	}
	cloud, _, err := r.Credentials.ForCluster(ctx, cluster)
	if err != nil {
		return
	}
	found, err := cloud.OnSubnet(ctx, a.Spec.Subnet)
	if err != nil {
		return // keep the last known list
	}
	a.Status.LoadBalancers, a.Status.UnattributedLoadBalancers = preflight.LoadBalancersOf(cluster, found)
}

func (r *AttachmentReconciler) ensureAttachment(ctx context.Context, cluster *clusterv1.Cluster, topology, network, subnet string, a *sharednetv1.SharedNetworkAttachment) (*sharednetv1.SharedNetworkAttachment, error) {
	spec := sharednetv1.SharedNetworkAttachmentSpec{ClusterName: cluster.Name, MachineDeploymentTopology: topology, SharedNetwork: network, Subnet: subnet}
	if a == nil {
		key := sharednetv1.AttachmentKey(cluster, topology)
		a = &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
		}}
		if v, ok := cluster.Labels[clusterv1.WatchLabel]; ok {
			a.Labels[clusterv1.WatchLabel] = v // the same instance detaches it after the Cluster is gone
		}
		a.Spec = spec
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
	if a.Spec != spec {
		a.Spec = spec // a new subnet of the same network: the share stays, the port changes
		if err := r.Client.Update(ctx, a); err != nil {
			return nil, err
		}
	}
	return a, nil
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

// share finds or creates the RBAC share of the SharedNetwork's network with
// the cluster's project, with the VM project's credential. The project is
// the one the SharedNetwork's own Keystone vouches for (credentials.VerifiedProject),
// never what the cluster's credential alone claims.
func (r *AttachmentReconciler) share(ctx context.Context, cluster *clusterv1.Cluster, sn *sharednetv1.SharedNetwork) (*sharednetv1.Share, error) {
	clusterCloud, _, err := r.Credentials.ForCluster(ctx, cluster)
	if err != nil {
		return nil, &shareRefusedError{reason: sharednetv1.ReasonClusterCredentialsInvalid, err: fmt.Errorf("the cluster's OpenStack credential cannot be used: %w", err)}
	}
	vm, err := r.Credentials.ForSharedNetwork(ctx, sn)
	if err != nil {
		return nil, r.vmProjectFailed(ctx, sn, "opening the VM project", err)
	}
	project, err := credentials.VerifiedProject(ctx, clusterCloud, vm)
	if err != nil {
		return nil, &shareRefusedError{reason: sharednetv1.ReasonForeignKeystone, err: fmt.Errorf("%w; nothing was shared", err)}
	}
	policy, err := vm.Share(ctx, sn.Spec.NetworkID, project)
	if err != nil {
		return nil, r.vmProjectFailed(ctx, sn, "sharing the network", err)
	}
	return &sharednetv1.Share{ProjectID: project, RBACPolicyID: policy}, nil
}

// vmProjectFailed records the VM project's error where the administrator
// sees it (an Event on the cluster-scoped SharedNetwork, the log) and returns
// what the cluster owner may read: no VM project ID, Keystone URL or Secret.
func (r *AttachmentReconciler) vmProjectFailed(ctx context.Context, sn *sharednetv1.SharedNetwork, doing string, err error) error {
	ctrl.LoggerFrom(ctx).Error(err, doing, "sharedNetwork", sn.Name)
	r.Recorder.Eventf(sn, corev1.EventTypeWarning, sharednetv1.EventVMProjectFailed, "%s: %v", doing, err)
	return fmt.Errorf("%s with the VM project's credential failed; the administrator sees why on SharedNetwork %s (kubectl describe sharednetwork %s); retrying", doing, sn.Name, sn.Name)
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

func (r *AttachmentReconciler) condition(a *sharednetv1.SharedNetworkAttachment, cluster *clusterv1.Cluster, kind string, status metav1.ConditionStatus, reason, message string) {
	// A copy: Set updates the condition in place.
	var old *metav1.Condition
	if c := conditions.Get(a, kind); c != nil {
		old = c.DeepCopy()
	}
	conditions.Set(a, sharednetv1.NewCondition(kind, status, reason, message))
	if status != metav1.ConditionTrue {
		a.Status.Message = message
	}
	if old == nil || old.Status != status || old.Reason != reason {
		eventType := corev1.EventTypeNormal
		if status == metav1.ConditionFalse && reason != sharednetv1.ReasonRollingOut && reason != sharednetv1.ReasonDetaching {
			eventType = corev1.EventTypeWarning
		}
		if cluster != nil {
			r.Recorder.Eventf(cluster, eventType, reason, "nodegroup %s: %s", a.Spec.MachineDeploymentTopology, message)
		}
		if a.UID != "" {
			r.Recorder.Event(a, eventType, reason, message)
		}
	}
}

// ownedConditions are the attachment's conditions this controller writes;
// the guardrails' (WorkloadGuarded) and the hooks' (LoadBalancersRemoved)
// are theirs.
var ownedConditions = []string{
	sharednetv1.AttachmentReadyCondition, sharednetv1.SharedCondition, sharednetv1.AttachedCondition, sharednetv1.GrantedCondition,
	sharednetv1.CloudFitsCondition, sharednetv1.PausedCondition, sharednetv1.DeletingCondition,
}

// patchAttachment writes what this controller found, with Paused and the
// Ready summary, through CAPI's patch helper: only the fields that changed
// are sent and only its own conditions are taken as authoritative, so the
// guardrails' findings written in between are kept.
func (r *AttachmentReconciler) patchAttachment(ctx context.Context, helper *patch.Helper, cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment) error {
	conditions.Set(a, pausedCondition(cluster, a))
	setReady(a)
	if err := helper.Patch(ctx, a, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithStatusObservedGeneration{}); err != nil {
		return fmt.Errorf("writing the status of SharedNetworkAttachment %s: %w", a.Name, err)
	}
	return nil
}

// setReady summarizes the attach into Ready with CAPI's util/conditions:
// False while any of Shared, Attached, Granted, CloudFits is False or
// Deleting is True, Unknown while one is not reported yet.
func setReady(a *sharednetv1.SharedNetworkAttachment) {
	err := conditions.SetSummaryCondition(a, a, sharednetv1.AttachmentReadyCondition,
		conditions.ForConditionTypes{sharednetv1.SharedCondition, sharednetv1.AttachedCondition, sharednetv1.GrantedCondition,
			sharednetv1.CloudFitsCondition, sharednetv1.DeletingCondition},
		// Granted and CloudFits are checked only once the grant is known
		// and the nodegroup is rolling out.
		conditions.IgnoreTypesIfMissing{sharednetv1.GrantedCondition, sharednetv1.CloudFitsCondition},
		conditions.CustomMergeStrategy{MergeStrategy: conditions.DefaultMergeStrategy(
			conditions.GetPriorityFunc(conditions.GetDefaultMergePriorityFunc(sharednetv1.DeletingCondition)),
			conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(sharednetv1.ReasonNotReady, sharednetv1.ReasonReadyUnknown, sharednetv1.ReasonReady)),
		)},
	)
	if err != nil { // only with a wrong list of types above
		conditions.Set(a, sharednetv1.NewCondition(sharednetv1.AttachmentReadyCondition, metav1.ConditionUnknown, sharednetv1.ReasonReadyUnknown, err.Error()))
	}
}

// clusterPaused: the Cluster's spec.paused or CAPI's paused annotation on it
// (clusterctl move sets both).
func clusterPaused(cluster *clusterv1.Cluster) bool {
	return cluster != nil && annotations.IsPaused(cluster, cluster)
}

// pausedCondition is CAPI's Paused condition for an attachment: True when
// the Cluster is paused or the attachment has CAPI's paused annotation.
// (CAPI's paused.EnsurePausedCondition does not honour the annotation on the
// Cluster, which this controller reconciles, so it is not used.)
func pausedCondition(cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment) metav1.Condition {
	var why []string
	if cluster != nil && ptr.Deref(cluster.Spec.Paused, false) {
		why = append(why, "Cluster spec.paused is set to true")
	}
	if cluster != nil && annotations.HasPaused(cluster) {
		why = append(why, "Cluster has the "+clusterv1.PausedAnnotation+" annotation")
	}
	if annotations.HasPaused(a) {
		why = append(why, "SharedNetworkAttachment has the "+clusterv1.PausedAnnotation+" annotation")
	}
	if len(why) == 0 {
		return sharednetv1.NewCondition(sharednetv1.PausedCondition, metav1.ConditionFalse, sharednetv1.ReasonNotPaused, "")
	}
	return sharednetv1.NewCondition(sharednetv1.PausedCondition, metav1.ConditionTrue, sharednetv1.ReasonPaused,
		strings.Join(why, ", ")+": nothing is shared, rolled out or unshared until it is resumed")
}

// recordPaused writes Paused (and Ready, which does not change with it) on
// an attachment that is left alone.
func (r *AttachmentReconciler) recordPaused(ctx context.Context, a *sharednetv1.SharedNetworkAttachment, paused metav1.Condition) error {
	if c := conditions.Get(a, sharednetv1.PausedCondition); c != nil && conditions.HasSameState(c, &paused) {
		return nil
	}
	helper, err := patch.NewHelper(a, r.Client)
	if err != nil {
		return err
	}
	conditions.Set(a, paused)
	if err := helper.Patch(ctx, a, patch.WithOwnedConditions{Conditions: []string{sharednetv1.PausedCondition}}); err != nil {
		return fmt.Errorf("writing the status of SharedNetworkAttachment %s: %w", a.Name, err)
	}
	return nil
}

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

// Package controllers holds the extension's reconcilers. They stay thin: cloud
// access is internal/openstack, rules are internal/rules.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
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
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/networkfacts"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/watchfilter"
)

// DefaultResync is how often a SharedNetwork's facts are read again from
// Neutron when nothing in Kubernetes changed.
const DefaultResync = 5 * time.Minute

// SharedNetworkReconciler keeps each SharedNetwork's status current from
// Neutron: MTU, subnets with pools and used/free addresses, the shares the
// network holds, its consumers, and a Ready condition.
type SharedNetworkReconciler struct {
	Client client.Client
	// Namespace holds the credential Secrets (the extension's own), and the
	// SharedNetworks' Events.
	Namespace string
	// Clouds opens the VM project with the SharedNetwork's credential, by
	// the same path and session key as every other use of it (the Secret's
	// UID, cloud and region, versioned by its resourceVersion).
	Clouds   credentials.Clouds
	Resync   time.Duration
	Recorder record.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// WatchFilterValue is CAPI's --watch-filter: only SharedNetworks with
	// that watch label are reconciled (their status written); every one
	// when empty.
	WatchFilterValue string
	// AuditVMIngress reads, with the facts, how many of the VM project's
	// ports on each subnet accept traffic from the nodes (their security
	// groups): the guardrails' VM-side report (WorkloadGuardrails feature),
	// which they copy and never ask.
	AuditVMIngress bool
}

// SetupWithManager registers the reconciler: SharedNetworks, their
// credential Secrets and the attachments that consume them.
func (r *SharedNetworkReconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(options).
		For(&sharednetv1.SharedNetwork{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.sharedNetworksOfSecret)).
		Watches(&sharednetv1.SharedNetworkAttachment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.(*sharednetv1.SharedNetworkAttachment).Spec.SharedNetwork}}}
		})).
		Named("sharednetwork").
		Complete(r)
}

func (r *SharedNetworkReconciler) sharedNetworksOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.Namespace {
		return nil
	}
	list := &sharednetv1.SharedNetworkList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, sn := range list.Items {
		if sn.Spec.Identity.SecretName == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sn)})
		}
	}
	return out
}

func (r *SharedNetworkReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *SharedNetworkReconciler) resync() time.Duration {
	if r.Resync > 0 {
		return r.Resync
	}
	return DefaultResync
}

// Reconcile implements reconcile.Reconciler. CAPI's patch helper writes what
// it found (finalizer, status) once, at the end, and only what changed.
func (r *SharedNetworkReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, reterr error) {
	sn := &sharednetv1.SharedNetwork{}
	if err := r.Client.Get(ctx, req.NamespacedName, sn); err != nil {
		if apierrors.IsNotFound(err) {
			forgetSubnetMetrics(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !watchfilter.Matches(sn, r.WatchFilterValue) {
		forgetSubnetMetrics(sn.Name) // another instance's (--watch-filter) now: it reports them
		return reconcile.Result{}, nil
	}
	helper, err := patch.NewHelper(sn, r.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	// gone: the finalizer is removed, so the object goes with the patch;
	// its status is left as read (a status patch would find nothing).
	gone, read := false, sn.Status.DeepCopy()
	defer func() {
		if gone {
			sn.Status = *read
		} else {
			r.publishMetrics(ctx, sn)
		}
		reterr = errors.Join(reterr, helper.Patch(ctx, sn))
	}()

	consumers, err := r.consumers(ctx, sn.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	sn.Status.Consumers = consumers

	// CAPI's paused annotation (e.g. while an administrator moves or
	// repairs the VM project): Neutron is not read and nothing is finalized.
	conditions.Set(sn, sharedNetworkPaused(sn))
	if annotations.HasPaused(sn) {
		return reconcile.Result{}, nil
	}

	if !sn.DeletionTimestamp.IsZero() {
		var result reconcile.Result
		result, gone = r.finalize(sn)
		return result, nil
	}
	controllerutil.AddFinalizer(sn, sharednetv1.SharedNetworkFinalizer)

	secret := &corev1.Secret{}
	secretErr := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: sn.Spec.Identity.SecretName}, secret)
	if secretErr != nil && !apierrors.IsNotFound(secretErr) {
		return reconcile.Result{}, secretErr
	}

	// Facts are read again when the spec or the credential changed, or the
	// resync interval passed; otherwise no OpenStack call is made.
	if wait, fresh := r.fresh(sn, secret); fresh {
		return reconcile.Result{RequeueAfter: wait}, nil
	}

	var result reconcile.Result
	if secretErr != nil {
		r.setReady(sn, metav1.ConditionFalse, sharednetv1.ReasonCredentialsInvalid,
			fmt.Sprintf("Secret %s/%s with the VM project's clouds.yaml does not exist; create it in the extension's namespace", r.Namespace, sn.Spec.Identity.SecretName))
	} else {
		result = r.refresh(ctx, sn, secret)
	}
	sn.Status.ObservedGeneration = sn.Generation
	sn.Status.ObservedIdentityVersion = secret.ResourceVersion
	if result.RequeueAfter == 0 {
		result.RequeueAfter = r.resync()
	}
	return result, nil
}

// sharedNetworkPaused is CAPI's Paused condition for a SharedNetwork.
func sharedNetworkPaused(sn *sharednetv1.SharedNetwork) metav1.Condition {
	if !annotations.HasPaused(sn) {
		return sharednetv1.NewCondition(sharednetv1.PausedCondition, metav1.ConditionFalse, sharednetv1.ReasonNotPaused, "")
	}
	return sharednetv1.NewCondition(sharednetv1.PausedCondition, metav1.ConditionTrue, sharednetv1.ReasonPaused,
		"SharedNetwork has the "+clusterv1.PausedAnnotation+" annotation: its facts are not read from Neutron (attaches wait for current facts) and it is not finalized until the annotation is removed")
}

// finalize lets a SharedNetwork being deleted go once no nodegroup uses
// it: their shares can only be released with its credential and network.
// It says whether the SharedNetwork is let go.
func (r *SharedNetworkReconciler) finalize(sn *sharednetv1.SharedNetwork) (reconcile.Result, bool) {
	if n := len(sn.Status.Consumers); n > 0 {
		r.setReady(sn, metav1.ConditionFalse, sharednetv1.ReasonInUse,
			fmt.Sprintf("deletion waits for %d nodegroup(s) to detach (see status.consumers): remove their sharedNetwork variable first", n))
		return reconcile.Result{RequeueAfter: r.resync()}, false
	}
	forgetSubnetMetrics(sn.Name)
	controllerutil.RemoveFinalizer(sn, sharednetv1.SharedNetworkFinalizer)
	return reconcile.Result{}, true
}

// fresh says whether the facts in status are still good, and for how long.
func (r *SharedNetworkReconciler) fresh(sn *sharednetv1.SharedNetwork, secret *corev1.Secret) (time.Duration, bool) {
	if sn.Status.ObservedIdentityVersion != secret.ResourceVersion {
		return 0, false
	}
	wait := sn.FreshFor(r.now(), r.resync())
	return wait, wait > 0
}

// refresh reads the facts from Neutron into sn.Status and sets Ready.
func (r *SharedNetworkReconciler) refresh(ctx context.Context, sn *sharednetv1.SharedNetwork, secret *corev1.Secret) reconcile.Result {
	where := fmt.Sprintf("Secret %s/%s, cloud %q", secret.Namespace, secret.Name, sn.Spec.Identity.CloudName)
	cloud, err := r.Clouds.ForSharedNetwork(ctx, sn)
	if err != nil {
		r.setReady(sn, metav1.ConditionFalse, sharednetv1.ReasonCredentialsInvalid, err.Error())
		return reconcile.Result{RequeueAfter: time.Minute}
	}
	facts, err := networkfacts.Read(ctx, cloud, sn)
	var notOnNetwork *networkfacts.SubnetsNotOnNetworkError
	switch {
	case openstack.IsNotFound(err):
		r.setReady(sn, metav1.ConditionFalse, sharednetv1.ReasonNetworkNotFound,
			fmt.Sprintf("network %s is not visible to the VM project's credential (%s): check spec.networkID and that the credential belongs to the project that owns the network", sn.Spec.NetworkID, where))
		return reconcile.Result{}
	case errors.As(err, &notOnNetwork):
		// The facts of the subnets that are there stay useful; the condition says what is wrong.
		r.readIngress(ctx, cloud, sn, &facts)
		r.setFacts(sn, facts)
		r.setReady(sn, metav1.ConditionFalse, sharednetv1.ReasonSubnetNotOnNetwork, err.Error())
		return reconcile.Result{}
	case err != nil:
		// Keep the last known facts: a transient error must not make free
		// addresses or shares look different from what they are.
		r.setReady(sn, metav1.ConditionFalse, sharednetv1.ReasonOpenStackUnavailable, err.Error())
		return reconcile.Result{RequeueAfter: 30 * time.Second}
	}
	r.readIngress(ctx, cloud, sn, &facts)
	r.setFacts(sn, facts)
	r.setReady(sn, metav1.ConditionTrue, sharednetv1.ReasonFactsCurrent,
		fmt.Sprintf("network %s: MTU %d, %d subnet(s) read from Neutron; %s", sn.Spec.NetworkID, facts.MTU, len(facts.Subnets), policiesMessage(facts.RBACPolicies)))
	return reconcile.Result{}
}

// readIngress adds the VM-side audit to the facts: how many of the VM
// project's ports on each subnet accept traffic from the whole subnet
// (their security groups, or no port security), read once per resync for
// every attachment's report (the guardrails copy it, they do not ask).
// When the ports or rules cannot be read, the last counts are kept: an
// outage says nothing about them, and the facts the rules decide on are
// current.
func (r *SharedNetworkReconciler) readIngress(ctx context.Context, cloud networkfacts.VMProject, sn *sharednetv1.SharedNetwork, facts *sharednetv1.SharedNetworkStatus) {
	if !r.AuditVMIngress {
		return
	}
	for i := range facts.Subnets {
		if last, ok := sn.Status.Subnet(facts.Subnets[i].ID); ok {
			s := &facts.Subnets[i]
			s.VMPorts, s.AdmittingVMPorts, s.AdmittingIngressRules = last.VMPorts, last.AdmittingVMPorts, last.AdmittingIngressRules
		}
	}
	if err := networkfacts.Ingress(ctx, cloud, sn.Spec.NetworkID, facts); err != nil {
		ctrl.LoggerFrom(ctx).Info("cannot read the VM project's ports on the subnets or their security group rules; each subnet keeps its last counts", "sharedNetwork", sn.Name, "error", err.Error())
	}
}

func (r *SharedNetworkReconciler) setFacts(sn *sharednetv1.SharedNetwork, facts sharednetv1.SharedNetworkStatus) {
	sn.Status.MTU, sn.Status.Subnets, sn.Status.Shares, sn.Status.RBACPolicies = facts.MTU, facts.Subnets, facts.Shares, facts.RBACPolicies
	sn.Status.LastRefreshTime = &metav1.Time{Time: r.now()}
}

// policiesMessage says how many RBAC policies the VM project uses, or that
// its credential may not read its quota (so no attach is refused for it).
func policiesMessage(q sharednetv1.QuotaUsage) string {
	switch {
	case q.Used == nil || q.Limit == nil:
		return "the VM project's RBAC policy quota is not readable with its credential: attaches are not checked against it (rule share-quota)"
	case ptr.Deref(q.Limit, -1) < 0:
		return fmt.Sprintf("the VM project uses %d RBAC policies (no limit)", ptr.Deref(q.Used, 0))
	}
	return fmt.Sprintf("the VM project uses %d of %d RBAC policies", ptr.Deref(q.Used, 0), ptr.Deref(q.Limit, 0))
}

// publishMetrics exports the subnet gauges of every subnet both offered
// (spec) and read (status): the free addresses as last read from Neutron,
// and what the nodegroups using the subnet may still take, sized by the
// capacity rule's own consumers.SubnetConsumers and rules.Consumer.Headroom
// from the manager's cache (no OpenStack call). A subnet that left the
// SharedNetwork has no series left behind.
func (r *SharedNetworkReconciler) publishMetrics(ctx context.Context, sn *sharednetv1.SharedNetwork) {
	var out []subnetMetrics
	for _, s := range sn.Status.Subnets {
		if !slices.Contains(sn.Spec.Subnets, s.ID) {
			continue
		}
		m := subnetMetrics{subnet: s.ID, free: ptr.Deref(s.FreeAddresses, 0)}
		consumers, err := consumers.SubnetConsumers(ctx, r.Client, sn, s.ID, "")
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "cannot size the nodegroups of a shared subnet: its reserved-addresses series is left out", "sharedNetwork", sn.Name, "subnet", s.ID)
		} else {
			m.reserved = ptr.To(rules.Reserved(consumers) + sn.Spec.KeptForLoadBalancers(s.ID))
		}
		out = append(out, m)
	}
	publishSubnets(sn.Name, out)
	publishPolicies(sn.Name, &sn.Status.RBACPolicies)
}

func (r *SharedNetworkReconciler) consumers(ctx context.Context, name string) ([]sharednetv1.Consumer, error) {
	list := &sharednetv1.SharedNetworkAttachmentList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil, err
	}
	var out []sharednetv1.Consumer
	for _, a := range list.Items {
		if a.Spec.SharedNetwork == name {
			out = append(out, sharednetv1.Consumer{Namespace: a.Namespace, Cluster: a.Spec.ClusterName, MachineDeployment: a.Spec.MachineDeploymentTopology, Subnet: a.Spec.Subnet})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Cluster+"/"+out[i].MachineDeployment < out[j].Namespace+"/"+out[j].Cluster+"/"+out[j].MachineDeployment
	})
	return out, nil
}

// setReady sets the Ready condition and records an Event when it changes.
func (r *SharedNetworkReconciler) setReady(sn *sharednetv1.SharedNetwork, status metav1.ConditionStatus, reason, message string) {
	old := meta.FindStatusCondition(sn.Status.Conditions, sharednetv1.ReadyCondition)
	changed := old == nil || old.Status != status || old.Reason != reason
	meta.SetStatusCondition(&sn.Status.Conditions, metav1.Condition{
		Type: sharednetv1.ReadyCondition, Status: status, Reason: reason, Message: message, ObservedGeneration: sn.Generation,
	})
	if changed {
		eventType := corev1.EventTypeNormal
		if status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		administratorEvent(r.Recorder, r.Namespace, sn, eventType, reason, message)
	}
}

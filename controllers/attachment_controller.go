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
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/predicates"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/fairshare"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/records"
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
// MachineDeployment topology, each in a nodegroupScope; every step is
// idempotent, so a restart at any point converges without a second share
// or a second rollout.
//
// The files: attachment_controller.go (watches, which nodegroup goes
// where), attachment_scope.go (what one reconcile reads and writes once),
// attachment_attach.go (check, share, nudge), attachment_observe.go
// (rollout, load balancers, CloudFits), attachment_detach.go (rollout
// without the port, unshare, release), attachment_status.go (conditions,
// events, Ready, Paused).
type AttachmentReconciler struct {
	Client client.Client
	// Credentials opens sessions with the cluster's and the VM project's credentials.
	Credentials credentials.Clouds
	Recorder    record.EventRecorder
	// Namespace is the extension's own, where the administrator's Events
	// about SharedNetworks go; install.Namespace when empty.
	Namespace string
	// Checker is the decision service; one over Client and Credentials
	// when nil.
	Checker *preflight.Checker
	// Records says whether nobody but the extension can write attachments'
	// status now (the shipped admission policy is in place); nil: never.
	Records RecordGuard
	// Seals is the key the extension seals its share records with
	// (status.share.seal); the detach trusts a record only when its seal
	// matches, and while Records protects it. nil: no record is sealed or
	// trusted.
	Seals records.Source
	// WatchFilterValue is CAPI's --watch-filter: only Clusters (and, once
	// their Cluster is gone, attachments) with that watch label are
	// reconciled; every one when empty.
	WatchFilterValue string

	// observed holds, per attachment UID, the SharedNetwork's
	// status.lastRefreshTime its cloud observations (load balancers,
	// CloudFits, the project) were made at. An Attached nodegroup is observed
	// again when the SharedNetwork's facts are read again (each resync), not
	// on every reconcile its machines' events cause nor on every other write
	// of the SharedNetwork (its consumers, its conditions): at scale those
	// calls would grow with the events. Lost with the process: a new leader
	// observes each attachment once.
	observed sync.Map
	// networks holds a *sync.Mutex per shared network: its shares are made
	// and released one at a time (the workers reconcile Clusters at once).
	networks sync.Map
}

// lockNetwork locks the shares of network and returns the unlock.
func (r *AttachmentReconciler) lockNetwork(network string) func() {
	m, _ := r.networks.LoadOrStore(network, &sync.Mutex{})
	m.(*sync.Mutex).Lock()
	return m.(*sync.Mutex).Unlock
}

func (r *AttachmentReconciler) checker() *preflight.Checker {
	if r.Checker == nil {
		r.Checker = &preflight.Checker{Reader: r.Client, Cloud: r.Credentials}
	}
	return r.Checker
}

// SetupWithManager registers the reconciler. options.MaxConcurrentReconciles
// Clusters are reconciled at once (never one Cluster twice at once): a
// tenant whose cloud is slow holds one worker, not the others' attaches.
func (r *AttachmentReconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	r.checker() // set once, before the workers share it
	byClusterLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[clusterv1.ClusterNameLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(options).
		For(&clusterv1.Cluster{}, builder.WithPredicates(clusterChanged, predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
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
		// One tenant's Clusters (a Keystone that hangs) hold at most a share
		// of the workers; the others' attaches go on.
		Complete(&fairshare.Reconciler{Next: r, PerNamespace: fairshare.Share(options.MaxConcurrentReconciles)})
}

// clusterChanged passes the Cluster changes the attachment controller acts
// on: its spec (the variables, the topology's sizes, paused), its
// annotations (the record of a share, CAPI's paused), its deletion, the
// watch filter's label and the failure domains its nodegroups spread over.
// CAPI's status writes and other label edits decide nothing here.
var clusterChanged = predicate.Or[client.Object](
	predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
	predicate.Funcs{UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		old, now := e.ObjectOld.(*clusterv1.Cluster), e.ObjectNew.(*clusterv1.Cluster)
		return old.DeletionTimestamp.IsZero() != now.DeletionTimestamp.IsZero() ||
			old.Labels[clusterv1.WatchLabel] != now.Labels[clusterv1.WatchLabel] ||
			len(old.Status.FailureDomains) != len(now.Status.FailureDomains)
	}},
)

// Reconcile implements reconcile.Reconciler.
func (r *AttachmentReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// Each attached nodegroup asks the cluster's project: its credential is
	// opened (its Secret read) once for all of them.
	ctx = credentials.WithMemo(ctx)
	cluster, list, err := r.read(ctx, req)
	if err != nil || (cluster != nil && !watchfilter.Matches(cluster, r.WatchFilterValue)) {
		return reconcile.Result{}, err // or another instance's (--watch-filter)
	}
	byTopology, paused, errs := r.partition(ctx, cluster, list)
	// A paused Cluster (e.g. during clusterctl move) is left alone, as CAPI's
	// contract asks: no attachment is created, shared, rolled or unshared.
	if clusterPaused(cluster) {
		return reconcile.Result{}, errors.Join(errs...)
	}
	values := map[string]sharednetv1.SharedNetworkVariable{}
	if cluster != nil && cluster.DeletionTimestamp.IsZero() && cluster.Spec.Topology.IsDefined() {
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

// read is the Cluster (nil once it is gone) and its attachments: by their
// Cluster's label, which they carry a copy of, so the instance that made
// them (--watch-filter) still finds them after the Cluster is gone.
func (r *AttachmentReconciler) read(ctx context.Context, req reconcile.Request) (*clusterv1.Cluster, []sharednetv1.SharedNetworkAttachment, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		cluster = nil
	}
	list := &sharednetv1.SharedNetworkAttachmentList{}
	if err := r.Client.List(ctx, list, client.InNamespace(req.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: req.Name}); err != nil {
		return nil, nil, err
	}
	if cluster == nil {
		list.Items = slices.DeleteFunc(list.Items, func(a sharednetv1.SharedNetworkAttachment) bool {
			return !watchfilter.Matches(&a, r.WatchFilterValue)
		})
	}
	return cluster, list.Items, nil
}

// partition sorts the attachments by nodegroup, recording Paused on those
// left alone.
func (r *AttachmentReconciler) partition(ctx context.Context, cluster *clusterv1.Cluster, list []sharednetv1.SharedNetworkAttachment) (map[string]*sharednetv1.SharedNetworkAttachment, map[string]bool, []error) {
	byTopology := map[string]*sharednetv1.SharedNetworkAttachment{}
	paused := map[string]bool{}
	var errs []error
	for i := range list {
		a := &list[i]
		if c := pausedCondition(cluster, a); c.Status == metav1.ConditionTrue {
			paused[a.Spec.MachineDeploymentTopology] = true
			errs = append(errs, r.recordPaused(ctx, a, c))
			continue
		}
		byTopology[a.Spec.MachineDeploymentTopology] = a
	}
	return byTopology, paused, errs
}

func earliest(a, b reconcile.Result) reconcile.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter != 0 && b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}

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
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
)

// CredentialWebhookName is the credential webhook in the
// ValidatingWebhookConfiguration (config/webhook/manifests.yaml).
const CredentialWebhookName = "credential.sharednet.capo.io" //nolint:gosec // a webhook name, not a credential

// SizeWebhookName is the webhook that holds an attached nodegroup's
// MachineDeployment to its size (webhooks.SizeGuard), scoped as the
// credential webhook is.
const SizeWebhookName = "size.sharednet.capo.io"

// NamespaceScope keeps what the API server and CAPI call the extension for,
// with a failure policy of Fail, to the namespaces that need it, so that an
// extension outage (both replicas down, a failed upgrade, an expired
// certificate) blocks nothing elsewhere:
//
//   - the credential and size webhooks' namespaceSelector: the namespaces
//     where a cluster uses a shared network (a nodegroup with a sharedNetwork
//     value, or an attachment not yet released). Only their Secrets'
//     deletions and MachineDeployments' growth reach the extension, and an
//     instance with --namespace is never asked about another namespace. A
//     configuration without the size webhook (an older one) keeps the
//     credential webhook scoped.
//   - the deletion ExtensionConfig's namespaceSelector: the namespaces with
//     an attachment. CAPI calls BeforeClusterDelete for every Cluster that
//     ExtensionConfig admits, of any ClusterClass; a cluster without an
//     attachment has no load balancer on a shared subnet to remove first.
//
// Both select by kubernetes.io/metadata.name, which the API server sets and
// no tenant can change. Until this has run (a fresh install or upgrade) the
// shipped selectors match no namespace: nothing is blocked, and a moment
// later every namespace that needs them is in. Attachments only come and go
// while the extension runs (it creates them, their finalizers are its), so
// the selectors are right for the whole of an outage.
type NamespaceScope struct {
	Client client.Client
	// APIReader reads the two configurations (not cached: two objects).
	APIReader client.Reader
	// CredentialWebhookConfiguration is the ValidatingWebhookConfiguration
	// of the credential webhook (config/webhook/manifests.yaml).
	CredentialWebhookConfiguration string
	// DeletionExtensionConfig registers BeforeClusterDelete
	// (config/default/extensionconfig.yaml).
	DeletionExtensionConfig string
}

// rescope is how often the selectors are checked when nothing else asked.
const rescope = 5 * time.Minute

// SetupWithManager registers the controller: a Cluster created, deleted or
// whose spec changed, an attachment created or deleted, and a change to
// either configuration check the scope. The last puts right at once an
// upgrade that reapplied the shipped selectors (the running leader sees it
// before the new version starts), so the window in which an attached
// cluster could be deleted without the hook is a moment, not minutes.
func (r *NamespaceScope) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: r.CredentialWebhookConfiguration}}}
	})
	createdOrDeleted := predicate.Funcs{UpdateFunc: func(ctrlevent.UpdateEvent) bool { return false }}
	named := func(name string) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == name })
	}
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(options).
		Named("namespacescope").
		Watches(&clusterv1.Cluster{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&sharednetv1.SharedNetworkAttachment{}, one, builder.WithPredicates(createdOrDeleted)).
		// Metadata only: a change of spec moves the generation, and the
		// selectors are read uncached.
		Watches(&runtimev1.ExtensionConfig{}, one, builder.OnlyMetadata,
			builder.WithPredicates(named(r.DeletionExtensionConfig), predicate.GenerationChangedPredicate{})).
		Watches(&admissionregistrationv1.ValidatingWebhookConfiguration{}, one, builder.OnlyMetadata,
			builder.WithPredicates(named(r.CredentialWebhookConfiguration), predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *NamespaceScope) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	attached, using, err := r.namespaces(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	// Each on its own: one configuration missing leaves the other scoped.
	if err := errors.Join(r.scopeDeletionHook(ctx, attached), r.scopeCredentialWebhook(ctx, using)); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: rescope}, nil
}

func (r *NamespaceScope) scopeCredentialWebhook(ctx context.Context, namespaces []string) error {
	want := NamespacesSelector(namespaces)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: r.CredentialWebhookConfiguration}, vwc); err != nil {
		return fmt.Errorf("reading ValidatingWebhookConfiguration %s (--credential-webhook-configuration): %w", r.CredentialWebhookConfiguration, err)
	}
	if !slices.ContainsFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == CredentialWebhookName }) {
		return fmt.Errorf("ValidatingWebhookConfiguration %s has no webhook %s", r.CredentialWebhookConfiguration, CredentialWebhookName)
	}
	base := vwc.DeepCopy()
	changed := false
	for i, w := range vwc.Webhooks {
		if (w.Name == CredentialWebhookName || w.Name == SizeWebhookName) && !equality.Semantic.DeepEqual(w.NamespaceSelector, want) {
			vwc.Webhooks[i].NamespaceSelector, changed = want, true
		}
	}
	if !changed {
		return nil
	}
	if err := r.Client.Patch(ctx, vwc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("scoping webhooks %s and %s to %d namespace(s): %w", CredentialWebhookName, SizeWebhookName, len(namespaces), err)
	}
	ctrl.LoggerFrom(ctx).Info("the credential and size webhooks are scoped to the namespaces whose clusters use a shared network", "namespaces", len(namespaces))
	return nil
}

func (r *NamespaceScope) scopeDeletionHook(ctx context.Context, namespaces []string) error {
	want := NamespacesSelector(namespaces)
	ec := &runtimev1.ExtensionConfig{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: r.DeletionExtensionConfig}, ec); err != nil {
		return fmt.Errorf("reading ExtensionConfig %s (--deletion-extension-config): %w", r.DeletionExtensionConfig, err)
	}
	if equality.Semantic.DeepEqual(ec.Spec.NamespaceSelector, want) {
		return nil
	}
	base := ec.DeepCopy()
	ec.Spec.NamespaceSelector = want
	if err := r.Client.Patch(ctx, ec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("scoping ExtensionConfig %s to %d namespace(s): %w", r.DeletionExtensionConfig, len(namespaces), err)
	}
	ctrl.LoggerFrom(ctx).Info("the deletion hook is scoped to the namespaces with attachments", "namespaces", len(namespaces))
	return nil
}

// namespaces are, sorted, those with an attachment, and those with an
// attachment or a Cluster that names a SharedNetwork.
func (r *NamespaceScope) namespaces(ctx context.Context) (attached, using []string, err error) {
	withAttachments := sets.New[string]()
	attachments := &sharednetv1.SharedNetworkAttachmentList{}
	if err := r.Client.List(ctx, attachments); err != nil {
		return nil, nil, err
	}
	for _, a := range attachments.Items {
		withAttachments.Insert(a.Namespace)
	}
	out := withAttachments.Clone()
	networks := &sharednetv1.SharedNetworkList{}
	if err := r.Client.List(ctx, networks); err != nil {
		return nil, nil, err
	}
	for _, sn := range networks.Items {
		clusters := &clusterv1.ClusterList{}
		if err := r.Client.List(ctx, clusters, client.MatchingFields{consumers.SharedNetworkIndex: sn.Name}); err != nil {
			return nil, nil, err
		}
		for _, c := range clusters.Items {
			out.Insert(c.Namespace)
		}
	}
	return sets.List(withAttachments), sets.List(out), nil
}

// NamespacesSelector selects exactly namespaces; none when empty (every
// namespace has the name label, so DoesNotExist matches none).
func NamespacesSelector(namespaces []string) *metav1.LabelSelector {
	if len(namespaces) == 0 {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: namespaces}}}
}

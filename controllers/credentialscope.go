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

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
)

// CredentialWebhookName is the credential webhook in the
// ValidatingWebhookConfiguration (config/webhook/manifests.yaml).
const CredentialWebhookName = "credential.sharednet.capo.io" //nolint:gosec // a webhook name, not a credential

// CredentialWebhookScope keeps the credential webhook's namespaceSelector
// to the namespaces where a cluster uses a shared network (a nodegroup with
// a sharedNetwork value, or an attachment not yet released). Only their
// Secrets' deletions reach the extension, so an extension outage blocks
// deleting a clouds.yaml Secret there and nowhere else, and an instance
// with --namespace is never asked about another namespace. Until it has
// run (a fresh install or upgrade), the shipped selector matches no
// namespace: nothing is blocked, and a minute later every credential in use
// is kept.
type CredentialWebhookScope struct {
	Client client.Client
	// APIReader reads the webhook configuration (not cached: one object).
	APIReader client.Reader
	// Configuration is the ValidatingWebhookConfiguration's name.
	Configuration string
}

// rescope is how often the selector is checked when nothing changed (an
// upgrade that reapplied the shipped selector is put right).
const rescope = 5 * time.Minute

// SetupWithManager registers the controller: a Cluster created, deleted or
// whose spec changed, and an attachment created or deleted, check the scope.
func (r *CredentialWebhookScope) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: r.Configuration}}}
	})
	createdOrDeleted := predicate.Funcs{UpdateFunc: func(ctrlevent.UpdateEvent) bool { return false }}
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(options).
		Named("credentialwebhookscope").
		Watches(&clusterv1.Cluster{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&sharednetv1.SharedNetworkAttachment{}, one, builder.WithPredicates(createdOrDeleted)).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *CredentialWebhookScope) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	namespaces, err := r.namespaces(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	want := CredentialNamespaceSelector(namespaces)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: r.Configuration}, vwc); err != nil {
		return reconcile.Result{}, fmt.Errorf("reading ValidatingWebhookConfiguration %s (--credential-webhook-configuration): %w", r.Configuration, err)
	}
	i := slices.IndexFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == CredentialWebhookName })
	if i < 0 {
		return reconcile.Result{}, fmt.Errorf("ValidatingWebhookConfiguration %s has no webhook %s", r.Configuration, CredentialWebhookName)
	}
	if equality.Semantic.DeepEqual(vwc.Webhooks[i].NamespaceSelector, want) {
		return reconcile.Result{RequeueAfter: rescope}, nil
	}
	base := vwc.DeepCopy()
	vwc.Webhooks[i].NamespaceSelector = want
	if err := r.Client.Patch(ctx, vwc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("scoping webhook %s to %d namespace(s): %w", CredentialWebhookName, len(namespaces), err)
	}
	ctrl.LoggerFrom(ctx).Info("the credential webhook is scoped to the namespaces whose clusters use a shared network", "namespaces", len(namespaces))
	return reconcile.Result{RequeueAfter: rescope}, nil
}

// namespaces are those of the attachments and of the Clusters that name a
// SharedNetwork, sorted.
func (r *CredentialWebhookScope) namespaces(ctx context.Context) ([]string, error) {
	out := sets.New[string]()
	attachments := &sharednetv1.SharedNetworkAttachmentList{}
	if err := r.Client.List(ctx, attachments); err != nil {
		return nil, err
	}
	for _, a := range attachments.Items {
		out.Insert(a.Namespace)
	}
	networks := &sharednetv1.SharedNetworkList{}
	if err := r.Client.List(ctx, networks); err != nil {
		return nil, err
	}
	for _, sn := range networks.Items {
		clusters := &clusterv1.ClusterList{}
		if err := r.Client.List(ctx, clusters, client.MatchingFields{consumers.SharedNetworkIndex: sn.Name}); err != nil {
			return nil, err
		}
		for _, c := range clusters.Items {
			out.Insert(c.Namespace)
		}
	}
	return sets.List(out), nil
}

// CredentialNamespaceSelector selects exactly namespaces; none when empty
// (every namespace has the name label, so DoesNotExist matches none).
func CredentialNamespaceSelector(namespaces []string) *metav1.LabelSelector {
	if len(namespaces) == 0 {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: namespaces}}}
}

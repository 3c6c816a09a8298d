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
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// CredentialPath is where the credential webhook is served.
const CredentialPath = "/validate-sharednet-credential"

// CredentialGuard refuses to delete a cluster's OpenStack credential (the
// Secret its OpenStackCluster's identityRef names) while that
// OpenStackCluster exists and the cluster uses a shared network.
//
// Deleting a namespace deletes its Secrets in the first pass, long before
// CAPO has deleted the cluster's servers and ports: without the credential
// CAPO cannot delete them, the BeforeClusterDelete hook cannot delete the
// cluster's load balancers, and the share stays in the VM project (whose
// owner then cannot delete the network). Refusing the deletion makes the
// namespace controller retry it, which succeeds once the OpenStackCluster is
// gone: the namespace deletion completes and leaves nothing in the cloud.
//
// The webhook configuration sends only DELETEs of Secrets holding a
// clouds.yaml key (matchConditions), so no other Secret waits for it. It
// reads from the cache (and, for an OpenStackClusterIdentity, the API
// server, as CAPO does) and decodes only the Secret's metadata.
type CredentialGuard struct {
	Reader client.Reader
	// Identities names the Secret CAPO reads for an OpenStackCluster.
	Identities IdentityResolver
	// WatchNamespace is the manager's --namespace: a Secret of another
	// namespace is not this instance's to keep (its cache cannot answer for
	// it, and an error would block the deletion); every namespace when
	// empty.
	WatchNamespace string
}

// IdentityResolver names the Secret CAPO reads for an OpenStackCluster's
// identityRef (credentials.Source, with CAPO's own resolution).
type IdentityResolver interface {
	IdentitySecret(ctx context.Context, osc *infrav1.OpenStackCluster) (client.ObjectKey, error)
}

// NewCredentialWebhook returns the webhook to register at CredentialPath,
// for the Secrets of watchNamespace (every namespace when empty).
func NewCredentialWebhook(reader client.Reader, identities IdentityResolver, watchNamespace string) *admission.Webhook {
	return &admission.Webhook{Handler: &CredentialGuard{Reader: reader, Identities: identities, WatchNamespace: watchNamespace}}
}

// Handle implements admission.Handler.
func (g *CredentialGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete || req.Kind.Kind != "Secret" || req.Kind.Group != "" {
		return admission.Allowed("")
	}
	if g.WatchNamespace != "" && req.Namespace != g.WatchNamespace {
		return admission.Allowed("namespace " + req.Namespace + " is not watched by this instance of capo-sharednet")
	}
	// A namespace deletion deletes Secrets with DeleteCollection, whose
	// requests carry no name: the Secret's own metadata does.
	name := req.Name
	if len(req.OldObject.Raw) > 0 {
		meta := &metav1.PartialObjectMetadata{}
		if err := json.Unmarshal(req.OldObject.Raw, meta); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Secret's metadata: %w", err))
		}
		name = meta.Name
	}
	users, err := g.UsersOf(ctx, client.ObjectKey{Namespace: req.Namespace, Name: name})
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(users) == 0 {
		return admission.Allowed("")
	}
	return admission.Denied(fmt.Sprintf("Secret %s/%s is the OpenStack credential (identityRef) of %s, which use a shared network: "+
		"CAPO needs it to delete the cluster's servers and ports, and capo-sharednet to delete its load balancers on the shared subnet "+
		"and stop sharing the network. It can be deleted once the OpenStackCluster is gone: delete the Cluster first "+
		"(a namespace deletion retries it and completes by itself)", req.Namespace, name, strings.Join(users, ", ")))
}

// UsersOf lists, as "OpenStackCluster <ns>/<name> of cluster <c>", the
// OpenStackClusters whose identityRef is the Secret and whose cluster has a
// nodegroup on a shared network (a sharedNetwork value or an attachment).
func (g *CredentialGuard) UsersOf(ctx context.Context, secret client.ObjectKey) ([]string, error) {
	oscs := &infrav1.OpenStackClusterList{}
	if err := g.Reader.List(ctx, oscs, client.InNamespace(secret.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the OpenStackClusters of namespace %s: %w", secret.Namespace, err)
	}
	var users []string
	for i := range oscs.Items {
		osc := &oscs.Items[i]
		// An identity CAPO cannot resolve names no Secret CAPO could use.
		if key, err := g.Identities.IdentitySecret(ctx, osc); err != nil || key != secret {
			continue
		}
		cluster := osc.Labels[clusterv1.ClusterNameLabel]
		if cluster == "" {
			continue
		}
		uses, err := g.usesSharedNetwork(ctx, client.ObjectKey{Namespace: osc.Namespace, Name: cluster})
		if err != nil {
			return nil, err
		}
		if uses {
			users = append(users, fmt.Sprintf("OpenStackCluster %s/%s of cluster %q", osc.Namespace, osc.Name, cluster))
		}
	}
	sort.Strings(users)
	return users, nil
}

// usesSharedNetwork: the cluster has an attachment (being deleted or not),
// or its topology sets sharedNetwork on a nodegroup.
func (g *CredentialGuard) usesSharedNetwork(ctx context.Context, key client.ObjectKey) (bool, error) {
	attachments := &sharednetv1.SharedNetworkAttachmentList{}
	if err := g.Reader.List(ctx, attachments, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}); err != nil {
		return false, fmt.Errorf("listing the attachments of cluster %s: %w", key, err)
	}
	if len(attachments.Items) > 0 {
		return true, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := g.Reader.Get(ctx, key, cluster); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	groups, err := variables.Nodegroups(cluster)
	if err != nil {
		return true, nil //nolint:nilerr // an unreadable value still names a shared network
	}
	return len(groups) > 0, nil
}

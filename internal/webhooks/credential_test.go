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
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// A namespace deletion deletes the cluster's credential first; the guard
// keeps it while CAPO and the extension still need it, and only for clusters
// on a shared network.
func TestTheCredentialOfAClusterOnASharedNetworkIsKeptWhileItsOpenStackClusterExists(t *testing.T) {
	osc := func(name, cluster string, ref infrav1.OpenStackIdentityReference) *infrav1.OpenStackCluster {
		return &infrav1.OpenStackCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
			Spec:       infrav1.OpenStackClusterSpec{IdentityRef: ref},
		}
	}
	cluster := func(name string, attached bool) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}, Spec: clusterv1.ClusterSpec{
			Topology: clusterv1.Topology{Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{Class: "w", Name: "md-a"}}}}}}
		if attached {
			variables.SetOverride(c, "md-a", []byte(`{"name":"vm","subnet":""}`))
		}
		return c
	}
	attachment := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{
		Namespace: "team-a", Name: "detaching-md-a", Labels: map[string]string{clusterv1.ClusterNameLabel: "detaching"}}}
	secretRef := func(name string) infrav1.OpenStackIdentityReference {
		return infrav1.OpenStackIdentityReference{Type: "Secret", Name: name, CloudName: "openstack"}
	}

	objs := []client.Object{
		// Uses a shared network in its topology (no attachment yet).
		cluster("attached", true), osc("attached", "attached", secretRef("attached-creds")),
		// Its value is gone but its attachment is still there (a detach, or
		// a deletion, in progress).
		cluster("detaching", false), osc("detaching", "detaching", infrav1.OpenStackIdentityReference{Name: "detaching-creds", CloudName: "openstack"}), attachment,
		// No shared network: not the extension's business.
		cluster("plain", false), osc("plain", "plain", secretRef("plain-creds")),
		// A ClusterIdentity's Secret lives elsewhere (and this one does not
		// exist: CAPO could not resolve it).
		cluster("identity", true), osc("identity", "identity", infrav1.OpenStackIdentityReference{Type: "ClusterIdentity", Name: "shared-creds", CloudName: "openstack"}),
		// The Cluster is gone and so is its attachment: only CAPO remains.
		osc("orphan", "gone", secretRef("orphan-creds")),
	}
	scheme := sharednetscheme.New()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	guard := &CredentialGuard{Reader: c, Identities: &credentials.Source{Client: c, APIReader: c}}

	for _, tc := range []struct {
		name, secret string
		op           admissionv1.Operation
		collection   bool     // a DeleteCollection (a namespace deletion): the name is only in the old object
		refused      []string // substrings of the refusal; nil: allowed
	}{
		{name: "a namespace deletion (DeleteCollection: the request has no name)", secret: "attached-creds", op: admissionv1.Delete, collection: true,
			refused: []string{"Secret team-a/attached-creds", `OpenStackCluster team-a/attached of cluster "attached"`}},
		{name: "the credential of a cluster that sets sharedNetwork", secret: "attached-creds", op: admissionv1.Delete,
			refused: []string{"Secret team-a/attached-creds", `OpenStackCluster team-a/attached of cluster "attached"`, "delete the Cluster first"}},
		{name: "no type means Secret, and an attachment is enough", secret: "detaching-creds", op: admissionv1.Delete,
			refused: []string{`OpenStackCluster team-a/detaching of cluster "detaching"`}},
		{name: "a cluster without a shared network", secret: "plain-creds", op: admissionv1.Delete},
		{name: "a Secret no OpenStackCluster names", secret: "unrelated", op: admissionv1.Delete},
		{name: "a Secret named like a ClusterIdentity", secret: "shared-creds", op: admissionv1.Delete},
		{name: "an OpenStackCluster whose Cluster and attachments are gone", secret: "orphan-creds", op: admissionv1.Delete},
		{name: "an update is not a deletion", secret: "attached-creds", op: admissionv1.Update},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: tc.op, Namespace: "team-a", Name: tc.secret,
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
			}}
			old, err := json.Marshal(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: tc.secret},
				Data: map[string][]byte{"clouds.yaml": []byte("clouds: {}")}})
			if err != nil {
				t.Fatal(err)
			}
			req.OldObject.Raw = old
			if tc.collection {
				req.Name = ""
			}
			resp := guard.Handle(context.Background(), req)
			if tc.refused == nil {
				if !resp.Allowed {
					t.Fatalf("refused: %s", resp.Result.Message)
				}
				return
			}
			if resp.Allowed {
				t.Fatal("allowed, want refused")
			}
			for _, want := range tc.refused {
				if !strings.Contains(resp.Result.Message, want) {
					t.Errorf("refusal %q does not say %q", resp.Result.Message, want)
				}
			}
		})
	}
}

// An instance with --namespace keeps only the credentials of its namespace:
// its cache cannot answer for another one, and an error there would block
// the deletion of every clouds.yaml Secret of the management cluster.
func TestTheCredentialWebhookAnswersForItsWatchedNamespaceOnly(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(sharednetscheme.New()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := &client.ListOptions{}
			o.ApplyOptions(opts)
			if o.Namespace != "team-b" {
				return fmt.Errorf("unable to list: %s because of unknown namespace for the cache", o.Namespace)
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	guard := &CredentialGuard{Reader: c, Identities: &credentials.Source{Client: c, APIReader: c}, WatchNamespace: "team-b"}
	for _, ns := range []string{"team-a", "team-b"} {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Delete, Namespace: ns, Name: "creds", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
		}}
		if resp := guard.Handle(context.Background(), req); !resp.Allowed {
			t.Errorf("the deletion of Secret %s/creds (no cluster uses it) is refused: %s", ns, resp.Result.Message)
		}
	}
	unscoped := &CredentialGuard{Reader: c, Identities: guard.Identities}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete, Namespace: "team-a", Name: "creds", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
	}}
	if resp := unscoped.Handle(context.Background(), req); resp.Allowed {
		t.Error("an unscoped guard admitted a deletion it could not judge: the test's cache does not stand for a --namespace cache")
	}
}

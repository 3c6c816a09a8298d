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

package credentials

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
	"github.com/capo-sharednet/capo-sharednet/test/fakekeystone"
)

func scheme() *runtime.Scheme {
	s := sharednetscheme.New()
	return s
}

// A cluster whose clouds.yaml names a Keystone of the tenant's own (here a
// fake one on 127.0.0.1 that claims some other project's ID) is refused.
func TestVerifiedProjectRefusesAClusterOfAnotherKeystone(t *testing.T) {
	g := NewWithT(t)
	keystone := fakekeystone.Start(t, fakekeystone.Options{Project: "victim-project"})
	cred, err := openstack.CredentialFromData(map[string][]byte{openstack.CloudsSecretKey: keystone.CloudsYAML("tenant")}, "tenant Secret", "tenant")
	g.Expect(err).NotTo(HaveOccurred())
	cluster, err := openstack.NewSession(context.Background(), cred, openstack.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.ProjectID()).To(Equal("victim-project"), "the tenant's Keystone claims what it likes")

	cloud := fakecloud.New()
	vm := &fakecloud.Project{Cloud: cloud, ID: "vm-project", RegionName: "RegionOne"}
	_, err = VerifiedProject(context.Background(), cluster, vm)
	var foreign *ForeignKeystoneError
	g.Expect(errors.As(err, &foreign)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(And(ContainSubstring(keystone.URL), ContainSubstring("another Keystone")))
	g.Expect(err.Error()).NotTo(ContainSubstring(fakecloud.DefaultKeystone), "the VM project's Keystone is not the tenant's business")
	g.Expect(cloud.Calls["ProjectOfToken"]).To(BeZero(), "the tenant's token is not even sent to the VM project's Keystone")
}

func TestVerifiedProject(t *testing.T) {
	cloud := fakecloud.New()
	vm := &fakecloud.Project{Cloud: cloud, ID: "vm-project", RegionName: "RegionOne"}
	for _, tt := range []struct {
		name    string
		cluster *fakecloud.Project
		want    string
		wantErr string
	}{
		{name: "same Keystone and region, the token is for the project claimed",
			cluster: &fakecloud.Project{Cloud: cloud, ID: "cluster-project", RegionName: "RegionOne"}, want: "cluster-project"},
		{name: "same Keystone through a proxy that rewrote the project in the answer",
			cluster: &fakecloud.Project{Cloud: cloud, ID: "victim-project", TokenProject: "tenant-project", RegionName: "RegionOne"},
			wantErr: "claimed project victim-project, but the token is for another project"},
		{name: "a token Keystone says is for no project (both sides empty are not a match)",
			cluster: &fakecloud.Project{Cloud: cloud, ID: "", RegionName: "RegionOne"}, wantErr: "its token is for no project"},
		{name: "same Keystone, another region",
			cluster: &fakecloud.Project{Cloud: cloud, ID: "cluster-project", RegionName: "RegionTwo"}, wantErr: `region "RegionTwo"`},
		{name: "another Keystone",
			cluster: &fakecloud.Project{Cloud: cloud, ID: "cluster-project", KeystoneURL: "https://keystone.tenant.example/", RegionName: "RegionOne"},
			wantErr: "https://keystone.tenant.example/, another Keystone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := VerifiedProject(context.Background(), tt.cluster, vm)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// The cluster's identity is resolved by CAPO's own code: identityRef of type
// Secret or ClusterIdentity, whose namespaceSelector is enforced.
func TestIdentityIsResolvedAsCAPOResolvesIt(t *testing.T) {
	identity := &infrav1alpha1.OpenStackClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "shared-creds"},
		Spec: infrav1alpha1.OpenStackClusterIdentitySpec{
			SecretRef:         infrav1alpha1.OpenStackCredentialSecretReference{Namespace: "capo-identities", Name: "project-x"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"identity": "project-x"}},
		},
	}
	admitted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"identity": "project-x"}}}
	refused := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(identity, admitted, refused).Build()
	s := &Source{Client: c, APIReader: c}
	osc := func(namespace string, ref infrav1.OpenStackIdentityReference) *infrav1.OpenStackCluster {
		return &infrav1.OpenStackCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "c"}, Spec: infrav1.OpenStackClusterSpec{IdentityRef: ref}}
	}
	for _, tt := range []struct {
		name    string
		osc     *infrav1.OpenStackCluster
		want    client.ObjectKey
		wantErr string
	}{
		{name: "a Secret in the cluster's namespace", osc: osc("team-b", infrav1.OpenStackIdentityReference{Type: "Secret", Name: "creds", CloudName: "openstack"}),
			want: client.ObjectKey{Namespace: "team-b", Name: "creds"}},
		{name: "no type means Secret", osc: osc("team-b", infrav1.OpenStackIdentityReference{Name: "creds", CloudName: "openstack"}),
			want: client.ObjectKey{Namespace: "team-b", Name: "creds"}},
		{name: "a ClusterIdentity whose namespaceSelector admits the namespace", osc: osc("team-a", infrav1.OpenStackIdentityReference{Type: "ClusterIdentity", Name: "shared-creds", CloudName: "openstack"}),
			want: client.ObjectKey{Namespace: "capo-identities", Name: "project-x"}},
		{name: "a ClusterIdentity whose namespaceSelector does not admit it", osc: osc("team-b", infrav1.OpenStackIdentityReference{Type: "ClusterIdentity", Name: "shared-creds", CloudName: "openstack"}),
			wantErr: "namespace team-b may not use it"},
		{name: "a ClusterIdentity that does not exist", osc: osc("team-a", infrav1.OpenStackIdentityReference{Type: "ClusterIdentity", Name: "nope", CloudName: "openstack"}),
			wantErr: "nope"},
		{name: "an unknown type", osc: osc("team-a", infrav1.OpenStackIdentityReference{Type: "Magic", Name: "x", CloudName: "openstack"}),
			wantErr: "unsupported identity type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := s.IdentitySecret(context.Background(), tt.osc)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

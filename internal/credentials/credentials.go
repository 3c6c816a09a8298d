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

// Package credentials finds the OpenStack credential of a cluster (CAPO's
// identityRef on its OpenStackCluster, resolved by CAPO's own code) and of a
// SharedNetwork (its VM-project Secret in the extension's namespace), and
// opens cached sessions with them. Secrets are read where they are and never
// copied.
package credentials

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/scope"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// Clouds opens the clouds the extension acts in. Callers hold this interface:
// *Source is the real one, tests use an in-memory fake.
type Clouds interface {
	// ForCluster opens the cluster's project with the cluster's own credential.
	ForCluster(ctx context.Context, cluster *clusterv1.Cluster) (openstack.ClusterCloud, *infrav1.OpenStackCluster, error)
	// ForSharedNetwork opens the VM project with the SharedNetwork's credential.
	ForSharedNetwork(ctx context.Context, sn *sharednetv1.SharedNetwork) (openstack.VMCloud, error)
}

// Source reads credentials and opens sessions.
type Source struct {
	// Client reads cached objects (SharedNetworks, OpenStackClusters,
	// Namespaces and the Secrets of the extension's namespace).
	Client client.Reader
	// APIReader reads what is not cached: a cluster's identity Secret and
	// CAPO's OpenStackClusterIdentities.
	APIReader client.Reader
	// Namespace holds the VM-project Secrets.
	Namespace string
	Sessions  *openstack.Sessions
}

var _ Clouds = &Source{}

// ForCluster implements Clouds.
func (s *Source) ForCluster(ctx context.Context, cluster *clusterv1.Cluster) (openstack.ClusterCloud, *infrav1.OpenStackCluster, error) {
	osc := &infrav1.OpenStackCluster{}
	if cluster.Spec.InfrastructureRef.Name == "" {
		return nil, nil, fmt.Errorf("cluster %s/%s has no OpenStackCluster yet", cluster.Namespace, cluster.Name)
	}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Spec.InfrastructureRef.Name}, osc); err != nil {
		return nil, nil, fmt.Errorf("reading the OpenStackCluster of cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	secret, err := s.IdentitySecret(ctx, osc)
	if err != nil {
		return nil, osc, err
	}
	id := osc.Spec.IdentityRef
	session, err := s.open(ctx, s.APIReader, secret, id.CloudName, id.Region)
	return session, osc, err
}

// errResolved stops CAPO's scope factory once it has chosen the Secret.
var errResolved = errors.New("identity resolved")

// IdentitySecret is the Secret CAPO would read for the OpenStackCluster's
// identityRef. It is CAPO's own resolution (scope.NewClientScopeFromObject:
// identity types Secret and ClusterIdentity, the ClusterIdentity's
// namespaceSelector enforced), stopped just before it authenticates: the
// connection is ours, with timeouts and the caller's context.
func (s *Source) IdentitySecret(ctx context.Context, osc *infrav1.OpenStackCluster) (client.ObjectKey, error) {
	resolver := &secretResolver{reader: s.APIReader, cache: s.Client}
	_, err := scope.NewFactory(0).NewClientScopeFromObject(ctx, resolver, nil, logr.Discard(), osc)
	if errors.Is(err, errResolved) && resolver.secret != nil {
		return *resolver.secret, nil
	}
	var denied *scope.IdentityAccessDeniedError
	if errors.As(err, &denied) {
		return client.ObjectKey{}, fmt.Errorf("OpenStackCluster %s/%s: identityRef %s %q: namespace %s may not use it (the OpenStackClusterIdentity's namespaceSelector does not select it); ask the administrator",
			osc.Namespace, osc.Name, osc.Spec.IdentityRef.Type, osc.Spec.IdentityRef.Name, osc.Namespace)
	}
	if err == nil {
		err = errors.New("identityRef names no Secret")
	}
	return client.ObjectKey{}, fmt.Errorf("OpenStackCluster %s/%s: resolving identityRef %s %q: %w", osc.Namespace, osc.Name, osc.Spec.IdentityRef.Type, osc.Spec.IdentityRef.Name, err)
}

// secretResolver lets CAPO read what it needs to choose a Secret, and
// records the Secret instead of reading it. Namespaces come from the cache
// (ForCluster runs on every reconcile and admission); the
// OpenStackClusterIdentity, which is not cached, from the API server.
type secretResolver struct {
	client.Client // nil: CAPO only calls Get
	reader        client.Reader
	cache         client.Reader
	secret        *client.ObjectKey
}

func (r *secretResolver) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch obj.(type) {
	case *corev1.Secret:
		r.secret = &key
		return errResolved
	case *corev1.Namespace:
		return r.cache.Get(ctx, key, obj, opts...)
	}
	return r.reader.Get(ctx, key, obj, opts...)
}

// ForSharedNetwork implements Clouds.
func (s *Source) ForSharedNetwork(ctx context.Context, sn *sharednetv1.SharedNetwork) (openstack.VMCloud, error) {
	return s.open(ctx, s.Client, client.ObjectKey{Namespace: s.Namespace, Name: sn.Spec.Identity.SecretName}, sn.Spec.Identity.CloudName, "")
}

func (s *Source) open(ctx context.Context, reader client.Reader, key client.ObjectKey, cloudName, region string) (*openstack.Session, error) {
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("reading credential Secret %s: %w", key, err)
	}
	cred, err := openstack.CredentialFromData(secret.Data, fmt.Sprintf("Secret %s, cloud %q", key, cloudName), cloudName)
	if err != nil {
		return nil, fmt.Errorf("%w; fix the Secret", err)
	}
	cred.Region = region
	// Everything that identifies the credential: a changed Secret, another
	// cloud or region never gets another credential's session.
	id := fmt.Sprintf("%s/%s/%s", secret.UID, cloudName, region)
	return s.Sessions.Get(ctx, id, secret.ResourceVersion, cred)
}

// SameCloud says whether the cluster's credential authenticates at the VM
// project's Keystone and region, asking nobody: a *ForeignKeystoneError
// when not. A cluster of another cloud is sent no request (its catalog's
// URLs are the tenant's choice).
func SameCloud(cluster, vm openstack.Identity) error {
	if cluster.Keystone() != vm.Keystone() {
		return &ForeignKeystoneError{Why: fmt.Sprintf("it authenticates at %s, another Keystone", cluster.Keystone())}
	}
	if cluster.Region() != vm.Region() {
		return &ForeignKeystoneError{Why: fmt.Sprintf("it uses region %q, another region", cluster.Region())}
	}
	return nil
}

// ClusterOnCloudOf opens the cluster's project only when its credential
// authenticates at sn's Keystone and region: the URLs its catalog gives
// (Octavia, Neutron) then come from the administrator's Keystone, never
// from one the tenant runs, before the extension sends them anything. A
// *ForeignKeystoneError when not; an error opening the VM project's cloud
// is wrapped in CannotVouchError (its text is not the tenant's to read).
func ClusterOnCloudOf(ctx context.Context, clouds Clouds, cluster *clusterv1.Cluster, sn *sharednetv1.SharedNetwork) (openstack.ClusterCloud, error) {
	cloud, _, err := clouds.ForCluster(ctx, cluster)
	if err != nil {
		return nil, err
	}
	vm, err := clouds.ForSharedNetwork(ctx, sn)
	if err != nil {
		return nil, &CannotVouchError{SharedNetwork: sn.Name, Err: err}
	}
	if err := SameCloud(cloud, vm); err != nil {
		return nil, err
	}
	return cloud, nil
}

// CannotVouchError says the SharedNetwork's cloud could not be opened to compare
// the cluster's with it. Error() names only the SharedNetwork; Err (the VM
// project's answer) is for the administrator's logs.
type CannotVouchError struct {
	SharedNetwork string
	Err           error
}

func (e *CannotVouchError) Error() string {
	return fmt.Sprintf("cannot verify the cluster's cloud with SharedNetwork %s's right now", e.SharedNetwork)
}

func (e *CannotVouchError) Unwrap() error { return e.Err }

// ForeignKeystoneError refuses a share: the cluster's credential does not
// belong to the SharedNetwork's cloud, or its Keystone does not vouch for the
// project it claims. Its text names only the cluster's own side.
type ForeignKeystoneError struct{ Why string }

func (e *ForeignKeystoneError) Error() string {
	return "the cluster's credential cannot be vouched for by the shared network's cloud: " + e.Why +
		"; a network is only shared with a project of the same cloud (the same Keystone and region as the VM project): fix the cluster's clouds.yaml, or ask the administrator"
}

// Voucher is the VM project's side of VerifiedProject: where it
// authenticated, and its Keystone's answer about a token.
type Voucher interface {
	openstack.Identity
	ProjectOfToken(ctx context.Context, token string) (string, error)
}

// VerifiedProject is the cluster's project as the SharedNetwork's own
// Keystone vouches for it. The cluster's clouds.yaml is the tenant's: it may
// name a Keystone of their own that answers with any project ID. So the
// cluster must authenticate at the VM project's Keystone and region, and its
// token is validated there again over the VM credential's connection (the
// administrator's URL and CA), which reports the project it is really for.
func VerifiedProject(ctx context.Context, cluster openstack.Identity, vm Voucher) (string, error) {
	if err := SameCloud(cluster, vm); err != nil {
		return "", err
	}
	project, err := vm.ProjectOfToken(ctx, cluster.Token())
	if err != nil {
		return "", &ForeignKeystoneError{Why: "its token was not accepted by the shared network's Keystone (" + err.Error() + ")"}
	}
	if project == "" {
		return "", &ForeignKeystoneError{Why: "the shared network's Keystone says its token is for no project"}
	}
	if project != cluster.ProjectID() {
		return "", &ForeignKeystoneError{Why: fmt.Sprintf("its authentication claimed project %s, but the token is for another project", cluster.ProjectID())}
	}
	return project, nil
}

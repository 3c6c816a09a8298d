// Package credentials finds the OpenStack credential of a cluster (CAPO's
// identityRef on its OpenStackCluster) and of a SharedNetwork (its VM-project
// Secret in the extension's namespace), and opens cached sessions with them.
// Secrets are read where they are and never copied.
package credentials

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// Source reads credentials and opens sessions.
type Source struct {
	// Client reads cached objects (SharedNetworks, OpenStackClusters and the
	// Secrets of the extension's namespace).
	Client client.Reader
	// APIReader reads a cluster's identity Secret, which is not cached.
	APIReader client.Reader
	// Namespace holds the VM-project Secrets.
	Namespace string
	Sessions  *openstack.Sessions
}

// ForCluster opens a session with the cluster's own credential.
func (s *Source) ForCluster(ctx context.Context, cluster *clusterv1.Cluster) (*openstack.Session, *infrav1.OpenStackCluster, error) {
	osc := &infrav1.OpenStackCluster{}
	if cluster.Spec.InfrastructureRef.Name == "" {
		return nil, nil, fmt.Errorf("cluster %s/%s has no OpenStackCluster yet", cluster.Namespace, cluster.Name)
	}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Spec.InfrastructureRef.Name}, osc); err != nil {
		return nil, nil, fmt.Errorf("reading the OpenStackCluster of cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	id := osc.Spec.IdentityRef
	session, err := s.open(ctx, s.APIReader, cluster.Namespace, id.Name, id.CloudName)
	return session, osc, err
}

// ForSharedNetwork opens a session with the VM project's credential.
func (s *Source) ForSharedNetwork(ctx context.Context, sn *sharednetv1.SharedNetwork) (*openstack.Session, error) {
	return s.open(ctx, s.Client, s.Namespace, sn.Spec.Identity.SecretName, sn.Spec.Identity.CloudName)
}

func (s *Source) open(ctx context.Context, reader client.Reader, namespace, name, cloudName string) (*openstack.Session, error) {
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, fmt.Errorf("reading credential Secret %s/%s: %w", namespace, name, err)
	}
	cred, err := openstack.CredentialFromData(secret.Data, fmt.Sprintf("Secret %s/%s, cloud %q", namespace, name, cloudName), cloudName)
	if err != nil {
		return nil, err
	}
	return s.Sessions.Get(ctx, string(secret.UID)+"/"+cloudName, secret.ResourceVersion, cred)
}

// Package attachments reads "this nodegroup's attachment": the one
// SharedNetworkAttachment of a (cluster, MachineDeployment topology) pair.
// Every reader goes through Get, so none mistakes another pair's attachment
// for its own (AttachmentName joins the two names with a dash, and
// "demo-md" + "a" gives the same name as "demo" + "md-a").
package attachments

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// Get returns the attachment of nodegroup topology of cluster namespace/name;
// nil when it has none, or when the object of that name belongs to another
// pair.
func Get(ctx context.Context, reader client.Reader, namespace, cluster, topology string) (*sharednetv1.SharedNetworkAttachment, error) {
	attachment := &sharednetv1.SharedNetworkAttachment{}
	key := client.ObjectKey{Namespace: namespace, Name: sharednetv1.AttachmentName(cluster, topology)} // AttachmentKey without a Cluster object
	if err := reader.Get(ctx, key, attachment); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading SharedNetworkAttachment %s: %w", key, err)
	}
	if attachment.Spec.ClusterName != cluster || attachment.Spec.MachineDeploymentTopology != topology {
		return nil, nil
	}
	return attachment, nil
}

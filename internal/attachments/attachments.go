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

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
*/package fakeinformers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
)

// Table is a consumers.Table fed, through Watch, with every Cluster and
// SharedNetworkAttachment c holds, both informers synced: what the
// manager's table is once its cache has read everything.
func Table(ctx context.Context, c client.Reader) (*consumers.Table, *Informers, error) {
	table, informers := consumers.NewTable(), New()
	if err := table.Watch(ctx, informers); err != nil {
		return nil, nil, err
	}
	clusters := &clusterv1.ClusterList{}
	attachments := &sharednetv1.SharedNetworkAttachmentList{}
	if err := c.List(ctx, clusters); err != nil {
		return nil, nil, err
	}
	if err := c.List(ctx, attachments); err != nil {
		return nil, nil, err
	}
	var objs []client.Object
	for i := range clusters.Items {
		objs = append(objs, &clusters.Items[i])
	}
	for i := range attachments.Items {
		objs = append(objs, &attachments.Items[i])
	}
	informers.Synced(objs...)
	informers.Delivered(&clusterv1.Cluster{})
	informers.Delivered(&sharednetv1.SharedNetworkAttachment{})
	return table, informers, nil
}

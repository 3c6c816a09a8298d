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

package consumers

import (
	"context"
	"fmt"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// SharedNetworkIndex is the field index on Clusters by the SharedNetworks
// their nodegroups' `sharedNetwork` values name (SharedNetworksOf).
// SubnetConsumers lists the Clusters of one SharedNetwork through it rather
// than every Cluster of the management cluster, so the capacity rule costs
// the same with one cluster as with hundreds. Every reader SubnetConsumers
// is given must have it: the manager's cache (AddIndex, before it starts)
// or controller-runtime's fake client
// (WithIndex(&clusterv1.Cluster{}, SharedNetworkIndex, SharedNetworksOf)).
const SharedNetworkIndex = "sharednet.capo.io/shared-network"

// SharedNetworksOf is SharedNetworkIndex's client.IndexerFunc: the names,
// each once and sorted, that the Cluster's nodegroups' `sharedNetwork`
// values name. A Cluster with a value that cannot be decoded has none: it
// is nobody's consumer (the value rule refuses it at admission).
func SharedNetworksOf(obj client.Object) []string {
	cluster, ok := obj.(*clusterv1.Cluster)
	if !ok {
		return nil
	}
	values, err := variables.Nodegroups(cluster)
	if err != nil {
		return nil
	}
	var names []string
	seen := map[string]bool{}
	for _, value := range values {
		if value.Name != "" && !seen[value.Name] {
			seen[value.Name] = true
			names = append(names, value.Name)
		}
	}
	sort.Strings(names)
	return names
}

// AddIndex registers SharedNetworkIndex with a manager's field indexer
// (mgr.GetFieldIndexer()). It must be called before the manager's cache
// starts; internal/manager's NewManager does.
func AddIndex(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &clusterv1.Cluster{}, SharedNetworkIndex, SharedNetworksOf); err != nil {
		return fmt.Errorf("indexing Clusters by SharedNetwork: %w", err)
	}
	return nil
}

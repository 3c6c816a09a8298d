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
	"sync"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

type memoKey struct{}

// memo holds the Clusters' credentials opened in one context.
type memo struct {
	mu     sync.Mutex
	opened map[memoEntryKey]opened
}

type memoEntryKey struct {
	clouds                        Clouds
	namespace, name, infraCluster string
}

type opened struct {
	cloud openstack.ClusterCloud
	osc   *infrav1.OpenStackCluster
}

// WithMemo returns a context in which In opens each Cluster's credential
// once. One reconcile of a Cluster asks its project several questions (for
// each attached nodegroup: its load balancers, its network's MTU, whether
// its Keystone still vouches for its project), and each opening reads the
// credential's Secret from the API server (tenant Secrets are not cached):
// three reads per nodegroup after every SharedNetwork resync, thousands at
// management-cluster scale. The context lives as long as the reconcile: a
// changed Secret is read again by the next one.
func WithMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &memo{opened: map[memoEntryKey]opened{}})
}

// In is clouds, opening each Cluster's credential once within a WithMemo
// context (and as clouds does elsewhere).
func In(ctx context.Context, clouds Clouds) Clouds {
	m, ok := ctx.Value(memoKey{}).(*memo)
	if !ok {
		return clouds
	}
	return &memoized{Clouds: clouds, memo: m}
}

type memoized struct {
	Clouds
	memo *memo
}

// ForCluster implements Clouds. A failure is not kept: the next use tries
// again.
func (m *memoized) ForCluster(ctx context.Context, cluster *clusterv1.Cluster) (openstack.ClusterCloud, *infrav1.OpenStackCluster, error) {
	key := memoEntryKey{clouds: m.Clouds, namespace: cluster.Namespace, name: cluster.Name, infraCluster: cluster.Spec.InfrastructureRef.Name}
	m.memo.mu.Lock()
	o, ok := m.memo.opened[key]
	m.memo.mu.Unlock()
	if ok {
		return o.cloud, o.osc.DeepCopy(), nil
	}
	cloud, osc, err := m.Clouds.ForCluster(ctx, cluster)
	if err != nil {
		return cloud, osc, err
	}
	m.memo.mu.Lock()
	m.memo.opened[key] = opened{cloud: cloud, osc: osc.DeepCopy()}
	m.memo.mu.Unlock()
	return cloud, osc, nil
}

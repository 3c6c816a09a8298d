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

package ccm

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// Attributed are the load balancers on a subnet split by whose they are
// for one cluster; other clusters' load balancers are in neither list.
type Attributed struct {
	// Own are the cluster's (its CCM made them, alone or with another
	// cluster's Service), with the Service each was made for.
	Own []sharednetv1.LoadBalancer
	// Unattributed are those no CCM made: reported, never deleted.
	Unattributed []sharednetv1.LoadBalancer
}

// LoadBalancersOn asks Octavia, in the cluster's project, for the load
// balancers on subnet and attributes them (LoadBalancersOf).
func LoadBalancersOn(ctx context.Context, octavia openstack.LoadBalancers, cluster *clusterv1.Cluster, subnet string) (Attributed, error) {
	found, err := octavia.OnSubnet(ctx, subnet)
	if err != nil {
		return Attributed{}, err
	}
	return LoadBalancersOf(cluster, found), nil
}

// LoadBalancersOf splits found by whose they are for the cluster.
func LoadBalancersOf(cluster *clusterv1.Cluster, found []openstack.LoadBalancer) Attributed {
	var out Attributed
	name := ClusterName(cluster.Namespace, cluster.Name)
	for _, lb := range found {
		switch OwnerOf(name, lb.Name, lb.Tags) {
		case ThisCluster, Shared:
			// The Service from the name, or from this cluster's tag on a
			// load balancer another cluster made.
			service := ""
			for _, s := range append([]string{lb.Name}, lb.Tags...) {
				if service = ServiceOf(name, s); service != "" {
					break
				}
			}
			out.Own = append(out.Own, sharednetv1.LoadBalancer{ID: lb.ID, Name: lb.Name, VIP: lb.VIP, Service: service})
		case Unattributed:
			out.Unattributed = append(out.Unattributed, sharednetv1.LoadBalancer{ID: lb.ID, Name: lb.Name, VIP: lb.VIP})
		}
	}
	return out
}

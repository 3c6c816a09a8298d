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
*/package ccm

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

func TestClusterLoadBalancersAreOnlyThisClusters(t *testing.T) {
	g := NewWithT(t)
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"}}
	mine := LoadBalancerName(ClusterName("team-a", "demo"), "shop", "web")
	twin := LoadBalancerName(ClusterName("team-b", "demo"), "shop", "web")
	found := []openstack.LoadBalancer{
		{ID: "1", Name: mine, VIP: "172.16.5.10", Tags: []string{mine}},
		{ID: "2", Name: twin, VIP: "172.16.5.11", Tags: []string{twin}},
		{ID: "3", Name: "by-hand", VIP: "172.16.5.12"},
		{ID: "4", Name: twin, VIP: "172.16.5.13", Tags: []string{twin, LoadBalancerName(ClusterName("team-a", "demo"), "shop", "api")}},
	}
	got := LoadBalancersOf(cluster, found)
	own, unattributed := got.Own, got.Unattributed
	g.Expect(own).To(Equal([]sharednetv1.LoadBalancer{
		{ID: "1", Name: mine, VIP: "172.16.5.10", Service: "shop/web"},
		{ID: "4", Name: twin, VIP: "172.16.5.13", Service: "shop/api"},
	}), "its own, and one a Service of it shares with another cluster; never the twin's alone")
	g.Expect(unattributed).To(Equal([]sharednetv1.LoadBalancer{{ID: "3", Name: "by-hand", VIP: "172.16.5.12"}}))
}

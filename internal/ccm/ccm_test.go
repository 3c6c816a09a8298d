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
	"strings"
	"testing"
)

func TestTwoClustersNamedAlikeInTwoNamespacesAreToldApart(t *testing.T) {
	a, b := ClusterName("team-a", "demo"), ClusterName("team-b", "demo")
	if a == b {
		t.Fatalf("both Clusters got CCM name %q", a)
	}
	lbA := LoadBalancerName(a, "default", "web")
	if got := OwnerOf(a, lbA, []string{lbA}); got != ThisCluster {
		t.Errorf("cluster team-a/demo: its own load balancer %q is %v, want ThisCluster", lbA, got)
	}
	if got := OwnerOf(b, lbA, []string{lbA}); got != OtherCluster {
		t.Errorf("cluster team-b/demo: team-a's load balancer %q is %v, want OtherCluster", lbA, got)
	}
}

func TestOwnerOf(t *testing.T) {
	me := ClusterName("ns", "c")
	tests := []struct {
		name string
		lb   string
		tags []string
		want Owner
	}{
		{"named and tagged by this cluster's CCM", "kube_service_ns.c_default_web", []string{"kube_service_ns.c_default_web"}, ThisCluster},
		{"named by this cluster's CCM, Octavia without tags", "kube_service_ns.c_default_web", nil, ThisCluster},
		{"a cluster whose name starts like this one's is another cluster", "kube_service_ns.c-2_default_web", nil, OtherCluster},
		{"the CCM's default cluster name is nobody we know", "kube_service_kubernetes_default_web", nil, OtherCluster},
		{"made by hand", "my-lb", nil, Unattributed},
		{"no name at all", "", nil, Unattributed},
		{"another cluster's load balancer that a Service of this cluster also uses", "kube_service_ns.d_default_web", []string{"kube_service_ns.d_default_web", "kube_service_ns.c_default_api"}, Shared},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OwnerOf(me, tt.lb, tt.tags); got != tt.want {
				t.Errorf("OwnerOf(%q, %q, %v) = %v, want %v", me, tt.lb, tt.tags, got, tt.want)
			}
		})
	}
}

func TestServiceOf(t *testing.T) {
	me := ClusterName("ns", "c")
	for lb, want := range map[string]string{
		LoadBalancerName(me, "shop", "web"):           "shop/web",
		LoadBalancerName(me, "envoy-gateway", "gw-1"): "envoy-gateway/gw-1",
		"kube_service_ns.d_shop_web":                  "",
		"kube_service_ns.c_shop":                      "",
		"my-lb":                                       "",
	} {
		if got := ServiceOf(me, lb); got != want {
			t.Errorf("ServiceOf(%q, %q) = %q, want %q", me, lb, got, want)
		}
	}
}

func TestLoadBalancerNameIsCutAsTheCCMCutsIt(t *testing.T) {
	long := strings.Repeat("s", 63)
	name := LoadBalancerName(ClusterName(long, long), long, long)
	if len(name) != 255 {
		t.Fatalf("len = %d, want 255 (Octavia's limit, cloud-provider-openstack's Sprintf255)", len(name))
	}
	if got := OwnerOf(ClusterName(long, long), name, nil); got != ThisCluster {
		t.Errorf("a cut name still belongs to its cluster, got %v", got)
	}
}

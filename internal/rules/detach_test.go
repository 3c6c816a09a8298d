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

package rules

import (
	"testing"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

func TestDetach(t *testing.T) {
	tests := []struct {
		name     string
		lbs      []sharednetv1.LoadBalancer
		wantRule string
		wantIn   []string
	}{
		{name: "no load balancer on the shared subnet: the nodegroup can be detached"},
		{name: "a Service's load balancer blocks the detach",
			lbs:      []sharednetv1.LoadBalancer{{Name: "kube_service_prod_shop_web", ID: "lb-1", VIP: "172.16.5.10", Service: "shop/web"}},
			wantRule: RuleDetach, wantIn: []string{"sub-1", "kube_service_prod_shop_web (VIP 172.16.5.10, Service shop/web)", "delete these Services and Gateways first, then remove the variable again"}},
		{name: "every load balancer is listed, by ID when it has no name",
			lbs:      []sharednetv1.LoadBalancer{{Name: "lb-a", VIP: "172.16.5.10"}, {ID: "0b1c", VIP: "fd00::5", Service: "envoy-gateway-system/gw"}},
			wantRule: RuleDetach, wantIn: []string{"2 load balancer(s)", "lb-a (VIP 172.16.5.10)", "0b1c (VIP fd00::5, Service envoy-gateway-system/gw)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, Detach("sub-1", tt.lbs), tt.wantRule, tt.wantIn...)
		})
	}
}

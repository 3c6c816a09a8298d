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

package guardrails

import "testing"

func TestParamsOnShared(t *testing.T) {
	p := Params{SharedSubnets: []string{"s1"}, SharedNetworks: []string{"n1"}, SharedPorts: []string{"p1"}, ClusterSubnet: "c"}
	for _, tt := range []struct {
		annotations map[string]string
		want        bool
	}{
		{map[string]string{SubnetAnnotation: "s1"}, true},
		{map[string]string{NetworkAnnotation: "n1"}, true},
		{map[string]string{PortAnnotation: "p1"}, true},
		{map[string]string{SubnetAnnotation: "s2", NetworkAnnotation: "n2", PortAnnotation: "p2"}, false},
		{map[string]string{MemberSubnetAnnotation: "s1"}, false},
		{nil, false},
	} {
		if got := p.OnShared(tt.annotations); got != tt.want {
			t.Errorf("OnShared(%v) = %v, want %v", tt.annotations, got, tt.want)
		}
	}
}

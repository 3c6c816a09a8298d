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
	"errors"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

func TestEvaluateJudgesEveryFactOnce(t *testing.T) {
	granted := func() *Network {
		return &Network{Name: "vm", NamespaceSelector: &metav1.LabelSelector{}, AllowedSubnets: []string{"sub-1"}, MTU: 1450,
			Subnets: []Subnet{{ID: "sub-1", CIDR: netip.MustParsePrefix("172.16.5.0/24"), FreeAddresses: 10}}}
	}
	attach := func(change func(*Nodegroup)) Nodegroup {
		n := Nodegroup{Name: "md-a", Check: CheckAttach, Namespace: "team-a", Cluster: "demo", SharedNetwork: "vm", Network: granted(),
			Ranges: &ClusterRanges{}, ClusterMTU: 1450, Size: &Size{Replicas: ptr[int32](3)}}
		change(&n)
		return n
	}
	tests := []struct {
		name  string
		facts Facts
		want  []string // "<nodegroup>/<rule>", in order
	}{
		{name: "every fact holds", facts: Facts{Version: "v1.35.0", Nodegroups: []Nodegroup{attach(func(*Nodegroup) {})}}},
		{name: "a value for the whole cluster", facts: Facts{ClusterLevel: true}, want: []string{"/" + RuleOneNodegroup}},
		{name: "moved to another network in one step: nothing else is judged",
			facts: Facts{Version: "v1.30.0", Nodegroups: []Nodegroup{{Name: "md-a", Check: CheckAttach, SharedNetwork: "vm", AttachedTo: "old"}}},
			want:  []string{"md-a/" + RuleOneNetwork}},
		{name: "an unknown network, with the version also too old",
			facts: Facts{Version: "v1.30.0", Nodegroups: []Nodegroup{attach(func(n *Nodegroup) { n.Network = nil })}},
			want:  []string{"md-a/" + RuleVersion, "md-a/" + RuleGranted}},
		{name: "an ungranted network: nothing else of it is the owner's business",
			facts: Facts{Version: "v1.35.0", Nodegroups: []Nodegroup{attach(func(n *Nodegroup) {
				n.Network.NamespaceSelector = nil
				n.ClusterMTU = 1500
				n.ForeignCloud = "another Keystone"
			})}},
			want: []string{"md-a/" + RuleGranted}},
		{name: "the shared network's facts could not be read: refused, nothing else judged",
			facts: Facts{Version: "v1.35.0", Nodegroups: []Nodegroup{attach(func(n *Nodegroup) {
				n.CannotVerify = "the facts are not current"
				n.Network.NamespaceSelector = nil
			})}},
			want: []string{"md-a/" + RuleCannotVerify}},
		{name: "the cluster's project could not be asked: refused, with what was judged without it",
			facts: Facts{Version: "v1.35.0", Nodegroups: []Nodegroup{attach(func(n *Nodegroup) {
				n.Ranges = &ClusterRanges{Pods: []netip.Prefix{netip.MustParsePrefix("172.16.0.0/16")}}
				n.CannotAsk = "the port quota cannot be read"
				n.Size.Replicas = ptr[int32](20)
			})}},
			want: []string{"md-a/" + RuleOverlap, "md-a/" + RuleCannotVerify}},
		{name: "a value that is not {name, subnet}: nothing else is judged",
			facts: Facts{ValueError: "variable sharedNetwork: {} is not {name, subnet}", ClusterLevel: true},
			want:  []string{"/" + RuleValue}},
		{name: "overlap, MTU, another cloud and capacity are all reported at once",
			facts: Facts{Version: "v1.35.0", Nodegroups: []Nodegroup{attach(func(n *Nodegroup) {
				n.Ranges = &ClusterRanges{Pods: []netip.Prefix{netip.MustParsePrefix("172.16.0.0/16")}}
				n.ClusterMTU = 1500
				n.ForeignCloud = "another Keystone"
				n.Size.Replicas = ptr[int32](20)
			})}},
			want: []string{"md-a/" + RuleOverlap, "md-a/" + RuleSameCloud, "md-a/" + RuleMTU, "md-a/" + RuleCapacity}},
		{name: "facts not gathered are not judged (ValidateTopology's static scope)",
			facts: Facts{Version: "v1.35.0", Nodegroups: []Nodegroup{attach(func(n *Nodegroup) { n.ClusterMTU, n.Size = 0, nil })}}},
		{name: "growth after the grant was revoked: no more nodes",
			facts: Facts{Nodegroups: []Nodegroup{attach(func(n *Nodegroup) {
				n.Check = CheckGrow
				n.Network.NamespaceSelector = nil
			})}},
			want: []string{"md-a/" + RuleGranted}},
		{name: "growth to a size that is not a node count",
			facts: Facts{Nodegroups: []Nodegroup{attach(func(n *Nodegroup) {
				n.Check = CheckGrow
				n.Size.Annotations = map[string]string{"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "ten"}
			})}},
			want: []string{"md-a/" + RuleCapacity}},
		{name: "the controller's fit check judges the cloud, not the grant (its own condition says that)",
			facts: Facts{Nodegroups: []Nodegroup{attach(func(n *Nodegroup) {
				n.Check = CheckFit
				n.Network.NamespaceSelector = nil
				n.ClusterMTU = 1500
			})}},
			want: []string{"md-a/" + RuleMTU}},
		{name: "an attach of a nodegroup whose size nothing bounds (kubectl scale would grow it unchecked)",
			facts: Facts{Version: "v1.35.0", Nodegroups: []Nodegroup{attach(func(n *Nodegroup) { n.Size.Replicas = nil })}},
			want:  []string{"md-a/" + RuleCapacity}},
		{name: "an attach bounded by the autoscaler's max size",
			facts: Facts{Version: "v1.35.0", Nodegroups: []Nodegroup{attach(func(n *Nodegroup) {
				n.Size.Replicas = nil
				n.Size.Annotations = map[string]string{"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5"}
			})}}},
		{name: "a nodegroup attached without replicas is not refused later for it, only its growth is",
			facts: Facts{Nodegroups: []Nodegroup{
				attach(func(n *Nodegroup) { n.Check, n.Size.Replicas = CheckFit, nil }),
				attach(func(n *Nodegroup) { n.Name, n.Check, n.Size.Replicas = "md-b", CheckGrow, nil }),
			}},
			want: []string{"md-b/" + RuleCapacity}},
		{name: "detach with this cluster's load balancer on the subnet",
			facts: Facts{Nodegroups: []Nodegroup{{Name: "md-b", Check: CheckDetach, DetachSubnet: "sub-1",
				LoadBalancers: []sharednetv1.LoadBalancer{{ID: "lb-1", Name: "kube_service_x", VIP: "172.16.5.9"}}}}},
			want: []string{"md-b/" + RuleDetach}},
		{name: "detach when the cluster's load balancers cannot be listed: refused, not admitted unchecked",
			facts: Facts{Nodegroups: []Nodegroup{{Name: "md-b", Check: CheckDetach, DetachSubnet: "sub-1", CannotAsk: "Octavia did not answer"}}},
			want:  []string{"md-b/" + RuleCannotVerify}},
		{name: "detach of a cluster whose credential is of another cloud: its Octavia's answer is not believed",
			facts: Facts{Nodegroups: []Nodegroup{{Name: "md-b", Check: CheckDetach, DetachSubnet: "sub-1", ForeignCloud: "it authenticates at another Keystone"}}},
			want:  []string{"md-b/" + RuleSameCloud}},
		{name: "a version change of a cluster with attached nodegroups",
			facts: Facts{Version: "v1.34.2", AttachedWhileVersionChanges: []string{"md-a", "md-b"}}, want: []string{"/" + RuleVersion}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, v := range Evaluate(tt.facts) {
				got = append(got, v.Nodegroup+"/"+v.Rule)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("Evaluate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRefusalNamesEveryViolationOnItsOwnLine(t *testing.T) {
	if err := Refusal(nil).Err(); err != nil {
		t.Fatalf("an empty refusal is no error, got %v", err)
	}
	text := Refusal{{Rule: RuleOneNodegroup, Message: "move it"}, {Rule: RuleMTU, Message: "1450 vs 1500", Nodegroup: "md-a"}}.Error()
	want := "sharedNetwork refused, nothing was changed:\n- one-nodegroup: move it\n- MachineDeployment topology \"md-a\": mtu: 1450 vs 1500"
	if text != want {
		t.Errorf("Refusal text:\n%s\nwant:\n%s", text, want)
	}
}

func TestRefusalTellsWhatKindOfRefusalItIs(t *testing.T) {
	r := Refusal{{Rule: RuleCannotVerify, Message: "quota unreadable"}}
	if !r.OnlyCannotVerify() || r.Has(RuleMTU) {
		t.Errorf("a refusal of unread facts only: OnlyCannotVerify=%v Has(mtu)=%v", r.OnlyCannotVerify(), r.Has(RuleMTU))
	}
	r = append(r, &Violation{Rule: RuleSameCloud, Message: "another Keystone"})
	var v *Violation
	if r.OnlyCannotVerify() || !r.Has(RuleSameCloud) || !errors.As(error(r), &v) {
		t.Errorf("a refusal with a broken rule: OnlyCannotVerify=%v Has(same-cloud)=%v errors.As=%v", r.OnlyCannotVerify(), r.Has(RuleSameCloud), v != nil)
	}
}

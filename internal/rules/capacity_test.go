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
	"strings"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func ptr[T any](v T) *T { return &v }

func TestMaxSize(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		replicas    *int32
		want        int
		wantErr     string
	}{
		{name: "the autoscaler's max size wins over replicas", annotations: map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "10"}, replicas: ptr[int32](3), want: 10},
		{name: "replicas without the autoscaler", replicas: ptr[int32](3), want: 3},
		{name: "zero replicas", replicas: ptr[int32](0), want: 0},
		{name: "neither counts as one node", want: 1},
		{name: "other annotations are ignored", annotations: map[string]string{"foo": "bar"}, replicas: ptr[int32](2), want: 2},
		{name: "a bad annotation is an error naming it", annotations: map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "ten"}, replicas: ptr[int32](3),
			wantErr: clusterv1.AutoscalerMaxSizeAnnotation + `="ten"`},
		{name: "a negative annotation is an error", annotations: map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "-1"}, wantErr: `"-1"`},
		// Parsed as int64 and summed, this would wrap to a negative need and pass.
		{name: "a max size beyond int32 is refused, not wrapped", annotations: map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "9223372036854775807"},
			wantErr: `"9223372036854775807" is not a node count; set it to a whole number from 0 to 2147483647`},
		{name: "the largest int32 is a size", annotations: map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "2147483647"}, want: 2147483647},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MaxSize(tt.annotations, tt.replicas)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want error containing %q, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("MaxSize = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestConsumerNeed(t *testing.T) {
	tests := []struct {
		c              Consumer
		need, headroom int
	}{
		// One address per node at maximum size, plus one per availability zone.
		{Consumer{MaxSize: 5, Zones: 3}, 8, 8},
		{Consumer{MaxSize: 5, Zones: 0}, 6, 6}, // no zone counts as one
		{Consumer{MaxSize: 5, Zones: 1, Attached: 4}, 6, 2},
		{Consumer{MaxSize: 2, Zones: 1, Attached: 7}, 3, 0}, // scaled down: never negative
	}
	for _, tt := range tests {
		if got := tt.c.Need(); got != tt.need {
			t.Errorf("%+v Need() = %d, want %d", tt.c, got, tt.need)
		}
		if got := tt.c.Headroom(); got != tt.headroom {
			t.Errorf("%+v Headroom() = %d, want %d", tt.c, got, tt.headroom)
		}
	}
}

func TestZones(t *testing.T) {
	tests := []struct {
		name          string
		failureDomain string
		cluster       int
		want          int
	}{
		{"a nodegroup pinned to one failure domain uses one zone", "az-1", 3, 1},
		{"a nodegroup without one spreads over the cluster's failure domains", "", 3, 3},
		{"a cluster that reports no failure domain is one zone", "", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Zones(tt.failureDomain, tt.cluster); got != tt.want {
				t.Errorf("Zones(%q, %d) = %d, want %d", tt.failureDomain, tt.cluster, got, tt.want)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	newMD := Consumer{Name: "team-a/prod/md-a", MaxSize: 10, Zones: 3} // needs 13
	others := []Consumer{
		{Name: "team-a/prod/md-b", MaxSize: 5, Zones: 1, Attached: 4},  // still reserves 2
		{Name: "team-b/stage/md-0", MaxSize: 3, Zones: 2, Attached: 0}, // reserves 5
		{Name: "team-c/old/md-x", MaxSize: 1, Zones: 1, Attached: 9},   // reserves 0
	}
	tests := []struct {
		name     string
		in       CapacityInput
		wantRule string
		wantIn   []string
	}{
		{name: "room for the nodegroup at max size plus one per zone: free == needed passes",
			in: CapacityInput{Subnet: "sub-1", FreeAddresses: 13, New: newMD}},
		{name: "one address less is refused",
			in:       CapacityInput{Subnet: "sub-1", FreeAddresses: 12, New: newMD},
			wantRule: RuleCapacity, wantIn: []string{"sub-1", "12 free", "needs 13", "max size 10 + 3 availability zone(s)", "larger subnet or allocation pool (1 more", "lower the nodegroup's max size"}},
		{name: "several consumers share one subnet: room for all passes",
			in: CapacityInput{Subnet: "sub-1", FreeAddresses: 20, New: newMD, Others: others}},
		{name: "several consumers share one subnet: the others' headroom counts",
			in:       CapacityInput{Subnet: "sub-1", FreeAddresses: 19, New: newMD, Others: others},
			wantRule: RuleCapacity, wantIn: []string{"19 free", "needs 13", "reserve 7", "team-a/prod/md-b holds 4 and may take 2 more", "5 by nodegroups of other namespaces"}},
		{name: "the autoscaler's max size, not replicas, is what counts",
			in: func() CapacityInput {
				maxSize, _ := MaxSize(map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "20"}, ptr[int32](2))
				return CapacityInput{Subnet: "sub-1", FreeAddresses: 10, New: Consumer{Name: "ns/c/md", MaxSize: maxSize, Zones: 1}}
			}(),
			wantRule: RuleCapacity, wantIn: []string{"needs 21", "max size 20"}},
		{name: "a re-check counts only what the nodegroup does not hold yet",
			in: CapacityInput{Subnet: "sub-1", FreeAddresses: 3, New: Consumer{Name: "ns/c/md", MaxSize: 10, Zones: 3, Attached: 10}}},
		{name: "addresses kept for load balancers: room for all passes",
			in: CapacityInput{Subnet: "sub-1", FreeAddresses: 24, KeptForLoadBalancers: 4, New: newMD, Others: others}},
		{name: "addresses kept for load balancers are not the nodegroups'",
			in:       CapacityInput{Subnet: "sub-1", FreeAddresses: 23, KeptForLoadBalancers: 4, New: newMD, Others: others},
			wantRule: RuleCapacity, wantIn: []string{"23 free", "needs 13", "reserve 7", "and 4 kept for load balancers", "(1 more addresses)"}},
		{name: "the cluster project's port quota is enough",
			in: CapacityInput{Subnet: "sub-1", FreeAddresses: 100, New: newMD, PortQuotaFree: ptr(13)}},
		{name: "the cluster project's port quota is too small",
			in:       CapacityInput{Subnet: "sub-1", FreeAddresses: 100, New: newMD, PortQuotaFree: ptr(12)},
			wantRule: RuleCapacity, wantIn: []string{"port quota", "12 more ports", "needs 13"}},
		{name: "the largest max size a nodegroup may have is compared, not wrapped",
			in: func() CapacityInput {
				maxSize, _ := MaxSize(map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "2147483647"}, nil)
				return CapacityInput{Subnet: "sub-1", FreeAddresses: 250, New: Consumer{Name: "ns/c/md", MaxSize: maxSize, Zones: 3}, Others: []Consumer{{Name: "ns/d/md", MaxSize: maxSize, Zones: 3}}}
			}(),
			wantRule: RuleCapacity, wantIn: []string{"250 free", "needs 2147483650"}},
		{name: "an unknown port quota is not checked",
			in: CapacityInput{Subnet: "sub-1", FreeAddresses: 13, New: newMD}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, Capacity(tt.in), tt.wantRule, tt.wantIn...)
		})
	}
}

// The refusal names the tenant's own other nodegroups, in one order, and
// only counts what other namespaces' nodegroups reserve.
func TestCapacityRefusalNamesTheOthersInOneOrder(t *testing.T) {
	others := []Consumer{{Name: "team-b/stage/md-0", MaxSize: 3}, {Name: "team-a/prod/md-b", MaxSize: 5}, {Name: "team-c/old/md-x", MaxSize: 1}}
	in := CapacityInput{Subnet: "sub-1", FreeAddresses: 5, New: Consumer{Name: "team-a/prod/md-a", MaxSize: 2}, Others: others}
	want := Capacity(in).Message
	reversed := CapacityInput{Subnet: "sub-1", FreeAddresses: 5, New: in.New, Others: []Consumer{others[2], others[1], others[0]}}
	if got := Capacity(reversed).Message; got != want {
		t.Errorf("the consumers gathered in another order give another refusal:\n%s\n%s", got, want)
	}
	if !strings.Contains(want, "(team-a/prod/md-b holds 0 and may take 6 more, 6 by nodegroups of other namespaces)") {
		t.Errorf("the tenant's own nodegroups are not named, or other namespaces' not counted: %s", want)
	}
	for _, other := range []string{"team-b/", "stage/", "team-c/", "old/"} {
		if strings.Contains(want, other) {
			t.Errorf("the refusal names %q of another namespace: %s", other, want)
		}
	}
	if others[0].Name != "team-b/stage/md-0" {
		t.Errorf("the refusal reordered its caller's consumers: %v", others)
	}
}

func TestSizedNamesTheFieldAndTheFix(t *testing.T) {
	v := Sized(nil, nil)
	if v == nil {
		t.Fatal("a nodegroup with neither replicas nor an autoscaler max size was not refused")
	}
	for _, want := range []string{"replicas", clusterv1.AutoscalerMaxSizeAnnotation, "set replicas on the nodegroup", "min-size and max-size"} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("%q does not say %q", v.Message, want)
		}
	}
	if v.Rule != RuleCapacity || v.Field != "replicas" {
		t.Errorf("rule %s field %s", v.Rule, v.Field)
	}
	if Sized(nil, ptr[int32](0)) != nil || Sized(map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "3"}, nil) != nil {
		t.Error("a bounded nodegroup was refused")
	}
}

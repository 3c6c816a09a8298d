package rules

import (
	"strings"
	"testing"
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
		{name: "the autoscaler's max size wins over replicas", annotations: map[string]string{AutoscalerMaxSizeAnnotation: "10"}, replicas: ptr[int32](3), want: 10},
		{name: "replicas without the autoscaler", replicas: ptr[int32](3), want: 3},
		{name: "zero replicas", replicas: ptr[int32](0), want: 0},
		{name: "neither counts as one node", want: 1},
		{name: "other annotations are ignored", annotations: map[string]string{"foo": "bar"}, replicas: ptr[int32](2), want: 2},
		{name: "a bad annotation is an error naming it", annotations: map[string]string{AutoscalerMaxSizeAnnotation: "ten"}, replicas: ptr[int32](3),
			wantErr: AutoscalerMaxSizeAnnotation + `="ten"`},
		{name: "a negative annotation is an error", annotations: map[string]string{AutoscalerMaxSizeAnnotation: "-1"}, wantErr: `"-1"`},
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
			wantRule: RuleCapacity, wantIn: []string{"19 free", "needs 13", "reserve 7", "team-a/prod/md-b: 2", "team-b/stage/md-0: 5"}},
		{name: "the autoscaler's max size, not replicas, is what counts",
			in: func() CapacityInput {
				maxSize, _ := MaxSize(map[string]string{AutoscalerMaxSizeAnnotation: "20"}, ptr[int32](2))
				return CapacityInput{Subnet: "sub-1", FreeAddresses: 10, New: Consumer{Name: "ns/c/md", MaxSize: maxSize, Zones: 1}}
			}(),
			wantRule: RuleCapacity, wantIn: []string{"needs 21", "max size 20"}},
		{name: "a re-check counts only what the nodegroup does not hold yet",
			in: CapacityInput{Subnet: "sub-1", FreeAddresses: 3, New: Consumer{Name: "ns/c/md", MaxSize: 10, Zones: 3, Attached: 10}}},
		{name: "the cluster project's port quota is enough",
			in: CapacityInput{Subnet: "sub-1", FreeAddresses: 100, New: newMD, PortQuotaFree: ptr(13)}},
		{name: "the cluster project's port quota is too small",
			in:       CapacityInput{Subnet: "sub-1", FreeAddresses: 100, New: newMD, PortQuotaFree: ptr(12)},
			wantRule: RuleCapacity, wantIn: []string{"port quota", "12 more ports", "needs 13"}},
		{name: "an unknown port quota is not checked",
			in: CapacityInput{Subnet: "sub-1", FreeAddresses: 13, New: newMD}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, Capacity(tt.in), tt.wantRule, tt.wantIn...)
		})
	}
}

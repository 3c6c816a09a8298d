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

package classpatches

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// worst is a class, with the Cluster's variables, that a tenant can write
// to make one evaluation take the most memory it can in one way.
type worst struct {
	name  string
	patch clusterv1.ClusterClassPatch
	vars  map[string]string
	want  string // what the error names
}

func worstClasses() []worst {
	const mib = `(repeat 1000000 "x")`
	value := func(text string) clusterv1.ClusterClassPatch {
		return patch("worst", "", templated("/spec/template/spec/tags", text))
	}
	// Each operation repeats a variable of 1 MB.
	repeated := patch("worst", "", clusterv1.JSONPatch{Op: "add", Path: "/spec/template/spec/tags", ValueFrom: &clusterv1.JSONPatchValue{Variable: "net"}})
	repeated.Definitions[0].JSONPatches = slices.Repeat(repeated.Definitions[0].JSONPatches, 100)
	bomb := "a0: &a0 [x,x,x,x,x,x,x,x,x,x]\n"
	for i := 1; i < 10; i++ {
		bomb += "a" + string(rune('0'+i)) + ": [" + strings.Repeat("*a"+string(rune('0'+i-1))+",", 9) + "*a" + string(rune('0'+i-1)) + "]\n"
		bomb = strings.Replace(bomb, "a"+string(rune('0'+i))+": [", "a"+string(rune('0'+i))+": &a"+string(rune('0'+i))+" [", 1)
	}
	kept := ""
	for i := range 70 { // 70 MB held in variables, where there is room for 8
		kept += "{{$v" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + " := repeat 1000000 \"x\"}}"
	}
	return []worst{
		{"split, empty separator", value(`{{split "" ` + mib + `}}`), nil, "split would build 1000000 elements"},
		{"splitList, empty separator", value(`{{splitList "" ` + mib + `}}`), nil, "splitList would build 1000000 elements"},
		{"splitn, empty separator", value(`{{splitn "" 2000000 ` + mib + `}}`), nil, "splitn would build 1000000 elements"},
		{"regexSplit, empty expression", value(`{{regexSplit "" ` + mib + ` -1}}`), nil, "regexSplit would build more than 10000 elements"},
		{"regexFindAll, empty expression", value(`{{regexFindAll "" ` + mib + ` -1}}`), nil, "regexFindAll would build more than 10000 elements"},
		{"regexMatch, Unicode classes", value(`{{regexMatch (repeat 341 "\\pL") ""}}`), nil, "regexMatch would compile to about"},
		{"fromJson, 2 bytes a value", value(`{{fromJson (print "[" (repeat 400000 "0,") "0]")}}`), nil, "fromJson would decode up to 800003 values"},
		{"toJson, 6 bytes a byte", value(`{{toJson (repeat 1000000 "\x00")}}`), nil, "toJson would build up to"},
		{"js, 6 bytes a byte", value(`{{js (repeat 1000000 "<")}}`), nil, "js would build up to"},
		{"printf, 5 bytes a byte", value(`{{printf "% #x" ` + mib + `}}`), nil, "printf would build up to"},
		{"semverCompare, 1||1||…", value(`{{semverCompare (repeat 300000 "1||") "1.0.0"}}`), nil, "semverCompare would parse 900005 bytes"},
		{"divf, 1,400 operands", value(`{{divf 1` + strings.Repeat(" 1e-300", 1400) + `}}`), nil, "divf would take 1401 operands"},
		{"values held in variables", value(kept), nil, "template functions and decoded values took more than"},
		{"a template parsed to 80 times its text", value(strings.Repeat("{{.}}", 200_000)), nil, "the template is 1000000 bytes, more than 10240"},
		{"YAML aliases", value(bomb), nil, "the template's YAML has an alias"},
		{"YAML of 2 bytes a value", value(`[{{repeat 400000 "0,"}}0]`), nil, "the template's YAML may decode to 800003 values"},
		{"a Cluster variable of 2 bytes a value", value("[]"), map[string]string{"net": "[" + strings.Repeat("0,", 600_000) + "0]"},
			"spec.topology.variables[net]: stopped: the value may decode to 1200003 values"},
		{"a variable of 1 MB in 100 operations", repeated, map[string]string{"net": `"` + strings.Repeat("x", 1_000_000) + `"`},
			"the OpenStackClusterTemplate may be over 1572864 bytes of JSON"},
	}
}

// heapBudget is what the evaluations may add to the heap, garbage not yet
// collected included: a few MB each, MaxConcurrentEvaluations at once. And
// each may allocate allocBudget on average, the 1 MB arguments included: a
// sample can miss a peak, the count of all allocations cannot.
const (
	heapBudget  = 64 << 20
	allocBudget = 4 << 20
)

// 50 evaluations of the worst classes, 5 asking at once, are all refused,
// by the bound each names, and the heap never grows by heapBudget.
func TestTheWorstEvaluationsStayWithinAHeapBudget(t *testing.T) {
	classes := worstClasses()
	type job struct {
		w       worst
		cc      *clusterv1.ClusterClass
		cluster *clusterv1.Cluster
	}
	jobs := make(chan job, 50)
	for i := range cap(jobs) {
		w := classes[i%len(classes)]
		cc, _ := class(w.patch)
		jobs <- job{w, cc, cluster(w.vars)}
	}
	close(jobs)
	_, tmpl := class()

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	sampled := make(chan struct{})
	ctx, stop := context.WithCancel(context.Background())
	go func() { // HeapAlloc counts garbage until the GC frees it
		defer close(sampled)
		var m runtime.MemStats
		for ctx.Err() == nil {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				_, err := DesiredInfraCluster(context.Background(), j.cc, tmpl, j.cluster)
				if !errors.Is(err, ErrBounded) || !strings.Contains(err.Error(), j.w.want) {
					t.Errorf("%s: err = %.300v, want ErrBounded naming %q", j.w.name, err, j.w.want)
				}
			}
		}()
	}
	wg.Wait()
	stop()
	<-sampled
	var end runtime.MemStats
	runtime.ReadMemStats(&end)
	grew := peak.Load() - min(base.HeapAlloc, peak.Load())
	t.Logf("heap: %d MiB before, grew by at most %d MiB; %d MiB allocated over the 50 evaluations",
		base.HeapAlloc>>20, grew>>20, (end.TotalAlloc-base.TotalAlloc)>>20)
	if grew > heapBudget {
		t.Errorf("the heap grew by %d MiB, over the budget of %d MiB", grew>>20, heapBudget>>20)
	}
	if allocated := end.TotalAlloc - base.TotalAlloc; allocated > uint64(cap(jobs)*allocBudget) {
		t.Errorf("the evaluations allocated %d MiB, over %d MiB each", allocated>>20, allocBudget>>20)
	}
}

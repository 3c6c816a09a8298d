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

package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"

	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// rssBudget is issue 15's target for the manager of a management cluster
// of 500 Clusters x 4 nodegroups.
const rssBudget = 256 << 20

// report is what memory.json holds for make bench.
type report struct {
	Clusters        int            `json:"clusters"`
	Nodegroups      int            `json:"nodegroupsPerCluster"`
	Objects         map[string]int `json:"objects"`
	WriteSeconds    float64        `json:"writeSeconds"`
	Baseline        measurement    `json:"baseline"`
	Loaded          measurement    `json:"loaded"`
	PeakRSSRatio    float64        `json:"peakRSSRatio"`
	HeapInuseRatio  float64        `json:"heapInuseRatio"`
	PeakRSSBudget   uint64         `json:"peakRSSBudgetBytes"`
	WithinRSSBudget bool           `json:"withinPeakRSSBudget"`
}

// TestManagerMemoryAt500ClustersOf4Nodegroups runs the manager binary twice
// against one API server: before the management cluster's objects exist
// (baseline) and once 500 Clusters of 4 nodegroups (each with its
// MachineDeployment, Machine, OpenStackMachine and OpenStackMachineTemplate),
// 1000 attachments and 4 SharedNetworks are there; it reports both peak
// RSS and Go heap, their ratio, and fails only when the peak RSS exceeds
// the 256 MiB budget. No OpenStack answers: every credential names a closed
// port of 127.0.0.1 (a call fails at once), and the SharedNetworks' facts
// are written as just read, so their controller calls nothing.
func TestManagerMemoryAt500ClustersOf4Nodegroups(t *testing.T) {
	testenv.SkipIfShort(t, "it builds the manager and writes 10,000 objects to a kube-apiserver")
	if !optedIn() {
		t.Skipf("set %s=1 to measure the manager's memory at 500 Clusters x 4 nodegroups (about 5 minutes; make bench does)", optIn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	bin := managerBinary(ctx, t)

	baseline := runManager(ctx, t, bin, "baseline")
	logMeasurement(t, baseline)

	w := &scaleWorld{closedPort: freePort(t), now: metav1.Now()}
	counts := Counts{}
	began := time.Now()
	step := func(what string, f func(context.Context) error) {
		t.Helper()
		s := time.Now()
		if err := f(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %s", what, time.Since(s).Round(100*time.Millisecond))
	}
	step("namespaces and ClusterClasses", func(ctx context.Context) error { return w.createNamespacesAndClasses(ctx, counts) })
	// CAPI's controllers would reconcile the Clusters' topologies (and
	// fight over the nodegroups written here); its webhooks keep running.
	step("stopping CAPI", func(context.Context) error { return env.StopCAPI() })
	step("SharedNetworks", func(ctx context.Context) error { return w.createSharedNetworks(ctx, counts) })
	step("Clusters and nodegroups", func(ctx context.Context) error { return w.createClusters(ctx, counts) })
	step("SharedNetwork facts", w.writeSharedNetworkStatus)
	written := time.Since(began)
	total := 0
	for _, n := range counts {
		total += n
	}
	t.Logf("wrote %d objects in %s: %s", total, written.Round(time.Second), countsText(counts))

	// What the manager writes in that steady state: nothing, when the
	// objects are written as its controllers would have left them.
	kinds := map[string]func() client.ObjectList{
		"Cluster":                 func() client.ObjectList { return &clusterv1.ClusterList{} },
		"SharedNetwork":           func() client.ObjectList { return &sharednetv1.SharedNetworkList{} },
		"SharedNetworkAttachment": func() client.ObjectList { return &sharednetv1.SharedNetworkAttachmentList{} },
	}
	before := map[string]map[string]client.Object{}
	for kind, list := range kinds {
		objs, err := snapshot(ctx, list())
		if err != nil {
			t.Fatal(err)
		}
		before[kind] = objs
	}
	loaded := runManager(ctx, t, bin, "500x4")
	loaded.Rewritten = map[string]int{}
	for kind, list := range kinds {
		after, err := snapshot(ctx, list())
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range slices.Sorted(maps.Keys(after)) {
			was, now := before[kind][key], after[key]
			if was != nil && was.GetResourceVersion() == now.GetResourceVersion() {
				continue
			}
			loaded.Rewritten[kind]++
			if loaded.Rewritten[kind] <= 3 { // what it wrote, for the first few
				wasJSON, _ := json.Marshal(was)
				nowJSON, _ := json.Marshal(now)
				t.Logf("%s %s rewritten;\nbefore: %s\nafter:  %s", kind, key, wasJSON, nowJSON)
			}
		}
	}
	logMeasurement(t, loaded)
	for kind, n := range loaded.Rewritten {
		t.Errorf("the manager rewrote %d %s objects written in their steady state (what it wrote is logged above)", n, kind)
	}

	r := report{
		Clusters: namespaces * clustersPerNamespace, Nodegroups: len(nodegroups), Objects: counts, WriteSeconds: written.Seconds(),
		Baseline: baseline, Loaded: loaded,
		PeakRSSRatio:   float64(loaded.PeakRSS) / float64(baseline.PeakRSS),
		HeapInuseRatio: float64(loaded.HeapInuse) / float64(baseline.HeapInuse),
		PeakRSSBudget:  rssBudget, WithinRSSBudget: loaded.PeakRSS <= rssBudget,
	}
	summary := fmt.Sprintf("manager memory, %d Clusters x %d nodegroups (%d objects)\n"+
		"%-10s %12s %12s %12s\n%-10s %12s %12s %12s\n%-10s %12s %12s %12s\n%-10s %11.2fx %11.2fx\n"+
		"budget: peak RSS <= %s (%s)\n",
		r.Clusters, r.Nodegroups, total,
		"run", "peak RSS", "RSS", "live heap",
		"baseline", mib(baseline.PeakRSS), mib(baseline.RSS), mib(baseline.HeapInuse),
		"500x4", mib(loaded.PeakRSS), mib(loaded.RSS), mib(loaded.HeapInuse),
		"ratio", r.PeakRSSRatio, r.HeapInuseRatio,
		mib(rssBudget), map[bool]string{true: "met", false: "NOT met"}[r.WithinRSSBudget])
	t.Log("\n" + summary)
	dir := artifactsDir(t)
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"memory.json": append(raw, '\n'), "memory.txt": []byte(summary)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("figures in %s", filepath.Join(dir, "memory.txt"))
	if !r.WithinRSSBudget {
		t.Errorf("the manager's peak RSS with %d Clusters x %d nodegroups is %s, over the budget of %s", r.Clusters, r.Nodegroups, mib(loaded.PeakRSS), mib(rssBudget))
	}
}

func logMeasurement(t *testing.T, m measurement) {
	t.Helper()
	t.Logf("%s: peak RSS %s, RSS %s, live heap %s (in use before a GC %s); workers started after %s, queues empty after %s; log %d lines, %d with an error; reconciles %v, errors %v; objects rewritten %v (%s)",
		m.Phase, mib(m.PeakRSS), mib(m.RSS), mib(m.HeapInuse), mib(m.HeapInuseBeforeGC), m.Startup.Round(100*time.Millisecond), m.Settled.Round(100*time.Millisecond),
		m.LogLines, m.LogErrors, m.Reconciles, m.ReconcileErrors, m.Rewritten, m.Log)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func countsText(c Counts) string {
	kinds := make([]string, 0, len(c))
	for k := range c {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", c[k], k))
	}
	return strings.Join(parts, ", ")
}

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
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"

	"github.com/capo-sharednet/capo-sharednet/test/loopback"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// rssBudget is the target for the manager's peak RSS at a size: issue
// 15's 256 MiB up to 500 Clusters x 4 nodegroups, issue 29's 384 MiB up to
// 2,000.
func rssBudget(clusters int) uint64 {
	if clusters <= 500 {
		return 256 << 20
	}
	return 384 << 20
}

// sizesVar lists the sizes measured, in Clusters of 4 nodegroups
// (multiples of clustersPerNamespace, ascending): make bench measures 500,
// make bench-scale the curve.
const sizesVar = "CAPO_SHAREDNET_SCALE_CLUSTERS"

// sizes are the sizes of sizesVar, 500 when it is unset.
func sizes() ([]int, error) {
	raw := os.Getenv(sizesVar)
	if raw == "" {
		return []int{500}, nil
	}
	var out []int
	for _, f := range strings.Split(raw, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n%clustersPerNamespace != 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("%s=%q: %q is not a size; give ascending multiples of %d, e.g. %s=100,500,1000,2000", sizesVar, raw, f, clustersPerNamespace, sizesVar)
		}
		out = append(out, n)
	}
	return out, nil
}

// point is one size of the curve.
type point struct {
	Clusters        int            `json:"clusters"`
	Objects         int            `json:"objects"`
	Loaded          measurement    `json:"loaded"`
	PeakRSSRatio    float64        `json:"peakRSSRatio"`
	HeapInuseRatio  float64        `json:"heapInuseRatio"`
	PeakRSSBudget   uint64         `json:"peakRSSBudgetBytes"`
	WithinRSSBudget bool           `json:"withinPeakRSSBudget"`
	Counts          map[string]int `json:"objectsByKind"`
}

// report is what memory.json holds for make bench and hack/benchplot.
type report struct {
	Nodegroups   int         `json:"nodegroupsPerCluster"`
	WriteSeconds float64     `json:"writeSeconds"`
	Baseline     measurement `json:"baseline"`
	Points       []point     `json:"points"`
	// SlopeMiBPerCluster is the peak RSS's growth per Cluster between the
	// smallest and the largest size.
	SlopeMiBPerCluster float64 `json:"slopeMiBPerCluster,omitempty"`
}

// TestManagerMemoryAtScale runs the manager binary against one API server:
// once before the management cluster's objects exist (baseline), then once
// at each size of sizesVar (500 by default), the objects written up to it:
// Clusters of 4 nodegroups (each with its MachineDeployment, Machine,
// OpenStackMachine and OpenStackMachineTemplate), 2 attachments per Cluster
// over 4 SharedNetworks. It reports peak RSS and live heap at each size,
// and fails when a peak RSS exceeds its budget or the manager rewrites an
// object written in its steady state. No OpenStack answers: every
// credential names a closed port of 127.0.0.1 (a call fails at once), and
// the SharedNetworks' facts are written as just read, so their controller
// calls nothing.
func TestManagerMemoryAtScale(t *testing.T) {
	testenv.SkipIfShort(t, "it builds the manager and writes 10,000 objects or more to a kube-apiserver")
	if !optedIn() {
		t.Skipf("set %s=1 to measure the manager's memory at 500 Clusters x 4 nodegroups (about 5 minutes; make bench does), and %s for other sizes (make bench-scale)", optIn, sizesVar)
	}
	want, err := sizes()
	if err != nil {
		t.Fatal(err)
	}
	largest := want[len(want)-1]
	// About 2 minutes per 500 Clusters written, and a manager run per size.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(8+largest/100+4*len(want))*time.Minute+time.Duration(sumOf(want))*settlePerCluster)
	defer cancel()
	bin := managerBinary(ctx, t)

	baseline := runManager(ctx, t, bin, "baseline", 0)
	logMeasurement(t, baseline)

	w := &scaleWorld{closedPort: loopback.Port(t), now: metav1.Now()}
	counts := Counts{}
	var written time.Duration
	step := func(what string, f func(context.Context) error) {
		t.Helper()
		s := time.Now()
		if err := f(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		written += time.Since(s)
		t.Logf("%s: %s", what, time.Since(s).Round(100*time.Millisecond))
	}
	step("namespaces and ClusterClasses", func(ctx context.Context) error {
		return w.createNamespacesAndClasses(ctx, counts, largest/clustersPerNamespace)
	})
	// CAPI's controllers would reconcile the Clusters' topologies (and
	// fight over the nodegroups written here); its webhooks keep running.
	step("stopping CAPI", func(context.Context) error { return env.StopCAPI() })
	step("SharedNetworks", func(ctx context.Context) error { return w.createSharedNetworks(ctx, counts) })

	r := report{Nodegroups: len(nodegroups), Baseline: baseline}
	done := 0 // namespaces written
	for _, clusters := range want {
		namespaces := clusters / clustersPerNamespace
		step(fmt.Sprintf("Clusters and nodegroups up to %d", clusters), func(ctx context.Context) error {
			return w.createClusters(ctx, counts, done, namespaces)
		})
		step("SharedNetwork facts", func(ctx context.Context) error { return w.writeSharedNetworkStatus(ctx, namespaces) })
		done = namespaces
		p := measureAt(ctx, t, bin, clusters, counts)
		p.PeakRSSRatio = float64(p.Loaded.PeakRSS) / float64(baseline.PeakRSS)
		p.HeapInuseRatio = float64(p.Loaded.HeapInuse) / float64(baseline.HeapInuse)
		r.Points = append(r.Points, p)
	}
	r.WriteSeconds = written.Seconds()
	if first, last := r.Points[0], r.Points[len(r.Points)-1]; last.Clusters > first.Clusters {
		r.SlopeMiBPerCluster = (float64(last.Loaded.PeakRSS) - float64(first.Loaded.PeakRSS)) / (1 << 20) / float64(last.Clusters-first.Clusters)
	}

	summary := fmt.Sprintf("manager memory, Clusters x %d nodegroups (baseline: the manager on an empty API server; each run with the Go soft limit it sets itself in a container limited to the budget)\n%-9s %8s %12s %12s %12s %10s %20s %9s %9s %s\n",
		len(nodegroups), "clusters", "objects", "peak RSS", "RSS", "live heap", "peak/base", "budget", "rewritten", "settled", "OpenStack requests (first look at each attachment)")
	summary += fmt.Sprintf("%-9s %8d %12s %12s %12s\n", "baseline", 0, mib(baseline.PeakRSS), mib(baseline.RSS), mib(baseline.HeapInuse))
	for _, p := range r.Points {
		summary += fmt.Sprintf("%-9d %8d %12s %12s %12s %9.2fx %20s %9d %8.0fs %d\n", p.Clusters, p.Objects, mib(p.Loaded.PeakRSS), mib(p.Loaded.RSS), mib(p.Loaded.HeapInuse),
			p.PeakRSSRatio, "<= "+mib(p.PeakRSSBudget)+map[bool]string{true: "", false: " NOT met"}[p.WithinRSSBudget], sum(p.Loaded.Rewritten), p.Loaded.Settled.Seconds(), p.Loaded.OpenStackRequests)
	}
	if r.SlopeMiBPerCluster > 0 {
		summary += fmt.Sprintf("slope: %.3f MiB of peak RSS per Cluster (%d to %d Clusters)\n", r.SlopeMiBPerCluster, r.Points[0].Clusters, largest)
	}
	summary += fmt.Sprintf("objects written in %s\n", written.Round(time.Second))
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
	for _, p := range r.Points {
		if !p.WithinRSSBudget {
			t.Errorf("the manager's peak RSS with %d Clusters x %d nodegroups is %s, over the budget of %s", p.Clusters, len(nodegroups), mib(p.Loaded.PeakRSS), mib(p.PeakRSSBudget))
		}
	}
}

// measureAt runs the manager on what is written, and says what it wrote:
// nothing, when the objects are written as its controllers would have
// left them.
func measureAt(ctx context.Context, t *testing.T, bin string, clusters int, counts Counts) point {
	t.Helper()
	kinds := map[string]func() client.ObjectList{
		"Cluster":                 func() client.ObjectList { return &clusterv1.ClusterList{} },
		"SharedNetwork":           func() client.ObjectList { return &sharednetv1.SharedNetworkList{} },
		"SharedNetworkAttachment": func() client.ObjectList { return &sharednetv1.SharedNetworkAttachmentList{} },
		"MachineDeployment":       func() client.ObjectList { return &clusterv1.MachineDeploymentList{} },
	}
	before := map[string]map[string]client.Object{}
	for kind, list := range kinds {
		objs, err := snapshot(ctx, list())
		if err != nil {
			t.Fatal(err)
		}
		before[kind] = objs
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	t.Logf("%d Clusters: %d objects (%s)", clusters, total, countsText(counts))
	loaded := runManager(ctx, t, bin, fmt.Sprintf("%dx%d", clusters, len(nodegroups)), clusters)
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
		t.Errorf("at %d Clusters the manager rewrote %d %s objects written in their steady state (what it wrote is logged above)", clusters, n, kind)
	}
	return point{Clusters: clusters, Objects: total, Loaded: loaded, Counts: maps.Clone(counts),
		PeakRSSBudget: rssBudget(clusters), WithinRSSBudget: loaded.PeakRSS <= rssBudget(clusters)}
}

func sumOf(sizes []int) int {
	n := 0
	for _, s := range sizes {
		n += s
	}
	return n
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func logMeasurement(t *testing.T, m measurement) {
	t.Helper()
	t.Logf("%s: peak RSS %s, RSS %s, live heap %s (in use before a GC %s), GOMEMLIMIT %s; workers started after %s, queues empty after %s; log %d lines, %d with an error; reconciles %v, errors %v; objects rewritten %v; OpenStack requests %d (%s)",
		m.Phase, mib(m.PeakRSS), mib(m.RSS), mib(m.HeapInuse), mib(m.HeapInuseBeforeGC), mib(m.GoMemoryLimit), m.Startup.Round(100*time.Millisecond), m.Settled.Round(100*time.Millisecond),
		m.LogLines, m.LogErrors, m.Reconciles, m.ReconcileErrors, m.Rewritten, m.OpenStackRequests, m.Log)
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

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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/test/loopback"
	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

const (
	// startTimeout bounds the wait for every controller's workers, and
	// settlePerCluster more for their first reconcile of everything: the
	// first look at each attached nodegroup authenticates at the closed
	// port, retried with backoff (about ten nodegroups a second).
	startTimeout     = 3 * time.Minute
	settlePerCluster = 400 * time.Millisecond
	// steadyState is how long the manager runs once every controller works.
	steadyState = 30 * time.Second
	// stopGrace is how long a SIGTERM is given before SIGKILL.
	stopGrace = 15 * time.Second
)

// controllersOfTheManager are the controllers manager.New registers (the
// workload guardrails, behind a feature gate that is off, are not).
var controllersOfTheManager = []string{"sharednetwork", "sharednetworkattachment"}

// measurement is what one run of the manager binary showed.
type measurement struct {
	Phase string `json:"phase"`
	// PeakRSS is VmHWM of /proc/<pid>/status, RSS its VmRSS, at the end of
	// the steady state; HeapInuse is go_memstats_heap_inuse_bytes of
	// /metrics right after a garbage collection (the live heap),
	// HeapInuseBeforeGC the same just before it.
	PeakRSS           uint64 `json:"peakRSSBytes"`
	RSS               uint64 `json:"rssBytes"`
	HeapInuse         uint64 `json:"heapInuseBytes"`
	HeapInuseBeforeGC uint64 `json:"heapInuseBeforeGCBytes"`
	// GoMemoryLimit is the GOMEMLIMIT it ran with: what it sets itself in
	// a container limited to the size's budget.
	GoMemoryLimit uint64 `json:"goMemoryLimitBytes"`
	// Startup is from the start of the process until every controller
	// logged "Starting workers".
	Startup time.Duration `json:"startupNanoseconds"`
	// Settled is from the start until the controllers' queues were empty
	// (every object reconciled once).
	Settled time.Duration `json:"settledNanoseconds"`
	// LogLines and LogErrors (lines with an error) of the whole run.
	LogLines  int `json:"logLines"`
	LogErrors int `json:"logErrors"`
	// Reconciles and ReconcileErrors by controller (controller_runtime_reconcile_total).
	Reconciles      map[string]int `json:"reconciles"`
	ReconcileErrors map[string]int `json:"reconcileErrors"`
	// OpenStackRequests is capo_sharednet_openstack_requests_total of the
	// whole run: with the SharedNetworks' facts fresh, the first look of a
	// new process at each attached nodegroup (its load balancers, its
	// cluster network's MTU), as after each SharedNetwork resync.
	OpenStackRequests int `json:"openStackRequests"`
	// Rewritten counts the objects the run wrote, by kind (resourceVersion
	// changed): none in a steady state.
	Rewritten map[string]int `json:"rewritten,omitempty"`
	Log       string         `json:"log"`
}

// artifactsDir is _artifacts/scale of the repository, where the figures
// and the manager's logs are left for make bench.
func artifactsDir(t *testing.T) string {
	t.Helper()
	root, err := providers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "_artifacts", "scale")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// managerBinary builds the manager as its Dockerfile does (CGO off, the
// module's main package) into a temporary folder.
func managerBinary(ctx context.Context, t *testing.T) string {
	t.Helper()
	root, err := providers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "manager")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the manager: %v\n%s", err, out)
	}
	return bin
}

// runManager runs the manager binary against the test's API server until
// every controller has started its workers and then for steadyState, reads
// its memory and stops it (SIGTERM, SIGKILL after stopGrace). The process
// never outlives the test. It runs as in a container whose memory limit is
// the size's budget: with the Go soft limit the manager sets itself from
// that limit (main.go), since no cgroup limit can be set here.
func runManager(ctx context.Context, t *testing.T, bin, phase string, clusters int) measurement {
	t.Helper()
	m := measurement{Phase: phase, Log: filepath.Join(artifactsDir(t), "manager-"+phase+".log"), GoMemoryLimit: manager.GoMemoryLimit(rssBudget(clusters))}
	logFile, err := os.Create(m.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	diagnostics, profiler := loopback.Port(t), loopback.Port(t)
	args := []string{
		"--profiler-address=127.0.0.1:" + strconv.Itoa(profiler),
		"--leader-elect=false",
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(loopback.Port(t)),
		"--deletion-hook-port=" + strconv.Itoa(loopback.Port(t)),
		"--webhook-cert-dir=" + env.CertDir,
		"--health-addr=127.0.0.1:" + strconv.Itoa(loopback.Port(t)),
		"--diagnostics-address=127.0.0.1:" + strconv.Itoa(diagnostics),
		"--insecure-diagnostics",
		"--credentials-namespace=" + install.Namespace,
		// The facts are written as just read: no resync falls in a run,
		// however long the largest size takes to settle (its reads would
		// fail on the closed port and be written).
		"--sharednetwork-resync=1h",
		"--logging-format=json",
	}
	runCtx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(runCtx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "POD_NAMESPACE="+install.Namespace, "POD_NAME=capo-sharednet-scale",
		"GOMEMLIMIT="+strconv.FormatUint(m.GoMemoryLimit, 10))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	started := time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			cancel()
			<-exited
		})
	}
	t.Cleanup(stop)
	running := func() error {
		select {
		case <-exited:
			return fmt.Errorf("the manager (%s) exited: %v; its log: %s", phase, exitErr, m.Log)
		default:
			return nil
		}
	}

	// Every controller's workers, from its log.
	limit := startTimeout + time.Duration(clusters)*settlePerCluster
	deadline := time.Now().Add(limit)
	for {
		if err := running(); err != nil {
			t.Fatal(err)
		}
		log := readLog(t, m.Log)
		if missing := log.notWorking(); len(missing) == 0 {
			m.Startup = time.Since(started)
			break
		} else if time.Now().After(deadline) {
			stop()
			t.Fatalf("the manager (%s): controllers %q had not started their workers after %s; its log: %s", phase, missing, limit, m.Log)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The first reconcile of every object: until the controllers' queues
	// are empty, still within the limit.
	for {
		if err := running(); err != nil {
			t.Fatal(err)
		}
		metrics := getMetrics(ctx, t, fmt.Sprintf("http://127.0.0.1:%d/metrics", diagnostics))
		depth := map[string]float64{}
		for _, c := range controllersOfTheManager {
			if v, ok := metrics.value("workqueue_depth", `name="`+c+`"`); ok && v > 0 {
				depth[c] = v
			}
		}
		if len(depth) == 0 {
			m.Settled = time.Since(started)
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the manager (%s): its queues still hold %v after %s; its log: %s", phase, depth, limit, m.Log)
		}
		time.Sleep(time.Second)
	}
	select {
	case <-exited:
		t.Fatal(running())
	case <-time.After(steadyState):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	m.PeakRSS, m.RSS = procKB(t, status, "VmHWM"), procKB(t, status, "VmRSS")
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", diagnostics)
	heap, ok := getMetrics(ctx, t, metricsURL).value("go_memstats_heap_inuse_bytes")
	if !ok {
		t.Fatal("the manager's /metrics has no go_memstats_heap_inuse_bytes")
	}
	m.HeapInuseBeforeGC = uint64(heap)
	// The live heap: pprof's heap profile with gc=1 runs a collection first,
	// so the figure does not depend on when the last one ran.
	get(ctx, t, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", profiler))
	metrics := getMetrics(ctx, t, metricsURL)
	if heap, ok = metrics.value("go_memstats_heap_inuse_bytes"); !ok {
		t.Fatal("the manager's /metrics has no go_memstats_heap_inuse_bytes")
	}
	m.HeapInuse = uint64(heap)
	m.Reconciles, m.ReconcileErrors = map[string]int{}, map[string]int{}
	for _, c := range controllersOfTheManager {
		sel := `controller="` + c + `"`
		for _, result := range []string{"success", "error", "requeue", "requeue_after"} {
			if v, ok := metrics.value("controller_runtime_reconcile_total", sel, `result="`+result+`"`); ok {
				m.Reconciles[c] += int(v)
			}
		}
		if v, ok := metrics.value("controller_runtime_reconcile_errors_total", sel); ok {
			m.ReconcileErrors[c] = int(v)
		}
	}

	for _, sample := range metrics["capo_sharednet_openstack_requests_total"].GetMetric() {
		m.OpenStackRequests += int(sample.GetCounter().GetValue())
	}

	stop()
	// (Wait reports the cancel itself as context.Canceled even when the
	// manager exits 0 on SIGTERM; the exit status is what counts.)
	if !cmd.ProcessState.Success() {
		t.Errorf("the manager (%s) did not stop cleanly on SIGTERM: %v (%s); its log: %s", phase, exitErr, cmd.ProcessState, m.Log)
	}
	log := readLog(t, m.Log)
	m.LogLines, m.LogErrors = log.lines, log.errors
	return m
}

// managerLog is what the manager's JSON log says so far.
type managerLog struct {
	lines, errors int
	// registered and working: controllers that logged "Starting Controller"
	// and "Starting workers".
	registered, working map[string]bool
}

func (l managerLog) notWorking() []string {
	var missing []string
	for c := range l.registered {
		if !l.working[c] {
			missing = append(missing, c)
		}
	}
	for _, c := range controllersOfTheManager {
		if !l.working[c] && !l.registered[c] {
			missing = append(missing, c)
		}
	}
	sort.Strings(missing)
	return missing
}

func readLog(t *testing.T, path string) managerLog {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := managerLog{registered: map[string]bool{}, working: map[string]bool{}}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a partial last line is read again next time
		}
		if err != nil {
			t.Fatal(err)
		}
		l.lines++
		var entry struct {
			Msg        string `json:"msg"`
			Controller string `json:"controller"`
			Err        any    `json:"err"`
		}
		if json.Unmarshal(line, &entry) != nil {
			if bytes.Contains(bytes.ToLower(line), []byte("error")) {
				l.errors++
			}
			continue
		}
		if entry.Err != nil {
			l.errors++
		}
		switch entry.Msg {
		case "Starting Controller":
			l.registered[entry.Controller] = true
		case "Starting workers":
			l.working[entry.Controller] = true
		}
	}
	return l
}

// procKB reads a "Name:   1234 kB" line of /proc/<pid>/status, in bytes.
func procKB(t *testing.T, status []byte, name string) uint64 {
	t.Helper()
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				kb, err := strconv.ParseUint(fields[0], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return kb * 1024
			}
		}
	}
	t.Fatalf("no %s in /proc/<pid>/status:\n%s", name, status)
	return 0
}

// metricFamilies are the metric families of /metrics by name, as expfmt
// parses the Prometheus text format.
type metricFamilies map[string]*dto.MetricFamily

// get answers a GET of url with its body.
func get(ctx context.Context, t *testing.T, url string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, error %v", url, resp.StatusCode, err)
	}
	return body
}

func getMetrics(ctx context.Context, t *testing.T, url string) metricFamilies {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(get(ctx, t, url)))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return families
}

// value is the counter's, gauge's or untyped metric's sample whose labels
// hold every one of labels, each `name="value"` as /metrics writes it.
func (p metricFamilies) value(metric string, labels ...string) (float64, bool) {
	for _, m := range p[metric].GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for _, l := range labels {
		name, quoted, _ := strings.Cut(l, "=")
		value, err := strconv.Unquote(quoted)
		if err != nil || !slices.ContainsFunc(m.GetLabel(), func(pair *dto.LabelPair) bool {
			return pair.GetName() == name && pair.GetValue() == value
		}) {
			return false
		}
	}
	return true
}

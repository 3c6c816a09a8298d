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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/internal/webhooks"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
	"github.com/capo-sharednet/capo-sharednet/test/loopback"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// The burst of issue 29, "Under load": Cluster updates sent at once through
// the kube-apiserver, each judged by CAPI's webhooks and this project's
// Cluster webhook (the manager in this process, deciding on an in-memory
// OpenStack).
const (
	// burstClusters is the size the burst runs at, at least: the scale
	// world as TestManagerMemoryAtScale writes it.
	burstClusters = 500
	// burstRequests are sent at once, each to a Cluster of its own.
	burstRequests = 200
	// loneRequests (unrelated changes) are sent one at a time first: their
	// median is the baseline of the burst's p99. loneAttaches follow.
	loneRequests = 30
	loneAttaches = 5
	// lonePause lets the watches of one lone request settle before the next.
	lonePause = 100 * time.Millisecond
	// burstTarget: the burst's p99 is within this many lone medians.
	burstTarget = 3.0

	clusterWebhook = "sharednet.cluster.capo.io"
	// touchedLabel is the unrelated change: a label no rule reads.
	touchedLabel = "scale.sharednet.capo.io/touched"
	// missingSharedNetwork is a SharedNetwork no one offers.
	missingSharedNetwork = "vm-net-missing"
	// factsTrusted is how long the SharedNetworks' facts written before the
	// measure are trusted: no SharedNetwork controller runs to read them
	// again, and a decision on stale facts would read them from the cloud.
	factsTrusted = time.Hour
)

// change is what one request does to its Cluster.
type change string

const (
	// Admitted:
	unrelated change = "unrelated" // a label; no sharedNetwork value changes
	attach    change = "attach"    // md-2 attached to md-0's SharedNetwork and subnet
	detach    change = "detach"    // md-0's value removed (no load balancer is left)
	// Refused by the rule refusedBy names:
	attachMTU     change = "attach, MTU mismatch"          // the cluster network has MTU 1500
	attachMissing change = "attach, no such SharedNetwork" // md-2 to missingSharedNetwork
	moveNetwork   change = "move to another network"       // md-0 to a third SharedNetwork
)

var (
	admittedChanges = []change{attach, detach, unrelated}
	refusedChanges  = []change{attachMTU, attachMissing, moveNetwork}
)

// refusedBy is the rule that must refuse the change; "" when it must be
// admitted.
func (c change) refusedBy() string {
	switch c {
	case attachMTU:
		return rules.RuleMTU
	case attachMissing:
		return rules.RuleGranted
	case moveNetwork:
		return rules.RuleOneNetwork
	}
	return ""
}

// apply makes the change to cluster, index i of the scale world; mark is
// the unrelated change's label value.
func (c change) apply(cluster *clusterv1.Cluster, i int, mark string) {
	switch c {
	case unrelated:
		if cluster.Labels == nil {
			cluster.Labels = map[string]string{}
		}
		cluster.Labels[touchedLabel] = mark
	case attach, attachMTU:
		variables.SetOverride(cluster, "md-2", sharedNetworkValue(sharedNetworkOf(i, 0)))
	case detach:
		variables.SetOverride(cluster, "md-0", nil)
	case attachMissing:
		variables.SetOverride(cluster, "md-2", fmt.Appendf(nil, `{"name":%q}`, missingSharedNetwork))
	case moveNetwork:
		// md-0 and md-1 are on SharedNetworks i and i+1 (mod 4): i+2 is neither.
		variables.SetOverride(cluster, "md-0", sharedNetworkValue((i+2)%sharedNetworks))
	}
}

// sharedNetworkValue is the `sharedNetwork` value of SharedNetwork sn's subnet.
func sharedNetworkValue(sn int) []byte {
	return fmt.Appendf(nil, `{"name":%q,"subnet":%q}`, sharedNetworkName(sn), uuid(idSubnet, sn))
}

// target is one request: a Cluster of the scale world and its change.
type target struct {
	index  int
	change change
}

func clusterKey(i int) client.ObjectKey {
	n, c := i/clustersPerNamespace, i%clustersPerNamespace
	return client.ObjectKey{Namespace: namespaceName(n), Name: clusterName(n, c)}
}

// burstPlan gives each request a Cluster of its own, spread over the
// namespaces and SharedNetworks by a fixed shuffle.
type burstPlan struct {
	warmUp           int // dry runs only
	lone, loneAttach []target
	burst            []target
}

func newBurstPlan(clusters int) burstPlan {
	order := rand.New(rand.NewPCG(29, 4)).Perm(clusters)
	next := func(c change) target {
		t := target{index: order[0], change: c}
		order = order[1:]
		return t
	}
	p := burstPlan{warmUp: next(unrelated).index}
	for range loneRequests {
		p.lone = append(p.lone, next(unrelated))
	}
	for range loneAttaches {
		p.loneAttach = append(p.loneAttach, next(attach))
	}
	var admitted, refused int
	for k := range burstRequests {
		// Every tenth request must be refused: none may fail open.
		if k%10 == 9 {
			p.burst = append(p.burst, next(refusedChanges[refused%len(refusedChanges)]))
			refused++
			continue
		}
		p.burst = append(p.burst, next(admittedChanges[admitted%len(admittedChanges)]))
		admitted++
	}
	return p
}

// mtuMismatched are the Clusters whose cluster network's MTU differs from
// the shared networks'.
func (p burstPlan) mtuMismatched() map[int]bool {
	out := map[int]bool{}
	for _, t := range p.burst {
		if t.change == attachMTU {
			out[t.index] = true
		}
	}
	return out
}

// outcome is how the API server answered a request.
type outcome string

const (
	allowed    outcome = "allowed"
	denied     outcome = "denied"                   // by this project's webhook
	unanswered outcome = "failed calling a webhook" // a timeout or no connection: refused unjudged
	otherError outcome = "other error"
)

var outcomes = []outcome{allowed, denied, unanswered, otherError}

// result is one request as the client saw it.
type result struct {
	Cluster string `json:"cluster"`
	Change  change `json:"change"`
	// Latency is the answered Update, every admission webhook in it.
	Latency time.Duration `json:"latencyNanoseconds"`
	Outcome outcome       `json:"outcome"`
	// Rules are those a refusal of this project's webhook names.
	Rules []string `json:"rules,omitempty"`
	// Conflicts: a conflict is no admission answer; the Cluster is read
	// again and the update sent once more.
	Conflicts int    `json:"conflicts,omitempty"`
	Error     string `json:"error,omitempty"`
}

// refusedRule is a rule named in a refusal (rules.Refusal.Error), one line each.
var refusedRule = regexp.MustCompile(`(?m)^- (?:MachineDeployment topology "[^"]*": )?([a-z-]+): `)

func classify(err error) (outcome, []string) {
	if err == nil {
		return allowed, nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "failed calling webhook"), errors.Is(err, context.DeadlineExceeded),
		apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return unanswered, nil
	case strings.Contains(msg, `admission webhook "`+clusterWebhook+`" denied the request`):
		var named []string
		for _, m := range refusedRule.FindAllStringSubmatch(msg, -1) {
			named = append(named, m[1])
		}
		return denied, named
	}
	return otherError, nil
}

// send updates cluster with the target's change, the Update timed alone
// (bounded by twice the webhook's timeout, so that a hang is counted, not
// waited for).
func send(ctx context.Context, cluster *clusterv1.Cluster, t target, mark string, timeout time.Duration, opts ...client.UpdateOption) result {
	key := clusterKey(t.index)
	r := result{Cluster: key.String(), Change: t.change}
	for {
		obj := cluster.DeepCopy()
		t.change.apply(obj, t.index, mark)
		rctx, cancel := context.WithTimeout(ctx, 2*timeout)
		start := time.Now()
		err := env.Client.Update(rctx, obj, opts...)
		r.Latency = time.Since(start)
		cancel()
		if apierrors.IsConflict(err) && r.Conflicts == 0 {
			r.Conflicts++
			fresh := &clusterv1.Cluster{}
			if err := env.Client.Get(ctx, key, fresh); err == nil {
				cluster = fresh
				continue
			}
		}
		r.Outcome, r.Rules = classify(err)
		if err != nil {
			r.Error = err.Error()
		}
		return r
	}
}

func getCluster(ctx context.Context, t *testing.T, i int) *clusterv1.Cluster {
	t.Helper()
	cluster := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, clusterKey(i), cluster); err != nil {
		t.Fatal(err)
	}
	return cluster
}

// TestAdmissionUnderABurst sends 200 Cluster updates at once through the
// kube-apiserver at 500 Clusters x 4 nodegroups (the scale world, written
// here unless TestManagerMemoryAtScale left it): a third attaches, a third
// detaches, a third unrelated changes, and one in ten that must be
// refused (an MTU mismatch, a SharedNetwork no one offers, a move to
// another network). Every request must be answered within the webhook's
// timeoutSeconds, with the answer it should have (none fails open), and the
// burst's p99 must be within 3x the median of a lone request (30 unrelated
// changes one at a time). This project's manager runs in this process with
// its webhooks only, its decisions asking an in-memory OpenStack whose
// networks have the IDs the world names.
func TestAdmissionUnderABurst(t *testing.T) {
	testenv.SkipIfShort(t, "it writes 500 Clusters and their nodegroups to a kube-apiserver and runs the manager's webhooks")
	if !optedIn() {
		t.Skipf("set %s=1 to measure admission under a burst of %d Cluster updates at %d Clusters x %d nodegroups (about 5 minutes)", optIn, burstRequests, burstClusters, len(nodegroups))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	clusters, namespaces := census(ctx, t)
	clusters = burstWorld(ctx, t, clusters, namespaces)
	plan := newBurstPlan(clusters)

	cloud, clouds := burstCloud(ctx, t, clusters, plan.mtuMismatched())
	var openstackCalls atomic.Int64
	// Fail is asked before every call: here, only to count them.
	cloud.Fail = func(string) error { openstackCalls.Add(1); return nil }
	url := startWebhooks(ctx, t, clouds)
	timeout := installClusterWebhook(ctx, t, url)
	warmUp(ctx, t, plan.warmUp, timeout)

	// Lone requests, one at a time.
	served0, calls0 := webhookServed(t), openstackCalls.Load()
	var lone, loneAttach []result
	for _, req := range plan.lone {
		lone = append(lone, send(ctx, getCluster(ctx, t, req.index), req, "lone", timeout))
		time.Sleep(lonePause)
	}
	served1 := webhookServed(t)
	for _, req := range plan.loneAttach {
		loneAttach = append(loneAttach, send(ctx, getCluster(ctx, t, req.index), req, "lone", timeout))
		time.Sleep(lonePause)
	}
	served2, calls2 := webhookServed(t), openstackCalls.Load()

	// The burst: every Cluster read first, every request sent at once.
	prepared := make([]*clusterv1.Cluster, len(plan.burst))
	for k, req := range plan.burst {
		prepared[k] = getCluster(ctx, t, req.index)
	}
	apiBefore, served3, calls3 := apiserverMetrics(ctx, t), webhookServed(t), openstackCalls.Load()
	burst := make([]result, len(plan.burst))
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for k, req := range plan.burst {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			burst[k] = send(ctx, prepared[k], req, "burst", timeout)
		}()
	}
	ready.Wait()
	began := time.Now()
	close(start)
	done.Wait()
	wall := time.Since(began)
	served4, calls4 := webhookServed(t), openstackCalls.Load()
	apiAfter := apiserverMetrics(ctx, t)

	r := burstReport{
		Clusters: clusters, Nodegroups: len(nodegroups), Requests: len(burst), WebhookTimeoutSeconds: timeout.Seconds(),
		Lone: summarize(lone), LoneAttach: summarize(loneAttach), Burst: summarize(burst), BurstWallSeconds: wall.Seconds(),
		ByChange: map[change]latencies{}, Outcomes: map[change]map[outcome]int{}, Target: burstTarget,
		Served: servedFigures{
			Lone:       served1.minus(served0).figures(),
			LoneAttach: served2.minus(served1).figures(),
			Burst:      served4.minus(served3).figures(),
		},
		OpenStackCalls: map[string]int64{"lone": calls2 - calls0, "burst": calls4 - calls3},
		APIServer:      apiserverFiguresBetween(apiBefore, apiAfter),
	}
	for _, c := range slices.Concat(admittedChanges, refusedChanges) {
		of := slices.DeleteFunc(slices.Clone(burst), func(res result) bool { return res.Change != c })
		r.ByChange[c] = summarize(of)
		r.Outcomes[c] = map[outcome]int{}
		for _, res := range of {
			r.Outcomes[c][res.Outcome]++
			r.Conflicts += res.Conflicts
		}
	}
	r.P99OverLoneMedian = r.Burst.P99 / r.Lone.P50
	r.WithinTarget = r.P99OverLoneMedian <= burstTarget
	r.Results = slices.Concat(lone, loneAttach, burst)
	writeBurstReport(t, r)

	checkAnswers(t, "lone", lone, timeout)
	checkAnswers(t, "lone attach", loneAttach, timeout)
	checkAnswers(t, "burst", burst, timeout)
	// A time is reported, never asserted (docs/performance.md): the burst
	// queues in the kube-apiserver and CAPI's webhooks on the machine's
	// cores, whatever this webhook does; what must hold is asserted above
	// and below.
	if !r.WithinTarget {
		t.Logf("the burst's p99 is %.1f ms, %.2fx the lone median of %.1f ms: over the target of %gx; 200 lone requests one after another on %d cores would take %.0f ms",
			r.Burst.P99, r.P99OverLoneMedian, r.Lone.P50, burstTarget, runtime.NumCPU(), r.Lone.P50*float64(len(burst))/float64(runtime.NumCPU()))
	}
	if a := r.APIServer; a != nil {
		if a.FailOpen > 0 || a.CallingErrors > 0 {
			t.Errorf("the kube-apiserver counted %v failures calling %s during the burst, %v of them failed open", a.CallingErrors, clusterWebhook, a.FailOpen)
		}
		if a.counted && a.Calls < float64(len(burst)) {
			t.Errorf("the kube-apiserver called %s %v times during the burst of %d requests: some were admitted without it", clusterWebhook, a.Calls, len(burst))
		}
	}
}

// checkAnswers fails the test for every request not answered within the
// webhook's timeout, or not answered as its change must be.
func checkAnswers(t *testing.T, phase string, results []result, timeout time.Duration) {
	t.Helper()
	for _, r := range results {
		want := r.Change.refusedBy()
		switch {
		case r.Outcome == unanswered || r.Outcome == otherError:
			t.Errorf("%s: %s of %s was not answered by the webhooks (%s after %s): %s", phase, r.Change, r.Cluster, r.Outcome, r.Latency.Round(time.Millisecond), r.Error)
		case r.Latency > timeout:
			t.Errorf("%s: %s of %s was answered after %s, over the webhook's timeout of %s", phase, r.Change, r.Cluster, r.Latency.Round(time.Millisecond), timeout)
		}
		switch {
		case want == "" && r.Outcome == denied:
			t.Errorf("%s: %s of %s must be admitted, but was refused: %s", phase, r.Change, r.Cluster, r.Error)
		case want != "" && r.Outcome == allowed:
			t.Errorf("%s: %s of %s must be refused by rule %s, but was admitted: the webhook failed open", phase, r.Change, r.Cluster, want)
		case want != "" && r.Outcome == denied && !slices.Contains(r.Rules, want):
			t.Errorf("%s: %s of %s must be refused by rule %s, but was refused by %q: %s", phase, r.Change, r.Cluster, want, r.Rules, r.Error)
		}
	}
}

// census counts the scale world the API server holds: its Clusters and
// namespaces (namespaceName's).
func census(ctx context.Context, t *testing.T) (clusters, namespaces int) {
	t.Helper()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ClusterList"))
	if err := env.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if strings.HasPrefix(c.Namespace, "scale-") {
			clusters++
		}
	}
	nsList := &corev1.NamespaceList{}
	if err := env.Client.List(ctx, nsList); err != nil {
		t.Fatal(err)
	}
	for _, ns := range nsList.Items {
		if strings.HasPrefix(ns.Name, "scale-") {
			namespaces++
		}
	}
	return clusters, namespaces
}

// burstWorld makes the API server hold burstClusters Clusters of the scale
// world or more, and returns how many: as TestManagerMemoryAtScale left it
// (at its largest size), or written here as it writes it. Either way CAPI's
// controllers are stopped and the SharedNetworks' facts written again, as
// just read.
func burstWorld(ctx context.Context, t *testing.T, clusters, namespaces int) int {
	t.Helper()
	if clusters%clustersPerNamespace != 0 {
		t.Fatalf("the API server holds %d scale Clusters, not whole namespaces of %d: the run that wrote them stopped half way", clusters, clustersPerNamespace)
	}
	w := &scaleWorld{closedPort: loopback.Port(t), now: metav1.Now()}
	counts := Counts{}
	step := func(what string, f func(context.Context) error) {
		t.Helper()
		s := time.Now()
		if err := f(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %s", what, time.Since(s).Round(100*time.Millisecond))
	}
	want := burstClusters / clustersPerNamespace
	if clusters < burstClusters {
		switch {
		case namespaces == 0:
			// CAPI reconciles the ClusterClasses (its Cluster webhook needs
			// that); with no Cluster written it may run again.
			if env.RuntimeClient() == nil {
				step("starting CAPI", env.StartCAPI)
			}
			step("namespaces and ClusterClasses", func(ctx context.Context) error { return w.createNamespacesAndClasses(ctx, counts, want) })
		case namespaces < want:
			t.Fatalf("the API server holds %d scale namespaces and %d Clusters, written for fewer than %d Clusters (%s=%s): run this test alone, or after TestManagerMemoryAtScale with a size of %d or more",
				namespaces, clusters, burstClusters, sizesVar, os.Getenv(sizesVar), burstClusters)
		}
	}
	// CAPI's controllers would reconcile the Clusters' topologies (and fight
	// over the nodegroups written); its webhooks keep running.
	step("stopping CAPI", func(context.Context) error { return env.StopCAPI() })
	if clusters < burstClusters {
		err := env.Client.Get(ctx, client.ObjectKey{Name: sharedNetworkName(0)}, &sharednetv1.SharedNetwork{})
		switch {
		case apierrors.IsNotFound(err):
			step("SharedNetworks", func(ctx context.Context) error { return w.createSharedNetworks(ctx, counts) })
		case err != nil:
			t.Fatal(err)
		}
		step(fmt.Sprintf("Clusters and nodegroups %d to %d", clusters, burstClusters), func(ctx context.Context) error {
			return w.createClusters(ctx, counts, clusters/clustersPerNamespace, want)
		})
		clusters = burstClusters
	}
	for i := range w.secrets {
		w.secrets[i] = &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: sharedNetworkName(i) + "-credential"}, w.secrets[i]); err != nil {
			t.Fatal(err)
		}
	}
	step("SharedNetwork facts", func(ctx context.Context) error { return w.writeSharedNetworkStatus(ctx, clusters/clustersPerNamespace) })
	if len(counts) > 0 {
		t.Logf("written: %s", countsText(counts))
	}
	return clusters
}

// burstCloud is the OpenStack the decisions ask: the VM project's networks
// with the IDs the world's SharedNetworks name, and each Cluster's project
// with its OpenStackCluster and its cluster network, of MTU 1450 as the
// shared ones, but 1500 for the Clusters of mismatched.
func burstCloud(ctx context.Context, t *testing.T, clusters int, mismatched map[int]bool) (*fakecloud.Cloud, *fakecloud.Clouds) {
	t.Helper()
	cloud := fakecloud.New()
	vm := &fakecloud.Project{Cloud: cloud, ID: "vm-project"}
	clouds := &fakecloud.Clouds{Clusters: map[string]*fakecloud.Project{}, SharedNetworks: map[string]*fakecloud.Project{}}
	for i := range sharedNetworks {
		cloud.AddNetworkWithIDs(vm.ID, 1450, subnetCIDR(i), uuid(idNetwork, i), uuid(idSubnet, i))
		clouds.SharedNetworks[sharedNetworkName(i)] = vm
	}
	list := &infrav1.OpenStackClusterList{}
	if err := env.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	oscs := map[string]*infrav1.OpenStackCluster{}
	for k := range list.Items {
		osc := &list.Items[k]
		oscs[osc.Namespace+"/"+osc.Labels[clusterv1.ClusterNameLabel]] = osc
	}
	for i := range clusters {
		key := clusterKey(i).String()
		osc, ok := oscs[key]
		if !ok || osc.Status.Network == nil || len(osc.Status.Network.Subnets) == 0 {
			t.Fatalf("cluster %s has no OpenStackCluster with its network", key)
		}
		project, mtu := uuid(idProject, i), 1450
		if mismatched[i] {
			mtu = 1500
		}
		cloud.AddNetworkWithIDs(project, mtu, osc.Status.Network.Subnets[0].CIDR, osc.Status.Network.ID, osc.Status.Network.Subnets[0].ID)
		clouds.Clusters[key] = &fakecloud.Project{Cloud: cloud, ID: project, OpenStackCluster: osc}
	}
	return cloud, clouds
}

// startWebhooks runs this project's manager in this process with its
// admission webhooks only (the burst is theirs), its decisions asking
// clouds, and waits until its cache holds every object a decision reads.
// It returns the webhook server's URL; the manager stops with the test.
func startWebhooks(ctx context.Context, t *testing.T, clouds credentials.Clouds) string {
	t.Helper()
	port := loopback.Port(t)
	mgr, err := manager.NewManager(env.Config, manager.Options{
		WebhookHost: "127.0.0.1", WebhookPort: port, DeletionHookPort: loopback.Port(t), WebhookCertDir: env.CertDir,
		HealthProbeBindAddress: "0", Namespace: install.Namespace, Resync: factsTrusted,
	})
	if err != nil {
		t.Fatal(err)
	}
	mgr.Preflight.Cloud = clouds
	if err := mgr.SetupWebhooks(); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	exited := make(chan struct{})
	var startErr error
	go func() { startErr = mgr.Start(runCtx); close(exited) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-exited:
			if startErr != nil {
				t.Errorf("the manager stopped with: %v", startErr)
			}
		case <-time.After(stopGrace):
			t.Errorf("the manager had not stopped %s after its context ended", stopGrace)
		}
	})

	syncCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	go func() {
		select {
		case <-exited: // a manager that could not start is not waited for
			cancel()
		case <-syncCtx.Done():
		}
	}()
	failed := func(what string, err error) {
		t.Helper()
		select {
		case <-exited:
			t.Fatalf("the manager stopped (%v) before %s", startErr, what)
		default:
			t.Fatalf("%s: %v", what, err)
		}
	}
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		failed("its cache synced", syncCtx.Err())
	}
	// The kinds a decision reads, listed now rather than on the first request.
	for _, obj := range []client.Object{&clusterv1.Cluster{}, &sharednetv1.SharedNetworkAttachment{}, &sharednetv1.SharedNetwork{}, &corev1.Namespace{}, &infrav1.OpenStackCluster{}} {
		if _, err := mgr.GetCache().GetInformer(syncCtx, obj); err != nil {
			failed(fmt.Sprintf("its informer of %T synced", obj), err)
		}
	}
	// The capacity rule reads the consumer table once it has read every
	// Cluster and attachment (the manager's readyz check).
	table, ok := mgr.Preflight.Consumers.(interface{ ReadyzCheck(*http.Request) error })
	if !ok {
		t.Fatalf("the checker's consumers (%T) have no readyz check", mgr.Preflight.Consumers)
	}
	if err := wait.PollUntilContextCancel(syncCtx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return table.ReadyzCheck(nil) == nil, nil
	}); err != nil {
		failed("the consumer table read every Cluster and attachment", err)
	}
	return fmt.Sprintf("https://127.0.0.1:%d", port)
}

// installClusterWebhook installs the Cluster webhook of the shipped
// config/webhook/manifests.yaml pointed at url (the credential webhook
// judges Secret deletions: none here), and returns its timeoutSeconds. It
// is deleted when the test ends.
func installClusterWebhook(ctx context.Context, t *testing.T, url string) time.Duration {
	t.Helper()
	cfg, err := env.InstallWebhooks(ctx, "capo-sharednet-scale-burst", url, clusterWebhook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.IgnoreNotFound(env.Client.Delete(ctx, cfg)); err != nil {
			t.Errorf("deleting ValidatingWebhookConfiguration %s: %v", cfg.Name, err)
		}
	})
	return time.Duration(ptr.Deref(cfg.Webhooks[0].TimeoutSeconds, 10)) * time.Second // the API's default
}

// warmUp waits, with dry runs of Cluster i, until the kube-apiserver sends
// Cluster updates to the webhook (it reads webhook configurations from a
// watch) and the connection to it is open; then a dry-run attach and detach
// make the decisions' first reads. Nothing is written.
func warmUp(ctx context.Context, t *testing.T, i int, timeout time.Duration) {
	t.Helper()
	cluster := getCluster(ctx, t, i)
	var last result
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = send(ctx, cluster, target{index: i, change: attachMissing}, "", timeout, client.DryRunAll)
		return last.Outcome == denied, nil
	})
	if err != nil {
		t.Fatalf("the kube-apiserver did not send Cluster updates to %s within a minute; the last dry run: %s %s", clusterWebhook, last.Outcome, last.Error)
	}
	for _, c := range []change{attach, detach} {
		if r := send(ctx, cluster, target{index: i, change: c}, "", timeout, client.DryRunAll); r.Outcome != allowed {
			t.Fatalf("a dry-run %s of %s was not admitted: %s %s", c, r.Cluster, r.Outcome, r.Error)
		}
	}
}

// latencies summarize requests' latencies, in milliseconds.
type latencies struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50Milliseconds"`
	P90  float64 `json:"p90Milliseconds"`
	P99  float64 `json:"p99Milliseconds"`
	Max  float64 `json:"maxMilliseconds"`
	Mean float64 `json:"meanMilliseconds"`
}

func summarize(results []result) latencies {
	if len(results) == 0 {
		return latencies{}
	}
	sorted := make([]time.Duration, 0, len(results))
	var total time.Duration
	for _, r := range results {
		sorted = append(sorted, r.Latency)
		total += r.Latency
	}
	slices.Sort(sorted)
	// The nearest rank: the value with p percent of the requests at or below it.
	at := func(p float64) float64 {
		k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
		return ms(sorted[max(0, min(k, len(sorted)-1))])
	}
	return latencies{N: len(sorted), P50: at(50), P90: at(90), P99: at(99), Max: ms(sorted[len(sorted)-1]), Mean: ms(total / time.Duration(len(sorted)))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// histogram is one histogram's samples merged over label sets: its count,
// sum and cumulative bucket counts by upper bound.
type histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

func (p metricFamilies) histogram(metric string, labels ...string) histogram {
	h := histogram{Buckets: map[float64]uint64{}}
	for _, m := range p[metric].GetMetric() {
		if m.Histogram == nil || !hasLabels(m, labels) {
			continue
		}
		h.Count += m.GetHistogram().GetSampleCount()
		h.Sum += m.GetHistogram().GetSampleSum()
		for _, b := range m.GetHistogram().GetBucket() {
			h.Buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	return h
}

func (h histogram) minus(before histogram) histogram {
	out := histogram{Count: h.Count - before.Count, Sum: h.Sum - before.Sum, Buckets: map[float64]uint64{}}
	for b, n := range h.Buckets {
		out.Buckets[b] = n - before.Buckets[b]
	}
	return out
}

// atMost is the smallest bucket bound holding the fraction q of the
// observations; 0 without buckets or beyond the last.
func (h histogram) atMost(q float64) float64 {
	need := uint64(math.Ceil(q * float64(h.Count)))
	for _, b := range slices.Sorted(maps.Keys(h.Buckets)) {
		if h.Buckets[b] >= need && !math.IsInf(b, 1) {
			return b
		}
	}
	return 0
}

// total sums the counter, gauge and untyped samples of metric with labels.
func (p metricFamilies) total(metric string, labels ...string) float64 {
	sum := 0.0
	for _, m := range p[metric].GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return sum
}

// served is what the Cluster webhook's server measured of the requests
// it served (controller-runtime's histogram; the manager runs in this
// process): from the request read to the answer written.
type served struct {
	Requests         uint64  `json:"requests"`
	MeanMilliseconds float64 `json:"meanMilliseconds"`
}

type servedFigures struct {
	Lone       served `json:"lone"`
	LoneAttach served `json:"loneAttach"`
	Burst      served `json:"burst"`
}

func webhookServed(t *testing.T) histogram {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Logf("gathering controller-runtime's metrics: %v", err) // what was gathered is used
	}
	m := metricFamilies{}
	for _, f := range families {
		m[f.GetName()] = f
	}
	return m.histogram("controller_runtime_webhook_latency_seconds", `webhook="`+webhooks.ClusterPath+`"`)
}

func (h histogram) figures() served {
	s := served{Requests: h.Count}
	if h.Count > 0 {
		s.MeanMilliseconds = h.Sum / float64(h.Count) * 1000
	}
	return s
}

// apiserverMetrics is the kube-apiserver's /metrics; nil when it cannot be
// read (logged: its figures are optional).
func apiserverMetrics(ctx context.Context, t *testing.T) metricFamilies {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Logf("the kube-apiserver's metrics: %v", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	raw, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Logf("the kube-apiserver's metrics: %v", err)
		return nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Logf("the kube-apiserver's metrics: %v", err)
		return nil
	}
	return families
}

// apiserverFigures are the kube-apiserver's own counts of its calls to the
// Cluster webhook during the burst.
type apiserverFigures struct {
	Calls         float64 `json:"webhookCalls"`
	Denied        float64 `json:"denied"`
	CallingErrors float64 `json:"callingWebhookErrors"`
	FailOpen      float64 `json:"failedOpen"`
	// ExcludedByMatchConditions were admitted without a call.
	ExcludedByMatchConditions float64 `json:"excludedByMatchConditions"`
	// MeanMilliseconds of a call; P99AtMostMilliseconds is the bound of the
	// histogram's bucket (5, 25, 100, 500 ms …) holding 99% of them.
	MeanMilliseconds      float64 `json:"meanMilliseconds"`
	P99AtMostMilliseconds float64 `json:"p99AtMostMilliseconds"`
	// counted: this kube-apiserver counts its calls by webhook.
	counted bool
}

func apiserverFiguresBetween(before, after metricFamilies) *apiserverFigures {
	if before == nil || after == nil {
		return nil
	}
	name := `name="` + clusterWebhook + `"`
	delta := func(metric string, labels ...string) float64 {
		labels = append([]string{name}, labels...)
		return after.total(metric, labels...) - before.total(metric, labels...)
	}
	const duration = "apiserver_admission_webhook_admission_duration_seconds"
	d := after.histogram(duration, name).minus(before.histogram(duration, name))
	f := &apiserverFigures{
		Calls:                     delta("apiserver_admission_webhook_request_total"),
		Denied:                    delta("apiserver_admission_webhook_rejection_count", `error_type="no_error"`),
		CallingErrors:             delta("apiserver_admission_webhook_rejection_count", `error_type="calling_webhook_error"`),
		FailOpen:                  delta("apiserver_admission_webhook_fail_open_count"),
		ExcludedByMatchConditions: delta("apiserver_admission_match_condition_exclusions_total"),
		P99AtMostMilliseconds:     d.atMost(0.99) * 1000,
	}
	_, f.counted = after["apiserver_admission_webhook_request_total"]
	if d.Count > 0 {
		f.MeanMilliseconds = d.Sum / float64(d.Count) * 1000
	}
	return f
}

// burstReport is what burst.json holds for docs/performance.md.
type burstReport struct {
	Clusters              int     `json:"clusters"`
	Nodegroups            int     `json:"nodegroupsPerCluster"`
	Requests              int     `json:"burstRequests"`
	WebhookTimeoutSeconds float64 `json:"webhookTimeoutSeconds"`
	// Lone are the unrelated changes one at a time: their p50 is the
	// baseline; LoneAttach the attaches one at a time.
	Lone              latencies                  `json:"lone"`
	LoneAttach        latencies                  `json:"loneAttach"`
	Burst             latencies                  `json:"burst"`
	BurstWallSeconds  float64                    `json:"burstWallSeconds"`
	ByChange          map[change]latencies       `json:"burstByChange"`
	Outcomes          map[change]map[outcome]int `json:"burstOutcomes"`
	Conflicts         int                        `json:"burstConflicts"`
	P99OverLoneMedian float64                    `json:"p99OverLoneMedian"`
	Target            float64                    `json:"target"`
	WithinTarget      bool                       `json:"withinTarget"`
	Served            servedFigures              `json:"webhookServed"`
	// OpenStackCalls the decisions made of the in-memory cloud, by phase.
	OpenStackCalls map[string]int64  `json:"openStackCalls"`
	APIServer      *apiserverFigures `json:"apiserver,omitempty"`
	Results        []result          `json:"requests"`
}

func writeBurstReport(t *testing.T, r burstReport) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "admission under a burst: %d Cluster updates at once, %d Clusters x %d nodegroups (kube-apiserver, CAPI's webhooks and %s; webhook timeout %gs)\n",
		r.Requests, r.Clusters, r.Nodegroups, clusterWebhook, r.WebhookTimeoutSeconds)
	fmt.Fprintf(&b, "%-32s %5s %9s %9s %9s %9s %9s\n", "requests (ms)", "n", "p50", "p90", "p99", "max", "mean")
	row := func(name string, l latencies) {
		fmt.Fprintf(&b, "%-32s %5d %9.1f %9.1f %9.1f %9.1f %9.1f\n", name, l.N, l.P50, l.P90, l.P99, l.Max, l.Mean)
	}
	row("lone, unrelated (baseline)", r.Lone)
	row("lone, attach", r.LoneAttach)
	row("burst", r.Burst)
	for _, c := range slices.Concat(admittedChanges, refusedChanges) {
		row("  "+string(c), r.ByChange[c])
	}
	verdict := "met"
	if !r.WithinTarget {
		verdict = "NOT met"
	}
	fmt.Fprintf(&b, "burst answered in %.2f s; its p99 is %.2fx the lone median (target <= %gx: %s); the lone median times %d requests over %d cores is %.0f ms\n",
		r.BurstWallSeconds, r.P99OverLoneMedian, r.Target, verdict, r.Requests, runtime.NumCPU(), r.Lone.P50*float64(r.Requests)/float64(runtime.NumCPU()))
	fmt.Fprintf(&b, "%-32s", "burst outcomes")
	for _, o := range outcomes {
		fmt.Fprintf(&b, " %9s", strings.Fields(string(o))[0])
	}
	fmt.Fprintf(&b, " %9s\n", "must be")
	for _, c := range slices.Concat(admittedChanges, refusedChanges) {
		fmt.Fprintf(&b, "%-32s", "  "+string(c))
		for _, o := range outcomes {
			fmt.Fprintf(&b, " %9d", r.Outcomes[c][o])
		}
		must := "admitted"
		if rule := c.refusedBy(); rule != "" {
			must = "refused (" + rule + ")"
		}
		fmt.Fprintf(&b, " %s\n", must)
	}
	fmt.Fprintf(&b, "conflicts retried: %d\n", r.Conflicts)
	s := r.Served
	fmt.Fprintf(&b, "the webhook's server: lone %.1f ms mean over %d, lone attach %.1f ms over %d, burst %.1f ms over %d; OpenStack calls (in-memory): lone %d, burst %d\n",
		s.Lone.MeanMilliseconds, s.Lone.Requests, s.LoneAttach.MeanMilliseconds, s.LoneAttach.Requests, s.Burst.MeanMilliseconds, s.Burst.Requests,
		r.OpenStackCalls["lone"], r.OpenStackCalls["burst"])
	if a := r.APIServer; a != nil {
		fmt.Fprintf(&b, "the kube-apiserver during the burst: %v calls of %s, %v denied, %v failed calling, %v failed open, %v excluded by matchConditions; a call %.1f ms mean, p99 <= %g ms\n",
			a.Calls, clusterWebhook, a.Denied, a.CallingErrors, a.FailOpen, a.ExcludedByMatchConditions, a.MeanMilliseconds, a.P99AtMostMilliseconds)
	}
	summary := b.String()
	t.Log("\n" + summary)

	dir := artifactsDir(t)
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"burst.json": append(raw, '\n'), "burst.txt": []byte(summary)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("figures in %s", filepath.Join(dir, "burst.txt"))
}

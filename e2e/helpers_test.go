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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// timeline records each step of the story with its wall time.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	steps []timelineStep
	// notes are figures measured on the way, printed after the steps.
	notes []string
}

type timelineStep struct {
	name     string
	at       time.Duration
	took     time.Duration
	finished bool
}

// step starts a step; call the returned func when it ends.
func (t *timeline) step(name string) func() {
	t.mu.Lock()
	i := len(t.steps)
	t.steps = append(t.steps, timelineStep{name: name, at: time.Since(t.start)})
	t.mu.Unlock()
	begin := time.Now()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.steps[i].took = time.Since(begin)
		t.steps[i].finished = true
	}
}

// notef adds a line of figures to the timeline.
func (t *timeline) notef(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

func (t *timeline) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "timeline (started %s, total %s)\n", t.start.Format(time.RFC3339), time.Since(t.start).Round(time.Second))
	for _, s := range t.steps {
		took := "did not finish"
		if s.finished {
			took = s.took.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "  +%-8s %-10s %s\n", s.at.Round(time.Second), took, s.name)
	}
	for _, n := range t.notes {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	return b.String()
}

// write puts the timeline into _artifacts/e2e/timeline.txt of the repository.
func (t *timeline) write(root string) (string, error) {
	dir := filepath.Join(root, "_artifacts", "e2e")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "timeline.txt")
	return path, os.WriteFile(path, []byte(t.String()), 0o644)
}

// ledger counts the Machines of a cluster created and deleted, by polling
// (a Machine lives far longer than the poll interval, so none is missed).
type ledger struct {
	mu     sync.Mutex
	known  map[string]machineEntry // by UID
	events []machineEvent
	err    error
	// listedAt is when the newest recorded poll asked the API server.
	listedAt time.Time
}

type machineEntry struct{ name, topology string }

type machineEvent struct {
	created  bool
	uid      string
	name     string
	topology string // "" for the control plane
	at       time.Time
}

func newLedger() *ledger { return &ledger{known: map[string]machineEntry{}} }

// run polls until ctx ends; the first poll records what exists as the baseline.
func (l *ledger) run(ctx context.Context, c client.Reader, namespace, cluster string) {
	first := true
	for {
		listedAt := time.Now()
		list := &clusterv1.MachineList{}
		err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})
		l.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				l.err = err
			}
		} else {
			l.err = nil
			now := time.Now()
			seen := map[string]bool{}
			for _, m := range list.Items {
				uid := string(m.UID)
				seen[uid] = true
				if _, ok := l.known[uid]; !ok {
					e := machineEntry{name: m.Name, topology: m.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]}
					l.known[uid] = e
					if !first {
						l.events = append(l.events, machineEvent{created: true, uid: uid, name: e.name, topology: e.topology, at: now})
					}
				}
			}
			for uid, e := range l.known {
				if !seen[uid] {
					delete(l.known, uid)
					l.events = append(l.events, machineEvent{uid: uid, name: e.name, topology: e.topology, at: now})
				}
			}
			first = false
			l.listedAt = listedAt
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// settle waits until the ledger has recorded a poll that started after this
// call: what the caller saw of the Machines before is then in the history.
func (l *ledger) settle() {
	GinkgoHelper()
	since := time.Now()
	Eventually(func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.listedAt.Before(since)
	}, 10*time.Second, 50*time.Millisecond).Should(BeTrue(), "the machine ledger polls the API server")
}

// mark is a position in the event history.
func (l *ledger) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// changes are the Machines created and deleted since mark, by topology
// (names, sorted).
type changes struct {
	Created map[string][]string
	Deleted map[string][]string
}

func (l *ledger) since(mark int) changes {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := changes{Created: map[string][]string{}, Deleted: map[string][]string{}}
	for _, e := range l.events[mark:] {
		k := e.topology
		if k == "" {
			k = "control-plane"
		}
		if e.created {
			out.Created[k] = append(out.Created[k], e.name)
		} else {
			out.Deleted[k] = append(out.Deleted[k], e.name)
		}
	}
	for _, m := range []map[string][]string{out.Created, out.Deleted} {
		for k := range m {
			sort.Strings(m[k])
		}
	}
	return out
}

func names(ms []string) []string {
	out := append([]string(nil), ms...)
	sort.Strings(out)
	return out
}

// newStory makes what a story's cluster needs: a namespace granted the
// shared networks, a VM network of cidr offered to it as a SharedNetwork, and
// the ClusterClass of templates/. Names are prefixes plus a random suffix.
func newStory(ctx SpecContext, prefix, clusterPrefix, cidr string) (ns, cluster, sharedNetwork string, vmNet plane.VMNetwork) {
	GinkgoHelper()
	suffix := fmt.Sprintf("%05x", rand.IntN(1<<20))
	ns, cluster, sharedNetwork = prefix+suffix, clusterPrefix+suffix, prefix+suffix
	Expect(pl.Namespace(ctx, ns, map[string]string{plane.GrantLabel: "true"})).To(Succeed())
	vmNet, err := plane.EnsureVMNetwork(ctx, vm, plane.VMNetworkOpts{Name: sharedNetwork + "-vm-net", CIDR: cidr})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { _ = plane.DeleteVMNetwork(ctx, vm, vmNet.NetworkID, 2*time.Minute) }, NodeTimeout(3*time.Minute))
	_, err = pl.OfferNetwork(ctx, sharedNetwork, vmNet, clouds, nil)
	Expect(err).NotTo(HaveOccurred())
	cc, err := pl.ClusterClass(ns)
	Expect(err).NotTo(HaveOccurred())
	for _, o := range cc {
		Expect(pl.Apply(ctx, o)).To(Succeed())
	}
	Expect(pl.WaitForClusterClass(ctx, ns, plane.ClusterClassName)).To(Succeed())
	return ns, cluster, sharedNetwork, vmNet
}

// attachedMachines waits until the nodegroup's attachment is Attached with n
// Running machines, and returns them.
func attachedMachines(ctx SpecContext, ns, cluster, topology string, n int, timeout time.Duration) []plane.Machine {
	GinkgoHelper()
	var out []plane.Machine
	Eventually(func(g Gomega) {
		a, err := pl.Attachment(ctx, ns, cluster, topology)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a).NotTo(BeNil())
		g.Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseAttached), a.Status.Message)
		out, err = pl.Machines(ctx, ns, cluster, topology)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(HaveLen(n))
		for _, m := range out {
			g.Expect(m.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)))
		}
	}, timeout, time.Second).Should(Succeed())
	return out
}

// newPlainCluster creates, in a namespace of its own, a cluster of the same
// ClusterClass with no nodegroup attached (no sharedNetwork value, no
// workers); provisioned tells when CAPO has made its infrastructure.
func newPlainCluster(ctx SpecContext, prefix string) client.ObjectKey {
	GinkgoHelper()
	suffix := fmt.Sprintf("%05x", rand.IntN(1<<20))
	key := client.ObjectKey{Namespace: prefix + suffix, Name: "plain-" + suffix}
	Expect(pl.Namespace(ctx, key.Namespace, nil)).To(Succeed())
	cc, err := pl.ClusterClass(key.Namespace)
	Expect(err).NotTo(HaveOccurred())
	for _, o := range cc {
		Expect(pl.Apply(ctx, o)).To(Succeed())
	}
	Expect(pl.WaitForClusterClass(ctx, key.Namespace, plane.ClusterClassName)).To(Succeed())
	secret, cluster, err := pl.RenderCluster(plane.ClusterVariables{Name: key.Name, Namespace: key.Namespace, CloudsYAML: clouds})
	Expect(err).NotTo(HaveOccurred())
	for i := range cluster.Spec.Topology.Workers.MachineDeployments {
		md := &cluster.Spec.Topology.Workers.MachineDeployments[i]
		variables.SetOverride(cluster, md.Name, nil)
		md.Replicas = ptr.To[int32](0)
	}
	// It runs next to the story's cluster, whose Services its CCM would serve too.
	cluster.Labels[plane.NoCloudControllerManagerLabel] = ""
	Expect(pl.Apply(ctx, secret, cluster)).To(Succeed())
	DeferCleanup(deleteClusterIfPresent, key, NodeTimeout(10*time.Minute))
	return key
}

// provisioned is whether CAPO has made the cluster's infrastructure.
func provisioned(ctx context.Context, g Gomega, key client.ObjectKey) bool {
	c := &clusterv1.Cluster{}
	g.Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
	return ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)
}

// deletionHookNamespaces are the namespaces the deletion ExtensionConfig's
// namespaceSelector names (none when it selects none).
func deletionHookNamespaces(ctx context.Context, g Gomega) []string {
	ec := &runtimev1.ExtensionConfig{}
	g.Expect(pl.Client.Get(ctx, client.ObjectKey{Name: plane.DeletionExtensionConfigName}, ec)).To(Succeed())
	g.Expect(ec.Spec.NamespaceSelector).NotTo(BeNil(), "a nil selector would select every namespace")
	var out []string
	for _, r := range ec.Spec.NamespaceSelector.MatchExpressions {
		if r.Operator == metav1.LabelSelectorOpIn {
			out = append(out, r.Values...)
		}
	}
	return out
}

// attachmentPhase is the phase of a nodegroup's attachment, which must exist.
func attachmentPhase(ctx context.Context, g Gomega, cluster client.ObjectKey, topology string) sharednetv1.AttachmentPhase {
	a, err := pl.Attachment(ctx, cluster.Namespace, cluster.Name, topology)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).NotTo(BeNil(), "the attachment of %s", topology)
	return a.Status.Phase
}

// attachmentColumns is `kubectl get sharednetworkattachments -n ns`: the
// API server's Table of the CRD's printer columns, by attachment name, each
// row by column name.
func attachmentColumns(ctx context.Context, ns string) map[string]map[string]string {
	GinkgoHelper()
	hc, err := rest.HTTPClientFor(pl.Config)
	Expect(err).NotTo(HaveOccurred())
	u, err := url.JoinPath(pl.Config.Host, "apis", sharednetv1.GroupVersion.Group, sharednetv1.GroupVersion.Version, "namespaces", ns, "sharednetworkattachments")
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s", u)
	table := &metav1.Table{}
	Expect(json.NewDecoder(resp.Body).Decode(table)).To(Succeed())
	out := map[string]map[string]string{}
	for _, row := range table.Rows {
		cells := map[string]string{}
		for i, c := range table.ColumnDefinitions {
			if i < len(row.Cells) {
				cells[c.Name] = fmt.Sprint(row.Cells[i])
			}
		}
		out[cells["Name"]] = cells
	}
	fmt.Fprintf(GinkgoWriter, "kubectl get sharednetworkattachments -n %s: %v\n", ns, out)
	return out
}

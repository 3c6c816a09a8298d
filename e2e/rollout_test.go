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
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
)

// rolloutTrace follows one nodegroup from a Cluster update until every
// machine it had is deleted and as many new ones are Running. The first
// seconds (the nudge, the attachment, the new template and MachineSet) are
// marked from watches, as the API server sends each change; the machines,
// which take tens of seconds, by polling every 200 ms (at most one poll
// late). The same for an attach and for an inline patch rollout.
type rolloutTrace struct {
	begin time.Time
	done  chan struct{}

	mu    sync.Mutex
	marks []traceMark
	seen  map[string]bool
	took  time.Duration
	err   error
}

type traceMark struct {
	at   time.Duration
	what string
}

// sharedAnnotation is the extension's nudge on the Cluster for a topology
// (controllers.sharedAnnotationPrefix).
func sharedAnnotation(topology string) string { return "sharednet.capo.io/shared." + topology }

// traceRollout starts following topology's rollout; old are its machines
// now, want how many it has when done. Start it right before the Cluster
// update: its clock starts here.
func traceRollout(ctx context.Context, ns, cluster, topology string, old []plane.Machine, want int) *rolloutTrace {
	GinkgoHelper()
	key := client.ObjectKey{Namespace: ns, Name: cluster}
	c := &clusterv1.Cluster{}
	Expect(pl.Client.Get(ctx, key, c)).To(Succeed())
	nudge := c.Annotations[sharedAnnotation(topology)]
	md := theMachineDeployment(ctx, key, topology)
	template := md.Spec.Template.Spec.InfrastructureRef.Name
	oldSets := map[string]bool{}
	for _, ms := range machineSets(ctx, ns, md.Name) {
		oldSets[ms] = true
	}
	oldMachines := map[string]bool{}
	for _, m := range old {
		oldMachines[m.Name] = true
	}
	attachment, err := pl.Attachment(ctx, ns, cluster, topology)
	Expect(err).NotTo(HaveOccurred())
	shared := attachment != nil && attachment.ShareEstablished()
	hadAttachment := attachment != nil

	t := &rolloutTrace{begin: time.Now(), done: make(chan struct{}), seen: map[string]bool{}}
	t.watch(ctx, &clusterv1.ClusterList{}, func(o client.Object) {
		if o.GetName() == cluster && o.GetAnnotations()[sharedAnnotation(topology)] != nudge {
			t.mark("Cluster annotated by the extension (nudge)")
		}
	}, client.InNamespace(ns))
	t.watch(ctx, &sharednetv1.SharedNetworkAttachmentList{}, func(o client.Object) {
		a, ok := o.(*sharednetv1.SharedNetworkAttachment)
		if !ok || a.Name != sharednetv1.AttachmentName(cluster, topology) {
			return
		}
		if !hadAttachment {
			t.mark("attachment created")
		}
		if !shared && a.ShareEstablished() {
			t.mark("share made (attachment status.share)")
		}
	}, client.InNamespace(ns))
	t.watch(ctx, &clusterv1.MachineDeploymentList{}, func(o client.Object) {
		if md, ok := o.(*clusterv1.MachineDeployment); ok && md.Spec.Template.Spec.InfrastructureRef.Name != template {
			t.mark("MachineDeployment on a new OpenStackMachineTemplate")
		}
	}, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology})
	t.watch(ctx, &clusterv1.MachineSetList{}, func(o client.Object) {
		if !oldSets[o.GetName()] {
			t.mark("new MachineSet")
		}
	}, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name})
	go func() {
		defer GinkgoRecover()
		defer close(t.done)
		for {
			if t.poll(ctx, key, topology, oldMachines, want) {
				return
			}
			select {
			case <-ctx.Done():
				t.mu.Lock()
				t.err = ctx.Err()
				t.mu.Unlock()
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return t
}

// watcher watches the management API server for the traces.
var watcher = sync.OnceValues(func() (client.WithWatch, error) {
	return client.NewWithWatch(pl.Config, client.Options{Scheme: pl.Client.Scheme()})
})

// watch calls mark with each object list's kind sends until the trace is
// done; the watch is open when it returns, so nothing after it is missed
// (the objects that exist come first, as ADDED).
func (t *rolloutTrace) watch(ctx context.Context, list client.ObjectList, mark func(client.Object), opts ...client.ListOption) {
	GinkgoHelper()
	c, err := watcher()
	Expect(err).NotTo(HaveOccurred())
	w, err := c.Watch(ctx, list, opts...)
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		defer w.Stop()
		for {
			select {
			case <-t.done:
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if o, isObject := ev.Object.(client.Object); isObject && ev.Type != watch.Error {
					mark(o)
				}
			}
		}
	}()
}

// mark records what the first time it is seen.
func (t *rolloutTrace) mark(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.seen[what] {
		t.seen[what] = true
		t.marks = append(t.marks, traceMark{at: time.Since(t.begin), what: what})
	}
}

// poll looks at the machines once; true when the rollout is over.
func (t *rolloutTrace) poll(ctx context.Context, key client.ObjectKey, topology string, oldMachines map[string]bool, want int) bool {
	machines, err := pl.Machines(ctx, key.Namespace, key.Name, topology)
	if err != nil {
		return false
	}
	present := map[string]bool{}
	created, running := 0, 0
	for _, m := range machines {
		present[m.Name] = true
		if oldMachines[m.Name] {
			continue
		}
		created++
		t.mark(fmt.Sprintf("new machines created: %d", created))
		if m.Phase == string(clusterv1.MachinePhaseRunning) {
			running++
			t.mark(fmt.Sprintf("new machines Running: %d", running))
		}
	}
	gone := 0
	for name := range oldMachines {
		if !present[name] {
			gone++
			t.mark(fmt.Sprintf("old machines deleted: %d", gone))
		}
	}
	if gone == len(oldMachines) && running == want && len(machines) == want {
		t.mu.Lock()
		t.took = time.Since(t.begin)
		t.mu.Unlock()
		return true
	}
	return false
}

// wait returns how long the rollout took, from the trace's start to every
// old machine deleted and want new ones Running.
func (t *rolloutTrace) wait(timeout time.Duration) time.Duration {
	GinkgoHelper()
	Eventually(t.done, timeout).Should(BeClosed(), "the rollout ends")
	t.mu.Lock()
	defer t.mu.Unlock()
	Expect(t.err).NotTo(HaveOccurred())
	return t.took
}

// at is when what was first seen.
func (t *rolloutTrace) at(what string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.marks {
		if m.what == what {
			return m.at, true
		}
	}
	return 0, false
}

// String lists the milestones in order: "+1.2s what, ...".
func (t *rolloutTrace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	marks := slices.Clone(t.marks)
	slices.SortStableFunc(marks, func(a, b traceMark) int { return int(a.at - b.at) })
	parts := make([]string, 0, len(marks))
	for _, m := range marks {
		parts = append(parts, fmt.Sprintf("+%.1fs %s", m.at.Seconds(), m.what))
	}
	return strings.Join(parts, ", ")
}

func theMachineDeployment(ctx context.Context, key client.ObjectKey, topology string) *clusterv1.MachineDeployment {
	GinkgoHelper()
	list := &clusterv1.MachineDeploymentList{}
	Expect(pl.Client.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel: key.Name, clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology,
	})).To(Succeed())
	Expect(list.Items).To(HaveLen(1))
	return &list.Items[0]
}

// machineSets are the names of a MachineDeployment's MachineSets (none on an error).
func machineSets(ctx context.Context, ns, md string) []string {
	list := &clusterv1.MachineSetList{}
	if err := pl.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil {
		return nil
	}
	out := make([]string, 0, len(list.Items))
	for _, ms := range list.Items {
		out = append(out, ms.Name)
	}
	return out
}

// setOverride sets (or replaces) one variable override of a MachineDeployment topology.
func setOverride(c *clusterv1.Cluster, topology, variable string, raw []byte) {
	for i := range c.Spec.Topology.Workers.MachineDeployments {
		md := &c.Spec.Topology.Workers.MachineDeployments[i]
		if md.Name != topology {
			continue
		}
		md.Variables.Overrides = slices.DeleteFunc(md.Variables.Overrides, func(v clusterv1.ClusterVariable) bool { return v.Name == variable })
		md.Variables.Overrides = append(md.Variables.Overrides, clusterv1.ClusterVariable{Name: variable, Value: apiextensionsv1.JSON{Raw: raw}})
	}
}

// copyFlavor makes, as the test bed's admin, a public Nova flavor with
// the sizes of flavor `from`, named name; deleted when the spec ends.
func copyFlavor(ctx context.Context, from, name string) string {
	GinkgoHelper()
	pages, err := flavors.ListDetail(admin.Compute, flavors.ListOpts{AccessType: flavors.AllAccess}).AllPages(ctx)
	Expect(err).NotTo(HaveOccurred())
	all, err := flavors.ExtractFlavors(pages)
	Expect(err).NotTo(HaveOccurred())
	i := slices.IndexFunc(all, func(f flavors.Flavor) bool { return f.Name == from })
	Expect(i).NotTo(Equal(-1), "flavor %s in Nova", from)
	src := all[i]
	public := true
	f, err := flavors.Create(ctx, admin.Compute, flavors.CreateOpts{Name: name, RAM: src.RAM, VCPUs: src.VCPUs, Disk: &src.Disk, IsPublic: &public}).Extract()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { _ = flavors.Delete(ctx, admin.Compute, f.ID).ExtractErr() })
	return f.Name
}

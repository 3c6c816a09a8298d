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

package fairshare

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// blocking holds every reconcile until released, counting those inside.
type blocking struct {
	mu      sync.Mutex
	inside  map[string]int
	release chan struct{}
}

func (b *blocking) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	b.mu.Lock()
	b.inside[req.Namespace]++
	b.mu.Unlock()
	<-b.release
	return reconcile.Result{}, nil
}

func (b *blocking) count(ns string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inside[ns]
}

// A namespace whose reconciles hang (its Keystone never answers) holds at
// most its share of the workers; its other requests come back later, and
// another namespace's request runs at once.
func TestANamespaceHoldsAtMostItsShareOfTheWorkers(t *testing.T) {
	g := NewWithT(t)
	next := &blocking{inside: map[string]int{}, release: make(chan struct{})}
	f := &Reconciler{Next: next, PerNamespace: Share(10), Wait: 3 * time.Second}
	g.Expect(f.PerNamespace).To(Equal(3))
	req := func(ns, name string) reconcile.Request {
		return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
	}
	for i := range 3 {
		go func() { _, _ = f.Reconcile(context.Background(), req("hostile", string(rune('a'+i)))) }()
	}
	g.Eventually(func() int { return next.count("hostile") }, 5*time.Second, 10*time.Millisecond).Should(Equal(3))
	res, err := f.Reconcile(context.Background(), req("hostile", "d"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(3*time.Second), "past its share: back later, the worker freed")
	g.Expect(next.count("hostile")).To(Equal(3))

	go func() { _, _ = f.Reconcile(context.Background(), req("healthy", "c")) }()
	g.Eventually(func() int { return next.count("healthy") }, 5*time.Second, 10*time.Millisecond).Should(Equal(1), "another namespace runs at once")
	close(next.release)
	g.Eventually(func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.running)
	}, 5*time.Second, 10*time.Millisecond).Should(BeZero(), "nothing is kept for namespaces no longer running")
	g.Expect(Share(1)).To(Equal(1), "a controller of one worker still runs")
}

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

package manager

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// maxListHold bounds how long one informer keeps the others from listing: a
// list that takes longer (an API server far away or overloaded, a kind of
// millions) lets the next one start, as without the gate. At 2,000 Clusters
// a list takes a second or two.
const maxListHold = 30 * time.Second

// cacheSyncTimeout is how long a controller waits for its informers: the
// lists now add up (a dozen informers, each at most maxListHold before the
// next starts), where controller-runtime's default of 2 minutes was sized
// for lists made together.
const cacheSyncTimeout = 10 * time.Minute

// listGate lets the cache's informers list one at a time. An informer's
// list reads every object of its kind in one response and decodes it whole
// before the cache's transform trims it; the manager starts a dozen
// informers at once, and their lists, live together, set its peak RSS at
// 2,000 Clusters of 4 nodegroups (test/scale, without a memory limit: 475
// MiB before, 392-396 after). A list holds the gate from the request until
// its reflector starts to watch (the objects are in the store by then),
// fails, stops, or has held it for maxHold. Relists (after an API server
// restart, every informer at once) take turns the same way.
type listGate struct {
	slot    chan struct{}
	maxHold time.Duration
}

func newListGate(maxHold time.Duration) *listGate {
	return &listGate{slot: make(chan struct{}, 1), maxHold: maxHold}
}

// newInformer is cache.Options.NewInformer: client-go's informer, its lists
// through the gate.
func (g *listGate) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(&gatedListWatch{gate: g, lw: toolscache.ToListerWatcherWithContext(lw)}, obj, resync, indexers)
}

// gatedListWatch is one informer's ListerWatcher.
type gatedListWatch struct {
	gate *listGate
	lw   toolscache.ListerWatcherWithContext

	mu   sync.Mutex
	held *hold // while this informer holds the gate
}

// hold is one turn at the gate, given back once.
type hold struct {
	once    sync.Once
	stopped func() bool // stops the release when the informer stops
	late    *time.Timer // the release after maxHold
}

func (l *gatedListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	list, err := l.lw.ListWithContext(ctx, opts)
	if err != nil {
		l.giveBack()
	}
	return list, err
}

func (l *gatedListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	l.giveBack()
	return l.lw.WatchWithContext(ctx, opts)
}

// List and Watch are the ListerWatcher client-go still asks for.
func (l *gatedListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *gatedListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// acquire waits for the gate, unless this informer holds it already (the
// next page of its list, or the list again after its store refused it).
func (l *gatedListWatch) acquire(ctx context.Context) error {
	l.mu.Lock()
	held := l.held != nil
	l.mu.Unlock()
	if held {
		return nil
	}
	select {
	case l.gate.slot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	h := &hold{}
	l.mu.Lock()
	l.held = h
	l.mu.Unlock()
	h.stopped = context.AfterFunc(ctx, func() { l.free(h) })
	h.late = time.AfterFunc(l.gate.maxHold, func() { l.free(h) })
	return nil
}

// free gives the gate back once per turn; a turn that ends without a watch
// (stopped, or held too long) is forgotten, so the informer's next list
// waits for a turn of its own.
func (l *gatedListWatch) free(h *hold) {
	h.once.Do(func() {
		<-l.gate.slot
		l.mu.Lock()
		if l.held == h {
			l.held = nil
		}
		l.mu.Unlock()
	})
}

func (l *gatedListWatch) giveBack() {
	l.mu.Lock()
	h := l.held
	l.held = nil
	l.mu.Unlock()
	if h != nil {
		h.stopped()
		h.late.Stop()
		l.free(h)
	}
}

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
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// listings is a fake API server for the gate's tests: each kind's list
// takes a while (a large response being decoded), and it counts the
// informers between a list request and their watch, where an informer
// holds its whole list.
type listings struct {
	mu             sync.Mutex
	holding, most  int
	failFirstLists atomic.Int32
}

func (l *listings) kind(name string) toolscache.ListerWatcher {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			l.mu.Lock()
			l.holding++
			l.most = max(l.most, l.holding)
			l.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			if l.failFirstLists.Add(-1) >= 0 {
				l.mu.Lock()
				l.holding--
				l.mu.Unlock()
				return nil, errors.New("the API server is restarting")
			}
			return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"},
				Items: []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "1"}}}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			l.mu.Lock()
			l.holding--
			l.mu.Unlock()
			return watch.NewFake(), nil // open until the informer stops
		},
	}
}

// The manager's informers hold one list at a time, and every one of them
// still syncs, a list that failed included.
func TestTheInformersListOneAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := &listings{}
	api.failFirstLists.Store(1)
	gate := newListGate(time.Minute)
	var informers []toolscache.SharedIndexInformer
	for i := range 6 {
		informer := gate.newInformer(api.kind(fmt.Sprintf("kind-%d", i)), &corev1.ConfigMap{}, 0, toolscache.Indexers{})
		informers = append(informers, informer)
		go informer.RunWithContext(ctx)
	}
	for i, informer := range informers {
		if !toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			t.Fatalf("informer %d did not sync within 30 s: the gate was not given back", i)
		}
		if keys := informer.GetStore().ListKeys(); len(keys) != 1 || keys[0] != fmt.Sprintf("default/kind-%d", i) {
			t.Errorf("informer %d holds %q, want its one object", i, keys)
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.most != 1 {
		t.Errorf("%d informers held their lists at the same time, want 1", api.most)
	}
}

// listsThrough reports when a list through lw returns.
func listsThrough(ctx context.Context, lw *gatedListWatch) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := lw.ListWithContext(ctx, metav1.ListOptions{})
		done <- err
	}()
	return done
}

// An informer stopped between its list and its watch, or a list held
// longer than the gate allows, lets the next informer list.
func TestTheGateIsGivenBackWithoutAWatch(t *testing.T) {
	for name, c := range map[string]struct {
		maxHold time.Duration
		leave   func(stop context.CancelFunc)
	}{
		"stopped":       {maxHold: time.Minute, leave: func(stop context.CancelFunc) { stop() }},
		"held too long": {maxHold: 200 * time.Millisecond, leave: func(context.CancelFunc) {}},
	} {
		t.Run(name, func(t *testing.T) {
			api := &listings{}
			gate := newListGate(c.maxHold)
			first := &gatedListWatch{gate: gate, lw: toolscache.ToListerWatcherWithContext(api.kind("first"))}
			next := &gatedListWatch{gate: gate, lw: toolscache.ToListerWatcherWithContext(api.kind("next"))}
			firstCtx, stopFirst := context.WithCancel(context.Background())
			defer stopFirst()
			if err := <-listsThrough(firstCtx, first); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			listed := listsThrough(ctx, next)
			c.leave(stopFirst)
			if err := <-listed; err != nil {
				t.Fatalf("the next informer did not list within 10 s (%v): the gate stayed with the first", err)
			}
		})
	}
}

// A list that outlived its turn and is made again (its store refused it)
// waits for a turn of its own instead of listing beside the next holder.
func TestAListMadeAgainAfterItsTurnWaitsForAnother(t *testing.T) {
	api := &listings{}
	gate := newListGate(time.Second)
	first := &gatedListWatch{gate: gate, lw: toolscache.ToListerWatcherWithContext(api.kind("first"))}
	next := &gatedListWatch{gate: gate, lw: toolscache.ToListerWatcherWithContext(api.kind("next"))}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := <-listsThrough(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := <-listsThrough(ctx, next); err != nil { // after first's second
		t.Fatalf("the next informer did not list within 10 s (%v)", err)
	}
	again := listsThrough(ctx, first)
	select {
	case err := <-again:
		t.Fatalf("the first informer listed again (%v) while the next held the gate", err)
	case <-time.After(200 * time.Millisecond): // well within next's turn of a second
	}
	if _, err := next.WatchWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-again; err != nil {
		t.Fatalf("the first informer did not list again once the next watched (%v)", err)
	}
}

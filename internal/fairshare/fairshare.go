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

// Package fairshare keeps one namespace from holding more than its share of
// a controller's workers. A tenant controls its namespace's Clusters and the
// Keystone their clouds.yaml names: twenty Clusters pointing at a Keystone
// that never answers would otherwise hold every worker for a reconcile
// timeout each, and every other tenant's attach would wait behind them.
package fairshare

import (
	"context"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultWait is how soon a request whose namespace has taken its share
// comes back.
const DefaultWait = time.Second

// Reconciler runs Next for at most PerNamespace requests of one namespace at
// once; a request past that share returns at once, to be reconciled after
// Wait, and frees its worker for other namespaces.
type Reconciler struct {
	Next reconcile.Reconciler
	// PerNamespace is the share: Share(workers) for a controller of
	// workers; at least 1.
	PerNamespace int
	// Wait is how soon a deferred request comes back; DefaultWait when zero.
	Wait time.Duration

	mu      sync.Mutex
	running map[string]int
}

// Share is one namespace's share of a controller's workers: a third, at
// least one, so that three hostile namespaces together still leave a worker
// when there are ten.
func Share(workers int) int {
	return max(1, workers/3)
}

// Reconcile implements reconcile.Reconciler.
func (f *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !f.enter(req.Namespace) {
		ctrl.LoggerFrom(ctx).V(4).Info("the namespace has its share of the workers in use; deferred", "namespace", req.Namespace)
		return reconcile.Result{RequeueAfter: f.wait()}, nil
	}
	defer f.leave(req.Namespace)
	return f.Next.Reconcile(ctx, req)
}

func (f *Reconciler) enter(namespace string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == nil {
		f.running = map[string]int{}
	}
	if f.running[namespace] >= max(1, f.PerNamespace) {
		return false
	}
	f.running[namespace]++
	return true
}

func (f *Reconciler) leave(namespace string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running[namespace]--; f.running[namespace] <= 0 {
		delete(f.running, namespace) // the map holds the namespaces running now only
	}
}

func (f *Reconciler) wait() time.Duration {
	if f.Wait > 0 {
		return f.Wait
	}
	return DefaultWait
}

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

// Package fakeinformers is the manager cache's GetInformer over
// controller-runtime's FakeInformer, a FAKE for fast tests of what is fed
// by informer events (consumers.Table): the test hands each event
// to the informer of its kind (Of(obj).Add, Update, Delete) and says when
// the first list is delivered to the handlers registered on it
// (Delivered), which their registrations then report, as client-go's do.
// An informer's own HasSynced (Of(obj).Synced) is not its handlers'.
package fakeinformers

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
)

// Informers holds one FakeInformer per Go type of object.
type Informers struct {
	informers map[string]*controllertest.FakeInformer
	delivered map[string]bool
}

// New returns informers with nothing delivered.
func New() *Informers {
	return &Informers{informers: map[string]*controllertest.FakeInformer{}, delivered: map[string]bool{}}
}

func kindOf(obj client.Object) string { return fmt.Sprintf("%T", obj) }

// Of is the informer of obj's kind.
func (f *Informers) Of(obj client.Object) *controllertest.FakeInformer {
	kind := kindOf(obj)
	if f.informers[kind] == nil {
		f.informers[kind] = &controllertest.FakeInformer{}
	}
	return f.informers[kind]
}

// GetInformer implements the cache's method of that name.
func (f *Informers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return informer{FakeInformer: f.Of(obj), registration: registration{f: f, kind: kindOf(obj)}}, nil
}

// Delivered says the informer of obj's kind has synced and delivered its
// first list to every handler.
func (f *Informers) Delivered(obj client.Object) {
	f.Of(obj).Synced = true
	f.delivered[kindOf(obj)] = true
}

// Synced delivers objs to the informers of their kinds, then their first
// list to every handler: a cache that has read them all.
func (f *Informers) Synced(objs ...client.Object) {
	for _, obj := range objs {
		f.Of(obj).Add(obj)
	}
	for _, obj := range objs {
		f.Delivered(obj)
	}
}

// informer returns registrations (FakeInformer's are nil) that report
// whether the first list was delivered to them.
type informer struct {
	*controllertest.FakeInformer
	registration registration
}

func (i informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	_, err := i.FakeInformer.AddEventHandler(h)
	return i.registration, err
}

type registration struct {
	f    *Informers
	kind string
}

func (r registration) HasSynced() bool { return r.f.delivered[r.kind] }

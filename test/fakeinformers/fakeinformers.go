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
// by informer events (preflight.ConsumerTable): the test hands each event
// to the informer of its kind (Of(obj).Add, Update, Delete) and says when
// its first list is delivered (Of(obj).Synced = true), which the
// registrations report as client-go's do.
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
type Informers map[string]*controllertest.FakeInformer

// Of is the informer of obj's kind.
func (f Informers) Of(obj client.Object) *controllertest.FakeInformer {
	kind := fmt.Sprintf("%T", obj)
	if f[kind] == nil {
		f[kind] = &controllertest.FakeInformer{}
	}
	return f[kind]
}

// GetInformer implements the cache's method of that name.
func (f Informers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return registering{f.Of(obj)}, nil
}

// registering returns registrations (FakeInformer's are nil) that have
// synced when the informer has.
type registering struct{ *controllertest.FakeInformer }

func (r registering) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	_, err := r.FakeInformer.AddEventHandler(h)
	return r, err
}

// Synced delivers objs to the informers of their kinds and marks every
// informer synced: a cache that has read them all.
func (f Informers) Synced(objs ...client.Object) {
	for _, obj := range objs {
		f.Of(obj).Add(obj)
	}
	for _, informer := range f {
		informer.Synced = true
	}
}

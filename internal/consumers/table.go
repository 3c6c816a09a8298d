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

package consumers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
)

// ErrNotRead is the Table's answer until the manager's
// cache has delivered every Cluster and attachment to it.
var ErrNotRead = errors.New("the extension has not yet read every Cluster and SharedNetworkAttachment since it started")

// Table is every nodegroup's claim on the SharedNetworks (its size
// and the subnet its value names) and the addresses each attachment holds,
// kept from the manager's Cluster and attachment informers. The capacity
// rule reads a subnet's consumers from it instead of decoding and sizing
// each of them on every admission: at 500 Clusters a subnet has hundreds
// (docs/performance.md). It answers what SubnetConsumers answers over the
// same cache, and answers nothing (ErrNotRead) until both informers
// delivered their first list, so a manager that just started never judges
// on half the consumers: the decision service then lists them through the
// cache instead (which waits for its sync), and the readyz check keeps
// admissions away from such a replica.
type Table struct {
	mu          sync.Mutex
	ofCluster   map[client.ObjectKey][]claim             // what each Cluster claims
	clustersOf  map[string]map[client.ObjectKey]struct{} // SharedNetwork → the Clusters claiming it
	attachments map[client.ObjectKey]attached            // by the attachment's key
	// consumers is, per SharedNetwork, its claims with the addresses each
	// holds, made when first asked after a change: most events (a Cluster's
	// or an attachment's conditions) change no claim and keep it.
	consumers map[string][]entry
	// subnets is, per SharedNetwork, the rules' consumers of each of its
	// subnets as a decision reads them, made when first asked after a
	// change or for another version of the SharedNetwork (its subnets
	// resolve the values): a decision then copies nothing (at 2,000
	// Clusters a subnet has a thousand consumers).
	subnets map[string]subnetLists

	synced   []func() bool
	isSynced atomic.Bool
}

// attached is what an attachment says of its nodegroup.
type attached struct {
	cluster  client.ObjectKey // its spec's Cluster
	consumer string           // rules.ConsumerName of its spec
	nodes    int              // addresses it holds on the subnet
}

// entry is a claim and the addresses its nodegroup holds.
type entry struct {
	claim
	holds int
}

// NewTable returns an empty table; Watch feeds it.
func NewTable() *Table {
	return &Table{
		ofCluster:   map[client.ObjectKey][]claim{},
		clustersOf:  map[string]map[client.ObjectKey]struct{}{},
		attachments: map[client.ObjectKey]attached{},
		consumers:   map[string][]entry{},
		subnets:     map[string]subnetLists{},
	}
}

// Informers is the part of the manager's cache (mgr.GetCache()) Watch takes.
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// Watch feeds the table from the Cluster and SharedNetworkAttachment
// informers. Called once, before the cache starts (internal/manager's
// NewManager): it starts with them.
func (t *Table) Watch(ctx context.Context, informers Informers) error {
	if len(t.synced) > 0 {
		return errors.New("the consumer table already watches its informers")
	}
	for _, w := range []struct {
		obj     client.Object
		handler toolscache.ResourceEventHandler
	}{
		{&clusterv1.Cluster{}, t.ClusterEvents()},
		{&sharednetv1.SharedNetworkAttachment{}, t.AttachmentEvents()},
	} {
		informer, err := informers.GetInformer(ctx, w.obj)
		if err != nil {
			return fmt.Errorf("the consumer table: informer of %T: %w", w.obj, err)
		}
		registration, err := informer.AddEventHandler(w.handler)
		if err != nil {
			return fmt.Errorf("the consumer table: watching %T: %w", w.obj, err)
		}
		t.synced = append(t.synced, registration.HasSynced)
	}
	return nil
}

// ClusterEvents keeps the claims of Clusters.
func (t *Table) ClusterEvents() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.setCluster(obj, false) },
		UpdateFunc: func(_, obj any) { t.setCluster(obj, false) },
		DeleteFunc: func(obj any) { t.setCluster(obj, true) },
	}
}

// AttachmentEvents keeps the addresses attachments hold.
func (t *Table) AttachmentEvents() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.setAttachment(obj, false) },
		UpdateFunc: func(_, obj any) { t.setAttachment(obj, false) },
		DeleteFunc: func(obj any) { t.setAttachment(obj, true) },
	}
}

// eventObject is an event's object, also when a watch missed its deletion.
func eventObject(obj any) any {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}

func (t *Table) setCluster(obj any, deleted bool) {
	cluster, ok := eventObject(obj).(*clusterv1.Cluster)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(cluster)
	var claims []claim
	if !deleted {
		claims = claimsOf(cluster) // outside the lock: it decodes the variables
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	before := t.ofCluster[key]
	if slices.EqualFunc(before, claims, claim.same) {
		return
	}
	for _, c := range before {
		delete(t.clustersOf[c.sharedNetwork], key)
		if len(t.clustersOf[c.sharedNetwork]) == 0 {
			delete(t.clustersOf, c.sharedNetwork)
		}
		t.forget(c.sharedNetwork)
	}
	delete(t.ofCluster, key)
	if len(claims) == 0 {
		return
	}
	t.ofCluster[key] = claims
	for _, c := range claims {
		if t.clustersOf[c.sharedNetwork] == nil {
			t.clustersOf[c.sharedNetwork] = map[client.ObjectKey]struct{}{}
		}
		t.clustersOf[c.sharedNetwork][key] = struct{}{}
		t.forget(c.sharedNetwork)
	}
}

func (t *Table) setAttachment(obj any, deleted bool) {
	a, ok := eventObject(obj).(*sharednetv1.SharedNetworkAttachment)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(a)
	now := attached{
		cluster:  client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.ClusterName},
		consumer: rules.ConsumerName(a.Namespace, a.Spec.ClusterName, a.Spec.MachineDeploymentTopology),
		nodes:    len(a.Status.Nodes),
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	before, had := t.attachments[key]
	switch {
	case deleted:
		delete(t.attachments, key)
	case had && before == now:
		return
	default:
		t.attachments[key] = now
	}
	// The SharedNetworks its Cluster (before and now) claims hold other numbers.
	for _, cluster := range []client.ObjectKey{before.cluster, now.cluster} {
		for _, c := range t.ofCluster[cluster] {
			t.forget(c.sharedNetwork)
		}
	}
}

// ReadyzCheck is a healthz.Checker: ready once the table has read every
// Cluster and attachment, so that admission is not sent to a replica
// whose capacity decisions would wait for its cache.
func (t *Table) ReadyzCheck(_ *http.Request) error {
	if !t.hasSynced() {
		return ErrNotRead
	}
	return nil
}

// hasSynced says whether every informer delivered its first list.
func (t *Table) hasSynced() bool {
	if t.isSynced.Load() {
		return true
	}
	if len(t.synced) == 0 {
		return false
	}
	for _, synced := range t.synced {
		if !synced() {
			return false
		}
	}
	t.isSynced.Store(true)
	return true
}

// consumersOf is every claim on SharedNetwork name with the addresses it
// holds (as attachments.Get finds them: the object of the nodegroup's
// attachment name, when its spec names that nodegroup). Called locked.
func (t *Table) consumersOf(name string) []entry {
	if out, ok := t.consumers[name]; ok {
		return out
	}
	out := []entry{}
	for key := range t.clustersOf[name] {
		for _, c := range t.ofCluster[key] {
			if c.sharedNetwork != name {
				continue
			}
			holds := 0
			if a, ok := t.attachments[c.attachment]; ok && a.consumer == c.name {
				holds = a.nodes
			}
			out = append(out, entry{claim: c, holds: holds})
		}
	}
	t.consumers[name] = out
	return out
}

// subnetLists are a SharedNetwork's consumers by subnet, for the subnets
// it had (what a value's subnet resolves against).
type subnetLists struct {
	subnets  string
	bySubnet map[string]subnetList
}

// subnetList is a subnet's consumers, and those whose size cannot be
// judged.
type subnetList struct {
	consumers []rules.Consumer
	invalid   []entry
}

// forget drops what was made of SharedNetwork name's claims. Called locked.
func (t *Table) forget(name string) {
	delete(t.consumers, name)
	delete(t.subnets, name)
}

// SubnetConsumers is every consumer of subnet of sn but the one named
// except (rules.ConsumerName; "" for none), as the package-level
// SubnetConsumers lists them. The slice is shared with the next decisions
// on the subnet: callers read it and never change it.
func (t *Table) SubnetConsumers(sn *sharednetv1.SharedNetwork, subnet, except string) ([]rules.Consumer, error) {
	if !t.hasSynced() {
		return nil, ErrNotRead
	}
	t.mu.Lock()
	list := t.subnetList(sn, subnet)
	t.mu.Unlock()
	for _, c := range list.invalid {
		if c.name != except {
			return nil, c.invalid
		}
	}
	i := slices.IndexFunc(list.consumers, func(c rules.Consumer) bool { return c.Name == except })
	if i < 0 {
		return list.consumers, nil // an attach: the nodegroup is no consumer yet
	}
	return slices.Concat(list.consumers[:i], list.consumers[i+1:]), nil
}

// subnetList is the consumers of subnet of sn. Called locked.
func (t *Table) subnetList(sn *sharednetv1.SharedNetwork, subnet string) subnetList {
	subnets := strings.Join(sn.Spec.Subnets, ",") + "|" + strings.Join(sn.Status.SubnetIDs(), ",")
	lists, ok := t.subnets[sn.Name]
	if !ok || lists.subnets != subnets {
		lists = subnetLists{subnets: subnets, bySubnet: map[string]subnetList{}}
		t.subnets[sn.Name] = lists
	}
	if list, ok := lists.bySubnet[subnet]; ok {
		return list
	}
	on := &subnetOf{sn: sn}
	all := t.consumersOf(sn.Name)
	var list subnetList
	for i := range all {
		c := &all[i]
		if !on.is(c.subnet, subnet) {
			continue
		}
		if c.invalid != nil {
			list.invalid = append(list.invalid, *c)
			continue
		}
		list.consumers = append(list.consumers, c.consumer(c.holds))
	}
	list.consumers = slices.Clip(list.consumers) // an append by a reader never writes into it
	lists.bySubnet[subnet] = list
	return list
}

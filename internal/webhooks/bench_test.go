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

package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
	"github.com/capo-sharednet/capo-sharednet/test/fakeinformers"
)

// Scale of the management cluster the admission benchmark decides in.
const (
	benchClusters        = 500
	benchNodegroups      = 4  // per Cluster: md-0 … md-3
	benchAttached        = 2  // of them attached (md-0, md-1): half
	benchSharedNetworks  = 4  // the handful they are attached to
	benchClustersPerTeam = 10 // Clusters per tenant namespace
	benchReplicas        = 3
)

// scaleWorld is a management cluster of n Clusters (team-NNN/cluster-NNN,
// benchClustersPerTeam per namespace, each with its OpenStackCluster and
// benchNodegroups nodegroups of benchReplicas nodes, md-0 and md-1 attached
// to SharedNetworks sn-(i%4) and sn-((i+1)%4) with their
// SharedNetworkAttachments listing their nodes) over controller-runtime's
// fake client with consumers.SharedNetworkIndex, and the in-memory fake
// cloud. The decision is cluster-000 attaching md-2 to sn-0: with n=500,
// sn-0's subnet has 250 other consumers; with n=1, one (cluster-000's md-0).
type scaleWorld struct {
	cloud     *fakecloud.Cloud
	validator *ClusterValidator
	request   admission.Request
}

// The readers the decision is benchmarked over.
const (
	fakeClient    = "fake-client"
	cacheReader   = "cache-reader"
	consumerTable = "consumer-table"
)

func newScaleWorld(tb testing.TB, n int, reader string) *scaleWorld {
	tb.Helper()
	cloud := fakecloud.New()
	now := metav1.Now()
	ready := []metav1.Condition{{Type: sharednetv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: sharednetv1.ReasonFactsCurrent, LastTransitionTime: now}}
	granted := &metav1.LabelSelector{MatchLabels: map[string]string{"shared-networks": "yes"}}
	var objs []client.Object
	vm := &fakecloud.Project{Cloud: cloud, ID: "vm-project"}
	clouds := &fakecloud.Clouds{Clusters: map[string]*fakecloud.Project{}, SharedNetworks: map[string]*fakecloud.Project{}}
	for i := range benchSharedNetworks {
		name, cidr := fmt.Sprintf("sn-%d", i), fmt.Sprintf("172.16.%d.0/20", 16*i)
		network, subnet := cloud.AddNetwork("vm-project", 1450, cidr)
		var status sharednetv1.SubnetStatus
		// JSON: the same literal whatever Go type the address counts have.
		if err := json.Unmarshal(fmt.Appendf(nil, `{"id":%q,"cidr":%q,"freeAddresses":4000}`, subnet, cidr), &status); err != nil {
			tb.Fatal(err)
		}
		objs = append(objs, &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: sharednetv1.SharedNetworkSpec{NetworkID: network, Subnets: []string{subnet}, NamespaceSelector: granted},
			Status: sharednetv1.SharedNetworkStatus{MTU: 1450, LastRefreshTime: &now, Conditions: ready,
				Subnets: []sharednetv1.SubnetStatus{status}}})
		clouds.SharedNetworks[name] = vm
	}
	var subject *clusterv1.Cluster
	for i := range n {
		namespace, name := fmt.Sprintf("team-%03d", i/benchClustersPerTeam), fmt.Sprintf("cluster-%03d", i)
		if i%benchClustersPerTeam == 0 {
			objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{"shared-networks": "yes"}}})
		}
		project := fmt.Sprintf("project-%03d", i)
		clusterNet, clusterSubnet := cloud.AddNetwork(project, 1450, "10.6.0.0/24")
		osc := &infrav1.OpenStackCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Spec:       infrav1.OpenStackClusterSpec{ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "10.6.0.0/24"}}},
			Status: infrav1.OpenStackClusterStatus{Network: &infrav1.NetworkStatusWithSubnets{
				NetworkStatus: infrav1.NetworkStatus{ID: clusterNet}, Subnets: []infrav1.Subnet{{ID: clusterSubnet, CIDR: "10.6.0.0/24"}}}},
		}
		cluster := &clusterv1.Cluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: clusterv1.ClusterSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.SchemeGroupVersion.Group, Kind: "OpenStackCluster", Name: name},
				Topology:          clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.35.0"},
			},
			Status: clusterv1.ClusterStatus{FailureDomains: []clusterv1.FailureDomain{{Name: "az-1", ControlPlane: ptr.To(true)}}},
		}
		for md := range benchNodegroups {
			cluster.Spec.Topology.Workers.MachineDeployments = append(cluster.Spec.Topology.Workers.MachineDeployments,
				clusterv1.MachineDeploymentTopology{Class: "w", Name: fmt.Sprintf("md-%d", md), Replicas: ptr.To[int32](benchReplicas)})
		}
		for md := range benchAttached {
			topology, sn := fmt.Sprintf("md-%d", md), objs[(i+md)%benchSharedNetworks].(*sharednetv1.SharedNetwork)
			variables.SetOverride(cluster, topology, fmt.Appendf(nil, `{"name":%q}`, sn.Name))
			a := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sharednetv1.AttachmentName(name, topology)},
				Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: name, MachineDeploymentTopology: topology, SharedNetwork: sn.Name, Subnet: sn.Spec.Subnets[0]}}
			for node := range benchReplicas {
				a.Status.Nodes = append(a.Status.Nodes, sharednetv1.AttachedNode{Machine: fmt.Sprintf("%s-%s-%d", name, topology, node)})
			}
			objs = append(objs, a)
		}
		objs = append(objs, cluster, osc)
		clouds.Clusters[namespace+"/"+name] = &fakecloud.Project{Cloud: cloud, ID: project, OpenStackCluster: osc}
		if i == 0 {
			subject = cluster
		}
	}
	scheme := sharednetscheme.New()
	var c client.Reader = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&clusterv1.Cluster{}, consumers.SharedNetworkIndex, consumers.SharedNetworksOf).Build()
	checker := &preflight.Checker{Reader: c, Cloud: clouds}
	if reader != fakeClient {
		checker.Reader = newIndexedStore(tb, scheme, objs)
	}
	if reader == consumerTable {
		table, informers := consumers.NewTable(), fakeinformers.New()
		if err := table.Watch(context.Background(), informers); err != nil {
			tb.Fatal(err)
		}
		var consumers []client.Object
		for _, obj := range objs {
			switch obj.(type) {
			case *clusterv1.Cluster, *sharednetv1.SharedNetworkAttachment:
				consumers = append(consumers, obj)
			}
		}
		informers.Synced(consumers...)
		checker.Consumers = table
	}
	w := &scaleWorld{cloud: cloud, validator: &ClusterValidator{Checker: checker, Decoder: admission.NewDecoder(scheme)}}

	// The decision: cluster-000 attaches md-2 to sn-0.
	now2 := subject.DeepCopy()
	variables.SetOverride(now2, "md-2", []byte(`{"name":"sn-0"}`))
	w.request = admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update}}
	var err error
	if w.request.Object.Raw, err = json.Marshal(now2); err != nil {
		tb.Fatal(err)
	}
	if w.request.OldObject.Raw, err = json.Marshal(subject); err != nil {
		tb.Fatal(err)
	}
	return w
}

// decide runs the webhook once; it must admit the attach.
func (w *scaleWorld) decide(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp := w.validator.Handle(ctx, w.request); !resp.Allowed {
		tb.Fatalf("the attach was refused: %s", resp.Result.Message)
	}
}

// calls is how many OpenStack calls the fake cloud has answered.
func (w *scaleWorld) calls() int {
	total := 0
	for _, n := range w.cloud.Calls {
		total += n
	}
	return total
}

// BenchmarkClusterAdmissionAtScale: the Cluster webhook deciding one attach
// in a management cluster of 500 Clusters x 4 nodegroups, half of them
// attached to 4 SharedNetworks, against the same decision with 1 Cluster,
// both timed in the same loop (alternating, so load on the machine hits
// both alike). Reported: ns per decision of each, their ratio
// (x-1-cluster) and the live OpenStack calls one decision makes.
//
// consumer-table is the manager's: objects read through client-go's
// thread-safe indexed store, as the manager's informer cache does, and the
// consumers of the subnet from consumers.Table, kept by informer
// events. The two others list and size the consumers on each decision
// (what the Checker does without a table): cache-reader through the same
// store (only the Clusters naming the SharedNetwork are copied);
// fake-client through controller-runtime's fake client, whose List
// JSON-copies every object of the kind before it applies a field index.
func BenchmarkClusterAdmissionAtScale(b *testing.B) {
	for _, reader := range []string{consumerTable, cacheReader, fakeClient} {
		b.Run(reader, func(b *testing.B) { benchmarkAdmission(b, reader, benchClusters) })
	}
}

// BenchmarkClusterAdmissionCurve is the manager's decision (consumer-table)
// at each size of CAPO_SHAREDNET_SCALE_CLUSTERS (100, 500, 1,000 and 2,000
// Clusters by default) against the 1-Cluster one: the curve of
// docs/performance.md (make bench-scale).
func BenchmarkClusterAdmissionCurve(b *testing.B) {
	sizes := []int{100, 500, 1000, 2000}
	if raw := os.Getenv("CAPO_SHAREDNET_SCALE_CLUSTERS"); raw != "" {
		sizes = nil
		for _, f := range strings.Split(raw, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("CAPO_SHAREDNET_SCALE_CLUSTERS=%q: %q is not a number of Clusters; give e.g. 100,500,1000,2000", raw, f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) { benchmarkAdmission(b, consumerTable, n) })
	}
}

func benchmarkAdmission(b *testing.B, reader string, clusters int) {
	b.Helper()
	one, many := newScaleWorld(b, 1, reader), newScaleWorld(b, clusters, reader)
	one.decide(b) // warm both: first reads, decoders
	many.decide(b)
	callsOne, callsMany := one.calls(), many.calls()
	var tOne, tMany time.Duration
	n := 0
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		one.decide(b)
		mid := time.Now()
		many.decide(b)
		tOne, tMany = tOne+mid.Sub(start), tMany+time.Since(mid)
		n++
	}
	b.ReportMetric(float64(tOne.Nanoseconds())/float64(n), "ns/op-1-cluster")
	b.ReportMetric(float64(tMany.Nanoseconds())/float64(n), "ns/op-at-scale")
	b.ReportMetric(float64(tMany)/float64(tOne), "x-1-cluster")
	perOne, perMany := float64(one.calls()-callsOne)/float64(n), float64(many.calls()-callsMany)/float64(n)
	if perOne != perMany {
		b.Errorf("the decision made %v OpenStack calls with 1 Cluster and %v with %d", perOne, perMany, clusters)
	}
	b.ReportMetric(perMany, "openstack-calls/op")
}

// indexedStore is a client.Reader over client-go's indexed store, read as
// controller-runtime's CacheReader reads the manager's informers: Get by
// key, List by a field index (consumers.SharedNetworkIndex on Clusters), by
// namespace or whole, then the label selector; every object returned is a
// deep copy.
type indexedStore struct {
	scheme *runtime.Scheme
	stores map[schema.GroupVersionKind]toolscache.Indexer
}

func newIndexedStore(tb testing.TB, scheme *runtime.Scheme, objs []client.Object) *indexedStore {
	tb.Helper()
	s := &indexedStore{scheme: scheme, stores: map[schema.GroupVersionKind]toolscache.Indexer{}}
	clusterGVK, err := apiutil.GVKForObject(&clusterv1.Cluster{}, scheme)
	if err != nil {
		tb.Fatal(err)
	}
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			tb.Fatal(err)
		}
		store, ok := s.stores[gvk]
		if !ok {
			indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
			if gvk == clusterGVK {
				indexers["field:"+consumers.SharedNetworkIndex] = func(o any) ([]string, error) {
					return consumers.SharedNetworksOf(o.(client.Object)), nil
				}
			}
			store = toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers)
			s.stores[gvk] = store
		}
		if err := store.Add(obj.DeepCopyObject()); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

func (s *indexedStore) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return err
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
	store, ok := s.stores[gvk]
	if !ok {
		return notFound
	}
	storeKey := key.Name // MetaNamespaceKeyFunc's: no slash when cluster-scoped
	if key.Namespace != "" {
		storeKey = key.Namespace + "/" + key.Name
	}
	item, exists, err := store.GetByKey(storeKey)
	if err != nil {
		return err
	}
	if !exists {
		return notFound
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(item.(runtime.Object).DeepCopyObject()).Elem())
	return nil
}

func (s *indexedStore) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, s.scheme)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	listOpts := client.ListOptions{}
	listOpts.ApplyOptions(opts)
	var items []any
	if store, ok := s.stores[gvk]; ok {
		switch {
		case listOpts.FieldSelector != nil:
			reqs := listOpts.FieldSelector.Requirements()
			if len(reqs) != 1 || reqs[0].Operator != "=" && reqs[0].Operator != "==" {
				return fmt.Errorf("field selector %s: one exact match only", listOpts.FieldSelector)
			}
			if items, err = store.ByIndex("field:"+reqs[0].Field, reqs[0].Value); err != nil {
				return err
			}
		case listOpts.Namespace != "":
			if items, err = store.ByIndex(toolscache.NamespaceIndex, listOpts.Namespace); err != nil {
				return err
			}
		default:
			items = store.List()
		}
	}
	out := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		obj := item.(client.Object)
		if listOpts.Namespace != "" && obj.GetNamespace() != listOpts.Namespace {
			continue
		}
		if listOpts.LabelSelector != nil && !listOpts.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		out = append(out, obj.DeepCopyObject())
	}
	return apimeta.SetList(list, out)
}

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

package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
)

// The pure hook benchmarks (issue 15, item 1): GeneratePatches and
// ValidateTopology for one cluster of 100 and 1,000 nodegroups in steady
// state, half of them attached to a handful of SharedNetworks, with no API
// server. Each is measured against a baseline in the same run: a bare JSON
// decode of the same request bytes into the request type plus an encode of a
// response as large as the request, the least any handler does. The handler
// side is what the runtime extension server does per call: decode the
// request, run the handler, encode the response.
//
//	go test -run '^$' -bench . -benchtime=2s ./internal/hooks
//
// Each size has two sub-benchmarks: `baseline` alone, and `handler`, which
// runs the baseline once after every handler call (outside the timer) and
// reports its ns/op as baseline-ns/op and the ratio as x-baseline (target:
// <= 1.5). Interleaving the two keeps the ratio honest on a loaded machine.

const (
	benchNamespace = "team-bench"
	benchCluster   = "big"
	// benchSharedNetworks is the handful of SharedNetworks the attached
	// nodegroups share.
	benchSharedNetworks = 4
)

// benchWorld is one cluster of n nodegroups in steady state: every
// MachineDeployment exists with its current OpenStackMachineTemplate; the
// even ones set `sharedNetwork`, carry the shared port and have an
// established share; the odd ones do not use the feature.
type benchWorld struct {
	n    int
	objs []client.Object
	// fake is controller-runtime's fake client holding objs.
	fake client.Client
	// cache reads objs as the manager's informer cache does.
	cache client.Reader
}

func benchTopology(i int) string { return fmt.Sprintf("md-%04d", i) }
func benchMD(i int) string       { return fmt.Sprintf("%s-%s-x1y2z", benchCluster, benchTopology(i)) }
func benchAttached(i int) bool   { return i%2 == 0 }
func benchNetwork(i int) int     { return (i / 2) % benchSharedNetworks }

func newBenchWorld(b *testing.B, n int) *benchWorld {
	b.Helper()
	ctx := context.Background()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace, Labels: map[string]string{"vm": "yes", "kubernetes.io/metadata.name": benchNamespace}}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: benchCluster},
			Spec: clusterv1.ClusterSpec{
				ClusterNetwork: clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}}, Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}}},
				Topology:       clusterv1.Topology{Version: "v1.35.0", ClassRef: clusterv1.ClusterClassRef{Name: "openstack"}},
			}},
	}
	sns := make([]*sharednetv1.SharedNetwork, benchSharedNetworks)
	for k := range sns {
		subnet := fmt.Sprintf("sub-%d", k)
		sns[k] = &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vm-%d", k)},
			Spec: sharednetv1.SharedNetworkSpec{NetworkID: fmt.Sprintf("net-%d", k), Subnets: []string{subnet},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"vm": "yes"}}},
			Status: sharednetv1.SharedNetworkStatus{MTU: 1500,
				Subnets: []sharednetv1.SubnetStatus{{ID: subnet, CIDR: fmt.Sprintf("172.16.%d.0/22", 4*k), IPVersion: 4}},
				Shares:  []sharednetv1.Share{{ProjectID: "project-big", RBACPolicyID: fmt.Sprintf("rbac-%d", k)}},
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready",
					LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}}}}
	}
	for i := range n {
		tmpl := &infrav1.OpenStackMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: benchMD(i) + "-tmpl"}}
		tmpl.Spec.Template.Spec = infrav1.OpenStackMachineSpec{Flavor: ptr.To("m1.small"), SSHKeyName: "key",
			Image: infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To("ubuntu-2404-kube-v1.35.0")}}}
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: benchMD(i),
			Labels: map[string]string{clusterv1.ClusterNameLabel: benchCluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: benchTopology(i)}}}
		md.Spec.ClusterName = benchCluster
		md.Spec.Template.Spec.ClusterName = benchCluster
		md.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.SchemeGroupVersion.Group, Kind: "OpenStackMachineTemplate", Name: tmpl.Name}
		objs = append(objs, tmpl, md)
		if !benchAttached(i) {
			continue
		}
		sn := sns[benchNetwork(i)]
		subnet := sn.Spec.Subnets[0]
		tmpl.Spec.Template.Spec.Ports = []infrav1.PortOpts{{}, sharedport.Port(sn.Name, sn.Spec.NetworkID, subnet)}
		a := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: sharednetv1.AttachmentName(benchCluster, benchTopology(i))},
			Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: benchCluster, MachineDeploymentTopology: benchTopology(i), SharedNetwork: sn.Name, Subnet: subnet},
			Status: sharednetv1.SharedNetworkAttachmentStatus{Share: &sharednetv1.Share{ProjectID: "project-big", RBACPolicyID: fmt.Sprintf("rbac-%d", benchNetwork(i))},
				Conditions: []metav1.Condition{{Type: sharednetv1.SharedCondition, Status: metav1.ConditionTrue, Reason: "Shared",
					LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}}}}
		sn.Status.Consumers = append(sn.Status.Consumers, sharednetv1.Consumer{Namespace: benchNamespace, Cluster: benchCluster, MachineDeployment: benchTopology(i), Subnet: subnet})
		objs = append(objs, a)
	}
	for _, sn := range sns {
		objs = append(objs, sn)
	}
	c := fake.NewClientBuilder().WithScheme(sharednetscheme.New()).WithObjects(objs...).WithStatusSubresource(&sharednetv1.SharedNetwork{}, &sharednetv1.SharedNetworkAttachment{}).Build()
	cache := &informerLikeReader{Reader: c, objs: map[informerKey]client.Object{}}
	for _, o := range objs {
		// What the fake client stored (resourceVersion, type meta).
		stored := o.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), stored); err != nil {
			b.Fatal(err)
		}
		cache.objs[informerKey{reflect.TypeOf(stored), client.ObjectKeyFromObject(o)}] = stored
	}
	return &benchWorld{n: n, objs: objs, fake: c, cache: cache}
}

// informerLikeReader reads the way the manager's informer cache does (a deep
// copy of the stored object per Get, no JSON), where controller-runtime's
// fake client would encode and decode each object as JSON and measure itself
// rather than the hooks. List goes to the fake client.
type informerLikeReader struct {
	client.Reader
	objs map[informerKey]client.Object
}

type informerKey struct {
	t   reflect.Type
	key client.ObjectKey
}

func (r *informerLikeReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	stored, ok := r.objs[informerKey{reflect.TypeOf(obj), key}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(stored.DeepCopyObject()).Elem())
	return nil
}

func (w *benchWorld) handlers(reader client.Reader) *Handlers {
	return &Handlers{Reader: reader, APIReader: w.fake, Client: w.fake, Preflight: &preflight.Checker{Reader: reader}}
}

func benchVariable(b *testing.B, name string, value any) runtimehooksv1.Variable {
	b.Helper()
	raw, err := json.Marshal(value)
	if err != nil {
		b.Fatal(err)
	}
	return runtimehooksv1.Variable{Name: name, Value: apiextensionsv1.JSON{Raw: raw}}
}

// clusterVariables are the request-level variables CAPI sends: the cluster's
// builtins (and the class's own variables, none here).
func (w *benchWorld) clusterVariables(b *testing.B) []runtimehooksv1.Variable {
	b.Helper()
	return []runtimehooksv1.Variable{benchVariable(b, runtimehooksv1.BuiltinsName, runtimehooksv1.Builtins{
		Cluster: &runtimehooksv1.ClusterBuiltins{Name: benchCluster, Namespace: benchNamespace, UID: "0b5c3c1e-1b0e-4d4e-9a57-3f3e6e0d9a11",
			Topology: &runtimehooksv1.ClusterTopologyBuiltins{Version: "v1.35.0", ClassRef: runtimehooksv1.ClusterTopologyClusterClassRefBuiltins{Name: "openstack", Namespace: benchNamespace}},
			Network:  &runtimehooksv1.ClusterNetworkBuiltins{ServiceDomain: ptr.To("cluster.local"), Services: []string{"10.96.0.0/12"}, Pods: []string{"192.168.0.0/16"}}},
		ControlPlane: &runtimehooksv1.ControlPlaneBuiltins{Version: "v1.35.0", Name: benchCluster + "-cp", Replicas: ptr.To[int32](3),
			MachineTemplate: &runtimehooksv1.ControlPlaneMachineTemplateBuiltins{InfrastructureRef: runtimehooksv1.ControlPlaneMachineTemplateInfrastructureRefBuiltins{Name: benchCluster + "-cp-tmpl"}}},
	})}
}

// nodegroupItem is the holder and the variables of nodegroup i, as CAPI
// sends them for its OpenStackMachineTemplate.
func (w *benchWorld) nodegroupItem(b *testing.B, i int) (runtimehooksv1.HolderReference, []runtimehooksv1.Variable) {
	b.Helper()
	holder := runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Namespace: benchNamespace, Name: benchMD(i), FieldPath: machineDeploymentInfraRefPath}
	vars := []runtimehooksv1.Variable{benchVariable(b, runtimehooksv1.BuiltinsName, runtimehooksv1.Builtins{MachineDeployment: &runtimehooksv1.MachineDeploymentBuiltins{
		Version: "v1.35.0", Class: "default-worker", Name: benchMD(i), TopologyName: benchTopology(i), Replicas: ptr.To[int64](3),
		Bootstrap:         &runtimehooksv1.MachineBootstrapBuiltins{ConfigRef: &runtimehooksv1.MachineBootstrapConfigRefBuiltins{Name: benchMD(i) + "-bootstrap"}},
		InfrastructureRef: &runtimehooksv1.MachineInfrastructureRefBuiltins{Name: benchMD(i) + "-tmpl"},
	}})}
	if benchAttached(i) {
		k := benchNetwork(i)
		vars = append(vars, benchVariable(b, sharednetv1.VariableName, map[string]string{"name": fmt.Sprintf("vm-%d", k), "subnet": fmt.Sprintf("sub-%d", k)}))
	}
	return holder, vars
}

// The templates as the ClusterClass renders them, before any patch.
var (
	benchClusterTemplate = []byte(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackClusterTemplate","spec":{"template":{"spec":{"externalNetwork":{"id":"ext-1"},"identityRef":{"cloudName":"openstack","name":"big-cloud-config"},"managedSecurityGroups":{"allowAllInClusterTraffic":true},"managedSubnets":[{"cidr":"10.6.0.0/24","dnsNameservers":["10.0.0.53"]}]}}}}`)
	benchMachineTemplate = []byte(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachineTemplate","spec":{"template":{"spec":{"flavor":"m1.small","image":{"filter":{"name":"ubuntu-2404-kube-v1.35.0"}},"sshKeyName":"key"}}}}`)
)

func clusterItemHolder() runtimehooksv1.HolderReference {
	return runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Namespace: benchNamespace, Name: benchCluster, FieldPath: "spec.infrastructureRef"}
}

func (w *benchWorld) generatePatchesRequest(b *testing.B) []byte {
	b.Helper()
	req := &runtimehooksv1.GeneratePatchesRequest{Variables: w.clusterVariables(b)}
	req.SetSettings(map[string]string{})
	req.Items = append(req.Items, runtimehooksv1.GeneratePatchesRequestItem{UID: "uid-cluster", HolderReference: clusterItemHolder(), Object: runtime.RawExtension{Raw: benchClusterTemplate}})
	for i := range w.n {
		holder, vars := w.nodegroupItem(b, i)
		req.Items = append(req.Items, runtimehooksv1.GeneratePatchesRequestItem{
			UID: types.UID(fmt.Sprintf("uid-%d", i)), HolderReference: holder, Object: runtime.RawExtension{Raw: benchMachineTemplate}, Variables: vars,
		})
	}
	return benchMarshal(b, req)
}

// validateTopologyRequest carries the templates after the patches: the
// attached nodegroups' with their shared port.
func (w *benchWorld) validateTopologyRequest(b *testing.B) []byte {
	b.Helper()
	req := &runtimehooksv1.ValidateTopologyRequest{Variables: w.clusterVariables(b)}
	req.SetSettings(map[string]string{})
	req.Items = append(req.Items, &runtimehooksv1.ValidateTopologyRequestItem{HolderReference: clusterItemHolder(), Object: runtime.RawExtension{Raw: benchClusterTemplate}})
	for i := range w.n {
		holder, vars := w.nodegroupItem(b, i)
		object := benchMachineTemplate
		if benchAttached(i) {
			k := benchNetwork(i)
			var tmpl map[string]any
			if err := json.Unmarshal(benchMachineTemplate, &tmpl); err != nil {
				b.Fatal(err)
			}
			spec := tmpl["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			spec["ports"] = []infrav1.PortOpts{{}, sharedport.Port(fmt.Sprintf("vm-%d", k), fmt.Sprintf("net-%d", k), fmt.Sprintf("sub-%d", k))}
			object = benchMarshal(b, tmpl)
		}
		req.Items = append(req.Items, &runtimehooksv1.ValidateTopologyRequestItem{HolderReference: holder, Object: runtime.RawExtension{Raw: object}, Variables: vars})
	}
	return benchMarshal(b, req)
}

func benchMarshal(b *testing.B, v any) []byte {
	b.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// serve is what the runtime extension server does with one call: decode the
// request, run the handler, encode the response.
func serve[Req, Resp any](body []byte, handle func(context.Context, *Req, *Resp)) ([]byte, error) {
	req := new(Req)
	if err := json.Unmarshal(body, req); err != nil {
		return nil, err
	}
	resp := new(Resp)
	handle(context.Background(), req, resp)
	return json.Marshal(resp)
}

// baseline is the least a handler does: decode the request bytes into the
// request type and encode a response as large as the request.
func baseline[Req any](body []byte) error {
	req := new(Req)
	if err := json.Unmarshal(body, req); err != nil {
		return err
	}
	_, err := json.Marshal(req)
	return err
}

// benchAgainstBaseline runs the `baseline` and `handler` sub-benchmarks of
// one size.
func benchAgainstBaseline(b *testing.B, handler func() error, base func() error) {
	b.Helper()
	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := base(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		var baseTime time.Duration
		for b.Loop() {
			if err := handler(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			start := time.Now()
			if err := base(); err != nil {
				b.Fatal(err)
			}
			baseTime += time.Since(start)
			b.StartTimer()
		}
		perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		basePerOp := float64(baseTime.Nanoseconds()) / float64(b.N)
		b.ReportMetric(basePerOp, "baseline-ns/op")
		b.ReportMetric(perOp/basePerOp, "x-baseline")
	})
}

var benchSizes = []int{100, 1000}

// answersAsTheFakeClient calls the handler over the informer-like reader
// the benchmark times and over controller-runtime's fake client, and fails
// unless both answer byte for byte the same; it returns that answer.
func (w *benchWorld) answersAsTheFakeClient(b *testing.B, call func(*Handlers) ([]byte, error)) []byte {
	b.Helper()
	want, err := call(w.handlers(w.fake))
	if err != nil {
		b.Fatal(err)
	}
	got, err := call(w.handlers(w.cache))
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		b.Fatalf("the informer-like reader answers\n%s\nthe fake client\n%s", got, want)
	}
	return got
}

func BenchmarkGeneratePatches(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("nodegroups=%d", n), func(b *testing.B) {
			w := newBenchWorld(b, n)
			body := w.generatePatchesRequest(b)
			h := w.handlers(w.cache)
			call := func(h *Handlers) ([]byte, error) {
				return serve(body, h.GeneratePatches)
			}
			// The attached half gets its port, no other.
			got := w.answersAsTheFakeClient(b, call)
			resp := &runtimehooksv1.GeneratePatchesResponse{}
			if err := json.Unmarshal(got, resp); err != nil {
				b.Fatal(err)
			}
			if resp.Status != runtimehooksv1.ResponseStatusSuccess || len(resp.Items) != n/2 {
				b.Fatalf("want %d patches, got %s %q with %d", n/2, resp.Status, resp.Message, len(resp.Items))
			}
			benchAgainstBaseline(b, func() error {
				_, err := call(h)
				return err
			}, func() error { return baseline[runtimehooksv1.GeneratePatchesRequest](body) })
		})
	}
}

func BenchmarkValidateTopology(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("nodegroups=%d", n), func(b *testing.B) {
			w := newBenchWorld(b, n)
			body := w.validateTopologyRequest(b)
			h := w.handlers(w.cache)
			call := func(h *Handlers) ([]byte, error) {
				return serve(body, h.ValidateTopology)
			}
			got := w.answersAsTheFakeClient(b, call)
			resp := &runtimehooksv1.ValidateTopologyResponse{}
			if err := json.Unmarshal(got, resp); err != nil {
				b.Fatal(err)
			}
			if resp.Status != runtimehooksv1.ResponseStatusSuccess {
				b.Fatalf("ValidateTopology refused: %s", resp.Message)
			}
			benchAgainstBaseline(b, func() error {
				_, err := call(h)
				return err
			}, func() error { return baseline[runtimehooksv1.ValidateTopologyRequest](body) })
		})
	}
}

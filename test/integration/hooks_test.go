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

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/hooks"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// handlersOnCache returns the hook handlers reading, as in the manager, from
// an informer cache of the real API server.
func handlersOnCache(tb testing.TB) *hooks.Handlers {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		tb.Fatal("cache did not start")
	}
	// Informers start on first use: touch each kind the hooks read.
	for _, list := range []client.ObjectList{&clusterv1.ClusterList{}, &clusterv1.MachineDeploymentList{}, &sharednetv1.SharedNetworkList{}, &sharednetv1.SharedNetworkAttachmentList{}} {
		if err := c.List(ctx, list); err != nil {
			tb.Fatal(err)
		}
	}
	return &hooks.Handlers{Reader: c, Preflight: &preflight.Checker{Reader: c}}
}

func variable(name string, value any) runtimehooksv1.Variable {
	raw, _ := json.Marshal(value)
	return runtimehooksv1.Variable{Name: name, Value: apiextensionsv1.JSON{Raw: raw}}
}

func clusterBuiltin(ns, name string) runtimehooksv1.Variable {
	return variable(runtimehooksv1.BuiltinsName, runtimehooksv1.Builtins{Cluster: &runtimehooksv1.ClusterBuiltins{Name: name, Namespace: ns}})
}

func machineDeploymentItem(ns, mdName, topology string, vars ...runtimehooksv1.Variable) (runtimehooksv1.HolderReference, []runtimehooksv1.Variable) {
	holder := runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Namespace: ns, Name: mdName, FieldPath: "spec.template.spec.infrastructureRef"}
	builtin := variable(runtimehooksv1.BuiltinsName, runtimehooksv1.Builtins{MachineDeployment: &runtimehooksv1.MachineDeploymentBuiltins{TopologyName: topology, Name: mdName}})
	return holder, append([]runtimehooksv1.Variable{builtin}, vars...)
}

func TestValidateTopologyIsTheBackstopOfAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := grantedNamespace(ctx, g)
	createSharedNetworks(ctx, t)
	class := "backstop"
	g.Expect(env.CreateObjects(ctx, testenv.ClusterClass(ns, class)...)).To(Succeed())
	g.Expect(env.WaitForClusterClass(ctx, ns, class)).To(Succeed())
	cluster := testenv.Cluster(ns, "c-backstop", class, "md-a")
	cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{podCIDR}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	h := handlersOnCache(t)

	validate := func(global []runtimehooksv1.Variable, itemVars ...runtimehooksv1.Variable) *runtimehooksv1.ValidateTopologyResponse {
		holder, vars := machineDeploymentItem(ns, "c-backstop-md-a-xyz", "md-a", itemVars...)
		req := &runtimehooksv1.ValidateTopologyRequest{
			Variables: append([]runtimehooksv1.Variable{clusterBuiltin(ns, cluster.Name)}, global...),
			Items:     []*runtimehooksv1.ValidateTopologyRequestItem{{HolderReference: holder, Object: runtime.RawExtension{Raw: []byte(`{}`)}, Variables: vars}},
		}
		resp := &runtimehooksv1.ValidateTopologyResponse{}
		g.Eventually(func(g Gomega) {
			*resp = runtimehooksv1.ValidateTopologyResponse{}
			h.ValidateTopology(ctx, req, resp)
			g.Expect(resp.Message).NotTo(ContainSubstring("not found"), "wait for the cache")
		}).Should(Succeed())
		return resp
	}

	t.Run("a cluster-level value is refused", func(t *testing.T) {
		g := NewWithT(t)
		resp := validate([]runtimehooksv1.Variable{variable(sharednetv1.VariableName, map[string]string{"name": "vm-net"})})
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
		g.Expect(resp.Message).To(ContainSubstring("whole cluster"))
	})
	t.Run("a nodegroup not attached yet gets the static rules", func(t *testing.T) {
		g := NewWithT(t)
		resp := validate(nil, variable(sharednetv1.VariableName, map[string]string{"name": "vm-restricted"}))
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
		g.Expect(resp.Message).To(And(ContainSubstring(`"md-a"`), ContainSubstring("granted")))

		resp = validate(nil, variable(sharednetv1.VariableName, map[string]string{"name": "vm-net", "subnet": vmSubnet}))
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	})
	t.Run("an attached nodegroup is never failed because facts changed", func(t *testing.T) {
		g := NewWithT(t)
		// Attached (share established), then the administrator narrows the grant.
		establishShare(ctx, g, cluster, "md-a", "vm-restricted", "66666666-6666-4666-8666-666666666666")
		// Once the manager's cache has seen the attachment.
		g.Eventually(func() runtimehooksv1.ResponseStatus {
			return validate(nil, variable(sharednetv1.VariableName, map[string]string{"name": "vm-restricted"})).Status
		}, 10*time.Second, 100*time.Millisecond).Should(Equal(runtimehooksv1.ResponseStatusSuccess))
	})
}

func TestGeneratePatchesIgnoresAClusterLevelValueAndGivesANewNodegroupItsPort(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := grantedNamespace(ctx, g)
	createSharedNetworks(ctx, t)
	h := handlersOnCache(t)
	value := variable(sharednetv1.VariableName, map[string]string{"name": "vm-net", "subnet": vmSubnet})

	generate := func(global []runtimehooksv1.Variable, itemVars ...runtimehooksv1.Variable) *runtimehooksv1.GeneratePatchesResponse {
		holder, vars := machineDeploymentItem(ns, "c-gp-md-a-abc", "md-a", itemVars...)
		req := &runtimehooksv1.GeneratePatchesRequest{
			Variables: append([]runtimehooksv1.Variable{clusterBuiltin(ns, "c-gp")}, global...),
			Items:     []runtimehooksv1.GeneratePatchesRequestItem{{UID: types.UID("item-1"), HolderReference: holder, Object: runtime.RawExtension{Raw: []byte(`{"kind":"OpenStackMachineTemplate","spec":{"template":{"spec":{}}}}`)}, Variables: vars}},
		}
		resp := &runtimehooksv1.GeneratePatchesResponse{}
		h.GeneratePatches(ctx, req, resp)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
		return resp
	}

	g.Expect(generate([]runtimehooksv1.Variable{value}).Items).To(BeEmpty(), "a cluster-level value attaches nothing")
	// The MachineDeployment does not exist yet: a nodegroup being created
	// gets its port at once, so its machines are created once, with it.
	pending := generate(nil, value).Items
	g.Expect(pending).To(HaveLen(1))
	g.Expect(string(pending[0].Patch)).To(ContainSubstring(`"path":"/spec/template/spec/ports","value":[{},{"network":{"id":"` + vmNetworkID + `"}`))
	restricted := variable(sharednetv1.VariableName, map[string]string{"name": "vm-restricted"})
	g.Expect(generate(nil, restricted).Items).To(BeEmpty(), "a network the namespace was not granted gets no port")

	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-gp"}}
	establishShare(ctx, g, cluster, "md-a", "vm-net", vmSubnet)
	g.Eventually(func() []runtimehooksv1.GeneratePatchesResponseItem { return generate(nil, value).Items }).Should(HaveLen(1))
	item := generate(nil, value).Items[0]
	g.Expect(item.UID).To(Equal(types.UID("item-1")))
	g.Expect(item.PatchType).To(Equal(runtimehooksv1.JSONPatchType))
	g.Expect(item.Patch).To(Equal(pending[0].Patch), "the port of the share is the one given at creation: no rollout")
}

// BenchmarkGeneratePatches measures GeneratePatches for a cluster with 100
// MachineDeployments (half of them attached), including decoding the request
// and encoding the response as the runtime server does, against a bare JSON
// decode+encode of the same request measured in the same run.
func BenchmarkGeneratePatches(b *testing.B) {
	g := NewWithT(b)
	ctx := context.Background()
	ns := grantedNamespace(ctx, g)
	createSharedNetworks(ctx, b)
	h := handlersOnCache(b)
	const clusterName = "c-bench"
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName}}

	req := &runtimehooksv1.GeneratePatchesRequest{Variables: []runtimehooksv1.Variable{clusterBuiltin(ns, clusterName)}}
	req.SetSettings(map[string]string{})
	template := []byte(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachineTemplate","spec":{"template":{"spec":{"flavor":"m1.small","image":{"filter":{"name":"ubuntu"}},"sshKeyName":"key"}}}}`)
	for i := range 100 {
		topology := fmt.Sprintf("md-%03d", i)
		var vars []runtimehooksv1.Variable
		if i%2 == 0 {
			vars = append(vars, variable(sharednetv1.VariableName, map[string]string{"name": "vm-net", "subnet": vmSubnet}))
			establishShare(ctx, g, cluster, topology, "vm-net", vmSubnet)
		}
		holder, all := machineDeploymentItem(ns, clusterName+"-"+topology+"-x1y2z", topology, vars...)
		req.Items = append(req.Items, runtimehooksv1.GeneratePatchesRequestItem{
			UID: types.UID(fmt.Sprintf("uid-%d", i)), HolderReference: holder, Object: runtime.RawExtension{Raw: template}, Variables: all,
		})
	}
	body, err := json.Marshal(req)
	g.Expect(err).NotTo(HaveOccurred())

	serve := func() *runtimehooksv1.GeneratePatchesResponse {
		in := &runtimehooksv1.GeneratePatchesRequest{}
		if err := json.Unmarshal(body, in); err != nil {
			b.Fatal(err)
		}
		resp := &runtimehooksv1.GeneratePatchesResponse{}
		h.GeneratePatches(ctx, in, resp)
		if _, err := json.Marshal(resp); err != nil {
			b.Fatal(err)
		}
		return resp
	}
	g.Eventually(func() int { return len(serve().Items) }).Should(Equal(50), "the cache sees the 50 shares")

	b.ResetTimer()
	for b.Loop() {
		serve()
	}
	b.StopTimer()
	n := b.N
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(n)

	// The baseline runs as many times in the same process, right after
	// (testing.Benchmark cannot be nested in a running benchmark).
	start := time.Now()
	for range n {
		in := &runtimehooksv1.GeneratePatchesRequest{}
		if err := json.Unmarshal(body, in); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(in); err != nil {
			b.Fatal(err)
		}
	}
	baseline := float64(time.Since(start).Nanoseconds()) / float64(n)
	b.ReportMetric(baseline, "baseline-ns/op")
	b.ReportMetric(perOp/baseline, "x-json-roundtrip")
}

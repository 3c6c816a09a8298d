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
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/nodeconfig"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
)

const mdName = "demo-md-a-x7k2p"

// patchWorld is what GeneratePatches reads, over controller-runtime's fake
// client: namespace team-a, granted SharedNetwork "vm" (network net-1,
// subnet sub-1), and whatever a case adds.
func patchWorld(t *testing.T, objs ...client.Object) *Handlers {
	t.Helper()
	scheme := sharednetscheme.New()
	base := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"vm": "yes"}}},
		&sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Spec: sharednetv1.SharedNetworkSpec{
			NetworkID: "net-1", Subnets: []string{"sub-1"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"vm": "yes"}}},
			Status: sharednetv1.SharedNetworkStatus{Subnets: []sharednetv1.SubnetStatus{{ID: "sub-1", CIDR: "172.16.5.0/24"}}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(base, objs...)...).Build()
	return &Handlers{Reader: c, APIReader: c, Client: c}
}

// existing is md-a's MachineDeployment with its current template, with or
// without the shared port.
func existing(withPort bool) []client.Object {
	tmpl := &infrav1.OpenStackMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-md-a-tmpl-1"}}
	if withPort {
		tmpl.Spec.Template.Spec.Ports = []infrav1.PortOpts{{}, sharedport.Port("vm", "net-1", "sub-1")}
	}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: mdName}}
	md.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{Kind: "OpenStackMachineTemplate", Name: tmpl.Name}
	return []client.Object{tmpl, md}
}

func machine(providerID string) client.Object {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-md-a-x7k2p-abc", Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: mdName}}}
	m.Spec.ProviderID = providerID
	return m
}

func attachment(shared bool, reason string) client.Object {
	a := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: sharednetv1.AttachmentName("demo", "md-a")},
		Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: "sub-1"}}
	if shared {
		a.Status.Share = &sharednetv1.Share{ProjectID: "p", RBACPolicyID: "rbac-1"}
	}
	if reason != "" {
		a.Status.Conditions = []metav1.Condition{{Type: sharednetv1.SharedCondition, Status: metav1.ConditionFalse, Reason: reason, LastTransitionTime: metav1.Now()}}
	}
	return a
}

func generate(t *testing.T, h *Handlers) *runtimehooksv1.GeneratePatchesResponse {
	t.Helper()
	return generateWith(t, h, "")
}

// kubeadmWorker is the class's bootstrap template of md-a.
const kubeadmWorker = `{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta2","kind":"KubeadmConfigTemplate","spec":{"template":{"spec":{"joinConfiguration":{"nodeRegistration":{"kubeletExtraArgs":[{"name":"cloud-provider","value":"external"}]}}}}}}`

// generateWith is md-a's call, with its bootstrap template too when
// bootstrap is set (CAPI sends it in the same call).
func generateWith(t *testing.T, h *Handlers, bootstrap string) *runtimehooksv1.GeneratePatchesResponse {
	t.Helper()
	resp := callGenerate(t, h, bootstrap)
	if resp.Status != runtimehooksv1.ResponseStatusSuccess {
		t.Fatalf("GeneratePatches failed: %s", resp.Message)
	}
	return resp
}

func callGenerate(t *testing.T, h *Handlers, bootstrap string) *runtimehooksv1.GeneratePatchesResponse {
	t.Helper()
	raw := func(v any) apiextensionsv1.JSON { return rawJSON(t, v) }
	req := &runtimehooksv1.GeneratePatchesRequest{
		Variables: []runtimehooksv1.Variable{{Name: runtimehooksv1.BuiltinsName, Value: raw(runtimehooksv1.Builtins{Cluster: &runtimehooksv1.ClusterBuiltins{Name: "demo", Namespace: "team-a"}})}},
		Items: []runtimehooksv1.GeneratePatchesRequestItem{{
			UID:             types.UID("md-a-infra"),
			HolderReference: runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Namespace: "team-a", Name: mdName, FieldPath: machineDeploymentInfraRefPath},
			Object:          runtime.RawExtension{Raw: []byte(`{"kind":"OpenStackMachineTemplate","spec":{"template":{"spec":{}}}}`)},
			Variables: []runtimehooksv1.Variable{
				{Name: runtimehooksv1.BuiltinsName, Value: raw(runtimehooksv1.Builtins{MachineDeployment: &runtimehooksv1.MachineDeploymentBuiltins{TopologyName: "md-a", Name: mdName}})},
				{Name: sharednetv1.VariableName, Value: raw(map[string]string{"name": "vm"})},
			},
		}},
	}
	if bootstrap != "" {
		item := req.Items[0]
		item.UID, item.HolderReference.FieldPath = "md-a-bootstrap", machineDeploymentBootstrapRefPath
		item.Object = runtime.RawExtension{Raw: []byte(bootstrap)}
		req.Items = append([]runtimehooksv1.GeneratePatchesRequestItem{item}, req.Items...)
	}
	resp := &runtimehooksv1.GeneratePatchesResponse{}
	h.GeneratePatches(context.Background(), req, resp)
	return resp
}

// rawJSON is v as a hook request carries it.
func rawJSON(t *testing.T, v any) apiextensionsv1.JSON {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return apiextensionsv1.JSON{Raw: b}
}

// The exact patch: the cluster network's default port, then the shared port.
const wantPatch = `[{"op":"add","path":"/spec/template/spec/ports","value":[{},{"network":{"id":"net-1"},"description":"capo-sharednet: shared network vm, subnet sub-1","nameSuffix":"shared","fixedIPs":[{"subnet":{"id":"sub-1"}}],"tags":["capo-sharednet"]}]}]`

func TestGeneratePatchesDecidesThePortOfEachNodegroup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objs    []client.Object
		granted bool
		port    bool
	}{
		{name: "a nodegroup being created gets the port at once, before the share, so its machines are created once", granted: true, port: true},
		{name: "a nodegroup being created in a namespace not granted gets none", port: false},
		{name: "a nodegroup being created whose attach was refused before the share gets none", objs: []client.Object{attachment(false, sharednetv1.ReasonRuleViolated)}, granted: true, port: false},
		{name: "a running nodegroup without the port waits for the share", objs: existing(false), granted: true, port: false},
		{name: "a running nodegroup gets the port once shared", objs: append(existing(false), attachment(true, "")), granted: true, port: true},
		{name: "a port the nodegroup carries is kept while the share is pending (lost status, restart)", objs: existing(true), granted: true, port: true},
		{name: "a port given at creation goes when the attach is refused before the share and no machine has a server",
			objs: append(existing(true), attachment(false, sharednetv1.ReasonRuleViolated), machine("")), granted: true, port: false},
		{name: "a refused attach never takes the port from a nodegroup whose machines have servers",
			objs: append(existing(true), attachment(false, sharednetv1.ReasonRuleViolated), machine("openstack:///server-1")), granted: true, port: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := tc.objs
			h := patchWorld(t, objs...)
			if !tc.granted {
				ns := &corev1.Namespace{}
				g.Expect(h.Reader.Get(context.Background(), client.ObjectKey{Name: "team-a"}, ns)).To(Succeed())
				ns.Labels = nil
				g.Expect(h.Client.Update(context.Background(), ns)).To(Succeed())
			}
			resp := generate(t, h)
			if !tc.port {
				g.Expect(resp.Items).To(BeEmpty())
				return
			}
			g.Expect(resp.Items).To(HaveLen(1))
			g.Expect(string(resp.Items[0].Patch)).To(MatchJSON(wantPatch))
		})
	}
}

// One call decides each nodegroup on its own network and subnet, though it
// reads each SharedNetwork and grant once for all of them.
func TestGeneratePatchesDecidesEachNodegroupOfOneCallOnItsOwnSubnet(t *testing.T) {
	g := NewWithT(t)
	var objs []client.Object
	nodegroup := func(topology string, exists bool, value map[string]string) runtimehooksv1.GeneratePatchesRequestItem {
		md := "demo-" + topology + "-x7k2p"
		if exists {
			tmpl := &infrav1.OpenStackMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: md + "-tmpl"}}
			m := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: md}}
			m.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{Kind: "OpenStackMachineTemplate", Name: tmpl.Name}
			objs = append(objs, tmpl, m)
		}
		return runtimehooksv1.GeneratePatchesRequestItem{
			UID:             types.UID(topology),
			HolderReference: runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Namespace: "team-a", Name: md, FieldPath: machineDeploymentInfraRefPath},
			Object:          runtime.RawExtension{Raw: []byte(`{"kind":"OpenStackMachineTemplate","spec":{"template":{"spec":{}}}}`)},
			Variables: []runtimehooksv1.Variable{
				{Name: runtimehooksv1.BuiltinsName, Value: rawJSON(t, runtimehooksv1.Builtins{MachineDeployment: &runtimehooksv1.MachineDeploymentBuiltins{TopologyName: topology, Name: md}})},
				{Name: sharednetv1.VariableName, Value: rawJSON(t, value)},
			},
		}
	}
	shared := func(topology, subnet string) client.Object {
		return &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: sharednetv1.AttachmentName("demo", topology)},
			Spec:   sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: topology, SharedNetwork: "vm", Subnet: subnet},
			Status: sharednetv1.SharedNetworkAttachmentStatus{Share: &sharednetv1.Share{ProjectID: "p", RBACPolicyID: "rbac-" + topology}}}
	}
	req := &runtimehooksv1.GeneratePatchesRequest{
		Variables: []runtimehooksv1.Variable{{Name: runtimehooksv1.BuiltinsName, Value: rawJSON(t, runtimehooksv1.Builtins{Cluster: &runtimehooksv1.ClusterBuiltins{Name: "demo", Namespace: "team-a"}})}},
		Items: []runtimehooksv1.GeneratePatchesRequestItem{
			// Shared on sub-2, since taken off the SharedNetwork's subnets: no new port.
			nodegroup("md-b", true, map[string]string{"name": "vm", "subnet": "sub-2"}),
			// Shared on sub-1, still allowed: the port.
			nodegroup("md-a", true, map[string]string{"name": "vm", "subnet": "sub-1"}),
			// Being created on a network that does not exist: none.
			nodegroup("md-d", false, map[string]string{"name": "nope"}),
			// Being created on vm: the port, at once.
			nodegroup("md-c", false, map[string]string{"name": "vm"}),
		},
	}
	h := patchWorld(t, append(objs, shared("md-a", "sub-1"), shared("md-b", "sub-2"))...)
	resp := &runtimehooksv1.GeneratePatchesResponse{}
	h.GeneratePatches(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	g.Expect(resp.Items).To(HaveLen(2))
	for i, uid := range []types.UID{"md-a", "md-c"} {
		g.Expect(resp.Items[i].UID).To(Equal(uid))
		g.Expect(string(resp.Items[i].Patch)).To(MatchJSON(wantPatch))
	}
}

// withBootstrap gives md-a's MachineDeployment (in objs) a current
// KubeadmConfigTemplate carrying carried (nil: nothing of the extension).
func withBootstrap(objs []client.Object, carried *nodeconfig.Additions) []client.Object {
	kct := &bootstrapv1.KubeadmConfigTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-md-a-bootstrap-1"}}
	if carried != nil {
		spec := &kct.Spec.Template.Spec
		spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs = []bootstrapv1.Arg{{Name: "node-labels", Value: ptr.To(nodeconfig.LabelKey + "=" + carried.Label)}}
		spec.Files = []bootstrapv1.File{{Path: nodeconfig.ScriptPath, Content: carried.Script}}
		spec.PreKubeadmCommands = []string{carried.Command}
	}
	for _, o := range objs {
		if md, ok := o.(*clusterv1.MachineDeployment); ok {
			md.Spec.Template.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{Kind: "KubeadmConfigTemplate", Name: kct.Name}
		}
	}
	return append(objs, kct)
}

// The bootstrap template changes exactly when the infrastructure template
// does, so CAPI rotates both in one MachineDeployment update: one rollout
// puts the port, the node label and the route script on a nodegroup, and
// neither an upgrade of the extension nor a nodegroup attached before the
// label existed replaces a node.
func TestTheBootstrapTemplateChangesWithThePortOnly(t *testing.T) {
	older := &nodeconfig.Additions{Label: "vm", Script: "#!/bin/sh\n# an older script\n", Command: nodeconfig.ScriptPath + " 172.16.5.0/24"}
	for _, tc := range []struct {
		name string
		objs []client.Object
		want *nodeconfig.Additions // nil: no patch of the bootstrap template
		port bool
	}{
		{name: "a nodegroup created attached", want: ptr.To(nodeconfig.For("vm", "172.16.5.0/24")), port: true},
		{name: "a running nodegroup attached once shared", objs: withBootstrap(append(existing(false), attachment(true, "")), nil),
			want: ptr.To(nodeconfig.For("vm", "172.16.5.0/24")), port: true},
		{name: "a nodegroup attached before the label existed keeps its nodes", objs: withBootstrap(append(existing(true), attachment(true, "")), nil), port: true},
		{name: "an attached nodegroup keeps what its template carries, an older script too", objs: withBootstrap(append(existing(true), attachment(true, "")), older),
			want: older, port: true},
		{name: "a running nodegroup waiting for the share gets nothing yet", objs: withBootstrap(existing(false), nil)},
		{name: "a detached nodegroup loses the label with the port",
			objs: withBootstrap(append(existing(true), attachment(false, sharednetv1.ReasonRuleViolated), machine("")), ptr.To(nodeconfig.For("vm", "172.16.5.0/24")))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			resp := generateWith(t, patchWorld(t, tc.objs...), kubeadmWorker)
			var infra, boot *runtimehooksv1.GeneratePatchesResponseItem
			for i := range resp.Items {
				switch resp.Items[i].UID {
				case "md-a-infra":
					infra = &resp.Items[i]
				case "md-a-bootstrap":
					boot = &resp.Items[i]
				}
			}
			g.Expect(infra != nil).To(Equal(tc.port), "the port")
			if tc.want == nil {
				g.Expect(boot).To(BeNil())
				return
			}
			g.Expect(boot).NotTo(BeNil())
			want, err := nodeconfig.Inject([]byte(kubeadmWorker), *tc.want)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(boot.Patch)).To(MatchJSON(rawJSON(t, want).Raw))
		})
	}
}

func TestTheBootstrapTemplateIsPatchedOnlyWhenItIsKnown(t *testing.T) {
	t.Run("another bootstrap provider's template gets neither label nor script", func(t *testing.T) {
		g := NewWithT(t)
		resp := generateWith(t, patchWorld(t), `{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta1","kind":"RKE2ConfigTemplate","spec":{"template":{"spec":{}}}}`)
		g.Expect(resp.Items).To(HaveLen(1))
		g.Expect(resp.Items[0].UID).To(BeEquivalentTo("md-a-infra"))
	})
	t.Run("a current template missing from the cache fails the call rather than rotate the templates again", func(t *testing.T) {
		g := NewWithT(t)
		objs := withBootstrap(append(existing(true), attachment(true, "")), nil)
		var withoutKCT []client.Object
		for _, o := range objs {
			if _, ok := o.(*bootstrapv1.KubeadmConfigTemplate); !ok {
				withoutKCT = append(withoutKCT, o)
			}
		}
		resp := callGenerate(t, patchWorld(t, withoutKCT...), kubeadmWorker)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
		g.Expect(resp.Message).To(ContainSubstring("demo-md-a-bootstrap-1"))
	})
	t.Run("a SharedNetwork that has not read the subnet yet fails the call rather than give the label without the script", func(t *testing.T) {
		g := NewWithT(t)
		h := patchWorld(t)
		sn := &sharednetv1.SharedNetwork{}
		g.Expect(h.Reader.Get(context.Background(), client.ObjectKey{Name: "vm"}, sn)).To(Succeed())
		sn.Status.Subnets = []sharednetv1.SubnetStatus{{ID: "sub-1"}}
		g.Expect(h.Client.Update(context.Background(), sn)).To(Succeed())
		resp := callGenerate(t, h, kubeadmWorker)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
		g.Expect(resp.Message).To(ContainSubstring("SharedNetwork vm has not read the subnet"))
	})
}

// A request without the builtins CAPI always sends fails the call naming the
// variable, and patches nothing.
func TestGeneratePatchesNamesAMissingBuiltin(t *testing.T) {
	item := func(vars ...runtimehooksv1.Variable) runtimehooksv1.GeneratePatchesRequestItem {
		return runtimehooksv1.GeneratePatchesRequestItem{
			UID:             "md-a-infra",
			HolderReference: runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Namespace: "team-a", Name: mdName, FieldPath: machineDeploymentInfraRefPath},
			Object:          runtime.RawExtension{Raw: []byte(`{"kind":"OpenStackMachineTemplate","spec":{"template":{"spec":{}}}}`)},
			Variables:       append(vars, runtimehooksv1.Variable{Name: sharednetv1.VariableName, Value: rawJSON(t, map[string]string{"name": "vm"})}),
		}
	}
	clusterVar := runtimehooksv1.Variable{Name: runtimehooksv1.BuiltinsName, Value: rawJSON(t, runtimehooksv1.Builtins{Cluster: &runtimehooksv1.ClusterBuiltins{Name: "demo", Namespace: "team-a"}})}
	for _, tc := range []struct {
		name string
		req  *runtimehooksv1.GeneratePatchesRequest
		want string
	}{
		{name: "no builtin variable", req: &runtimehooksv1.GeneratePatchesRequest{Items: []runtimehooksv1.GeneratePatchesRequestItem{item()}},
			want: `reading builtin.cluster: variable "builtin" does not exist`},
		{name: "builtin without the cluster", req: &runtimehooksv1.GeneratePatchesRequest{
			Variables: []runtimehooksv1.Variable{{Name: runtimehooksv1.BuiltinsName, Value: rawJSON(t, runtimehooksv1.Builtins{})}}, Items: []runtimehooksv1.GeneratePatchesRequestItem{item()}},
			want: "reading builtin.cluster: not set"},
		{name: "a nodegroup setting the variable without its builtin", req: &runtimehooksv1.GeneratePatchesRequest{
			Variables: []runtimehooksv1.Variable{clusterVar}, Items: []runtimehooksv1.GeneratePatchesRequestItem{item()}},
			want: `cluster team-a/demo, ` + mdName + `: reading builtin.machineDeployment: variable "builtin" does not exist`},
		{name: "a builtin that is not CAPI's", req: &runtimehooksv1.GeneratePatchesRequest{
			Variables: []runtimehooksv1.Variable{clusterVar},
			Items:     []runtimehooksv1.GeneratePatchesRequestItem{item(runtimehooksv1.Variable{Name: runtimehooksv1.BuiltinsName, Value: apiextensionsv1.JSON{Raw: []byte(`{"machineDeployment":"md-a"}`)}})}},
			want: "reading builtin.machineDeployment: json: cannot unmarshal string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			resp := &runtimehooksv1.GeneratePatchesResponse{}
			patchWorld(t).GeneratePatches(context.Background(), tc.req, resp)
			g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
			g.Expect(resp.Message).To(ContainSubstring(tc.want))
			g.Expect(resp.Items).To(BeEmpty())
		})
	}
}

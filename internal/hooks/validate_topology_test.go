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
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
)

// validate sends ValidateTopology what CAPI sends for Cluster team-a/demo
// (pods 192.168.0.0/16) whose md-a has value (cluster-level when
// clusterLevel), over the patch world plus objs.
func validate(t *testing.T, value string, clusterLevel bool, objs ...client.Object) *runtimehooksv1.ValidateTopologyResponse {
	t.Helper()
	raw := func(v any) apiextensionsv1.JSON { return rawJSON(t, v) }
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"},
		Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}}},
			Topology: clusterv1.Topology{Version: "v1.35.0"}}}
	h := patchWorld(t, append(objs, cluster)...)
	h.Preflight = &preflight.Checker{Reader: h.Reader}
	clusterVars := []runtimehooksv1.Variable{{Name: runtimehooksv1.BuiltinsName, Value: raw(runtimehooksv1.Builtins{Cluster: &runtimehooksv1.ClusterBuiltins{Name: "demo", Namespace: "team-a"}})}}
	mdVars := []runtimehooksv1.Variable{{Name: runtimehooksv1.BuiltinsName, Value: raw(runtimehooksv1.Builtins{MachineDeployment: &runtimehooksv1.MachineDeploymentBuiltins{TopologyName: "md-a", Name: mdName}})}}
	v := runtimehooksv1.Variable{Name: sharednetv1.VariableName, Value: apiextensionsv1.JSON{Raw: []byte(value)}}
	if clusterLevel {
		clusterVars = append(clusterVars, v)
	} else {
		mdVars = append(mdVars, v)
	}
	req := &runtimehooksv1.ValidateTopologyRequest{Variables: clusterVars, Items: []*runtimehooksv1.ValidateTopologyRequestItem{{
		HolderReference: runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Namespace: "team-a", Name: mdName, FieldPath: machineDeploymentInfraRefPath},
		Variables:       mdVars,
	}}}
	resp := &runtimehooksv1.ValidateTopologyResponse{}
	h.ValidateTopology(context.Background(), req, resp)
	return resp
}

func TestValidateTopologyIsAdmissionsBackstop(t *testing.T) {
	ungranted := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "closed"}, Spec: sharednetv1.SharedNetworkSpec{NetworkID: "net-2", Subnets: []string{"sub-2"}},
		Status: sharednetv1.SharedNetworkStatus{Subnets: []sharednetv1.SubnetStatus{{ID: "sub-2", CIDR: "172.16.6.0/24"}}}}
	overlapping := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "inside-pods"}, Spec: sharednetv1.SharedNetworkSpec{NetworkID: "net-3", Subnets: []string{"sub-3"},
		NamespaceSelector: &metav1.LabelSelector{}}, Status: sharednetv1.SharedNetworkStatus{Subnets: []sharednetv1.SubnetStatus{{ID: "sub-3", CIDR: "192.168.7.0/24"}}}}
	for _, tc := range []struct {
		name         string
		value        string
		clusterLevel bool
		objs         []client.Object
		refusedBy    []string // rule names; none: admitted
	}{
		{name: "a granted network that fits", value: `{"name":"vm"}`},
		{name: "a value for the whole cluster", value: `{"name":"vm"}`, clusterLevel: true, refusedBy: []string{rules.RuleOneNodegroup}},
		{name: "a network that does not exist", value: `{"name":"nope"}`, refusedBy: []string{rules.RuleGranted}},
		{name: "a network not granted to the namespace", value: `{"name":"closed"}`, objs: []client.Object{ungranted}, refusedBy: []string{rules.RuleGranted}},
		{name: "a subnet inside the pod range", value: `{"name":"inside-pods"}`, objs: []client.Object{overlapping}, refusedBy: []string{rules.RuleOverlap}},
		{name: "a nodegroup that already carries the port is not judged again (a changed cloud never wedges it)",
			value: `{"name":"closed"}`, objs: append(existing(true), ungranted)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			resp := validate(t, tc.value, tc.clusterLevel, tc.objs...)
			if len(tc.refusedBy) == 0 {
				g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
				return
			}
			g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
			g.Expect(resp.Message).To(HavePrefix("sharedNetwork refused, nothing was changed:"))
			for _, rule := range tc.refusedBy {
				g.Expect(resp.Message).To(ContainSubstring(rule + ":"))
			}
		})
	}
}

// A nodegroup that sets sharedNetwork but whose builtin variables cannot be
// read (no builtin.machineDeployment) is refused, not admitted unjudged.
func TestValidateTopologyFailsClosedOnUnreadableBuiltins(t *testing.T) {
	g := NewWithT(t)
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"}, Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{Version: "v1.35.0"}}}
	h := patchWorld(t, cluster)
	h.Preflight = &preflight.Checker{Reader: h.Reader}
	req := &runtimehooksv1.ValidateTopologyRequest{
		Variables: []runtimehooksv1.Variable{{Name: runtimehooksv1.BuiltinsName, Value: rawJSON(t, runtimehooksv1.Builtins{Cluster: &runtimehooksv1.ClusterBuiltins{Name: "demo", Namespace: "team-a"}})}},
		Items: []*runtimehooksv1.ValidateTopologyRequestItem{{
			HolderReference: runtimehooksv1.HolderReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Namespace: "team-a", Name: mdName, FieldPath: machineDeploymentInfraRefPath},
			Variables:       []runtimehooksv1.Variable{{Name: sharednetv1.VariableName, Value: apiextensionsv1.JSON{Raw: []byte(`{"name":"closed"}`)}}},
		}},
	}
	resp := &runtimehooksv1.ValidateTopologyResponse{}
	h.ValidateTopology(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(resp.Message).To(And(ContainSubstring("MachineDeployment "+mdName+" sets sharedNetwork but its builtin variables cannot be read"),
		ContainSubstring("builtin.machineDeployment")))
}

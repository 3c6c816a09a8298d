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
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// An attached nodegroup's MachineDeployment never takes more replicas than
// its Cluster's topology gives it (what admission judged against the
// subnet), whether written on the object (kubectl edit) or through the
// scale subresource (kubectl scale, the autoscaler).
func TestAnAttachedNodegroupIsHeldToItsSizeByEveryPath(t *testing.T) {
	cluster := func(topology clusterv1.MachineDeploymentTopology, attached bool) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c"}, Spec: clusterv1.ClusterSpec{
			Topology: clusterv1.Topology{Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{topology}}}}}
		if attached {
			variables.SetOverride(c, topology.Name, []byte(`{"name":"vm"}`))
		}
		return c
	}
	md := func(replicas int32) *clusterv1.MachineDeployment {
		return &clusterv1.MachineDeployment{
			TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c-md-a-x", Labels: map[string]string{
				clusterv1.ClusterNameLabel: "c", clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-a"}},
			Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c", Replicas: ptr.To(replicas)}}
	}
	raw := func(o runtime.Object) runtime.RawExtension {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	edit := func(from, to *clusterv1.MachineDeployment) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Namespace: "team-a", Name: to.Name,
			Kind: metav1.GroupVersionKind{Group: clusterv1.GroupVersion.Group, Version: "v1beta2", Kind: "MachineDeployment"}, Object: raw(to), OldObject: raw(from)}}
	}
	scale := func(from, to int32) admission.Request {
		s := func(n int32) *autoscalingv1.Scale {
			return &autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c-md-a-x"}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
		}
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Namespace: "team-a", Name: "c-md-a-x",
			SubResource: "scale", Kind: metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Object: raw(s(to)), OldObject: raw(s(from))}}
	}
	guard := func(objs ...client.Object) *SizeGuard {
		c := fake.NewClientBuilder().WithScheme(sharednetscheme.New()).WithObjects(objs...).Build()
		return &SizeGuard{Reader: c, Decoder: admission.NewDecoder(sharednetscheme.New())}
	}
	replicas3 := clusterv1.MachineDeploymentTopology{Class: "w", Name: "md-a", Replicas: ptr.To[int32](3)}
	autoscaled := clusterv1.MachineDeploymentTopology{Class: "w", Name: "md-a", Metadata: clusterv1.ObjectMeta{
		Annotations: map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "1", clusterv1.AutoscalerMaxSizeAnnotation: "5"}}}
	unbounded := clusterv1.MachineDeploymentTopology{Class: "w", Name: "md-a"}

	for _, tc := range []struct {
		name    string
		guard   *SizeGuard
		req     admission.Request
		refused []string // substrings of the refusal; none: admitted
	}{
		{name: "kubectl edit past the topology's replicas", guard: guard(cluster(replicas3, true), md(3)), req: edit(md(3), md(4)),
			refused: []string{"MachineDeployment c-md-a-x (nodegroup md-a of Cluster c, attached to SharedNetwork vm)", "spec.replicas 4 is more than the 3 nodes",
				"scale to 3 or fewer, or raise the nodegroup's replicas or max size in the Cluster's topology"}},
		{name: "kubectl scale past the topology's replicas", guard: guard(cluster(replicas3, true), md(3)), req: scale(3, 30),
			refused: []string{"spec.replicas (scale) 30 is more than the 3 nodes"}},
		{name: "the topology controller applying the topology's replicas", guard: guard(cluster(replicas3, true), md(1)), req: edit(md(1), md(3))},
		{name: "the autoscaler up to its max size", guard: guard(cluster(autoscaled, true), md(1)), req: scale(1, 5)},
		{name: "the autoscaler past its max size", guard: guard(cluster(autoscaled, true), md(5)), req: scale(5, 6),
			refused: []string{"spec.replicas (scale) 6 is more than the 5 nodes"}},
		{name: "a nodegroup attached with nothing bounding it grows by no path", guard: guard(cluster(unbounded, true), md(1)), req: scale(1, 2),
			refused: []string{"sets neither replicas nor", "set replicas on the nodegroup in the Cluster's topology"}},
		{name: "a scale down", guard: guard(cluster(replicas3, true), md(3)), req: scale(3, 1)},
		{name: "a nodegroup on no shared network", guard: guard(cluster(replicas3, false), md(3)), req: scale(3, 30)},
		{name: "a MachineDeployment of no Cluster any more", guard: guard(md(3)), req: scale(3, 30)},
		{name: "renaming the nodegroup's label to escape the guard", guard: guard(cluster(replicas3, true), md(3)), req: edit(md(3), func() *clusterv1.MachineDeployment {
			m := md(30)
			m.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] = "other"
			return m
		}()), refused: []string{`metadata.labels[topology.cluster.x-k8s.io/deployment-name] may not change from "md-a" to "other"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			resp := tc.guard.Handle(context.Background(), tc.req)
			if len(tc.refused) == 0 {
				g.Expect(resp.Allowed).To(BeTrue(), resp.Result.Message)
				return
			}
			g.Expect(resp.Allowed).To(BeFalse())
			for _, want := range tc.refused {
				g.Expect(resp.Result.Message).To(ContainSubstring(want))
			}
		})
	}

	t.Run("a Cluster that cannot be read: the growth waits (fail closed)", func(t *testing.T) {
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithScheme(sharednetscheme.New()).WithObjects(md(3)).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*clusterv1.Cluster); ok {
					return errors.New("the API server is away")
				}
				return c.Get(ctx, key, obj, opts...)
			}}).Build()
		resp := (&SizeGuard{Reader: c, Decoder: admission.NewDecoder(sharednetscheme.New())}).Handle(context.Background(), scale(3, 30))
		g.Expect(resp.Allowed).To(BeFalse())
		g.Expect(resp.Result.Message).To(ContainSubstring("the API server is away"))
	})
}

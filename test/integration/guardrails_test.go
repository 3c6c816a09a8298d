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
	"fmt"

	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capo-sharednet/capo-sharednet/exp/guardrails"
)

// clusterSubnet is the cluster's own subnet in the policy tests; the shared
// network of guardedSubnet and a port of the cluster's project on it.
const (
	// The shared subnets the policy guards (IDs only: no network behind them).
	guardedSubnet      = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	otherGuardedSubnet = "44444444-4444-4444-8444-444444444444"
	clusterSubnet      = "c0c0c0c0-0000-4000-8000-000000000001"
	sharedNetworkID    = "c0c0c0c0-0000-4000-8000-0000000000aa"
	sharedPortID       = "c0c0c0c0-0000-4000-8000-0000000000bb"
)

// installPolicy installs the policy, its binding and its parameters (shared
// subnets guardedSubnet and otherGuardedSubnet, cluster subnet clusterSubnet) for the
// test, as the controller does in a workload cluster.
func installPolicy(ctx context.Context, t *testing.T, g Gomega) {
	t.Helper()
	policy, binding, params := guardrails.Objects(guardrails.Params{SharedSubnets: []string{guardedSubnet, otherGuardedSubnet}, SharedNetworks: []string{sharedNetworkID},
		SharedPorts: []string{sharedPortID}, ClusterSubnet: clusterSubnet})
	for _, obj := range []client.Object{params, policy, binding} {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
	}
	t.Cleanup(func() {
		for _, obj := range []client.Object{binding, policy, params} {
			_ = env.Client.Delete(ctx, obj)
		}
	})
}

// correctAnnotations are the seed's three annotations, right.
func correctAnnotations() map[string]string {
	return map[string]string{
		guardrails.InternalAnnotation: "true", guardrails.SubnetAnnotation: guardedSubnet, guardrails.MemberSubnetAnnotation: clusterSubnet,
	}
}

// with is a copy of annotations with key set to value, or removed when value is "".
func with(annotations map[string]string, key, value string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		out[k] = v
	}
	if value == "" {
		delete(out, key)
	} else {
		out[key] = value
	}
	return out
}

// TestGuardrailsPolicyIsEnforcedByTheAPIServer (it runs before the
// controller test in workload_guardrails_test.go, which installs and removes
// the same objects) installs the policy into a real
// API server (the one the harness's clusters use as their workload cluster)
// and lets the API server itself judge Services, as in a workload cluster.
func TestGuardrailsPolicyIsEnforcedByTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	installPolicy(ctx, t, g)
	ns, err := env.CreateNamespace(ctx, "workload")
	g.Expect(err).NotTo(HaveOccurred())

	service := func(name string, annotations map[string]string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "my-app"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
	}
	correct := correctAnnotations()
	without := func(key string) map[string]string { return with(correct, key, "") }

	waitForPolicy(ctx, g, service("probe", without(guardrails.InternalAnnotation)))

	t.Run("a public load balancer on a shared subnet is refused", func(t *testing.T) {
		g := NewWithT(t)
		err := env.Client.Create(ctx, service("public", without(guardrails.InternalAnnotation)))
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(And(ContainSubstring(guardrails.InternalAnnotation), ContainSubstring("reachable from the internet")))
	})
	t.Run("a load balancer that cannot reach the nodes is refused", func(t *testing.T) {
		g := NewWithT(t)
		err := env.Client.Create(ctx, service("no-members", without(guardrails.MemberSubnetAnnotation)))
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(And(ContainSubstring(guardrails.MemberSubnetAnnotation), ContainSubstring(clusterSubnet), ContainSubstring("every request fails")))
		wrong := without(guardrails.MemberSubnetAnnotation)
		wrong[guardrails.MemberSubnetAnnotation] = guardedSubnet
		g.Expect(env.Client.Create(ctx, service("wrong-members", wrong))).NotTo(Succeed())
	})
	t.Run("the correct Service is accepted, and its annotations cannot be edited", func(t *testing.T) {
		g := NewWithT(t)
		svc := service("my-service", correct)
		g.Expect(env.Client.Create(ctx, svc)).To(Succeed())
		svc.Annotations[guardrails.SubnetAnnotation] = otherGuardedSubnet // another shared subnet: valid, but read only at creation
		err := env.Client.Update(ctx, svc)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("delete this object and create it again"))

		latest := &corev1.Service{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(svc), latest)).To(Succeed())
		latest.Labels = map[string]string{"team": "a"}
		g.Expect(env.Client.Update(ctx, latest)).To(Succeed(), "other edits are fine")
	})
	t.Run("moving an existing Service onto a shared subnet is refused", func(t *testing.T) {
		g := NewWithT(t)
		svc := service("later", nil)
		g.Expect(env.Client.Create(ctx, svc)).To(Succeed(), "a public LB elsewhere is not our business")
		svc.Annotations = correct
		err := env.Client.Update(ctx, svc)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("read only when the load balancer is created"))
	})
	t.Run("a load balancer placed on the shared network or on a port of it needs the same annotations", func(t *testing.T) {
		for _, placed := range []map[string]string{{guardrails.NetworkAnnotation: sharedNetworkID}, {guardrails.PortAnnotation: sharedPortID}} {
			g := NewWithT(t)
			public := map[string]string{}
			for k, v := range placed {
				public[k] = v
			}
			err := env.Client.Create(ctx, service("placed-public", public))
			g.Expect(err).To(MatchError(ContainSubstring("reachable from the internet")), "placed with %v", placed)
			internal := with(public, guardrails.InternalAnnotation, "true")
			err = env.Client.Create(ctx, service("placed-no-members", internal))
			g.Expect(err).To(MatchError(ContainSubstring("every request fails")), "placed with %v", placed)
			svc := service("placed-right", with(internal, guardrails.MemberSubnetAnnotation, clusterSubnet))
			g.Expect(env.Client.Create(ctx, svc)).To(Succeed(), "placed with %v", placed)
			g.Expect(env.Client.Delete(ctx, svc)).To(Succeed())
		}
	})
	t.Run("Services not on a shared subnet are not touched", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(env.Client.Create(ctx, service("elsewhere", map[string]string{guardrails.SubnetAnnotation: "c0c0c0c0-0000-4000-8000-000000000009"}))).To(Succeed())
		g.Expect(env.Client.Create(ctx, service("other-network", map[string]string{guardrails.NetworkAnnotation: "c0c0c0c0-0000-4000-8000-000000000008"}))).To(Succeed())
		g.Expect(env.Client.Create(ctx, service("other-port", map[string]string{guardrails.PortAnnotation: "c0c0c0c0-0000-4000-8000-000000000007"}))).To(Succeed())
		clusterIP := service("cluster-ip", without(guardrails.InternalAnnotation))
		clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
		g.Expect(env.Client.Create(ctx, clusterIP)).To(Succeed())
	})
}

// TestGuardrailsPolicyJudgesAgainAfterItWasRemoved: a workload cluster
// whose last attachment was detached (the policy objects removed) and that
// is attached again must be guarded again. Reading the values through a
// ConfigMap paramKind, it was not: kube-apiserver stops a built-in
// paramKind's informer once no binding names it, and the new binding found
// no parameters (kubernetes/kubernetes#130887), so every public load
// balancer was admitted until the API server restarted.
func TestGuardrailsPolicyJudgesAgainAfterItWasRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "reattached")
	g.Expect(err).NotTo(HaveOccurred())
	probe := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Annotations: with(correctAnnotations(), guardrails.InternalAnnotation, "")},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "my-app"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	policy, binding, params := guardrails.Objects(guardrails.Params{SharedSubnets: []string{guardedSubnet}, ClusterSubnet: clusterSubnet})
	for round := range 2 {
		for _, obj := range []client.Object{params, policy, binding} {
			g.Expect(env.Client.Create(ctx, obj.DeepCopyObject().(client.Object))).To(Succeed())
		}
		waitForPolicy(ctx, g, probe)
		// Removed as the controller removes it (binding first); the API
		// server's policy refresh (every second) sees no binding.
		for _, obj := range []client.Object{binding, policy, params} {
			g.Expect(env.Client.Delete(ctx, obj)).To(Succeed())
		}
		if round == 0 {
			time.Sleep(3 * time.Second)
		}
	}
}

// TestGuardrailsPolicyJudgesGateways is the same for Envoy Gateway Gateways,
// whose annotations are under spec.infrastructure.annotations (Envoy Gateway
// copies them onto the LoadBalancer Service it creates): the Gateway API CRDs
// of sigs.k8s.io/gateway-api are installed into the same real API server,
// which judges the Gateways itself.
func TestGuardrailsPolicyJudgesGateways(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	installGatewayAPI(t)
	installPolicy(ctx, t, g)
	ns, err := env.CreateNamespace(ctx, "gateways")
	g.Expect(err).NotTo(HaveOccurred())

	correct := correctAnnotations()
	create := func(name string, annotations map[string]string) error {
		return env.Client.Create(ctx, gateway(ns, name, annotations))
	}
	// update sets the Gateway's infrastructure annotations (nil: removes spec.infrastructure).
	update := func(name string, annotations map[string]string) error {
		gw := gateway(ns, name, nil)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(gw), gw); err != nil {
			return err
		}
		if annotations == nil {
			unstructured.RemoveNestedField(gw.Object, "spec", "infrastructure")
		} else if err := unstructured.SetNestedStringMap(gw.Object, annotations, "spec", "infrastructure", "annotations"); err != nil {
			return err
		}
		return env.Client.Update(ctx, gw)
	}

	waitForPolicy(ctx, g, gateway(ns, "probe", with(correct, guardrails.InternalAnnotation, "")))

	t.Run("the correct Gateway is accepted", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(create("my-gateway", correct)).To(Succeed())
	})
	t.Run("a public load balancer on a shared subnet is refused", func(t *testing.T) {
		for name, annotations := range map[string]map[string]string{
			"internal-missing": with(correct, guardrails.InternalAnnotation, ""),
			"internal-false":   with(correct, guardrails.InternalAnnotation, "false"),
		} {
			g := NewWithT(t)
			err := create(name, annotations)
			g.Expect(err).To(HaveOccurred(), name)
			g.Expect(err.Error()).To(And(ContainSubstring(guardrails.InternalAnnotation), ContainSubstring(`"true"`),
				ContainSubstring("reachable from the internet")), name)
		}
	})
	t.Run("a load balancer that cannot reach the nodes is refused", func(t *testing.T) {
		for name, annotations := range map[string]map[string]string{
			"members-missing":        with(correct, guardrails.MemberSubnetAnnotation, ""),
			"members-on-shared":      with(correct, guardrails.MemberSubnetAnnotation, guardedSubnet),
			"members-somewhere-else": with(correct, guardrails.MemberSubnetAnnotation, "c0c0c0c0-0000-4000-8000-000000000009"),
		} {
			g := NewWithT(t)
			err := create(name, annotations)
			g.Expect(err).To(HaveOccurred(), name)
			g.Expect(err.Error()).To(And(ContainSubstring(guardrails.MemberSubnetAnnotation), ContainSubstring(clusterSubnet),
				ContainSubstring("every request fails")), name)
		}
	})
	t.Run("the three annotations cannot be added, changed or removed", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(create("edited", correct)).To(Succeed())
		for what, annotations := range map[string]map[string]string{
			"subnet changed to another shared subnet": with(correct, guardrails.SubnetAnnotation, otherGuardedSubnet),
			"subnet removed":         with(correct, guardrails.SubnetAnnotation, ""),
			"internal changed":       with(correct, guardrails.InternalAnnotation, "false"),
			"internal removed":       with(correct, guardrails.InternalAnnotation, ""),
			"members changed":        with(correct, guardrails.MemberSubnetAnnotation, guardedSubnet),
			"members removed":        with(correct, guardrails.MemberSubnetAnnotation, ""),
			"all removed":            {},
			"infrastructure removed": nil,
		} {
			err := update("edited", annotations)
			g.Expect(err).To(HaveOccurred(), what)
			g.Expect(err.Error()).To(Or(
				ContainSubstring("read only when the load balancer is created: to change them, delete this object and create it again"),
				ContainSubstring("reachable from the internet"), ContainSubstring("every request fails")), what)
		}
		// Where no other rule is broken, the message is the one about editing.
		for what, annotations := range map[string]map[string]string{
			"subnet changed to another shared subnet": with(correct, guardrails.SubnetAnnotation, otherGuardedSubnet),
			"subnet removed": with(correct, guardrails.SubnetAnnotation, ""),
			"all removed":    {},
		} {
			err := update("edited", annotations)
			g.Expect(err).To(HaveOccurred(), what)
			g.Expect(err.Error()).To(And(ContainSubstring("delete this object and create it again"),
				ContainSubstring(guardrails.InternalAnnotation), ContainSubstring(guardrails.SubnetAnnotation),
				ContainSubstring(guardrails.MemberSubnetAnnotation)), what)
		}
		g.Expect(update("edited", with(correct, "example.com/team", "a"))).To(Succeed(), "other annotations may change")

		g.Expect(create("public-first", nil)).To(Succeed(), "a public Gateway is not our business")
		err := update("public-first", correct)
		g.Expect(err).To(HaveOccurred(), "all three added")
		g.Expect(err.Error()).To(ContainSubstring("delete this object and create it again"), "all three added")
		g.Expect(update("public-first", map[string]string{guardrails.SubnetAnnotation: guardedSubnet})).NotTo(Succeed(), "subnet added")
	})
	t.Run("Gateways not on a shared subnet are not touched", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(create("elsewhere", map[string]string{guardrails.SubnetAnnotation: "c0c0c0c0-0000-4000-8000-000000000009"})).To(Succeed())
		g.Expect(create("no-annotations", map[string]string{})).To(Succeed())
		g.Expect(update("elsewhere", map[string]string{guardrails.SubnetAnnotation: "c0c0c0c0-0000-4000-8000-00000000000a"})).To(Succeed())
	})
}

// waitForPolicy waits until the API server refuses probe, a public load balancer on a shared
// subnet: the policy takes effect once the API server has compiled it and sees its parameters.
func waitForPolicy(ctx context.Context, g Gomega, probe client.Object) {
	g.Eventually(func() string {
		err := env.Client.Create(ctx, probe.DeepCopyObject().(client.Object))
		if err == nil {
			_ = env.Client.Delete(ctx, probe)
			return ""
		}
		return err.Error()
	}, 60*time.Second, 250*time.Millisecond).Should(ContainSubstring(guardrails.InternalAnnotation), func() string {
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		_ = env.Client.Get(ctx, client.ObjectKey{Name: guardrails.PolicyName}, policy)
		params := &corev1.ConfigMap{}
		_ = env.Client.Get(ctx, client.ObjectKey{Namespace: guardrails.ParamsNamespace, Name: guardrails.ParamsName}, params)
		return fmt.Sprintf("the policy is not judging: its status %+v, its parameters %v", policy.Status, params.Data)
	})
}

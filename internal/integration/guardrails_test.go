package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capo-sharednet/capo-sharednet/exp/guardrails"
)

// TestGuardrailsPolicyIsEnforcedByTheAPIServer (it runs before the
// controller test in workload_guardrails_test.go, which installs and removes
// the same objects) installs the policy into a real
// API server (the one the harness's clusters use as their workload cluster)
// and lets the API server itself judge Services, as in a workload cluster.
func TestGuardrailsPolicyIsEnforcedByTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const clusterSubnet = "c0c0c0c0-0000-4000-8000-000000000001"
	policy, binding, params := guardrails.Objects(guardrails.Params{SharedSubnets: []string{vmSubnet, twoSubnetsA}, ClusterSubnet: clusterSubnet})
	for _, obj := range []client.Object{params, policy, binding} {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
	}
	t.Cleanup(func() {
		for _, obj := range []client.Object{binding, policy, params} {
			_ = env.Client.Delete(ctx, obj)
		}
	})
	ns, err := env.CreateNamespace(ctx, "workload")
	g.Expect(err).NotTo(HaveOccurred())

	service := func(name string, annotations map[string]string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "my-app"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
	}
	correct := map[string]string{
		guardrails.InternalAnnotation: "true", guardrails.SubnetAnnotation: vmSubnet, guardrails.MemberSubnetAnnotation: clusterSubnet,
	}
	without := func(key string) map[string]string {
		out := map[string]string{}
		for k, v := range correct {
			if k != key {
				out[k] = v
			}
		}
		return out
	}

	// The policy takes effect once the API server has compiled it and sees its parameters.
	g.Eventually(func() string {
		probe := service("probe", without(guardrails.InternalAnnotation))
		err := env.Client.Create(ctx, probe)
		if err == nil {
			_ = env.Client.Delete(ctx, probe)
			return ""
		}
		return err.Error()
	}, 60*time.Second, 250*time.Millisecond).Should(ContainSubstring(guardrails.InternalAnnotation))

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
		wrong[guardrails.MemberSubnetAnnotation] = vmSubnet
		g.Expect(env.Client.Create(ctx, service("wrong-members", wrong))).NotTo(Succeed())
	})
	t.Run("the correct Service is accepted, and its annotations cannot be edited", func(t *testing.T) {
		g := NewWithT(t)
		svc := service("my-service", correct)
		g.Expect(env.Client.Create(ctx, svc)).To(Succeed())
		svc.Annotations[guardrails.SubnetAnnotation] = twoSubnetsA // another shared subnet: valid, but read only at creation
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
	t.Run("Services not on a shared subnet are not touched", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(env.Client.Create(ctx, service("elsewhere", map[string]string{guardrails.SubnetAnnotation: "c0c0c0c0-0000-4000-8000-000000000009"}))).To(Succeed())
		clusterIP := service("cluster-ip", without(guardrails.InternalAnnotation))
		clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
		g.Expect(env.Client.Create(ctx, clusterIP)).To(Succeed())
	})
}

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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/exp/guardrails"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// TestGuardrailsAreInstalledIntoTheWorkloadClusterAndAudit runs the
// guardrails controller of the real manager: the harness's control-plane
// stand-in points each cluster's kubeconfig at the same real API server, which
// plays the workload cluster here.
func TestGuardrailsAreInstalledIntoTheWorkloadClusterAndAudit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := grantedNamespace(ctx, g)
	createSharedNetworks(ctx, t)
	class := "guarded"
	g.Expect(env.CreateObjects(ctx, testenv.ClusterClass(ns, class)...)).To(Succeed())
	g.Expect(env.WaitForClusterClass(ctx, ns, class)).To(Succeed())
	cluster := testenv.Cluster(ns, "c-guarded", class, "md-a")
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())

	// The cluster network, as CAPO would report it.
	const clusterSubnet = "c1c1c1c1-0000-4000-8000-000000000001"
	g.Eventually(func(g Gomega) {
		c := &clusterv1.Cluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
		g.Expect(c.Spec.InfrastructureRef.Name).NotTo(BeEmpty())
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			osc := &infrav1.OpenStackCluster{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Spec.InfrastructureRef.Name}, osc); err != nil {
				return err
			}
			osc.Status.Network = &infrav1.NetworkStatusWithSubnets{
				NetworkStatus: infrav1.NetworkStatus{ID: "c1c1c1c1-0000-4000-8000-0000000000ff", Name: "cluster-net"},
				Subnets:       []infrav1.Subnet{{ID: clusterSubnet, Name: "cluster-subnet", CIDR: "10.6.0.0/24"}},
			}
			return env.Client.Status().Update(ctx, osc)
		})).To(Succeed())
	}, 30*time.Second, 500*time.Millisecond).Should(Succeed())

	// A Service made before any policy existed, public on the shared subnet.
	workloadNS, err := env.CreateNamespace(ctx, "apps")
	g.Expect(err).NotTo(HaveOccurred())
	old := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: workloadNS, Name: "made-before", Annotations: map[string]string{guardrails.SubnetAnnotation: vmSubnet}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
	g.Expect(env.Client.Create(ctx, old)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, old) })
	// And a Gateway of Envoy Gateway whose load balancer could not reach the nodes.
	installGatewayAPI(t)
	oldGateway := gateway(workloadNS, "gateway-made-before", map[string]string{guardrails.InternalAnnotation: "true", guardrails.SubnetAnnotation: vmSubnet})
	// (Eventually: the API server may still hold the policy an earlier test removed.)
	g.Eventually(func() error { return env.Client.Create(ctx, oldGateway.DeepCopy()) }, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, oldGateway) })
	// A Node whose InternalIP is its shared-subnet address.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c-guarded-md-a-node"}}
	g.Expect(env.Client.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, node) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.30.0.12"}, {Type: corev1.NodeInternalIP, Address: "10.6.0.12"}}
	g.Expect(env.Client.Status().Update(ctx, node)).To(Succeed())

	// The attachment, as its controller leaves it once the nodegroup is attached.
	establishShare(ctx, g, cluster, "md-a", "vm-net", vmSubnet)
	a := &sharednetv1.SharedNetworkAttachment{}
	key := client.ObjectKey{Namespace: ns, Name: sharednetv1.AttachmentName(cluster.Name, "md-a")}
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, key, a); err != nil {
			return err
		}
		a.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
		return env.Client.Update(ctx, a)
	})).To(Succeed())
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, key, a); err != nil {
			return err
		}
		a.Status.Nodes = []sharednetv1.AttachedNode{{Machine: "m1", Node: node.Name, Address: "172.30.0.12"}}
		a.Status.LoadBalancers = []sharednetv1.LoadBalancer{{ID: "lb-1", Name: "kube_service_x_gone_svc", VIP: "172.30.0.40", Service: "gone/svc"}}
		return env.Client.Status().Update(ctx, a)
	})).To(Succeed())
	nudge(ctx, g, cluster)

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: guardrails.PolicyName}, &admissionregistrationv1.ValidatingAdmissionPolicy{})).To(Succeed())
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: guardrails.PolicyName}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})).To(Succeed())
		got := &sharednetv1.SharedNetworkAttachment{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Workload).NotTo(BeZero())
		g.Expect(got.Status.Workload.Policy).To(Equal(sharednetv1.WorkloadPolicyInstalled))
		g.Expect(got.Status.Workload.Misconfigured).To(ContainElement(And(
			HaveField("Kind", "Service"), HaveField("Name", "made-before"), HaveField("Reason", ContainSubstring("reachable from the internet")))))
		g.Expect(got.Status.Workload.Misconfigured).To(ContainElement(And(
			HaveField("Kind", "Gateway"), HaveField("Namespace", workloadNS), HaveField("Name", "gateway-made-before"),
			HaveField("Reason", And(ContainSubstring(guardrails.MemberSubnetAnnotation), ContainSubstring("every request fails"))))))
		g.Expect(got.Status.Workload.UnaccountedLoadBalancers).To(ConsistOf(ContainSubstring("kube_service_x_gone_svc")))
		g.Expect(got.Status.Workload.Nodes).To(ConsistOf(And(HaveField("Name", node.Name), HaveField("Reason", ContainSubstring("address-sort-order")))))
	}, 90*time.Second, 500*time.Millisecond).Should(Succeed(), "within three of the controller's 30s polls")

	t.Run("the policy goes with the last attachment", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(env.Client.Delete(ctx, a)).To(Succeed())
		nudge(ctx, g, cluster)
		g.Eventually(func() bool {
			err := env.Client.Get(ctx, client.ObjectKey{Name: guardrails.PolicyName}, &admissionregistrationv1.ValidatingAdmissionPolicy{})
			return client.IgnoreNotFound(err) == nil && err != nil
		}, 60*time.Second, 500*time.Millisecond).Should(BeTrue())
	})
}

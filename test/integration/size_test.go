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
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/controllers"
)

// TestAnAttachedNodegroupNeverTakesMoreReplicasThanItsSubnetWasCheckedFor:
// on the real kube-apiserver, with CAPI's topology controller, a nodegroup
// attached with replicas 1 cannot be grown past it by the scale subresource
// (kubectl scale, the autoscaler) or an edit of its MachineDeployment, nor
// lose its bound in the Cluster's topology (kubectl scale could then take it
// anywhere); raising replicas in the topology is judged and applied by CAPI,
// and a nodegroup on no shared network scales freely.
func TestAnAttachedNodegroupNeverTakesMoreReplicasThanItsSubnetWasCheckedFor(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createSharedNetworks(ctx, t)
	ns := grantedNamespace(ctx, g)
	scopeSizeWebhook(ctx, g, ns)
	c, _ := clusterOfTheExtension(ctx, t, ns, "sized", "c-sized")
	g.Expect(updateCluster(ctx, c, override("md-a", `{"name":"vm-net"}`))).To(Succeed())

	mdA, mdB := machineDeploymentOf(ctx, g, c, "md-a"), machineDeploymentOf(ctx, g, c, "md-b")
	// The API server reads webhook configurations from an informer: a dry
	// run (which calls webhooks, and changes nothing) shows when it asks.
	g.Eventually(func() error { return scaleTo(ctx, mdA, 30, client.DryRunAll) }, 10*time.Second, 100*time.Millisecond).Should(HaveOccurred())
	g.Expect(scaleTo(ctx, mdA, 30)).To(MatchError(And(ContainSubstring("nodegroup md-a of Cluster c-sized, attached to SharedNetwork vm-net"),
		ContainSubstring("spec.replicas (scale) 30 is more than the 1 nodes the Cluster's topology gives the nodegroup"),
		ContainSubstring("scale to 1 or fewer, or raise the nodegroup's replicas or max size in the Cluster's topology"))), "kubectl scale")
	edited := machineDeploymentOf(ctx, g, c, "md-a")
	edited.Spec.Replicas = ptr.To[int32](2)
	g.Expect(env.Client.Update(ctx, edited)).To(MatchError(ContainSubstring("spec.replicas 2 is more than the 1 nodes")), "kubectl edit")
	g.Expect(scaleTo(ctx, mdB, 2)).To(Succeed(), "a nodegroup on no shared network scales freely")

	err := updateCluster(ctx, c, func(c *clusterv1.Cluster) { topologyOf(c, "md-a").Replicas = nil })
	g.Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("capacity:"), ContainSubstring("sets neither replicas nor"),
		ContainSubstring("set replicas on the nodegroup in the Cluster's topology"))), "the bound is not given up")

	g.Expect(updateCluster(ctx, c, func(c *clusterv1.Cluster) { topologyOf(c, "md-a").Replicas = ptr.To[int32](2) })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(machineDeploymentOf(ctx, g, c, "md-a").Spec.Replicas).To(HaveValue(BeEquivalentTo(2)), "CAPI applies the judged size")
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(machineDeploymentOf(ctx, g, c, "md-a").UID).To(Equal(mdA.UID))
}

// scopeSizeWebhook selects ns for the size webhook, as NamespaceScope does
// for each namespace whose clusters use a shared network (it does not run
// in this tier).
func scopeSizeWebhook(ctx context.Context, g Gomega, ns string) {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "capo-sharednet-integration"}, vwc)).To(Succeed())
	for i := range vwc.Webhooks {
		if vwc.Webhooks[i].Name == controllers.SizeWebhookName {
			vwc.Webhooks[i].NamespaceSelector = controllers.NamespacesSelector([]string{ns})
		}
	}
	g.Expect(env.Client.Update(ctx, vwc)).To(Succeed())
}

// machineDeploymentOf is the MachineDeployment of nodegroup topology.
func machineDeploymentOf(ctx context.Context, g Gomega, c *clusterv1.Cluster, topology string) *clusterv1.MachineDeployment {
	mds := &clusterv1.MachineDeploymentList{}
	g.Expect(env.Client.List(ctx, mds, client.InNamespace(c.Namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel: c.Name, clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology})).To(Succeed())
	g.Expect(mds.Items).To(HaveLen(1))
	return &mds.Items[0]
}

// scaleTo writes replicas through the scale subresource, as kubectl scale
// and the cluster autoscaler do.
func scaleTo(ctx context.Context, md *clusterv1.MachineDeployment, replicas int32, opts ...client.UpdateOption) error {
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: md.Namespace, Name: md.Name}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	o := &client.SubResourceUpdateOptions{SubResourceBody: scale}
	for _, opt := range opts {
		opt.ApplyToUpdate(&o.UpdateOptions)
	}
	return env.Client.SubResource("scale").Update(ctx, md, o)
}

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

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/quotas"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
)

// TestANewShareNeedsAnRBACPolicyTheVMProjectHas: the administrator lowers
// the VM project's rbac_policy quota to what it uses, on the real Neutron.
// A cluster of the project the network is shared with already attaches (it
// needs no new policy); a cluster of another project is refused at
// admission with the numbers, and nothing changes: no rollout, no policy.
func TestANewShareNeedsAnRBACPolicyTheVMProjectHas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createSharedNetworks(ctx, t)
	vm, admin := testbed.NewClients(t, testbed.VMProject), testbed.NewClients(t, testbed.Admin)
	first := testbed.NewClients(t, testbed.ClusterProject)

	n, err := networks.Create(ctx, vm.Network, networks.CreateOpts{Name: testbed.Name(t, "net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, vm.Network, n.ID).ExtractErr() })
	sub, err := subnets.Create(ctx, vm.Network, subnets.CreateOpts{NetworkID: n.ID, CIDR: "172.27.0.0/24", IPVersion: 4, EnableDHCP: ptr.To(false)}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	sharer := testbed.Session(t, testbed.VMProject, openstack.Options{})
	// The first cluster's share, as the attachment controller makes it
	// once CAPO made the cluster's network (this tier runs no CAPO).
	policy, err := sharer.Share(ctx, n.ID, first.ProjectID)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = sharer.Unshare(ctx, policy) })

	sn := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm-quota"}, Spec: sharednetv1.SharedNetworkSpec{
		Identity: sharednetv1.VMProjectIdentity{SecretName: "vm-project", CloudName: testbed.VMProject}, NetworkID: n.ID, Subnets: []string{sub.ID},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{grantLabel: "true"}}}}
	g.Expect(env.Client.Create(ctx, sn)).To(Succeed())

	used, err := sharer.RBACPolicies(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	limit := used.Used + used.Reserved
	_, err = quotas.Update(ctx, admin.Network, vm.ProjectID, quotas.UpdateOpts{RBACPolicy: &limit}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_, _ = quotas.Update(ctx, admin.Network, vm.ProjectID, quotas.UpdateOpts{RBACPolicy: &used.Limit}).Extract()
	})
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sn), sn)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(sn.Status.Conditions, sharednetv1.ReadyCondition)).To(BeTrue())
		g.Expect(sn.Status.RBACPolicies).To(Equal(sharednetv1.QuotaUsage{Used: ptr.To(int32(limit)), Limit: ptr.To(int32(limit))}))
		g.Expect(sn.Status.Shares).To(ConsistOf(sharednetv1.Share{ProjectID: first.ProjectID, RBACPolicyID: policy}))
	}, 3*resync+10*time.Second, 250*time.Millisecond).Should(Succeed(), "the SharedNetwork shows the quota used up")
	g.Eventually(func(g Gomega) {
		for _, namespace := range []string{install.Namespace, metav1.NamespaceDefault} {
			events := &corev1.EventList{}
			g.Expect(env.Client.List(ctx, events, client.InNamespace(namespace))).To(Succeed())
			var ready []string
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "SharedNetwork" && e.InvolvedObject.Name == sn.Name {
					ready = append(ready, e.Reason)
				}
			}
			if namespace == install.Namespace {
				g.Expect(ready).To(ContainElement(sharednetv1.ReasonFactsCurrent), "the administrator's Event, in the extension's namespace")
			} else {
				g.Expect(ready).To(BeEmpty(), "nothing of the VM project in default, which tenants may read")
			}
		}
	}, 10*time.Second, 250*time.Millisecond).Should(Succeed())

	ns := grantedNamespace(ctx, g)
	shared, _ := clusterOfTheExtension(ctx, t, ns, "quota-a", "c-quota-a")
	other, initial := clusterOfTheExtension(ctx, t, ns, "quota-b", "c-quota-b")
	useCredential(ctx, t, ns, "quota-b", testbed.OtherProject)

	g.Expect(updateCluster(ctx, shared, override("md-a", `{"name":"vm-quota"}`))).To(Succeed(),
		"the project the network is shared with needs no new policy")
	err = updateCluster(ctx, other, override("md-a", `{"name":"vm-quota"}`))
	g.Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("share-quota:"),
		ContainSubstring(fmt.Sprintf("uses %d of %d RBAC policies", limit, limit)), ContainSubstring("raise quota rbac_policy"))))
	g.Expect(err.Error()).NotTo(ContainSubstring(vm.ProjectID), "tenant-visible text carries no VM-project internals")
	g.Consistently(func(g Gomega) {
		g.Expect(observe(ctx, g, other)).To(Equal(initial))
		shares, err := sharer.Shares(ctx, n.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(shares).To(Equal(map[string]string{first.ProjectID: policy}), "no policy was made")
	}, 2*time.Second, 250*time.Millisecond).Should(Succeed())
}

// useCredential points the identityRef Secret of class's clusters at
// another identity of the test bed.
func useCredential(ctx context.Context, t *testing.T, ns, class, cloud string) {
	t.Helper()
	g := NewWithT(t)
	var clouds map[string]map[string]any
	g.Expect(yaml.Unmarshal(testbed.CloudsYAML(t), &clouds)).To(Succeed())
	clouds["clouds"]["openstack"] = clouds["clouds"][cloud]
	raw, err := yaml.Marshal(clouds)
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: class + "-cloud-config"}, secret)).To(Succeed())
	secret.Data[openstack.CloudsSecretKey] = raw
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
}

// TestANodegroupWhoseSizeNothingBoundsIsNotAttached: without replicas in its
// topology (and no autoscaler max size) CAPI leaves the MachineDeployment's
// replicas to whoever scales it, so `kubectl scale` would grow an attached
// nodegroup past the room judged on the subnet. The attach is refused at
// admission by the real webhook, with the fix, and nothing changes; with
// replicas the same attach is admitted.
func TestANodegroupWhoseSizeNothingBoundsIsNotAttached(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createSharedNetworks(ctx, t)
	ns := grantedNamespace(ctx, g)
	c, initial := clusterOfTheExtension(ctx, t, ns, "unsized", "c-unsized")

	err := updateCluster(ctx, c, func(c *clusterv1.Cluster) {
		topologyOf(c, "md-a").Replicas = nil
		override("md-a", `{"name":"vm-net"}`)(c)
	})
	g.Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("capacity:"),
		ContainSubstring("sets neither replicas nor the cluster autoscaler's annotation"), ContainSubstring("set replicas on the nodegroup"))))
	g.Consistently(func(g Gomega) {
		g.Expect(observe(ctx, g, c)).To(Equal(initial), "nothing rolls")
	}, 2*time.Second, 250*time.Millisecond).Should(Succeed())
	latest := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), latest)).To(Succeed())
	g.Expect(topologyOf(latest, "md-a").Replicas).NotTo(BeNil(), "the Cluster is as it was")

	g.Expect(updateCluster(ctx, c, override("md-a", `{"name":"vm-net"}`))).To(Succeed(), "with its replicas, the same attach is admitted")
}

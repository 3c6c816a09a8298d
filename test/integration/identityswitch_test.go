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

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/rbacpolicies"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
)

// TestAnIdentitySwitchOrphansNoShareOnARealCloud: a cluster attached with
// the cluster project's credential has its Secret pointed at another
// project of the same Keystone. The attachment reports it (Shared False,
// ProjectChanged), nothing is shared with the new project, and the detach
// still removes the cluster project's share from Neutron (from the record
// the shipped admission policy protects), where the verified project alone
// would have found no share and let the attachment go.
func TestAnIdentitySwitchOrphansNoShareOnARealCloud(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clouds := testbed.CloudsYAML(t)
	vm, cluster, other, admin := testbed.NewClients(t, testbed.VMProject), testbed.NewClients(t, testbed.ClusterProject),
		testbed.NewClients(t, testbed.OtherProject), testbed.NewClients(t, testbed.Admin)
	installAttachmentPolicy(ctx, t, g)

	n, err := networks.Create(ctx, vm.Network, networks.CreateOpts{Name: testbed.Name(t, "vm-net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, vm.Network, n.ID).ExtractErr() })
	s, err := subnets.Create(ctx, vm.Network, subnets.CreateOpts{NetworkID: n.ID, CIDR: "172.25.1.0/24", IPVersion: 4}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = subnets.Delete(ctx, vm.Network, s.ID).ExtractErr() })
	vmSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "vm-project-identity-switch"},
		Data: map[string][]byte{openstack.CloudsSecretKey: clouds}}
	g.Expect(env.Client.Create(ctx, vmSecret)).To(Succeed())
	sn := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm-switch"}, Spec: sharednetv1.SharedNetworkSpec{
		Identity:  sharednetv1.VMProjectIdentity{SecretName: vmSecret.Name, CloudName: testbed.VMProject},
		NetworkID: n.ID, Subnets: []string{s.ID},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{grantLabel: "true"}},
	}}
	g.Expect(env.Client.Create(ctx, sn)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, sn) })
	g.Eventually(func(g Gomega) {
		got := &sharednetv1.SharedNetwork{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sn), got)).To(Succeed())
		_, ok := got.Status.Subnet(s.ID)
		g.Expect(ok).To(BeTrue())
	}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
	sharesOf := func(project string) []string {
		pages, err := rbacpolicies.List(admin.Network, rbacpolicies.ListOpts{ObjectID: n.ID, TargetTenant: project}).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		all, err := rbacpolicies.ExtractRBACPolicies(pages)
		g.Expect(err).NotTo(HaveOccurred())
		var ids []string
		for _, p := range all {
			ids = append(ids, p.ID)
		}
		return ids
	}

	ns := grantedNamespace(ctx, g)
	c, _ := clusterOfTheExtension(ctx, t, ns, "switch", "c-switch")
	controller := startAttachmentController(t)
	t.Cleanup(func() { controller.stop() })

	// The cluster network CAPO makes in the cluster's project.
	cn, err := networks.Create(ctx, cluster.Network, networks.CreateOpts{Name: testbed.Name(t, "cluster-net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, cluster.Network, cn.ID).ExtractErr() })
	cs, err := subnets.Create(ctx, cluster.Network, subnets.CreateOpts{NetworkID: cn.ID, CIDR: "10.6.0.0/24", IPVersion: 4}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = subnets.Delete(ctx, cluster.Network, cs.ID).ExtractErr() })
	g.Eventually(func() error {
		latest := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
			return err
		}
		osc := &infrav1.OpenStackCluster{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: latest.Spec.InfrastructureRef.Name}, osc); err != nil {
			return err
		}
		osc.Status.Network = &infrav1.NetworkStatusWithSubnets{
			NetworkStatus: infrav1.NetworkStatus{ID: cn.ID, Name: cn.Name},
			Subnets:       []infrav1.Subnet{{ID: cs.ID, Name: cs.Name, CIDR: cs.CIDR}},
		}
		return env.Client.Status().Update(ctx, osc)
	}, 30*time.Second, 500*time.Millisecond).Should(Succeed())

	attachment := func(g Gomega) *sharednetv1.SharedNetworkAttachment {
		a := &sharednetv1.SharedNetworkAttachment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharednetv1.AttachmentName(c.Name, "md-a")}, a)).To(Succeed())
		return a
	}
	setValue(ctx, g, c, "md-a", fmt.Sprintf(`{"name":%q}`, sn.Name))
	g.Eventually(func(g Gomega) {
		a := attachment(g)
		g.Expect(a.Status.Share).NotTo(BeNil(), "%+v", a.Status.Conditions)
		g.Expect(a.Status.Share.ProjectID).To(Equal(cluster.ProjectID))
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(sharesOf(cluster.ProjectID)).To(HaveLen(1))

	// The tenant points its clouds.yaml at the other project.
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "switch-cloud-config"}, secret)).To(Succeed())
	var parsed map[string]map[string]any
	g.Expect(yaml.Unmarshal(clouds, &parsed)).To(Succeed())
	parsed["clouds"]["openstack"] = parsed["clouds"][testbed.OtherProject]
	secret.Data[openstack.CloudsSecretKey], err = yaml.Marshal(parsed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())

	g.Eventually(func(g Gomega) {
		shared := condition(attachment(g), sharednetv1.SharedCondition)
		g.Expect(shared.Reason).To(Equal(sharednetv1.ReasonProjectChanged))
		g.Expect(shared.Message).To(And(ContainSubstring(cluster.ProjectID), ContainSubstring(other.ProjectID)))
	}, 3*resync+30*time.Second, 250*time.Millisecond).Should(Succeed(), "checked at the next SharedNetwork resync")
	g.Expect(sharesOf(other.ProjectID)).To(BeEmpty(), "nothing is shared with the project the credential now names")

	g.Expect(updateCluster(ctx, c, func(c *clusterv1.Cluster) { variables.SetOverride(c, "md-a", nil) })).To(Succeed())
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharednetv1.AttachmentName(c.Name, "md-a")}, &sharednetv1.SharedNetworkAttachment{})
		return apierrors.IsNotFound(err)
	}, 90*time.Second, 250*time.Millisecond).Should(BeTrue(), "the detach finishes")
	g.Expect(sharesOf(cluster.ProjectID)).To(BeEmpty(), "the share made for the cluster project is gone, although the credential names another project")
	g.Expect(sharesOf(other.ProjectID)).To(BeEmpty())
	g.Expect(networks.Delete(ctx, vm.Network, n.ID).ExtractErr()).To(Succeed(), "the VM project can delete its network")
}

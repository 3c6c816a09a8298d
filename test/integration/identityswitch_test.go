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

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
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
	vm, cluster, other, admin := testbed.NewClients(t, testbed.VMProject), testbed.NewClients(t, testbed.ClusterProject),
		testbed.NewClients(t, testbed.OtherProject), testbed.NewClients(t, testbed.Admin)
	installAttachmentPolicy(ctx, t, g)

	n, _, sn := offerRealNetwork(ctx, t, vm, "vm-switch", "172.25.1.0/24")
	shared := func(project string) []string { return sharesOf(ctx, g, admin, n.ID, project) }

	ns := grantedNamespace(ctx, g)
	c, _ := clusterOfTheExtension(ctx, t, ns, "switch", "c-switch")
	controller := startAttachmentController(t)
	t.Cleanup(func() { controller.stop() })

	// The cluster network CAPO makes in the cluster's project.
	cn, cs := createClusterNetwork(ctx, t, cluster)
	recordClusterNetwork(ctx, g, c, cn, cs)

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
	g.Expect(shared(cluster.ProjectID)).To(HaveLen(1))

	// The tenant points its clouds.yaml at the other project.
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "switch-cloud-config"}, secret)).To(Succeed())
	secret.Data[openstack.CloudsSecretKey] = cloudsAs(t, testbed.OtherProject)
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())

	g.Eventually(func(g Gomega) {
		shared := condition(attachment(g), sharednetv1.SharedCondition)
		g.Expect(shared.Reason).To(Equal(sharednetv1.ReasonProjectChanged))
		g.Expect(shared.Message).To(And(ContainSubstring(cluster.ProjectID), ContainSubstring(other.ProjectID)))
	}, 3*resync+30*time.Second, 250*time.Millisecond).Should(Succeed(), "checked at the next SharedNetwork resync")
	g.Expect(shared(other.ProjectID)).To(BeEmpty(), "nothing is shared with the project the credential now names")

	g.Expect(updateCluster(ctx, c, func(c *clusterv1.Cluster) { variables.SetOverride(c, "md-a", nil) })).To(Succeed())
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharednetv1.AttachmentName(c.Name, "md-a")}, &sharednetv1.SharedNetworkAttachment{})
		return apierrors.IsNotFound(err)
	}, 90*time.Second, 250*time.Millisecond).Should(BeTrue(), "the detach finishes")
	g.Expect(shared(cluster.ProjectID)).To(BeEmpty(), "the share made for the cluster project is gone, although the credential names another project")
	g.Expect(shared(other.ProjectID)).To(BeEmpty())
	g.Expect(networks.Delete(ctx, vm.Network, n.ID).ExtractErr()).To(Succeed(), "the VM project can delete its network")
}

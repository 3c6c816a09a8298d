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

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/rbacpolicies"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
)

// offerRealNetwork creates a network with one subnet (cidr) in the test
// bed's VM project and the administrator's SharedNetwork name offering it
// to the granted namespaces, with a credential Secret of its own, and waits
// until the SharedNetwork controller has read the subnet's facts.
func offerRealNetwork(ctx context.Context, t *testing.T, vm testbed.Clients, name, cidr string) (*networks.Network, *subnets.Subnet, *sharednetv1.SharedNetwork) {
	t.Helper()
	g := NewWithT(t)
	n, err := networks.Create(ctx, vm.Network, networks.CreateOpts{Name: testbed.Name(t, "vm-net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, vm.Network, n.ID).ExtractErr() })
	s, err := subnets.Create(ctx, vm.Network, subnets.CreateOpts{NetworkID: n.ID, CIDR: cidr, IPVersion: 4}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = subnets.Delete(ctx, vm.Network, s.ID).ExtractErr() })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "vm-project-" + name},
		Data: map[string][]byte{openstack.CloudsSecretKey: testbed.CloudsYAML(t)}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	sn := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sharednetv1.SharedNetworkSpec{
		Identity:  sharednetv1.VMProjectIdentity{SecretName: secret.Name, CloudName: testbed.VMProject},
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
	return n, s, sn
}

// sharesOf lists the RBAC policies that share network with project, as the
// test bed's administrator sees them in Neutron.
func sharesOf(ctx context.Context, g Gomega, admin testbed.Clients, network, project string) []string {
	pages, err := rbacpolicies.List(admin.Network, rbacpolicies.ListOpts{ObjectID: network, TargetTenant: project}).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	all, err := rbacpolicies.ExtractRBACPolicies(pages)
	g.Expect(err).NotTo(HaveOccurred())
	var ids []string
	for _, p := range all {
		ids = append(ids, p.ID)
	}
	return ids
}

// createClusterNetwork makes the cluster network CAPO makes, in the
// cluster's project (10.6.0.0/24, Neutron's default MTU).
func createClusterNetwork(ctx context.Context, t *testing.T, cluster testbed.Clients) (*networks.Network, *subnets.Subnet) {
	t.Helper()
	g := NewWithT(t)
	cn, err := networks.Create(ctx, cluster.Network, networks.CreateOpts{Name: testbed.Name(t, "cluster-net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, cluster.Network, cn.ID).ExtractErr() })
	cs, err := subnets.Create(ctx, cluster.Network, subnets.CreateOpts{NetworkID: cn.ID, CIDR: "10.6.0.0/24", IPVersion: 4}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = subnets.Delete(ctx, cluster.Network, cs.ID).ExtractErr() })
	return cn, cs
}

// recordClusterNetwork plays CAPO once the network exists: the cluster's
// OpenStackCluster status names it.
func recordClusterNetwork(ctx context.Context, g Gomega, c *clusterv1.Cluster, cn *networks.Network, cs *subnets.Subnet) {
	g.Eventually(func() error {
		latest := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
			return err
		}
		osc := &infrav1.OpenStackCluster{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: latest.Spec.InfrastructureRef.Name}, osc); err != nil {
			return err
		}
		osc.Status.Network = &infrav1.NetworkStatusWithSubnets{
			NetworkStatus: infrav1.NetworkStatus{ID: cn.ID, Name: cn.Name},
			Subnets:       []infrav1.Subnet{{ID: cs.ID, Name: cs.Name, CIDR: cs.CIDR}},
		}
		return env.Client.Status().Update(ctx, osc)
	}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
}

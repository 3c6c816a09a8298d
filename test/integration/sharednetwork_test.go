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
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/mtu"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	neutronports "github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
)

// TestSharedNetworkStatusFollowsNeutron runs the SharedNetwork controller of
// the real manager against the real OpenStack test bed.
func TestSharedNetworkStatusFollowsNeutron(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clouds := testbed.CloudsYAML(t)
	vm := testbed.NewClients(t, testbed.VMProject)

	n, err := networks.Create(ctx, vm.Network, networks.CreateOpts{Name: testbed.Name(t, "net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, vm.Network, n.ID).ExtractErr() })
	newSubnet := func(cidr string, pools []subnets.AllocationPool) string {
		s, err := subnets.Create(ctx, vm.Network, subnets.CreateOpts{NetworkID: n.ID, CIDR: cidr, IPVersion: 4, AllocationPools: pools}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = subnets.Delete(ctx, vm.Network, s.ID).ExtractErr() })
		return s.ID
	}
	first := newSubnet("172.22.0.0/24", []subnets.AllocationPool{{Start: "172.22.0.10", End: "172.22.0.29"}})
	second := newSubnet("172.22.1.0/24", nil)
	p, err := neutronports.Create(ctx, vm.Network, neutronports.CreateOpts{NetworkID: n.ID, FixedIPs: []neutronports.IP{{SubnetID: first}}}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = neutronports.Delete(ctx, vm.Network, p.ID).ExtractErr() })

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: testbed.Name(t, "vm")[:40]},
		Data:       map[string][]byte{openstack.CloudsSecretKey: clouds},
	}
	secret.Name = strings.ToLower(strings.Trim(secret.Name, "-"))
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	sn := &sharednetv1.SharedNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "followed"},
		Spec: sharednetv1.SharedNetworkSpec{
			Identity:  sharednetv1.VMProjectIdentity{SecretName: secret.Name, CloudName: testbed.VMProject},
			NetworkID: n.ID, Subnets: []string{first, second},
		},
	}
	g.Expect(env.Client.Create(ctx, sn)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, sn) })

	get := func(g Gomega) *sharednetv1.SharedNetwork {
		got := &sharednetv1.SharedNetwork{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sn), got)).To(Succeed())
		return got
	}
	ready := func(got *sharednetv1.SharedNetwork) *metav1.Condition {
		return meta.FindStatusCondition(got.Status.Conditions, sharednetv1.ReadyCondition)
	}

	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(ready(got)).NotTo(BeNil())
		g.Expect(ready(got).Reason).To(Equal(sharednetv1.ReasonFactsCurrent), ready(got).Message)
		g.Expect(got.Status.MTU).To(BeNumerically(">", 0))
		f, ok := got.Status.Subnet(first)
		g.Expect(ok).To(BeTrue())
		g.Expect(f.CIDR).To(Equal("172.22.0.0/24"))
		g.Expect(f.AllocationPools).To(Equal([]sharednetv1.AllocationPool{{Start: "172.22.0.10", End: "172.22.0.29"}}))
		g.Expect(f.UsedAddresses).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(f.FreeAddresses).To(HaveValue(BeEquivalentTo(19)))
	}, 30*time.Second, 500*time.Millisecond).Should(Succeed())

	t.Run("steady state: one resync costs four requests on the network and one for the VM project's quota", func(t *testing.T) {
		g := NewWithT(t)
		last := get(g).Status.LastRefreshTime.Time
		g.Eventually(func() time.Time { return get(g).Status.LastRefreshTime.Time }, 3*resync, 200*time.Millisecond).Should(BeTemporally(">", last))
		openstackRequests.Reset()
		last = get(g).Status.LastRefreshTime.Time
		g.Eventually(func() time.Time { return get(g).Status.LastRefreshTime.Time }, 3*resync, 200*time.Millisecond).Should(BeTemporally(">", last))
		// Other tests' SharedNetworks resync too: count this network's requests.
		var seen []string
		quota := false
		for _, r := range openstackRequests.Reset() {
			if strings.Contains(r, n.ID) {
				seen = append(seen, r)
			}
			quota = quota || strings.Contains(r, "/quotas/"+vm.ProjectID+"/details")
		}
		t.Logf("requests in one resync: %d %v", len(seen), seen)
		g.Expect(seen).To(HaveLen(4), "network, subnets, ports and shares; no new token")
		g.Expect(quota).To(BeTrue(), "the VM project's RBAC policy quota is read with the facts")
	})

	t.Run("a changed MTU shows within one resync", func(t *testing.T) {
		g := NewWithT(t)
		before := get(g).Status.MTU
		admin := testbed.NewClients(t, testbed.Admin)
		_, err := networks.Update(ctx, admin.Network, n.ID, mtu.UpdateOptsExt{UpdateOptsBuilder: networks.UpdateOpts{}, MTU: int(before) - 50}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() int32 { return get(g).Status.MTU }, 2*resync+5*time.Second, 200*time.Millisecond).Should(Equal(before - 50))
	})

	t.Run("a deleted subnet shows within one resync, with a reason to act on", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(subnets.Delete(ctx, vm.Network, second).ExtractErr()).To(Succeed())
		g.Eventually(func(g Gomega) {
			got := get(g)
			g.Expect(ready(got).Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready(got).Reason).To(Equal(sharednetv1.ReasonSubnetNotOnNetwork))
			g.Expect(ready(got).Message).To(ContainSubstring(second))
			_, stillThere := got.Status.Subnet(second)
			g.Expect(stillThere).To(BeFalse())
		}, 2*resync+5*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	t.Run("bad credentials say so", func(t *testing.T) {
		g := NewWithT(t)
		latest := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), latest)).To(Succeed())
		latest.Data[openstack.CloudsSecretKey] = []byte(strings.ReplaceAll(string(clouds), "testbed-vm", "wrong-password"))
		g.Expect(env.Client.Update(ctx, latest)).To(Succeed())
		g.Eventually(func(g Gomega) {
			got := get(g)
			g.Expect(ready(got).Reason).To(Equal(sharednetv1.ReasonCredentialsInvalid))
			g.Expect(ready(got).Message).NotTo(ContainSubstring("wrong-password"), "credentials are never echoed")
		}, 2*resync+10*time.Second, 200*time.Millisecond).Should(Succeed())
	})
}

// TestSharedNetworkFieldsThatWouldMoveNodegroupsAreImmutable: the API server
// (CEL in the CRD) refuses changing the network, and the identity while
// nodegroups use the SharedNetwork, with a message that says how to migrate.
func TestSharedNetworkFieldsThatWouldMoveNodegroupsAreImmutable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sn := &sharednetv1.SharedNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "immutable"},
		Spec: sharednetv1.SharedNetworkSpec{
			Identity:  sharednetv1.VMProjectIdentity{SecretName: "vm-immutable", CloudName: testbed.VMProject},
			NetworkID: "00000000-0000-4000-8000-000000000001", Subnets: []string{"00000000-0000-4000-8000-000000000002"},
		},
	}
	g.Expect(env.Client.Create(ctx, sn)).To(Succeed())
	t.Cleanup(func() {
		got := &sharednetv1.SharedNetwork{}
		if env.Client.Get(ctx, client.ObjectKeyFromObject(sn), got) == nil {
			got.Finalizers = nil
			_ = env.Client.Update(ctx, got)
			_ = env.Client.Delete(ctx, got)
		}
	})
	// The SharedNetwork controller writes it too (finalizer, status): retry conflicts.
	change := func(edit func(*sharednetv1.SharedNetwork)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &sharednetv1.SharedNetwork{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sn), got); err != nil {
				return err
			}
			edit(got)
			return env.Client.Update(ctx, got)
		})
	}

	err := change(func(s *sharednetv1.SharedNetwork) {
		s.Spec.LoadBalancerAddresses = []sharednetv1.LoadBalancerAddresses{{Subnet: "00000000-0000-4000-8000-000000000003", Keep: 4}}
	})
	g.Expect(err).To(MatchError(And(ContainSubstring("spec.loadBalancerAddresses[].subnet must be one of spec.subnets"), ContainSubstring("add the subnet to spec.subnets"))))
	g.Expect(change(func(s *sharednetv1.SharedNetwork) {
		s.Spec.LoadBalancerAddresses = []sharednetv1.LoadBalancerAddresses{{Subnet: s.Spec.Subnets[0], Keep: 4}}
	})).To(Succeed(), "addresses kept on an offered subnet")

	err = change(func(s *sharednetv1.SharedNetwork) { s.Spec.NetworkID = "00000000-0000-4000-8000-000000000009" })
	g.Expect(err).To(MatchError(And(ContainSubstring("spec.networkID is immutable"), ContainSubstring("create a new SharedNetwork"))))
	g.Eventually(func() error {
		return change(func(s *sharednetv1.SharedNetwork) { s.Spec.Identity.CloudName = "other" })
	}, 10*time.Second, 250*time.Millisecond).Should(Succeed(), "without consumers the identity may change")

	// A nodegroup uses it: the SharedNetwork controller lists it in status.consumers.
	ns := grantedNamespace(ctx, g)
	a := &sharednetv1.SharedNetworkAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-md-a"},
		Spec:       sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "c", MachineDeploymentTopology: "md-a", SharedNetwork: sn.Name, Subnet: sn.Spec.Subnets[0]},
	}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, a) })
	g.Eventually(func(g Gomega) {
		got := &sharednetv1.SharedNetwork{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sn), got)).To(Succeed())
		g.Expect(got.Status.Consumers).NotTo(BeEmpty())
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	err = change(func(s *sharednetv1.SharedNetwork) { s.Spec.Identity.SecretName = "another-vm-project" })
	g.Expect(err).To(MatchError(And(ContainSubstring("spec.identity cannot change while nodegroups use this SharedNetwork"), ContainSubstring("update the Secret's clouds.yaml in place"))))
}

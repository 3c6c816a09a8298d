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

package controllers

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
)

// TestStatusNeverReportsAWrongFreeCount refreshes a SharedNetwork's facts
// from the real Neutron through a fault injector: every refresh either
// reports the true free count or keeps the last one and says Neutron is
// unavailable.
func TestStatusNeverReportsAWrongFreeCount(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clouds := testbed.CloudsYAML(t)
	vm := testbed.NewClients(t, testbed.VMProject)
	n, err := networks.Create(ctx, vm.Network, networks.CreateOpts{Name: testbed.Name(t, "net")}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = networks.Delete(ctx, vm.Network, n.ID).ExtractErr() })
	s, err := subnets.Create(ctx, vm.Network, subnets.CreateOpts{NetworkID: n.ID, CIDR: "172.23.0.0/24", IPVersion: 4,
		AllocationPools: []subnets.AllocationPool{{Start: "172.23.0.10", End: "172.23.0.19"}}}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = subnets.Delete(ctx, vm.Network, s.ID).ExtractErr() })

	injector := &testbed.FaultInjector{Hold: 2 * time.Second}
	sessions := &openstack.Sessions{Options: openstack.Options{Timeout: 500 * time.Millisecond, WrapTransport: func(next http.RoundTripper) http.RoundTripper {
		injector.Next = next
		return injector
	}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "uid", ResourceVersion: "1"},
		Data: map[string][]byte{openstack.CloudsSecretKey: clouds}}
	secrets := fake.NewClientBuilder().WithObjects(secret).Build()
	r := &SharedNetworkReconciler{Clouds: &credentials.Source{Client: secrets, Namespace: "ns", Sessions: sessions}}
	sn := &sharednetv1.SharedNetwork{Spec: sharednetv1.SharedNetworkSpec{
		Identity: sharednetv1.VMProjectIdentity{SecretName: "vm", CloudName: testbed.VMProject}, NetworkID: n.ID, Subnets: []string{s.ID}}}

	free := func() int64 {
		f, ok := sn.Status.Subnet(s.ID)
		g.Expect(ok).To(BeTrue())
		return ptr.Deref(f.FreeAddresses, 0)
	}
	r.refresh(ctx, sn, secret)
	g.Expect(meta.IsStatusConditionTrue(sn.Status.Conditions, sharednetv1.ReadyCondition)).To(BeTrue())
	g.Expect(free()).To(BeEquivalentTo(10))

	var held []string
	plans := [][]testbed.Fault{
		{testbed.ServerError, testbed.ServerError, testbed.ServerError, testbed.ServerError},
		{testbed.Pass, testbed.Reset, testbed.Reset, testbed.Reset, testbed.Reset},
		{testbed.Pass, testbed.Pass, testbed.Timeout, testbed.Timeout, testbed.Timeout, testbed.Timeout},
		{testbed.Pass, testbed.Pass, testbed.Pass, testbed.LostAnswer, testbed.ServerError, testbed.Reset, testbed.Timeout},
		{testbed.ServerError, testbed.Pass, testbed.Reset},
	}
	for i, plan := range plans {
		// Each round takes one more address, so a stale or partial count would show.
		p, err := ports.Create(ctx, vm.Network, ports.CreateOpts{NetworkID: n.ID, FixedIPs: []ports.IP{{SubnetID: s.ID}}}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		held = append(held, p.ID)
		t.Cleanup(func() { _ = ports.Delete(ctx, vm.Network, p.ID).ExtractErr() })
		before := free()
		injector.Plan = append([]testbed.Fault(nil), plan...)
		r.refresh(ctx, sn, secret)
		ready := meta.FindStatusCondition(sn.Status.Conditions, sharednetv1.ReadyCondition)
		if ready.Status == metav1.ConditionTrue {
			g.Expect(free()).To(BeEquivalentTo(10-len(held)), "round %d: a fresh count is the true count", i)
		} else {
			g.Expect(ready.Reason).To(Equal(sharednetv1.ReasonOpenStackUnavailable), "round %d: %s", i, ready.Message)
			g.Expect(free()).To(Equal(before), "round %d: an unavailable Neutron leaves the last known count", i)
		}
	}
	g.Expect(injector.Injected).To(BeNumerically(">", 10))
	injector.Plan = nil
	r.refresh(ctx, sn, secret)
	g.Expect(free()).To(BeEquivalentTo(10 - len(held)))
}

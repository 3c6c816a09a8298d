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
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
)

// networkStory is the SharedNetwork controller over controller-runtime's
// fake client and the in-memory fake cloud: SharedNetwork "vm" offers the
// VM project's network (MTU 1450, subnet 172.16.5.0/24) with the credential
// in Secret capo-sharednet-system/vm.
type networkStory struct {
	t      *testing.T
	cloud  *fakecloud.Cloud
	client client.Client
	r      *SharedNetworkReconciler
	now    time.Time
	subnet string
	vm     *fakecloud.Project // the VM project's credential
}

func newNetworkStory(t *testing.T, objs ...client.Object) *networkStory {
	t.Helper()
	s := &networkStory{t: t, cloud: fakecloud.New(), now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	network, subnet := s.cloud.AddNetwork("vm-project", 1450, "172.16.5.0/24")
	s.subnet = subnet
	sn := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Spec: sharednetv1.SharedNetworkSpec{
		Identity: sharednetv1.VMProjectIdentity{SecretName: "vm", CloudName: "vm-project"}, NetworkID: network, Subnets: []string{subnet}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-sharednet-system", Name: "vm", UID: "secret-uid"},
		Data: map[string][]byte{openstack.CloudsSecretKey: []byte("clouds:\n  vm-project:\n    auth:\n      auth_url: http://127.0.0.1:5000/v3\n")}}
	s.client = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, sn, secret)...).
		WithStatusSubresource(&sharednetv1.SharedNetwork{}).WithIndex(&clusterv1.Cluster{}, consumers.SharedNetworkIndex, consumers.SharedNetworksOf).Build()
	vm := &fakecloud.Project{Cloud: s.cloud, ID: "vm-project"}
	s.vm = vm
	s.r = &SharedNetworkReconciler{Client: s.client, Namespace: "capo-sharednet-system", Now: func() time.Time { return s.now }, AuditVMIngress: true,
		Clouds: &fakecloud.Clouds{SharedNetworks: map[string]*fakecloud.Project{"vm": vm}}}
	return s
}

func (s *networkStory) reconcile() reconcile.Result {
	s.t.Helper()
	res, err := s.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "vm"}})
	if err != nil {
		s.t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (s *networkStory) sharedNetwork() *sharednetv1.SharedNetwork {
	s.t.Helper()
	sn := &sharednetv1.SharedNetwork{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Name: "vm"}, sn); err != nil {
		s.t.Fatal(err)
	}
	return sn
}

func (s *networkStory) ready() *metav1.Condition {
	return meta.FindStatusCondition(s.sharedNetwork().Status.Conditions, sharednetv1.ReadyCondition)
}

func TestSharedNetworkFactsAreReadOncePerResync(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	res := s.reconcile()
	sn := s.sharedNetwork()
	g.Expect(s.ready().Status).To(Equal(metav1.ConditionTrue))
	g.Expect(sn.Status.MTU).To(BeEquivalentTo(1450))
	facts, ok := sn.Status.Subnet(s.subnet)
	g.Expect(ok).To(BeTrue())
	g.Expect(facts.CIDR).To(Equal("172.16.5.0/24"))
	g.Expect(facts.FreeAddresses).To(HaveValue(BeNumerically(">", 200)))
	g.Expect(sn.Finalizers).To(ContainElement(sharednetv1.SharedNetworkFinalizer), "kept while nodegroups may use it")
	g.Expect(res.RequeueAfter).To(Equal(DefaultResync))

	calls := s.cloud.Calls["Network"]
	s.now = s.now.Add(DefaultResync / 2)
	g.Expect(s.reconcile().RequeueAfter).To(BeNumerically("<=", DefaultResync/2), "waits for the rest of the interval")
	g.Expect(s.cloud.Calls["Network"]).To(Equal(calls), "fresh facts: no call to Neutron")

	s.now = s.now.Add(DefaultResync)
	s.reconcile()
	g.Expect(s.cloud.Calls["Network"]).To(Equal(calls+1), "stale facts: read again")
}

func TestSharedNetworkReadyTellsTheAdministratorWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     func(s *networkStory)
		reason    string
		words     string
		keepsFree bool
	}{
		{name: "the credential Secret is missing", reason: sharednetv1.ReasonCredentialsInvalid, words: "does not exist; create it",
			fault: func(s *networkStory) {
				g := NewWithT(s.t)
				g.Expect(s.client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-sharednet-system", Name: "vm"}})).To(Succeed())
			}},
		{name: "the network is not the credential's to see", reason: sharednetv1.ReasonNetworkNotFound, words: "not visible to the VM project's credential",
			fault: func(s *networkStory) {
				sn := s.sharedNetwork()
				sn.Spec.NetworkID = "someone-elses"
				NewWithT(s.t).Expect(s.client.Update(context.Background(), sn)).To(Succeed())
				s.now = s.now.Add(DefaultResync + time.Second) // the fake client bumps no generation
			}},
		{name: "Neutron does not answer: the last facts are kept", reason: sharednetv1.ReasonOpenStackUnavailable, words: "503", keepsFree: true,
			fault: func(s *networkStory) {
				s.now = s.now.Add(DefaultResync + time.Second)
				s.cloud.Fail = func(method string) error {
					if method == "Subnets" {
						return errors.New("Neutron answered 503")
					}
					return nil
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newNetworkStory(t)
			s.reconcile()
			before, _ := s.sharedNetwork().Status.Subnet(s.subnet)
			tc.fault(s)
			s.reconcile()
			ready := s.ready()
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(tc.reason))
			g.Expect(ready.Message).To(ContainSubstring(tc.words))
			if tc.keepsFree {
				after, ok := s.sharedNetwork().Status.Subnet(s.subnet)
				g.Expect(ok).To(BeTrue())
				g.Expect(after.FreeAddresses).To(Equal(before.FreeAddresses))
			}
		})
	}
}

func TestASharedNetworkInUseIsKeptUntilItsNodegroupsDetach(t *testing.T) {
	g := NewWithT(t)
	consumer := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-md-a"},
		Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm"}}
	s := newNetworkStory(t, consumer)
	s.reconcile()
	g.Expect(s.client.Delete(context.Background(), s.sharedNetwork())).To(Succeed())
	s.reconcile()
	sn := s.sharedNetwork()
	g.Expect(sn.Status.Consumers).To(ConsistOf(sharednetv1.Consumer{Namespace: "team-a", Cluster: "demo", MachineDeployment: "md-a"}))
	g.Expect(s.ready().Reason).To(Equal(sharednetv1.ReasonInUse))
	g.Expect(s.ready().Message).To(ContainSubstring("remove their sharedNetwork variable first"))

	g.Expect(s.client.Delete(context.Background(), consumer)).To(Succeed())
	s.reconcile()
	err := s.client.Get(context.Background(), client.ObjectKey{Name: "vm"}, &sharednetv1.SharedNetwork{})
	g.Expect(err).To(MatchError(ContainSubstring("not found")), "released once no nodegroup uses it")
}

// TestAPausedSharedNetworkIsLeftAlone: CAPI's paused annotation on a
// SharedNetwork stops its reads of Neutron and its finalization (say while
// an administrator repairs the VM project), and says so in Paused.
func TestAPausedSharedNetworkIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	s.reconcile()
	calls := s.cloud.Calls["Network"]
	paused := func(status metav1.ConditionStatus) *metav1.Condition {
		c := meta.FindStatusCondition(s.sharedNetwork().Status.Conditions, sharednetv1.PausedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status))
		return c
	}
	paused(metav1.ConditionFalse)

	sn := s.sharedNetwork()
	sn.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	g.Expect(s.client.Update(context.Background(), sn)).To(Succeed())
	s.now = s.now.Add(DefaultResync + time.Second)
	g.Expect(s.reconcile().RequeueAfter).To(BeZero(), "nothing to wait for: the annotation's removal wakes it")
	g.Expect(s.cloud.Calls["Network"]).To(Equal(calls), "paused: Neutron is not read though the facts are stale")
	g.Expect(paused(metav1.ConditionTrue).Message).To(ContainSubstring(clusterv1.PausedAnnotation + " annotation: its facts are not read"))

	g.Expect(s.client.Delete(context.Background(), s.sharedNetwork())).To(Succeed())
	s.reconcile()
	g.Expect(s.sharedNetwork().Finalizers).To(ContainElement(sharednetv1.SharedNetworkFinalizer), "paused: not finalized, though no nodegroup uses it")

	sn = s.sharedNetwork()
	delete(sn.Annotations, clusterv1.PausedAnnotation)
	g.Expect(s.client.Update(context.Background(), sn)).To(Succeed())
	s.reconcile()
	err := s.client.Get(context.Background(), client.ObjectKey{Name: "vm"}, &sharednetv1.SharedNetwork{})
	g.Expect(err).To(MatchError(ContainSubstring("not found")), "resumed: released, as no nodegroup uses it")
}

// TestTheStatusIsWrittenOnlyWhenItChanges: the patch helper writes nothing
// on a reconcile that finds what the status already says.
func TestTheStatusIsWrittenOnlyWhenItChanges(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	s.reconcile()
	version := s.sharedNetwork().ResourceVersion
	s.now = s.now.Add(DefaultResync / 2)
	s.reconcile()
	g.Expect(s.sharedNetwork().ResourceVersion).To(Equal(version), "fresh facts, same consumers: no write")
}

// TestFreeAddressesAreExportedAndForgotten: the metric an administrator
// alerts on has one series per subnet of the facts, and none once the
// subnet leaves the SharedNetwork or the SharedNetwork is gone.
func TestFreeAddressesAreExportedAndForgotten(t *testing.T) {
	g := NewWithT(t)
	freeAddresses.Reset() // what earlier tests of this package left (the test bed's too)
	s := newNetworkStory(t)
	s.reconcile()
	facts, _ := s.sharedNetwork().Status.Subnet(s.subnet)
	g.Expect(testutil.ToFloat64(freeAddresses.WithLabelValues("vm", s.subnet))).To(BeEquivalentTo(*facts.FreeAddresses))
	series := func() int { return testutil.CollectAndCount(freeAddresses) }
	g.Expect(series()).To(Equal(1))

	// The subnet leaves the SharedNetwork: its series goes at the next read.
	sn := s.sharedNetwork()
	sn.Spec.Subnets = nil
	g.Expect(s.client.Update(context.Background(), sn)).To(Succeed())
	s.now = s.now.Add(DefaultResync + time.Second)
	s.reconcile()
	g.Expect(series()).To(BeZero())

	// Read again, then deleted: nothing is left.
	sn = s.sharedNetwork()
	sn.Spec.Subnets = []string{s.subnet}
	g.Expect(s.client.Update(context.Background(), sn)).To(Succeed())
	s.now = s.now.Add(DefaultResync + time.Second)
	s.reconcile()
	g.Expect(series()).To(Equal(1))
	g.Expect(s.client.Delete(context.Background(), s.sharedNetwork())).To(Succeed())
	s.reconcile()
	g.Expect(series()).To(BeZero())
}

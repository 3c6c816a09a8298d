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
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// The VM-side audit (do the VM project's security groups let the shared
// subnet in?) is read with the facts, once per resync, in one request: the
// guardrails copy the count onto every attachment instead of asking the VM
// project on each of their reconciles.
func TestTheVMSideAuditIsReadOncePerResync(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	s.vm.SecurityGroupRules = []openstack.IngressRule{
		{ID: "r-wide", RemoteIPPrefix: "172.16.0.0/16"},
		{ID: "r-exact", RemoteIPPrefix: "172.16.5.0/24"},
		{ID: "r-half", RemoteIPPrefix: "172.16.5.0/25"}, // part of the subnet: some nodes only
		{ID: "r-other", RemoteIPPrefix: "10.0.0.0/8"},   // another range
		{ID: "r-v6", RemoteIPPrefix: "::/0"},            // another IP version
		{ID: "r-bad", RemoteIPPrefix: "not-a-prefix"},   // never counted
	}
	s.reconcile()
	subnet, _ := s.sharedNetwork().Status.Subnet(s.subnet)
	g.Expect(subnet.AdmittingIngressRules).To(HaveValue(BeEquivalentTo(2)))
	g.Expect(s.cloud.Calls["IngressRules"]).To(Equal(1), "one request per resync")

	s.reconcile()
	g.Expect(s.cloud.Calls["IngressRules"]).To(Equal(1), "fresh facts: the rules are not read again")

	s.vm.SecurityGroupRules = nil // the VM project removes its rules
	s.now = s.now.Add(DefaultResync)
	s.reconcile()
	subnet, _ = s.sharedNetwork().Status.Subnet(s.subnet)
	g.Expect(subnet.AdmittingIngressRules).To(HaveValue(BeEquivalentTo(0)), "refused now: the next resync says so")
	g.Expect(s.cloud.Calls["IngressRules"]).To(Equal(2))

	s.r.AuditVMIngress = false // the WorkloadGuardrails feature off: nobody reports it
	s.now = s.now.Add(DefaultResync)
	s.reconcile()
	subnet, _ = s.sharedNetwork().Status.Subnet(s.subnet)
	g.Expect(subnet.AdmittingIngressRules).To(BeNil())
	g.Expect(s.cloud.Calls["IngressRules"]).To(Equal(2), "not read")
}

// The audit never holds up the facts the rules decide on: when the rules
// cannot be read, the facts are still refreshed and Ready; the last count is
// kept through an outage, and unset when the credential may not list rules.
func TestTheVMSideAuditNeverHoldsUpTheFacts(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	s.vm.SecurityGroupRules = []openstack.IngressRule{{ID: "r", RemoteIPPrefix: "172.16.5.0/24"}}
	s.reconcile()

	s.cloud.Fail = func(method string) error {
		if method == "IngressRules" {
			return errors.New("503 Service Unavailable")
		}
		return nil
	}
	s.now = s.now.Add(DefaultResync)
	s.reconcile()
	sn := s.sharedNetwork()
	subnet, _ := sn.Status.Subnet(s.subnet)
	g.Expect(subnet.AdmittingIngressRules).To(HaveValue(BeEquivalentTo(1)), "an outage says nothing about the rules: the last count is kept")
	g.Expect(s.ready().Status).To(Equal(metav1.ConditionTrue))
	g.Expect(sn.Status.LastRefreshTime.Time).To(BeTemporally("==", s.now), "the facts themselves were read")

	s.cloud.Fail = nil
	s.vm.SecurityGroupRulesHidden = true
	s.now = s.now.Add(DefaultResync)
	s.reconcile()
	subnet, _ = s.sharedNetwork().Status.Subnet(s.subnet)
	g.Expect(subnet.AdmittingIngressRules).To(BeNil(), "not readable with this credential: no count rather than a wrong one")
	g.Expect(s.ready().Status).To(Equal(metav1.ConditionTrue))
	g.Expect(s.ready().Reason).To(Equal(sharednetv1.ReasonFactsCurrent))
}

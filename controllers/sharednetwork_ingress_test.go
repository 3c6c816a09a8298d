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

// vmPorts gives the story's VM project its ports on the shared subnet: a
// VM in sg-web, one in sg-db, one without port security, and ports that are
// no VM's (Neutron's DHCP port, a load balancer's VIP) or not the VM
// project's (a node's, in its cluster's project).
func (s *networkStory) vmPorts() {
	sn := s.sharedNetwork()
	on := func(p openstack.Port) {
		p.SubnetIDs = []string{s.subnet}
		s.cloud.AddSubnetPort(sn.Spec.NetworkID, p)
	}
	on(openstack.Port{ProjectID: "vm-project", DeviceOwner: "compute:nova", SecurityGroups: []string{"sg-web"}})
	on(openstack.Port{ProjectID: "vm-project", DeviceOwner: "compute:nova", SecurityGroups: []string{"sg-db"}})
	on(openstack.Port{ProjectID: "vm-project", DeviceOwner: "compute:nova", PortSecurityDisabled: true})
	on(openstack.Port{ProjectID: "vm-project", DeviceOwner: "network:dhcp", SecurityGroups: []string{"sg-db"}})
	on(openstack.Port{ProjectID: "vm-project", DeviceOwner: "Octavia", SecurityGroups: []string{"sg-db"}})
	on(openstack.Port{ProjectID: "cluster-project", DeviceOwner: "compute:nova", SecurityGroups: []string{"sg-db"}})
}

// audit is the subnet's VM-side counts: VM ports, those that admit the
// subnet, the rules that do (nil when unset).
func (s *networkStory) audit() []*int32 {
	subnet, _ := s.sharedNetwork().Status.Subnet(s.subnet)
	return []*int32{subnet.VMPorts, subnet.AdmittingVMPorts, subnet.AdmittingIngressRules}
}

// counts is what audit answers when the counts are set.
func counts(vmPorts, admitting, rules int32) []*int32 {
	return []*int32{&vmPorts, &admitting, &rules}
}

// The VM-side audit (do the VM project's VMs on the shared subnet accept
// traffic from the nodes?) reads what decides it: the security groups of
// the VM project's own ports there. It is read with the facts, once per
// resync, in two requests: the guardrails copy the counts onto every
// attachment instead of asking the VM project on each of their reconciles.
func TestTheVMSideAuditIsReadOncePerResync(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	s.vmPorts()
	s.vm.SecurityGroupRules = []openstack.IngressRule{
		{ID: "r-wide", SecurityGroupID: "sg-web", RemoteIPPrefix: "172.16.0.0/16"},
		{ID: "r-exact", SecurityGroupID: "sg-web", RemoteIPPrefix: "172.16.5.0/24", Protocol: "tcp", PortRangeMin: 443, PortRangeMax: 443},
		{ID: "r-half", SecurityGroupID: "sg-web", RemoteIPPrefix: "172.16.5.0/25"}, // part of the subnet: some nodes only
		{ID: "r-other", SecurityGroupID: "sg-web", RemoteIPPrefix: "10.0.0.0/8"},   // another range
		{ID: "r-v6", SecurityGroupID: "sg-web", EtherType: "IPv6"},                 // from anywhere, of the other IP version
		{ID: "r-members", SecurityGroupID: "sg-db", RemoteGroupID: "sg-db"},        // the nodes are no members
		{ID: "r-unused", SecurityGroupID: "sg-unused"},                             // from anywhere, but no VM port is in the group
	}
	s.reconcile()
	g.Expect(s.audit()).To(Equal(counts(3, 2, 2)), "3 VM ports; the one in sg-web and the one without port security admit the subnet, through 2 rules")
	g.Expect(s.cloud.Calls["PortsOnSubnets"]).To(Equal(1), "one port list per resync")
	g.Expect(s.cloud.Calls["IngressRules"]).To(Equal(1), "one rule list per resync")

	s.reconcile()
	g.Expect(s.cloud.Calls["PortsOnSubnets"]+s.cloud.Calls["IngressRules"]).To(Equal(2), "fresh facts: nothing read again")

	s.vm.SecurityGroupRules = append(s.vm.SecurityGroupRules, openstack.IngressRule{ID: "r-any", SecurityGroupID: "sg-db"}) // neither a prefix nor a group: from anywhere
	s.now = s.now.Add(DefaultResync)
	s.reconcile()
	g.Expect(s.audit()).To(Equal(counts(3, 3, 3)), "the next resync says so")
	g.Expect(s.cloud.Calls["PortsOnSubnets"]).To(Equal(2))

	s.r.AuditVMIngress = false // the WorkloadGuardrails feature off: nobody reports it
	s.now = s.now.Add(DefaultResync)
	s.reconcile()
	g.Expect(s.audit()).To(Equal([]*int32{nil, nil, nil}))
	g.Expect(s.cloud.Calls["PortsOnSubnets"]).To(Equal(2), "not read")
}

// Without a VM port on the subnet there is nothing to admit: the counts say
// 0 of 0, and no rule is read.
func TestTheVMSideAuditOfASubnetWithoutVMPorts(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	s.vm.SecurityGroupRules = []openstack.IngressRule{{ID: "r", SecurityGroupID: "sg", RemoteIPPrefix: "172.16.5.0/24"}}
	s.reconcile()
	g.Expect(s.audit()).To(Equal(counts(0, 0, 0)))
	g.Expect(s.cloud.Calls["IngressRules"]).To(BeZero(), "no port, no group to read")
}

// The audit never holds up the facts the rules decide on: when the ports or
// rules cannot be read, the facts are still refreshed and Ready; the last
// counts are kept through an outage, and unset when the credential may not
// list ports or rules.
func TestTheVMSideAuditNeverHoldsUpTheFacts(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	s.vmPorts()
	s.vm.SecurityGroupRules = []openstack.IngressRule{{ID: "r", SecurityGroupID: "sg-web", RemoteIPPrefix: "172.16.5.0/24"}}
	s.reconcile()
	g.Expect(s.audit()).To(Equal(counts(3, 2, 1)))

	for _, failing := range []string{"PortsOnSubnets", "IngressRules"} {
		s.cloud.Fail = func(method string) error {
			if method == failing {
				return errors.New("503 Service Unavailable")
			}
			return nil
		}
		s.now = s.now.Add(DefaultResync)
		s.reconcile()
		sn := s.sharedNetwork()
		g.Expect(s.audit()).To(Equal(counts(3, 2, 1)), "%s fails: an outage says nothing about the ports or rules, the last counts are kept", failing)
		g.Expect(s.ready().Status).To(Equal(metav1.ConditionTrue))
		g.Expect(sn.Status.LastRefreshTime.Time).To(BeTemporally("==", s.now), "the facts themselves were read")
	}

	s.cloud.Fail = nil
	for _, hide := range []*bool{&s.vm.PortsHidden, &s.vm.SecurityGroupRulesHidden} {
		*hide = true
		s.now = s.now.Add(DefaultResync)
		s.reconcile()
		g.Expect(s.audit()).To(Equal([]*int32{nil, nil, nil}), "not readable with this credential: no count rather than a wrong one")
		g.Expect(s.ready().Status).To(Equal(metav1.ConditionTrue))
		g.Expect(s.ready().Reason).To(Equal(sharednetv1.ReasonFactsCurrent))
		*hide = false
	}
}

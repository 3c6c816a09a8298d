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

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
)

func (s *authorityStory) setSharedNetworkMTU(mtu int32) {
	s.t.Helper()
	sn := &sharednetv1.SharedNetwork{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Name: "vm"}, sn); err != nil {
		s.t.Fatal(err)
	}
	sn.Status.MTU = mtu
	if err := s.client.Status().Update(context.Background(), sn); err != nil {
		s.t.Fatal(err)
	}
	s.resync() // what a resync that read a new MTU writes
}

// A Cluster created with the variable: admission could not know its
// network's MTU or its project's quota. The controller checks them before it
// shares; a violation means no share, no nudge (so no port, no rollout), and
// the rule, the values and the fix on the attachment and the Cluster.
func TestTheRulesAdmissionCouldNotDecideRunBeforeTheShare(t *testing.T) {
	t.Run("an MTU mismatch: nothing shared, said on the attachment and the Cluster; fixed, the attach goes on", func(t *testing.T) {
		g := NewWithT(t)
		s := newAuthorityStory(t, true, nil)
		s.setSharedNetworkMTU(1400)
		s.reconcile()
		a := s.attachment("md-a")
		g.Expect(a.Status.Share).To(BeNil())
		shared := condition(a, sharednetv1.SharedCondition)
		g.Expect(shared.Reason).To(Equal(sharednetv1.ReasonRuleViolated))
		g.Expect(shared.Message).To(And(ContainSubstring(`MachineDeployment topology "md-a": mtu:`), ContainSubstring("MTU 1400 but the cluster network has MTU 1450"),
			ContainSubstring("Set the shared network's MTU to 1450"), ContainSubstring("nothing was shared")))
		g.Expect(s.cloud.Shares()).To(BeEmpty())
		g.Expect(s.cluster().Annotations).NotTo(HaveKey(sharedAnnotationPrefix+"md-a"), "no nudge: no port, no rollout")
		events := s.events()
		g.Expect(events).To(ContainSubstring("Warning RuleViolated nodegroup md-a: nothing was shared"), "on the Cluster")
		g.Expect(events).To(ContainSubstring("Warning RuleViolated nothing was shared"), "on the attachment")

		s.setSharedNetworkMTU(1450)
		s.reconcile()
		a = s.attachment("md-a")
		g.Expect(a.Status.Share).NotTo(BeNil())
		g.Expect(s.cluster().Annotations).To(HaveKey(sharedAnnotationPrefix + "md-a"))
	})

	t.Run("the cluster project's port quota", func(t *testing.T) {
		g := NewWithT(t)
		project := &fakecloud.Project{ID: "cluster-project", PortQuota: &openstack.Quota{Limit: 5, Used: 5}}
		s := newAuthorityStory(t, true, project)
		s.reconcile()
		a := s.attachment("md-a")
		g.Expect(a.Status.Share).To(BeNil())
		g.Expect(condition(a, sharednetv1.SharedCondition).Message).To(And(ContainSubstring("capacity:"), ContainSubstring("port quota allows 0 more ports")))
		g.Expect(s.cloud.Shares()).To(BeEmpty())
	})

	t.Run("a fact that cannot be read now is not a violation: cannot check, retried, nothing shared", func(t *testing.T) {
		g := NewWithT(t)
		s := newAuthorityStory(t, true, nil)
		s.cloud.Fail = func(method string) error {
			if method == "Ports" {
				return errors.New("the cluster project's Neutron is down")
			}
			return nil
		}
		s.reconcile()
		a := s.attachment("md-a")
		g.Expect(a.Status.Share).To(BeNil())
		shared := condition(a, sharednetv1.SharedCondition)
		g.Expect(shared.Reason).To(Equal(sharednetv1.ReasonCannotCheck))
		g.Expect(shared.Message).To(ContainSubstring("cannot read the cluster project's port quota"))
		g.Expect(s.cloud.Shares()).To(BeEmpty())
	})

	t.Run("the cluster network does not exist yet: it waits, nothing is refused", func(t *testing.T) {
		g := NewWithT(t)
		s := newAuthorityStory(t, true, nil)
		osc := &infrav1.OpenStackCluster{}
		g.Expect(s.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "demo"}, osc)).To(Succeed())
		osc.Status.Network = nil
		g.Expect(s.client.Update(context.Background(), osc)).To(Succeed())
		s.reconcile()
		a := s.attachment("md-a")
		g.Expect(a.Status.Share).To(BeNil())
		g.Expect(condition(a, sharednetv1.SharedCondition).Reason).To(Equal(sharednetv1.ReasonWaitingForClusterNetwork))
		g.Expect(s.cloud.Shares()).To(BeEmpty())
	})
}

// A cloud that changed after the attach is reported and never acted on.
func TestACloudThatChangedAfterTheAttachIsReportedNotRolled(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.reconcile()
	a := s.attachment("md-a")
	g.Expect(a.Status.Share).NotTo(BeNil())
	policy, nudged := a.Status.Share.RBACPolicyID, s.cluster().Annotations[sharedAnnotationPrefix+"md-a"]
	g.Expect(condition(a, sharednetv1.CloudFitsCondition).Status).To(Equal(metav1.ConditionTrue))

	s.setSharedNetworkMTU(1400)
	s.events()
	s.reconcile()
	events := s.events()
	a = s.attachment("md-a")
	fits := condition(a, sharednetv1.CloudFitsCondition)
	g.Expect(fits.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(fits.Reason).To(Equal(sharednetv1.ReasonCloudChanged))
	g.Expect(fits.Message).To(And(ContainSubstring("mtu:"), ContainSubstring("nothing rolls"), ContainSubstring("cannot grow")))
	g.Expect(events).To(ContainSubstring("Warning CloudChanged"))
	g.Expect(a.Status.Share.RBACPolicyID).To(Equal(policy), "the share stays")
	g.Expect(s.cluster().Annotations[sharedAnnotationPrefix+"md-a"]).To(Equal(nudged), "no nudge: nothing rolls")
}

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
	"testing"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/exp/guardrails"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// machine is one machine of md-a: the template it was cloned from and its
// address on the shared subnet ("" for none).
type machine struct{ name, template, address string }

// nodegroup puts md-a's MachineDeployment (desired replicas, current
// template md-a-new, with the shared port when carries) and its machines
// with their OpenStackMachines into the fake API server.
func (s *authorityStory) nodegroup(desired int32, carries bool, machines ...machine) {
	s.t.Helper()
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-md-a",
		Labels: map[string]string{clusterv1.ClusterNameLabel: "demo", clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-a"}}}
	md.Spec.Replicas = ptr.To(desired)
	md.Spec.Template.Spec.InfrastructureRef.Name = "md-a-new"
	tmpl := &infrav1.OpenStackMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "md-a-new"}}
	if carries {
		tmpl.Spec.Template.Spec.Ports = []infrav1.PortOpts{{}, {Tags: []string{sharedport.Tag}}}
	}
	objs := []client.Object{md, tmpl}
	for _, m := range machines {
		mach := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: m.name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: "demo", clusterv1.MachineDeploymentNameLabel: md.Name}}}
		mach.Spec.InfrastructureRef.Name = m.name
		mach.Status.NodeRef.Name = "node-" + m.name
		osm := &infrav1.OpenStackMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: m.name,
			Labels:      map[string]string{clusterv1.ClusterNameLabel: "demo"},
			Annotations: map[string]string{clusterv1.TemplateClonedFromNameAnnotation: m.template}}}
		osm.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.6.0.10"}}
		if m.address != "" {
			osm.Status.Addresses = append(osm.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: m.address})
		}
		objs = append(objs, mach, osm)
	}
	for _, o := range objs {
		if err := s.client.Create(context.Background(), o); err != nil {
			s.t.Fatal(err)
		}
	}
}

// reconcileResult reconciles team-a/demo once and returns what the
// controller-runtime would see.
func (s *authorityStory) reconcileResult() (reconcile.Result, error) {
	return s.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "demo"}})
}

func (s *authorityStory) removeVariable() {
	s.t.Helper()
	c := s.cluster()
	s.update(c, func() { variables.SetOverride(c, "md-a", nil) })
}

// TestShareAndNudge: the first reconcile of a nodegroup that asks for a
// shared network shares it once with the cluster's project, records the
// share before anything else, and nudges CAPI with the policy ID (only for
// that nodegroup); the next reconciles share nothing more.
func TestShareAndNudge(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	res, err := s.reconcileResult()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(pollRollout), "rolling out: watched closely")

	a := s.attachment("md-a")
	g.Expect(a.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "demo"), "CAPI's label names the cluster")
	g.Expect(a.Finalizers).To(ContainElement(AttachmentFinalizer), "kept until the share is released")
	g.Expect(a.Status.Share).NotTo(BeNil())
	g.Expect(s.cloud.Shares()).To(Equal(map[string][2]string{a.Status.Share.RBACPolicyID: {s.network, "cluster-project"}}))
	g.Expect(condition(a, sharednetv1.SharedCondition).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(s.cluster().Annotations).To(HaveKeyWithValue(sharedAnnotationPrefix+"md-a", a.Status.Share.RBACPolicyID), "the nudge")
	g.Expect(s.cluster().Annotations).NotTo(HaveKey(sharedAnnotationPrefix+"md-b"), "md-b asked for nothing")

	for range 2 {
		_, err := s.reconcileResult()
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(s.cloud.Calls["Share"]).To(Equal(1), "an established share is not asked for again")
	g.Expect(s.cloud.Shares()).To(HaveLen(1))
}

// TestRolloutIsMeasuredFromTheNodegroup: phase, counts, Attached and Ready
// follow CAPI's rollout of the nodegroup; Attached (and Ready) only when
// every machine runs on the template with the port and has its address.
func TestRolloutIsMeasuredFromTheNodegroup(t *testing.T) {
	for _, tt := range []struct {
		name         string
		desired      int32
		carries      bool
		machines     []machine
		wantPhase    sharednetv1.AttachmentPhase
		wantAttached int32
		wantReady    metav1.ConditionStatus
		wantRequeue  bool // pollRollout rather than pollCloud
	}{
		{name: "CAPI has not applied the port yet", desired: 2, carries: false,
			machines:  []machine{{"m1", "md-a-old", ""}, {"m2", "md-a-old", ""}},
			wantPhase: sharednetv1.PhaseRollingOut, wantAttached: 0, wantReady: metav1.ConditionFalse, wantRequeue: true},
		{name: "halfway: one node replaced", desired: 2, carries: true,
			machines:  []machine{{"m1", "md-a-old", ""}, {"m3", "md-a-new", "172.16.5.11"}},
			wantPhase: sharednetv1.PhaseRollingOut, wantAttached: 1, wantReady: metav1.ConditionFalse, wantRequeue: true},
		{name: "every node replaced but one still without its address", desired: 2, carries: true,
			machines:  []machine{{"m3", "md-a-new", "172.16.5.11"}, {"m4", "md-a-new", ""}},
			wantPhase: sharednetv1.PhaseRollingOut, wantAttached: 1, wantReady: metav1.ConditionFalse, wantRequeue: true},
		{name: "done", desired: 2, carries: true,
			machines:  []machine{{"m3", "md-a-new", "172.16.5.11"}, {"m4", "md-a-new", "172.16.5.12"}},
			wantPhase: sharednetv1.PhaseAttached, wantAttached: 2, wantReady: metav1.ConditionTrue},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, nil)
			s.nodegroup(tt.desired, tt.carries, tt.machines...)
			res, err := s.reconcileResult()
			g.Expect(err).NotTo(HaveOccurred())

			a := s.attachment("md-a")
			g.Expect(a.Status.Phase).To(Equal(tt.wantPhase))
			g.Expect(ptr.Deref(a.Status.DesiredNodes, 0)).To(Equal(tt.desired))
			g.Expect(ptr.Deref(a.Status.AttachedNodes, 0)).To(Equal(tt.wantAttached))
			g.Expect(a.Status.Nodes).To(HaveLen(int(tt.wantAttached)))
			g.Expect(a.Status.SubnetLoadBalancerAddresses).To(HaveValue(BeEquivalentTo(3)), "what load balancers hold on the subnet, from the SharedNetwork")
			g.Expect(condition(a, sharednetv1.AttachedCondition).Status).To(Equal(map[bool]metav1.ConditionStatus{true: metav1.ConditionTrue, false: metav1.ConditionFalse}[tt.wantPhase == sharednetv1.PhaseAttached]))
			ready := condition(a, sharednetv1.AttachmentReadyCondition)
			g.Expect(ready.Status).To(Equal(tt.wantReady))
			if tt.wantReady == metav1.ConditionTrue {
				g.Expect(ready.Reason).To(Equal(sharednetv1.ReasonReady))
				g.Expect(res.RequeueAfter).To(Equal(pollCloud))
			} else {
				g.Expect(ready.Reason).To(Equal(sharednetv1.ReasonNotReady))
				g.Expect(ready.Message).To(ContainSubstring("Attached:"), "Ready says what is missing")
			}
			if tt.wantRequeue {
				g.Expect(res.RequeueAfter).To(Equal(pollRollout))
			}
			g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		})
	}
}

// TestALostStatusFindsTheShareAgain: an attachment whose status was lost
// (restored from a backup, rewritten by hand) while its share exists in
// Neutron gets the same share back: no second share, no new nudge, so no
// second rollout, even when the cloud no longer passes the rules made
// before a share (the nodes already run with their port).
func TestALostStatusFindsTheShareAgain(t *testing.T) {
	for _, tt := range []struct {
		name string
		// nodesRunWithPort: the nodegroup is rolled out with the port.
		nodesRunWithPort bool
		// cloudChanged: the shared network's MTU no longer matches.
		cloudChanged bool
	}{
		{name: "nothing rolled out yet"},
		{name: "the nodes run with the port", nodesRunWithPort: true},
		{name: "the nodes run with the port and the cloud changed since", nodesRunWithPort: true, cloudChanged: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, nil)
			if tt.nodesRunWithPort {
				s.nodegroup(1, true, machine{"m1", "md-a-new", "172.16.5.11"})
			}
			s.reconcile()
			policy := s.attachment("md-a").Status.Share.RBACPolicyID
			nudged := s.cluster().Annotations[sharedAnnotationPrefix+"md-a"]

			a := s.attachment("md-a")
			a.Status = sharednetv1.SharedNetworkAttachmentStatus{}
			g.Expect(s.client.Status().Update(context.Background(), a)).To(Succeed())
			if tt.cloudChanged {
				s.setSharedNetworkMTU(1400)
			}
			_, err := s.reconcileResult()
			g.Expect(err).NotTo(HaveOccurred())

			a = s.attachment("md-a")
			g.Expect(a.Status.Share).NotTo(BeNil(), "found again")
			g.Expect(a.Status.Share.RBACPolicyID).To(Equal(policy))
			g.Expect(s.cloud.Shares()).To(HaveLen(1), "not shared twice")
			g.Expect(s.cluster().Annotations[sharedAnnotationPrefix+"md-a"]).To(Equal(nudged), "no new nudge: no second rollout")
		})
	}
}

// inUse makes Neutron refuse every unshare with 409 until cleared.
func (s *authorityStory) inUse(refuse bool) {
	s.cloud.Fail = nil
	if refuse {
		s.cloud.Fail = func(method string) error {
			if method == "Unshare" {
				return &openstack.InUseError{PolicyID: "any", Answer: "RbacPolicyInUse"}
			}
			return nil
		}
	}
}

// TestDetachWaitsForNeutron: Neutron refusing the unshare (409, the
// cluster's project still has ports on the network) is "not yet": no error
// surfaced, a requeue, the share and the attachment kept, Deleting True
// and Ready False saying why; once Neutron lets it go the detach finishes:
// unshared, un-nudged, the attachment gone.
func TestDetachWaitsForNeutron(t *testing.T) {
	for _, tt := range []struct {
		name      string
		lbName    string // a load balancer on the shared subnet, when set
		wantPhase sharednetv1.AttachmentPhase
		wantWhy   string
		wantWords string
	}{
		{name: "ports of the cluster's project remain",
			wantPhase: sharednetv1.PhaseDetaching, wantWhy: sharednetv1.ReasonPortsRemain, wantWords: "Neutron keeps the share"},
		{name: "a load balancer of a Service of the cluster", lbName: ccm.LoadBalancerName(ccm.ClusterName("team-a", "demo"), "default", "web"),
			wantPhase: sharednetv1.PhaseDetachBlocked, wantWhy: sharednetv1.ReasonLoadBalancersRemain, wantWords: "Service default/web"},
		{name: "a load balancer nobody's CCM made", lbName: "by-hand",
			wantPhase: sharednetv1.PhaseDetachBlocked, wantWhy: sharednetv1.ReasonLoadBalancersRemain, wantWords: "openstack loadbalancer delete --cascade"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, nil)
			s.reconcile()
			if tt.lbName != "" {
				s.cloud.AddLoadBalancer(s.subnet, tt.lbName)
			}
			s.inUse(true)
			s.removeVariable()

			res, err := s.reconcileResult()
			g.Expect(err).NotTo(HaveOccurred(), "409 is not a failure")
			g.Expect(res.RequeueAfter).To(Equal(pollRollout), "tried again")
			a := s.attachment("md-a")
			g.Expect(a.Status.Phase).To(Equal(tt.wantPhase))
			shared := condition(a, sharednetv1.SharedCondition)
			g.Expect(shared.Reason).To(Equal(tt.wantWhy))
			g.Expect(shared.Message).To(ContainSubstring(tt.wantWords))
			g.Expect(s.cloud.Shares()).To(HaveLen(1), "the share stays while Neutron refuses")
			g.Expect(a.Finalizers).To(ContainElement(AttachmentFinalizer))
			deleting := condition(a, sharednetv1.DeletingCondition)
			g.Expect(deleting.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(deleting.Message).To(ContainSubstring("sharedNetwork variable was removed"))
			ready := condition(a, sharednetv1.AttachmentReadyCondition)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Message).To(ContainSubstring(tt.wantWords), "Ready says why")

			s.inUse(false)
			_, err = s.reconcileResult()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.cloud.Shares()).To(BeEmpty())
			g.Expect(s.cluster().Annotations).NotTo(HaveKey(sharedAnnotationPrefix+"md-a"), "un-nudged: GeneratePatches stops emitting the port")
			err = s.client.Get(context.Background(), sharednetv1.AttachmentKey(s.cluster(), "md-a"), &sharednetv1.SharedNetworkAttachment{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the attachment is gone: %v", err)
		})
	}
}

// TestPausedClusterIsLeftAlone: while the Cluster is paused (clusterctl
// move) or the attachment carries CAPI's paused annotation, Paused is True
// and nothing is shared, rolled or unshared; resumed, the work goes on.
func TestPausedClusterIsLeftAlone(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pause   func(s *authorityStory)
		resume  func(s *authorityStory)
		message string
	}{
		{name: "Cluster spec.paused",
			pause: func(s *authorityStory) {
				c := s.cluster()
				s.update(c, func() { c.Spec.Paused = ptr.To(true) })
			},
			resume: func(s *authorityStory) {
				c := s.cluster()
				s.update(c, func() { c.Spec.Paused = nil })
			}, message: "Cluster spec.paused is set to true"},
		{name: "the paused annotation on the Cluster",
			pause: func(s *authorityStory) {
				c := s.cluster()
				s.update(c, func() { c.Annotations[clusterv1.PausedAnnotation] = "" })
			},
			resume: func(s *authorityStory) {
				c := s.cluster()
				s.update(c, func() { delete(c.Annotations, clusterv1.PausedAnnotation) })
			}, message: "Cluster has the cluster.x-k8s.io/paused annotation"},
		{name: "the paused annotation on the attachment",
			pause: func(s *authorityStory) {
				a := s.attachment("md-a")
				s.update(a, func() { a.Annotations = map[string]string{clusterv1.PausedAnnotation: ""} })
			},
			resume: func(s *authorityStory) {
				a := s.attachment("md-a")
				s.update(a, func() { a.Annotations = nil })
			}, message: "SharedNetworkAttachment has the cluster.x-k8s.io/paused annotation"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, nil)
			s.reconcile()
			g.Expect(condition(s.attachment("md-a"), sharednetv1.PausedCondition).Status).To(Equal(metav1.ConditionFalse))

			tt.pause(s)
			s.removeVariable()
			_, err := s.reconcileResult()
			g.Expect(err).NotTo(HaveOccurred())
			a := s.attachment("md-a")
			paused := condition(a, sharednetv1.PausedCondition)
			g.Expect(paused.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(paused.Reason).To(Equal(sharednetv1.ReasonPaused))
			g.Expect(paused.Message).To(ContainSubstring(tt.message))
			g.Expect(s.cloud.Shares()).To(HaveLen(1), "no unshare while paused")
			g.Expect(s.cluster().Annotations).To(HaveKey(sharedAnnotationPrefix+"md-a"), "no un-nudge while paused")

			tt.resume(s)
			_, err = s.reconcileResult()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.cloud.Shares()).To(BeEmpty(), "resumed: the detach goes on")
		})
	}
}

// TestNoAttachmentIsCreatedForAPausedCluster: a Cluster paused before its
// first reconcile gets no attachment and no share.
func TestNoAttachmentIsCreatedForAPausedCluster(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	c := s.cluster()
	s.update(c, func() { c.Spec.Paused = ptr.To(true) })
	s.reconcile()
	list := &sharednetv1.SharedNetworkAttachmentList{}
	g.Expect(s.client.List(context.Background(), list)).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())
	g.Expect(s.cloud.Calls["Share"]).To(BeZero())
}

// TestAFailedStatusWriteIsReturned: a status the controller could not
// write is an error (controller-runtime retries), never a silent success;
// the share is recorded before the nudge, so no nudge follows a lost write.
func TestAFailedStatusWriteIsReturned(t *testing.T) {
	for _, tt := range []struct {
		name      string
		before    func(s *authorityStory)
		wantNudge bool
	}{
		{name: "the share, written before the nudge", before: func(*authorityStory) {}},
		{name: "a detach waiting for Neutron", before: func(s *authorityStory) {
			s.reconcile()
			s.inUse(true)
			s.removeVariable()
		}, wantNudge: true},
		{name: "the unshare, written before the un-nudge and the release", before: func(s *authorityStory) {
			s.reconcile()
			s.removeVariable()
		}, wantNudge: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, nil)
			tt.before(s)
			s.statusPatchErr = apierrors.NewServiceUnavailable("etcd is down")
			_, err := s.reconcileResult()
			g.Expect(err).To(MatchError(ContainSubstring("writing the status of SharedNetworkAttachment demo-md-a")))
			g.Expect(s.cluster().Annotations).To(map[bool]types.GomegaMatcher{true: HaveKey(sharedAnnotationPrefix + "md-a"), false: Not(HaveKey(sharedAnnotationPrefix + "md-a"))}[tt.wantNudge])
			g.Expect(s.client.Get(context.Background(), sharednetv1.AttachmentKey(s.cluster(), "md-a"), &sharednetv1.SharedNetworkAttachment{})).To(Succeed(), "nothing is released whose status was not written")
		})
	}
}

// TestTheGuardrailsAndTheAttachmentControllerKeepEachOthersStatus: two
// controllers write an attachment's status (the attachment controller its
// phase, nodes and conditions; the guardrails status.workload and
// WorkloadGuarded). When one writes between the other's read and write,
// neither's fields or conditions are lost.
func TestTheGuardrailsAndTheAttachmentControllerKeepEachOthersStatus(t *testing.T) {
	for _, tt := range []struct {
		name string
		// guardrailsFirst: the guardrails read first and the attachment
		// controller writes in between; else the other way round.
		guardrailsFirst bool
	}{
		{name: "the guardrails write while the attachment controller reconciles"},
		{name: "the attachment controller writes while the guardrails reconcile", guardrailsFirst: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, nil)
			s.reconcile() // shared, rolling out
			workload := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{guardrails.SubnetAnnotation: s.subnet}},
					Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}).Build()
			rails := &guardrails.Reconciler{Client: s.client, Credentials: s.clouds, Recorder: s.recorder,
				WorkloadClient: func(context.Context, client.ObjectKey) (client.Client, error) { return workload, nil }}
			req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "demo"}}
			s.nodegroup(1, true, machine{"m1", "md-a-new", "172.16.5.11"}) // the rollout is over

			reconcileRails := func() { _, err := rails.Reconcile(context.Background(), req); g.Expect(err).NotTo(HaveOccurred()) }
			reconcileAttachment := func() { _, err := s.reconcileResult(); g.Expect(err).NotTo(HaveOccurred()) }
			if tt.guardrailsFirst {
				s.beforeStatusPatch = reconcileAttachment
				reconcileRails()
			} else {
				s.beforeStatusPatch = reconcileRails
				reconcileAttachment()
			}
			g.Expect(s.beforeStatusPatch).To(BeNil(), "the other writer did get in between")

			a := s.attachment("md-a")
			g.Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseAttached), "the attachment controller's fields")
			g.Expect(ptr.Deref(a.Status.AttachedNodes, 0)).To(Equal(int32(1)))
			g.Expect(condition(a, sharednetv1.AttachedCondition).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(a, sharednetv1.AttachmentReadyCondition).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(a.Status.Workload).NotTo(BeZero(), "the guardrails' fields")
			g.Expect(a.Status.Workload.Misconfigured).To(HaveLen(1))
			guarded := condition(a, sharednetv1.WorkloadGuardedCondition)
			g.Expect(guarded.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(guarded.Message).To(ContainSubstring("Service default/web: not internal"))
		})
	}
}

// TestAnAttachedNodegroupAsksTheCloudOncePerResync: once Attached, the
// reconciles its machines' events cause make no OpenStack call; the cloud is
// observed again when the SharedNetwork's facts are written again (each
// resync), and a changed cloud still shows then.
func TestAnAttachedNodegroupAsksTheCloudOncePerResync(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.nodegroup(2, true, machine{"m3", "md-a-new", "172.16.5.11"}, machine{"m4", "md-a-new", "172.16.5.12"})
	s.reconcile()
	g.Expect(s.attachment("md-a").Status.Phase).To(Equal(sharednetv1.PhaseAttached))

	before := s.cloudCalls()
	for range 3 {
		s.reconcile()
	}
	g.Expect(s.cloudCalls()).To(Equal(before), "steady state: no OpenStack call per reconcile")

	sn := &sharednetv1.SharedNetwork{}
	g.Expect(s.client.Get(context.Background(), client.ObjectKey{Name: "vm"}, sn)).To(Succeed())
	sn.Status.Consumers = append(sn.Status.Consumers, sharednetv1.Consumer{Namespace: "team-b", Cluster: "other", MachineDeployment: "md-a", Subnet: "s"})
	g.Expect(s.client.Status().Update(context.Background(), sn)).To(Succeed()) // another nodegroup attached: no resync
	s.reconcile()
	g.Expect(s.cloudCalls()).To(Equal(before), "the SharedNetwork's consumers changed, not its facts: nothing to observe again")

	s.setSharedNetworkMTU(1400) // what a resync that read a new MTU writes
	s.reconcile()
	g.Expect(s.cloudCalls()).To(BeNumerically(">", before), "the SharedNetwork's facts were read again: the cloud is observed again")
	g.Expect(condition(s.attachment("md-a"), sharednetv1.CloudFitsCondition).Reason).To(Equal(sharednetv1.ReasonCloudChanged))
}

// TestARollingOutNodegroupAsksTheCloudOncePerResyncAndAsItBecomesAttached:
// the reconciles a rollout's machine events cause make no OpenStack call;
// the load balancers and CloudFits are observed once more in the reconcile
// that finds the nodegroup Attached.
func TestARollingOutNodegroupAsksTheCloudOncePerResyncAndAsItBecomesAttached(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.nodegroup(2, true, machine{"m3", "md-a-new", "172.16.5.11"}, machine{"m4", "md-a-old", ""})
	s.reconcile()
	g.Expect(s.attachment("md-a").Status.Phase).To(Equal(sharednetv1.PhaseRollingOut))

	before := s.cloudCalls()
	for range 3 {
		s.reconcile()
	}
	g.Expect(s.cloudCalls()).To(Equal(before), "rolling out: no OpenStack call per reconcile")

	osm := &infrav1.OpenStackMachine{}
	g.Expect(s.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "m4"}, osm)).To(Succeed())
	s.update(osm, func() {
		osm.Annotations[clusterv1.TemplateClonedFromNameAnnotation] = "md-a-new"
		osm.Status.Addresses = append(osm.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.16.5.12"})
	})
	s.reconcile()
	a := s.attachment("md-a")
	g.Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseAttached))
	g.Expect(s.cloudCalls()).To(BeNumerically(">", before), "observed once more as it becomes Attached")
	g.Expect(condition(a, sharednetv1.CloudFitsCondition).Status).To(Equal(metav1.ConditionTrue))

	attached := s.cloudCalls()
	s.reconcile()
	g.Expect(s.cloudCalls()).To(Equal(attached), "Attached: no OpenStack call per reconcile")
}

// cloudCalls is how many OpenStack calls the fake cloud has answered.
func (s *authorityStory) cloudCalls() int {
	n := 0
	for _, c := range s.cloud.Calls {
		n += c
	}
	return n
}

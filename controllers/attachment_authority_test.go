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
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
)

// authorityStory is one Cluster (team-a/demo) whose md-a asks for
// SharedNetwork "vm", the attachment controller over controller-runtime's
// fake client, and an in-memory fake cloud.
type authorityStory struct {
	t        *testing.T
	client   client.Client
	cloud    *fakecloud.Cloud
	clouds   *fakecloud.Clouds
	recorder *record.FakeRecorder
	r        *AttachmentReconciler
	network  string
	subnet   string
	// beforeStatusPatch, when set, runs before the next write of an
	// attachment's status reaches the fake API server (another writer
	// getting in between a read and a write), and is then cleared.
	beforeStatusPatch func()
	// statusPatchErr, when set, is the answer to every write of an
	// attachment's status (an API server that refuses it).
	statusPatchErr error
}

const grantLabel = "sharednet.example/vm"

func newAuthorityStory(t *testing.T, granted bool, clusterProject *fakecloud.Project) *authorityStory {
	t.Helper()
	cloud := fakecloud.New()
	network, subnet := cloud.AddNetwork("vm-project", 1450, "172.16.5.0/24")
	if clusterProject == nil {
		clusterProject = &fakecloud.Project{ID: "cluster-project"}
	}
	clusterProject.Cloud = cloud
	// The cluster network CAPO made: the rules run before the share need it.
	clusterNetwork, clusterSubnet := cloud.AddNetwork(clusterProject.ID, 1450, "10.6.0.0/24")
	osc := &infrav1.OpenStackCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
		Status: infrav1.OpenStackClusterStatus{Network: &infrav1.NetworkStatusWithSubnets{
			NetworkStatus: infrav1.NetworkStatus{ID: clusterNetwork, Name: "k8s-clusterapi-cluster-team-a-demo"},
			Subnets:       []infrav1.Subnet{{ID: clusterSubnet, CIDR: "10.6.0.0/24"}},
		}},
	}
	clusterProject.OpenStackCluster = osc
	s := &authorityStory{t: t, cloud: cloud, network: network, subnet: subnet, recorder: record.NewFakeRecorder(100),
		clouds: &fakecloud.Clouds{
			Clusters:       map[string]*fakecloud.Project{"team-a/demo": clusterProject},
			SharedNetworks: map[string]*fakecloud.Project{"vm": {Cloud: cloud, ID: "vm-project"}},
		}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	if granted {
		ns.Labels = map[string]string{grantLabel: "yes"}
	}
	now := metav1.Now()
	sn := &sharednetv1.SharedNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "vm"},
		Spec: sharednetv1.SharedNetworkSpec{Identity: sharednetv1.VMProjectIdentity{SecretName: "vm-creds", CloudName: "vm"}, NetworkID: network, Subnets: []string{subnet},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{grantLabel: "yes"}}},
		Status: sharednetv1.SharedNetworkStatus{MTU: 1450, Subnets: []sharednetv1.SubnetStatus{{ID: subnet, CIDR: "172.16.5.0/24", FreeAddresses: ptr.To[int64](200), LoadBalancerAddresses: ptr.To[int64](3)}}, LastRefreshTime: &now,
			Conditions: []metav1.Condition{{Type: sharednetv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: sharednetv1.ReasonFactsCurrent, LastTransitionTime: now}}},
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo", UID: "uid-demo"},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.SchemeGroupVersion.Group, Kind: "OpenStackCluster", Name: "demo"},
			Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.35.0",
				Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{Class: "w", Name: "md-a", Replicas: ptr.To[int32](1)}, {Class: "w", Name: "md-b", Replicas: ptr.To[int32](1)}}}},
		},
	}
	variables.SetOverride(cluster, "md-a", []byte(`{"name":"vm"}`))
	s.client = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(ns, sn, cluster, osc).
		WithIndex(&clusterv1.Cluster{}, consumers.SharedNetworkIndex, consumers.SharedNetworksOf).
		WithStatusSubresource(&sharednetv1.SharedNetworkAttachment{}, &sharednetv1.SharedNetwork{}).
		WithInterceptorFuncs(interceptor.Funcs{
			// The API server gives every object a UID; the fake client does not.
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				obj.SetUID(types.UID("uid-" + obj.GetName()))
				return c.Create(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if _, ok := obj.(*sharednetv1.SharedNetworkAttachment); ok && s.beforeStatusPatch != nil {
					other := s.beforeStatusPatch
					s.beforeStatusPatch = nil
					other()
				}
				if _, ok := obj.(*sharednetv1.SharedNetworkAttachment); ok && s.statusPatchErr != nil {
					return s.statusPatchErr
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	s.r = &AttachmentReconciler{Client: s.client, Credentials: s.clouds, Recorder: s.recorder, Seals: testSealer(t)}
	return s
}

func (s *authorityStory) reconcile() {
	s.t.Helper()
	if _, err := s.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "demo"}}); err != nil {
		s.t.Fatalf("reconcile: %v", err)
	}
}

func (s *authorityStory) attachment(topology string) *sharednetv1.SharedNetworkAttachment {
	s.t.Helper()
	a := &sharednetv1.SharedNetworkAttachment{}
	if err := s.client.Get(context.Background(), sharednetv1.AttachmentKey(s.cluster(), topology), a); err != nil {
		s.t.Fatalf("attachment %s: %v", topology, err)
	}
	return a
}

func (s *authorityStory) hasAttachment(topology string) bool {
	s.t.Helper()
	err := s.client.Get(context.Background(), sharednetv1.AttachmentKey(s.cluster(), topology), &sharednetv1.SharedNetworkAttachment{})
	if err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatalf("attachment %s: %v", topology, err)
	}
	return err == nil
}

func (s *authorityStory) cluster() *clusterv1.Cluster {
	s.t.Helper()
	c := &clusterv1.Cluster{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "demo"}, c); err != nil {
		s.t.Fatal(err)
	}
	return c
}

func (s *authorityStory) update(obj client.Object, change func()) {
	s.t.Helper()
	change()
	if err := s.client.Update(context.Background(), obj); err != nil {
		s.t.Fatal(err)
	}
}

// events drains the recorded Events into one string.
func (s *authorityStory) events() string {
	var out []string
	for {
		select {
		case e := <-s.recorder.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

func condition(a *sharednetv1.SharedNetworkAttachment, kind string) metav1.Condition {
	if c := meta.FindStatusCondition(a.Status.Conditions, kind); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestNoShareForANamespaceTheSharedNetworkDoesNotGrant(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, false, nil)
	s.reconcile()
	g.Expect(s.hasAttachment("md-a")).To(BeFalse(), "no attachment for a namespace the SharedNetwork does not grant")
	g.Expect(s.cloud.Shares()).To(BeEmpty(), "the controller checks the grant before it shares, not only admission")
	g.Expect(s.cluster().Annotations).NotTo(HaveKey(sharedAnnotationPrefix+"md-a"), "no nudge: GeneratePatches emits nothing")
}

func TestNoShareForAClusterOfAnotherKeystone(t *testing.T) {
	for name, project := range map[string]*fakecloud.Project{
		"its clouds.yaml names the tenant's own Keystone":  {ID: "victim-project", KeystoneURL: "http://127.0.0.1:35357/"},
		"a proxy rewrote the project in Keystone's answer": {ID: "victim-project", TokenProject: "cluster-project"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, project)
			s.reconcile()
			a := s.attachment("md-a")
			g.Expect(a.Status.Share).To(BeNil())
			shared := condition(a, sharednetv1.SharedCondition)
			g.Expect(shared.Reason).To(Equal(sharednetv1.ReasonForeignKeystone))
			g.Expect(shared.Message).To(ContainSubstring("nothing was shared"))
			g.Expect(s.cloud.Shares()).To(BeEmpty())
			for _, internal := range []string{"vm-project", fakecloud.DefaultKeystone, "vm-creds"} {
				g.Expect(shared.Message+s.events()).NotTo(ContainSubstring(internal), "tenant-visible text carries no VM-project internals")
			}
		})
	}
}

// TestNoShareWithoutAnRBACPolicyLeft: the VM project's quota is judged
// before the share when its facts say it; where they could not (the
// credential may not read it, or another attach took the last policy
// since), Neutron's refusal reads like the rule, not like an outage.
func TestNoShareWithoutAnRBACPolicyLeft(t *testing.T) {
	t.Run("judged before the share", func(t *testing.T) {
		g := NewWithT(t)
		s := newAuthorityStory(t, true, nil)
		sn := &sharednetv1.SharedNetwork{}
		g.Expect(s.client.Get(context.Background(), client.ObjectKey{Name: "vm"}, sn)).To(Succeed())
		sn.Status.RBACPolicies = sharednetv1.QuotaUsage{Used: ptr.To[int32](10), Limit: ptr.To[int32](10)}
		g.Expect(s.client.Status().Update(context.Background(), sn)).To(Succeed())
		s.reconcile()
		a := s.attachment("md-a")
		g.Expect(a.Status.Share).To(BeNil())
		g.Expect(condition(a, sharednetv1.SharedCondition).Message).To(And(ContainSubstring("share-quota:"), ContainSubstring("uses 10 of 10 RBAC policies")))
		g.Expect(s.cloud.Shares()).To(BeEmpty())
		g.Expect(s.cluster().Annotations).NotTo(HaveKey(sharedAnnotationPrefix + "md-a"))
	})
	t.Run("refused by Neutron at share time", func(t *testing.T) {
		g := NewWithT(t)
		s := newAuthorityStory(t, true, nil)
		vm := s.clouds.SharedNetworks["vm"]
		vm.RBACPolicyLimit, vm.RBACPolicyQuotaHidden = ptr.To(0), true
		s.reconcile()
		a := s.attachment("md-a")
		g.Expect(a.Status.Share).To(BeNil())
		shared := condition(a, sharednetv1.SharedCondition)
		g.Expect(shared.Reason).To(Equal(sharednetv1.ReasonRBACPolicyQuotaExceeded))
		g.Expect(shared.Message).To(And(ContainSubstring("raise quota rbac_policy"), ContainSubstring("detach a project")))
		g.Expect(s.cloud.Shares()).To(BeEmpty())
		g.Expect(s.cluster().Annotations).NotTo(HaveKey(sharedAnnotationPrefix + "md-a"))
		for _, internal := range []string{"vm-project", fakecloud.DefaultKeystone, "vm-creds"} {
			g.Expect(shared.Message).NotTo(ContainSubstring(internal), "tenant-visible text carries no VM-project internals")
		}
	})
}

func TestShareIsForTheVerifiedProjectAndRevocationRollsNothing(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.reconcile()
	a := s.attachment("md-a")
	g.Expect(a.Status.Share).NotTo(BeNil())
	g.Expect(a.Status.Share.ProjectID).To(Equal("cluster-project"))
	g.Expect(s.cloud.Shares()).To(Equal(map[string][2]string{a.Status.Share.RBACPolicyID: {s.network, "cluster-project"}}))
	nudged := s.cluster().Annotations[sharedAnnotationPrefix+"md-a"]
	g.Expect(nudged).To(Equal(a.Status.Share.RBACPolicyID))

	// The administrator removes the namespace's label; the cluster owner
	// then attaches md-b too.
	ns := &corev1.Namespace{}
	g.Expect(s.client.Get(context.Background(), client.ObjectKey{Name: "team-a"}, ns)).To(Succeed())
	s.update(ns, func() { ns.Labels = nil })
	c := s.cluster()
	s.update(c, func() { variables.SetOverride(c, "md-b", []byte(`{"name":"vm"}`)) })
	s.reconcile()

	a = s.attachment("md-a")
	g.Expect(condition(a, sharednetv1.GrantedCondition).Reason).To(Equal(sharednetv1.ReasonGrantRevoked))
	g.Expect(a.Status.Share).NotTo(BeNil(), "the attached nodegroup keeps its share: no surprise rollout")
	g.Expect(s.cluster().Annotations[sharedAnnotationPrefix+"md-a"]).To(Equal(nudged), "no nudge, so no rollout")
	g.Expect(s.hasAttachment("md-b")).To(BeFalse(), "no new attach under a revoked grant")
	g.Expect(s.cluster().Annotations).NotTo(HaveKey(sharedAnnotationPrefix + "md-b"))
}

func TestAShareDeletedBehindTheExtensionsBackIsMadeAgain(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.reconcile()
	policy := s.attachment("md-a").Status.Share.RBACPolicyID
	s.cloud.DeleteShare(policy)

	// The SharedNetwork controller's next read of Neutron no longer finds it.
	sn := &sharednetv1.SharedNetwork{}
	g.Expect(s.client.Get(context.Background(), client.ObjectKey{Name: "vm"}, sn)).To(Succeed())
	later := metav1.NewTime(time.Now().Add(time.Minute))
	sn.Status.LastRefreshTime, sn.Status.Shares = &later, nil
	g.Expect(s.client.Status().Update(context.Background(), sn)).To(Succeed())
	s.reconcile()

	a := s.attachment("md-a")
	g.Expect(a.Status.Share).NotTo(BeNil())
	g.Expect(a.Status.Share.RBACPolicyID).NotTo(Equal(policy))
	g.Expect(s.cloud.Shares()).To(Equal(map[string][2]string{a.Status.Share.RBACPolicyID: {s.network, "cluster-project"}}))
}

func TestDetachUnsharesWhatNeutronHoldsForTheVerifiedProject(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(s *authorityStory, a *sharednetv1.SharedNetworkAttachment)
	}{
		{name: "a lost status still unshares", damage: func(_ *authorityStory, a *sharednetv1.SharedNetworkAttachment) { a.Status.Share = nil }},
		{name: "a status pointing at another project's share cannot make it delete that one", damage: func(s *authorityStory, a *sharednetv1.SharedNetworkAttachment) {
			victim, _ := (&fakecloud.Project{Cloud: s.cloud, ID: "vm-project"}).Share(context.Background(), s.network, "victim-project")
			a.Status.Share = &sharednetv1.Share{ProjectID: "victim-project", RBACPolicyID: victim}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, nil)
			s.reconcile()
			a := s.attachment("md-a")
			tt.damage(s, a)
			g.Expect(s.client.Status().Update(context.Background(), a)).To(Succeed())
			c := s.cluster()
			s.update(c, func() { variables.SetOverride(c, "md-a", nil) })
			s.reconcile()

			for _, share := range s.cloud.Shares() {
				g.Expect(share[1]).NotTo(Equal("cluster-project"), "the cluster's share is gone")
			}
			if strings.Contains(tt.name, "another project") {
				g.Expect(s.cloud.Shares()).To(HaveLen(1), "the other project's share is untouched")
			}
		})
	}
}

// TestALostStatusIsNotTakenForNoShareWhileTheVMProjectCannotBeAsked: a live
// cluster's detach with a lost status waits for the VM project instead of
// letting the attachment go with the share still in Neutron.
func TestALostStatusIsNotTakenForNoShareWhileTheVMProjectCannotBeAsked(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.reconcile()
	a := s.attachment("md-a")
	a.Status.Share = nil
	g.Expect(s.client.Status().Update(context.Background(), a)).To(Succeed())
	vm := s.clouds.SharedNetworks["vm"]
	delete(s.clouds.SharedNetworks, "vm")
	c := s.cluster()
	s.update(c, func() { variables.SetOverride(c, "md-a", nil) })
	s.reconcile()

	a = s.attachment("md-a")
	g.Expect(condition(a, sharednetv1.SharedCondition).Reason).To(Equal(sharednetv1.ReasonUnshareFailed))
	g.Expect(s.cloud.Shares()).To(HaveLen(1), "the share is still there, and so is the attachment that will release it")

	s.clouds.SharedNetworks["vm"] = vm
	s.reconcile()
	g.Expect(s.cloud.Shares()).To(BeEmpty())
}

// TestDetachWaitsWhileNeutronKeepsTheShare: Neutron's 409 (the cluster's
// project still has ports on the network) is "not yet", never success.
func TestDetachWaitsWhileNeutronKeepsTheShare(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.reconcile()
	s.cloud.AddPort("cluster-project", s.network)
	c := s.cluster()
	s.update(c, func() { variables.SetOverride(c, "md-a", nil) })
	s.reconcile()

	a := s.attachment("md-a")
	g.Expect(condition(a, sharednetv1.SharedCondition).Reason).To(Equal(sharednetv1.ReasonPortsRemain))
	g.Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseDetaching))
	g.Expect(s.cloud.Shares()).To(HaveLen(1))
}

// protectedRecords is the RecordGuard of an extension whose shipped
// admission policy is in place (or not).
type protectedRecords bool

func (p protectedRecords) Protected(context.Context) bool { return bool(p) }

// switchIdentity points the cluster's credential at project id of the same
// Keystone, as a tenant editing its clouds.yaml Secret would.
func (s *authorityStory) switchIdentity(id string) {
	old := s.clouds.Clusters["team-a/demo"]
	s.clouds.Clusters["team-a/demo"] = &fakecloud.Project{Cloud: s.cloud, ID: id, OpenStackCluster: old.OpenStackCluster}
}

// resync is the SharedNetwork controller's next write of the facts, with
// the network's shares as the cloud has them: the attachment controller
// observes attached nodegroups again.
func (s *authorityStory) resync() {
	s.t.Helper()
	sn := &sharednetv1.SharedNetwork{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Name: "vm"}, sn); err != nil {
		s.t.Fatal(err)
	}
	// A second later than the last one: the time is kept to the second.
	later := metav1.NewTime(sn.Status.LastRefreshTime.Add(time.Second))
	sn.Status.LastRefreshTime, sn.Status.Shares = &later, nil
	for policy, share := range s.cloud.Shares() {
		if share[0] == sn.Spec.NetworkID {
			sn.Status.Shares = append(sn.Status.Shares, sharednetv1.Share{ProjectID: share[1], RBACPolicyID: policy})
		}
	}
	if err := s.client.Status().Update(context.Background(), sn); err != nil {
		s.t.Fatal(err)
	}
}

// TestAnIdentitySwitchOrphansNoShare: a cluster's credential pointed at
// another project after the attach still has the share the extension made
// released, from its record: on a detach, on the Cluster's deletion, and
// when the credential never comes back. The switch is reported.
func TestAnIdentitySwitchOrphansNoShare(t *testing.T) {
	attached := func(t *testing.T) *authorityStory {
		t.Helper()
		s := newAuthorityStory(t, true, nil)
		s.r.Records = protectedRecords(true)
		s.reconcile()
		g := NewWithT(t)
		g.Expect(s.attachment("md-a").Status.Share.ProjectID).To(Equal("cluster-project"))
		return s
	}
	noShareOf := func(g Gomega, s *authorityStory, project string) {
		for _, share := range s.cloud.Shares() {
			g.Expect(share[1]).NotTo(Equal(project), "no share of %s is left", project)
		}
	}

	t.Run("the switch is reported, and undone", func(t *testing.T) {
		g := NewWithT(t)
		s := attached(t)
		s.switchIdentity("project-2")
		s.resync()
		s.reconcile()
		shared := condition(s.attachment("md-a"), sharednetv1.SharedCondition)
		g.Expect(shared.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(shared.Reason).To(Equal(sharednetv1.ReasonProjectChanged))
		g.Expect(shared.Message).To(And(ContainSubstring("shared with project cluster-project"), ContainSubstring("now authenticates to project project-2"), ContainSubstring("Point the credential back")))
		g.Expect(s.cloud.Shares()).To(HaveLen(1), "nothing is shared for the new project, nothing unshared")

		s.switchIdentity("cluster-project")
		s.resync()
		s.reconcile()
		g.Expect(condition(s.attachment("md-a"), sharednetv1.SharedCondition).Reason).To(Equal(sharednetv1.ReasonShared))
	})
	t.Run("a detach after the switch unshares the recorded project", func(t *testing.T) {
		g := NewWithT(t)
		s := attached(t)
		s.switchIdentity("project-2")
		c := s.cluster()
		s.update(c, func() { variables.SetOverride(c, "md-a", nil) })
		s.reconcile()
		noShareOf(g, s, "cluster-project")
		g.Expect(s.cloud.Shares()).To(BeEmpty())
	})
	t.Run("a deleted cluster whose credential never comes back is unshared from the record", func(t *testing.T) {
		g := NewWithT(t)
		s := attached(t)
		s.switchIdentity("project-2")
		s.clouds.ClusterErr = errors.New("the Secret is gone")
		g.Expect(s.client.Delete(context.Background(), s.cluster())).To(Succeed())
		s.reconcile()
		g.Expect(s.cloud.Shares()).To(BeEmpty())
		a := &sharednetv1.SharedNetworkAttachmentList{}
		g.Expect(s.client.List(context.Background(), a)).To(Succeed())
		g.Expect(a.Items).To(BeEmpty(), "the attachment is released once its share is gone")
	})
	t.Run("without the admission policy a record is not trusted, and the administrator is told", func(t *testing.T) {
		g := NewWithT(t)
		s := attached(t)
		s.r.Records = protectedRecords(false)
		s.clouds.ClusterErr = errors.New("the Secret is gone")
		g.Expect(s.client.Delete(context.Background(), s.cluster())).To(Succeed())
		s.events()
		s.reconcile()
		g.Expect(s.cloud.Shares()).To(HaveLen(1), "a status anyone could have written deletes nothing")
		g.Expect(s.events()).To(And(ContainSubstring(sharednetv1.EventShareNotReleased), ContainSubstring("project cluster-project"), ContainSubstring("capo-sharednet-attachments")))
	})
}

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

package hooks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
)

var _ credentials.Clouds = &fakecloud.Clouds{}

func testScheme() *runtime.Scheme {
	s := sharednetscheme.New()
	return s
}

// deleteStory is two Clusters named "demo" in two namespaces of one
// OpenStack project, both attached to one shared subnet, each with an
// internal load balancer made by its CCM; and one load balancer made by hand.
type deleteStory struct {
	cloud            *fakecloud.Cloud
	clouds           *fakecloud.Clouds
	client           client.Client
	recorder         *record.FakeRecorder
	lbA, lbB, byHand string
	deleted          time.Time
}

func newDeleteStory(t *testing.T, aBeingDeleted bool) *deleteStory {
	t.Helper()
	cloud := fakecloud.New()
	project := &fakecloud.Project{Cloud: cloud, ID: "cluster-project"}
	_, subnet := cloud.AddNetwork("vm-project", 1450, "172.16.5.0/24")
	s := &deleteStory{cloud: cloud, recorder: record.NewFakeRecorder(10), deleted: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC),
		clouds: &fakecloud.Clouds{Clusters: map[string]*fakecloud.Project{"team-a/demo": project, "team-b/demo": project},
			SharedNetworks: map[string]*fakecloud.Project{"vm": {Cloud: cloud, ID: "vm-project"}}}}
	nameA := ccm.LoadBalancerName(ccm.ClusterName("team-a", "demo"), "default", "web")
	nameB := ccm.LoadBalancerName(ccm.ClusterName("team-b", "demo"), "default", "web")
	s.lbA, s.lbB = cloud.AddLoadBalancer(subnet, nameA, nameA), cloud.AddLoadBalancer(subnet, nameB, nameB)
	s.byHand = cloud.AddLoadBalancer(subnet, "my-own-lb")

	objs := []client.Object{&sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm"}}}
	for _, ns := range []string{"team-a", "team-b"} {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
		if ns == "team-a" && aBeingDeleted {
			c.Finalizers = []string{"cluster.cluster.x-k8s.io"}
			c.DeletionTimestamp = &metav1.Time{Time: s.deleted}
		}
		a := &sharednetv1.SharedNetworkAttachment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-md-a", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
			Spec:       sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: subnet},
		}
		objs = append(objs, c, a)
	}
	s.client = fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).WithStatusSubresource(&sharednetv1.SharedNetworkAttachment{}).Build()
	return s
}

func (s *deleteStory) handlers(now time.Time) *Handlers {
	return &Handlers{Reader: s.client, APIReader: s.client, Client: s.client, Credentials: s.clouds, Recorder: s.recorder,
		Now: func() time.Time { return now }}
}

func call(h *Handlers, namespace string) *runtimehooksv1.BeforeClusterDeleteResponse {
	req := &runtimehooksv1.BeforeClusterDeleteRequest{Cluster: clusterv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "demo"}}}
	resp := &runtimehooksv1.BeforeClusterDeleteResponse{}
	h.BeforeClusterDelete(context.Background(), req, resp)
	return resp
}

func TestBeforeClusterDeleteForAClusterNotBeingDeletedDeletesNothing(t *testing.T) {
	g := NewWithT(t)
	s := newDeleteStory(t, false)
	resp := call(s.handlers(s.deleted), "team-a")
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(resp.RetryAfterSeconds).To(BeZero())
	g.Expect(resp.Message).To(ContainSubstring("not being deleted: nothing was deleted"))
	g.Expect(s.cloud.Calls["DeleteCascade"]).To(BeZero(), "a forged or replayed call deletes nothing")
	g.Expect(s.cloud.LoadBalancerIDs()).To(ConsistOf(s.lbA, s.lbB, s.byHand))
}

func TestBeforeClusterDeleteRemovesOnlyThisClustersLoadBalancers(t *testing.T) {
	g := NewWithT(t)
	s := newDeleteStory(t, true)
	h := s.handlers(s.deleted.Add(time.Minute))

	resp := call(h, "team-a")
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0), "the deletion waits while the load balancer goes")
	g.Expect(resp.Message).To(ContainSubstring("kube_service_team-a.demo_default_web"))
	g.Expect(resp.Message).NotTo(ContainSubstring("team-b"))

	// Octavia is still deleting it: its 409 means "retry later", not failure.
	resp = call(h, "team-a")
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0))

	s.cloud.Settle()
	resp = call(h, "team-a")
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	g.Expect(resp.RetryAfterSeconds).To(BeZero(), "gone: the deletion goes on")
	g.Expect(s.cloud.LoadBalancerIDs()).To(ConsistOf(s.lbB, s.byHand), "cluster team-b/demo's load balancer and the hand-made one are left alone")
}

func TestBeforeClusterDeleteTreatsOctavia409AsRetryLater(t *testing.T) {
	g := NewWithT(t)
	s := newDeleteStory(t, true)
	s.cloud.SetLoadBalancerStatus(s.lbA, "PENDING_UPDATE")
	resp := call(s.handlers(s.deleted.Add(time.Minute)), "team-a")
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0))
	g.Expect(s.cloud.Calls["DeleteCascade"]).To(Equal(1))
}

func TestBeforeClusterDeleteDoesNotBlockForeverAndSaysWhatWasLeft(t *testing.T) {
	for _, tt := range []struct {
		name     string
		fault    func(s *deleteStory)
		wantLeft []string
	}{
		{name: "the cluster's project cannot be reached", fault: func(s *deleteStory) { s.clouds.ClusterErr = errors.New("connection refused") },
			wantLeft: []string{"could not be listed", "connection refused", "openstack loadbalancer delete --cascade <id>", "kube_service_team-a.demo_"}},
		{name: "a cloud without Octavia", fault: func(s *deleteStory) {
			s.cloud.Fail = func(method string) error {
				if method == "OnSubnet" {
					return errors.New("no load-balancer (Octavia) endpoint in the catalog")
				}
				return nil
			}
		}, wantLeft: []string{"could not be listed", "no load-balancer (Octavia) endpoint"}},
		{name: "Octavia never finishes the delete", fault: func(s *deleteStory) { s.cloud.SetLoadBalancerStatus(s.lbA, "PENDING_DELETE") },
			wantLeft: []string{"were left behind", "openstack loadbalancer delete --cascade " + "lb-"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newDeleteStory(t, true)
			tt.fault(s)

			resp := call(s.handlers(s.deleted.Add(time.Minute)), "team-a")
			g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
			g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0), "within the deadline: retried")

			resp = call(s.handlers(s.deleted.Add(DefaultCleanupDeadline+time.Second)), "team-a")
			g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
			g.Expect(resp.RetryAfterSeconds).To(BeZero(), "past the deadline the deletion goes on")

			g.Expect(s.recorder.Events).To(Receive(And(ContainSubstring(sharednetv1.ReasonLeftBehind), ContainSubstring("cluster's project credential"))))
			a := &sharednetv1.SharedNetworkAttachment{}
			g.Expect(s.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "demo-md-a"}, a)).To(Succeed())
			cond := meta.FindStatusCondition(a.Status.Conditions, sharednetv1.LoadBalancersRemovedCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			for _, want := range tt.wantLeft {
				g.Expect(cond.Message).To(ContainSubstring(want))
			}
			g.Expect(s.cloud.LoadBalancerIDs()).To(ContainElements(s.lbB, s.byHand))
		})
	}
}

func TestBeforeClusterDeleteOfAClusterWithoutAttachmentNeedsNoCloud(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithScheme(testScheme()).Build()
	h := &Handlers{Reader: c, APIReader: c, Client: c, Credentials: &fakecloud.Clouds{ClusterErr: errors.New("must not be asked")}}
	resp := call(h, "other")
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(resp.RetryAfterSeconds).To(BeZero())
	g.Expect(strings.TrimSpace(resp.Message)).To(BeEmpty())
}

// The hook is the third writer of an attachment's status: it owns
// LoadBalancersRemoved only, so a condition the attachment controller writes
// between the hook's read and its write is kept.
func TestBeforeClusterDeleteKeepsTheControllersConditions(t *testing.T) {
	g := NewWithT(t)
	s := newDeleteStory(t, true)
	s.clouds.ClusterErr = errors.New("connection refused")
	h := s.handlers(s.deleted.Add(DefaultCleanupDeadline + time.Second))
	controllerWrote := false
	h.Client = interceptor.NewClient(s.client.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if !controllerWrote {
				controllerWrote = true
				a := &sharednetv1.SharedNetworkAttachment{}
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), a)).To(Succeed())
				a.Status.Conditions = append(a.Status.Conditions, sharednetv1.NewCondition(sharednetv1.DeletingCondition, metav1.ConditionTrue, sharednetv1.ReasonDeleting, "the Cluster is being deleted"))
				g.Expect(c.Status().Update(ctx, a)).To(Succeed())
			}
			return c.Status().Patch(ctx, obj, p, opts...)
		},
	})
	resp := call(h, "team-a")
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	g.Expect(controllerWrote).To(BeTrue())
	a := &sharednetv1.SharedNetworkAttachment{}
	g.Expect(s.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "demo-md-a"}, a)).To(Succeed())
	g.Expect(meta.FindStatusCondition(a.Status.Conditions, sharednetv1.DeletingCondition)).NotTo(BeNil(), "the controller's condition is kept")
	g.Expect(meta.FindStatusCondition(a.Status.Conditions, sharednetv1.LoadBalancersRemovedCondition)).NotTo(BeNil(), "and the hook's is written")
}

// A cluster whose credential now names a Keystone of the tenant's own: its
// catalog's Octavia is never asked (it could be any URL the tenant wants
// the extension to call), nothing is deleted, and the deletion waits
// saying why, as for an unreachable project.
func TestBeforeClusterDeleteAsksOnlyTheSharedNetworksCloud(t *testing.T) {
	g := NewWithT(t)
	s := newDeleteStory(t, true)
	s.clouds.Clusters["team-a/demo"] = &fakecloud.Project{Cloud: s.cloud, ID: "cluster-project", KeystoneURL: "http://127.0.0.1:35357/"}
	resp := call(s.handlers(s.deleted.Add(time.Minute)), "team-a")
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0))
	g.Expect(resp.Message).To(And(ContainSubstring("cannot remove the cluster's load balancers on shared subnets yet"), ContainSubstring("another Keystone")))
	g.Expect(s.cloud.Calls).NotTo(HaveKey(BeElementOf("OnSubnet", "DeleteCascade")), "a catalog of the tenant's choosing is sent no request")
	g.Expect(s.cloud.LoadBalancerIDs()).To(ConsistOf(s.lbA, s.lbB, s.byHand))
}

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
	"bytes"
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/records"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
)

// testSealer is the extension's key in the controller tests.
func testSealer(t *testing.T) *records.Sealer {
	t.Helper()
	s, err := records.NewSealer(bytes.Repeat([]byte{7}, records.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *authorityStory) sharedNetwork() *sharednetv1.SharedNetwork {
	s.t.Helper()
	sn := &sharednetv1.SharedNetwork{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Name: "vm"}, sn); err != nil {
		s.t.Fatal(err)
	}
	return sn
}

// victimShare is a share of the network with another tenant's project,
// which no attachment of team-a may release.
func (s *authorityStory) victimShare() string {
	s.t.Helper()
	policy, err := s.clouds.SharedNetworks["vm"].Share(context.Background(), s.network, "victim-project")
	if err != nil {
		s.t.Fatal(err)
	}
	return policy
}

// forge writes md-a's status.share as a tenant would, were nothing to stop it.
func (s *authorityStory) forge(change func(*sharednetv1.Share)) {
	s.t.Helper()
	a := s.attachment("md-a")
	change(a.Status.Share)
	if err := s.client.Status().Update(context.Background(), a); err != nil {
		s.t.Fatal(err)
	}
}

// goneForGood deletes the Cluster with its credential gone too, so that
// only md-a's record can name the project to unshare, and reconciles.
func (s *authorityStory) goneForGood() {
	s.t.Helper()
	s.clouds.ClusterErr = errors.New("the Secret is gone")
	if err := s.client.Delete(context.Background(), s.cluster()); err != nil {
		s.t.Fatal(err)
	}
	s.events()
	s.reconcile()
}

func (s *authorityStory) hasShare(project string) bool {
	for _, share := range s.cloud.Shares() {
		if share[1] == project {
			return true
		}
	}
	return false
}

// TestASealedRecordIsReleasedAfterTheClusterIsGone: the extension seals the
// record it writes, with its key, over the attachment and the share; the
// record verifies, and the detach of a cluster whose credential is gone
// releases the share from it.
func TestASealedRecordIsReleasedAfterTheClusterIsGone(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.r.Records = protectedRecords(true)
	s.reconcile()
	a := s.attachment("md-a")
	g.Expect(a.Status.Share.ProjectID).To(Equal("cluster-project"))
	g.Expect(a.Status.Share.Seal).NotTo(BeEmpty(), "the share record is sealed when it is written")
	g.Expect(testSealer(t).Verify(records.Of(a, s.sharedNetwork()), a.Status.Share.Seal)).To(BeTrue())

	s.goneForGood()
	g.Expect(s.cloud.Shares()).To(BeEmpty(), "the sealed record alone releases the share")
	g.Expect(s.events()).NotTo(ContainSubstring(sharednetv1.EventShareNotReleased))
	left := &sharednetv1.SharedNetworkAttachmentList{}
	g.Expect(s.client.List(context.Background(), left)).To(Succeed())
	g.Expect(left.Items).To(BeEmpty(), "the attachment is released once its share is gone")
}

// TestAForgedRecordIsNotTrusted: a record the extension did not write as it
// is never points the VM credential at another project's share, however it
// was made, even with the admission policy in place now; the administrator
// is told which share was not released, and why.
func TestAForgedRecordIsNotTrusted(t *testing.T) {
	for _, tt := range []struct {
		name string
		// forge writes the tenant's record; s is attached, victim is the
		// victim's share.
		forge func(s *authorityStory, victim string)
		why   string
		// beforeSeals: the attach was made by the version before seals,
		// without config/policy.
		beforeSeals bool
	}{
		{
			name: "its project edited",
			forge: func(s *authorityStory, _ string) {
				s.forge(func(share *sharednetv1.Share) { share.ProjectID = "victim-project" })
			},
			why: "its seal does not match it",
		},
		{
			name: "copied from another attachment",
			forge: func(s *authorityStory, victim string) {
				// The extension's own seal, of another tenant's attachment.
				other := records.Record{Namespace: "team-b", Name: "other-md-a", UID: "uid-other-md-a", SharedNetwork: "vm", NetworkID: s.network,
					ProjectID: "victim-project", RBACPolicyID: victim}
				s.forge(func(share *sharednetv1.Share) {
					*share = sharednetv1.Share{ProjectID: "victim-project", RBACPolicyID: victim, Seal: testSealer(s.t).Seal(other)}
				})
			},
			why: "its seal does not match it",
		},
		{
			name: "written before the key and the policy existed",
			forge: func(s *authorityStory, victim string) {
				// The tenant wrote it while nothing stopped it; the key and
				// the policy came later, and an observation since does not
				// seal a project the cluster's Keystone does not vouch for.
				s.forge(func(share *sharednetv1.Share) {
					*share = sharednetv1.Share{ProjectID: "victim-project", RBACPolicyID: victim}
				})
				s.r.Seals, s.r.Records = testSealer(s.t), protectedRecords(true)
				s.resync()
				s.reconcile()
				g := NewWithT(s.t)
				a := s.attachment("md-a")
				g.Expect(a.Status.Share.Seal).To(BeEmpty(), "a project nobody vouches for is never sealed")
				g.Expect(condition(a, sharednetv1.SharedCondition).Reason).To(Equal(sharednetv1.ReasonProjectChanged))
			},
			why:         "it carries no seal",
			beforeSeals: true,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, nil)
			s.r.Records = protectedRecords(true)
			if tt.beforeSeals {
				s.r.Seals, s.r.Records = nil, protectedRecords(false)
			}
			s.reconcile()
			g.Expect(s.attachment("md-a").Status.Share.ProjectID).To(Equal("cluster-project"))
			victim := s.victimShare()

			tt.forge(s, victim)
			s.goneForGood()
			g.Expect(s.hasShare("victim-project")).To(BeTrue(), "the VM credential never unshares a project on a forged record's word")
			g.Expect(s.events()).To(And(ContainSubstring(sharednetv1.EventShareNotReleased), ContainSubstring("project victim-project"), ContainSubstring(tt.why)))
		})
	}
}

// TestNoRecordIsTrustedWithoutTheKey: a key that cannot be read trusts no
// record (the share is recorded unsealed, and the detach of a gone cluster
// releases nothing on its word), and says so to the administrator.
func TestNoRecordIsTrustedWithoutTheKey(t *testing.T) {
	for name, keys := range map[string]*records.Keyring{
		"the key cannot be read": {Namespace: install.Namespace, Reader: fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, records.KeySecret, errors.New("RBAC"))
			},
		}).Build()},
		"the key Secret holds no key": {Namespace: install.Namespace, Reader: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: records.KeySecret}, Data: map[string][]byte{records.KeyField: []byte("short")},
		}).Build()},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := newAuthorityStory(t, true, nil)
			keys.Writer = keys.Reader.(client.Client)
			s.r.Records, s.r.Seals = protectedRecords(true), keys
			s.reconcile()
			a := s.attachment("md-a")
			g.Expect(a.Status.Share.ProjectID).To(Equal("cluster-project"), "the attach goes on without the key")
			g.Expect(a.Status.Share.Seal).To(BeEmpty())

			s.goneForGood()
			g.Expect(s.hasShare("cluster-project")).To(BeTrue(), "no record is trusted without the key")
			g.Expect(s.events()).To(And(ContainSubstring(sharednetv1.EventShareNotReleased), ContainSubstring("the key that seals records cannot be read")))
		})
	}
}

// TestAnUnsealedRecordOfTheVerifiedProjectIsSealed: a record written before
// records were sealed is sealed at the next observation whose verified
// project is the recorded one, and from then on releases its share alone.
func TestAnUnsealedRecordOfTheVerifiedProjectIsSealed(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.r.Seals, s.r.Records = nil, protectedRecords(true) // the version before seals
	s.reconcile()
	g.Expect(s.attachment("md-a").Status.Share.Seal).To(BeEmpty())

	// The upgrade: a new process, with the key.
	s.r = &AttachmentReconciler{Client: s.client, Credentials: s.clouds, Recorder: s.recorder, Records: protectedRecords(true), Seals: testSealer(t)}
	s.reconcile()
	a := s.attachment("md-a")
	g.Expect(testSealer(t).Verify(records.Of(a, s.sharedNetwork()), a.Status.Share.Seal)).To(BeTrue(), "sealed once the cluster's Keystone vouched for its project")

	s.goneForGood()
	g.Expect(s.cloud.Shares()).To(BeEmpty())
}

// TestAKeyThatCannotBeReadUnsealsNothing: an observation while the key
// cannot be read keeps the seal a record has; once the key is back the
// record releases its share alone.
func TestAKeyThatCannotBeReadUnsealsNothing(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	s.r.Records = protectedRecords(true)
	s.reconcile()
	seal := s.attachment("md-a").Status.Share.Seal
	g.Expect(seal).NotTo(BeEmpty())

	s.r.Seals = &records.Keyring{Namespace: install.Namespace, Reader: fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("the API server is away")
		},
	}).Build()}
	s.resync()
	s.reconcile()
	g.Expect(s.attachment("md-a").Status.Share.Seal).To(Equal(seal))

	s.r.Seals = testSealer(t)
	s.goneForGood()
	g.Expect(s.cloud.Shares()).To(BeEmpty())
}

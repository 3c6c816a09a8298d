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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// Two instances divide a management cluster with --watch-filter: each
// attaches, and after the Cluster is gone detaches, only its own clusters'
// nodegroups, so no share is made or released twice.
func TestAttachmentControllerReconcilesOnlyItsWatchFilter(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	east := s.r
	east.WatchFilterValue, east.Records = "east", protectedRecords(true)
	west := &AttachmentReconciler{Client: s.client, Credentials: s.clouds, Recorder: s.recorder, WatchFilterValue: "west", Records: protectedRecords(true), Seals: east.Seals}
	reconcileBy := func(r *AttachmentReconciler) {
		t.Helper()
		_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "demo"}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	attachments := func() []sharednetv1.SharedNetworkAttachment {
		list := &sharednetv1.SharedNetworkAttachmentList{}
		g.Expect(s.client.List(context.Background(), list)).To(Succeed())
		return list.Items
	}

	reconcileBy(east)
	g.Expect(attachments()).To(BeEmpty(), "an unlabelled Cluster is no filtered instance's")
	g.Expect(s.cloud.Calls["Share"]).To(BeZero())

	c := s.cluster()
	s.update(c, func() { c.Labels = map[string]string{clusterv1.WatchLabel: "west"} })
	reconcileBy(east)
	g.Expect(attachments()).To(BeEmpty(), "west's Cluster is not east's")

	c = s.cluster()
	s.update(c, func() { c.Labels[clusterv1.WatchLabel] = "east" })
	reconcileBy(west)
	g.Expect(attachments()).To(BeEmpty(), "east's Cluster is not west's")
	reconcileBy(east)
	a := s.attachment("md-a")
	g.Expect(a.Labels).To(HaveKeyWithValue(clusterv1.WatchLabel, "east"), "the attachment carries its Cluster's watch label")
	g.Expect(s.cloud.Shares()).To(HaveLen(1))

	// The Cluster is gone (its label with it): only east detaches.
	c = s.cluster()
	controllerutil.RemoveFinalizer(c, clusterv1.ClusterFinalizer)
	g.Expect(s.client.Delete(context.Background(), c)).To(Succeed())
	reconcileBy(west)
	g.Expect(s.cloud.Shares()).To(HaveLen(1), "west releases nothing of east's")
	g.Expect(s.client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
	g.Expect(a.DeletionTimestamp).To(BeNil())
	for range 3 {
		reconcileBy(east)
	}
	g.Expect(s.cloud.Shares()).To(BeEmpty(), "east releases the share of its Cluster that is gone")
}

// A SharedNetwork labelled for another instance is neither read from
// Neutron nor written by this one: two instances never fight over its status.
func TestSharedNetworkControllerReconcilesOnlyItsWatchFilter(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	s.r.WatchFilterValue = "east"
	s.reconcile()
	g.Expect(s.sharedNetwork().Status.LastRefreshTime).To(BeNil())
	g.Expect(s.cloud.Calls).To(BeEmpty(), "no OpenStack call for another instance's SharedNetwork")

	resetSubnetMetrics()
	sn := s.sharedNetwork()
	sn.Labels = map[string]string{clusterv1.WatchLabel: "east"}
	g.Expect(s.client.Update(context.Background(), sn)).To(Succeed())
	s.reconcile()
	g.Expect(s.sharedNetwork().Status.LastRefreshTime).NotTo(BeNil())
	g.Expect(s.ready().Status).To(Equal(metav1.ConditionTrue))
	g.Expect(seriesOf(t, freeAddresses)).NotTo(BeEmpty())

	// Handed to another instance: that one reports its metrics now.
	sn = s.sharedNetwork()
	sn.Labels[clusterv1.WatchLabel] = "west"
	g.Expect(s.client.Update(context.Background(), sn)).To(Succeed())
	s.reconcile()
	g.Expect(seriesOf(t, freeAddresses)).To(BeEmpty())
	g.Expect(seriesOf(t, reservedAddresses)).To(BeEmpty())
}

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
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// TestAnOutageBlocksOnlyNamespacesUsingASharedNetwork: the credential
// webhook's namespaceSelector names the namespaces whose clusters set a
// sharedNetwork value or still have an attachment, and the deletion hook's
// ExtensionConfig those with an attachment, and no other, so an extension
// outage blocks Secret deletions and Cluster deletions there only; with
// none, they select no namespace.
func TestAnOutageBlocksOnlyNamespacesUsingASharedNetwork(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "vwc"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{
		{Name: "sharednet.cluster.capo.io"},
		{Name: CredentialWebhookName, NamespaceSelector: NamespacesSelector(nil)},
		{Name: SizeWebhookName, NamespaceSelector: NamespacesSelector(nil)},
	}}
	ec := &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: "deletion"}, Spec: runtimev1.ExtensionConfigSpec{NamespaceSelector: NamespacesSelector(nil)}}
	cluster := func(ns string, value string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}, Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{Class: "w", Name: "md-a"}}}}}}
		if value != "" {
			variables.SetOverride(c, "md-a", []byte(value))
		}
		return c
	}
	// team-a names a SharedNetwork, not attached yet; team-b has an
	// attachment (its cluster detaching); team-c uses none.
	uses, plain := cluster("team-a", `{"name":"vm"}`), cluster("team-c", "")
	detaching := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "gone-md-a"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(vwc, ec, uses, plain, detaching, &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm"}}).
		WithIndex(&clusterv1.Cluster{}, consumers.SharedNetworkIndex, consumers.SharedNetworksOf).Build()
	r := &NamespaceScope{Client: c, APIReader: c, CredentialWebhookConfiguration: "vwc", DeletionExtensionConfig: "deletion"}
	matching := func(selector *metav1.LabelSelector) []string {
		sel, err := metav1.LabelSelectorAsSelector(selector)
		g.Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, ns := range []string{"team-a", "team-b", "team-c", "kube-system"} {
			if sel.Matches(labels.Set{corev1.LabelMetadataName: ns}) {
				out = append(out, ns)
			}
		}
		return out
	}
	selects := func() []string {
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "vwc"}, got)).To(Succeed())
		g.Expect(got.Webhooks[0].NamespaceSelector).To(BeNil(), "the Cluster webhook is left as it is")
		g.Expect(matching(got.Webhooks[2].NamespaceSelector)).To(Equal(matching(got.Webhooks[1].NamespaceSelector)), "the size webhook is scoped as the credential webhook")
		return matching(got.Webhooks[1].NamespaceSelector)
	}
	deletionSelects := func() []string {
		got := &runtimev1.ExtensionConfig{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "deletion"}, got)).To(Succeed())
		return matching(got.Spec.NamespaceSelector)
	}
	reconcileOnce := func() {
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "vwc"}})
		g.Expect(err).NotTo(HaveOccurred())
	}

	g.Expect(selects()).To(BeEmpty(), "as shipped: no namespace")
	g.Expect(deletionSelects()).To(BeEmpty(), "as shipped: no namespace")
	reconcileOnce()
	g.Expect(selects()).To(Equal([]string{"team-a", "team-b"}))
	g.Expect(deletionSelects()).To(Equal([]string{"team-b"}), "only a namespace with an attachment can have load balancers to remove first")
	before := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "vwc"}, before)).To(Succeed())
	ecBefore := &runtimev1.ExtensionConfig{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "deletion"}, ecBefore)).To(Succeed())
	reconcileOnce()
	after := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "vwc"}, after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "nothing rewritten when nothing changed")
	ecAfter := &runtimev1.ExtensionConfig{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "deletion"}, ecAfter)).To(Succeed())
	g.Expect(ecAfter.ResourceVersion).To(Equal(ecBefore.ResourceVersion), "nothing rewritten when nothing changed")

	// team-a's nodegroup is attached: its deletion now waits for the extension.
	attached := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c-md-a"}}
	g.Expect(c.Create(ctx, attached)).To(Succeed())
	reconcileOnce()
	g.Expect(deletionSelects()).To(Equal([]string{"team-a", "team-b"}))
	g.Expect(c.Delete(ctx, attached)).To(Succeed())

	// team-a detaches and team-b's attachment is released.
	variables.SetOverride(uses, "md-a", nil)
	g.Expect(c.Update(ctx, uses)).To(Succeed())
	g.Expect(c.Delete(ctx, detaching)).To(Succeed())
	reconcileOnce()
	g.Expect(selects()).To(BeEmpty())
	g.Expect(deletionSelects()).To(BeEmpty())
}

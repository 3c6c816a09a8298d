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

package leader

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/test/loopback"
)

// TestAReappliedShippedSelectorIsPutRightAtOnce: an upgrade reapplies the
// components, and with them the shipped selectors that match no namespace;
// until they are put right, an attached cluster's deletion would skip
// BeforeClusterDelete and its Secrets' deletion the credential webhook. The
// running extension sees the change (its watch on both configurations) and
// puts them right within seconds, not at its next periodic check (5 minutes).
func TestAReappliedShippedSelectorIsPutRightAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	suffix := fmt.Sprint(os.Getpid())
	ns := "attached-" + suffix
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &sharednetv1.SharedNetworkAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-md-a"},
		Spec:       sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: "s"},
	})).To(Succeed())

	port, err := loopback.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	deletionPort, err := loopback.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	shipped := controllers.NamespacesSelector(nil)
	ec := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "deletion-" + suffix},
		Spec: runtimev1.ExtensionConfigSpec{
			ClientConfig:      runtimev1.ClientConfig{URL: fmt.Sprintf("https://127.0.0.1:%d", deletionPort), CABundle: env.CAData},
			NamespaceSelector: shipped,
		},
	}
	// The credential webhook as config/webhook ships it, with no rules: it
	// is never called here.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "credential-" + suffix},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    controllers.CredentialWebhookName,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/validate", port)), CABundle: env.CAData},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       shipped,
		}},
	}
	for _, o := range []client.Object{ec, vwc} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, o) })
	}

	m, err := manager.NewManager(env.Config, manager.Options{
		WebhookHost: "127.0.0.1", WebhookPort: port, DeletionHookPort: deletionPort, WebhookCertDir: env.CertDir,
		HealthProbeBindAddress: "0", Namespace: install.Namespace,
		CredentialWebhookConfiguration: vwc.Name, DeletionExtensionConfig: ec.Name,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.SetupNamespaceScope()).To(Succeed())
	startManager(t, m)

	selectors := func(g Gomega) (deletion, credential *metav1.LabelSelector) {
		gotEC, gotVWC := &runtimev1.ExtensionConfig{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ec), gotEC)).To(Succeed())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(vwc), gotVWC)).To(Succeed())
		return gotEC.Spec.NamespaceSelector, gotVWC.Webhooks[0].NamespaceSelector
	}
	guarded := func(g Gomega) {
		deletion, credential := selectors(g)
		for what, s := range map[string]*metav1.LabelSelector{"BeforeClusterDelete's ExtensionConfig": deletion, "the credential webhook": credential} {
			g.Expect(s).NotTo(BeNil())
			g.Expect(s.MatchExpressions).To(HaveLen(1))
			g.Expect(s.MatchExpressions[0].Values).To(ContainElement(ns), "%s selects the namespace with an attachment", what)
		}
	}
	g.Eventually(guarded).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

	// The upgrade: both shipped selectors applied again.
	gotEC := &runtimev1.ExtensionConfig{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ec), gotEC)).To(Succeed())
	gotEC.Spec.NamespaceSelector = shipped
	g.Expect(env.Client.Update(ctx, gotEC)).To(Succeed())
	gotVWC := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(vwc), gotVWC)).To(Succeed())
	gotVWC.Webhooks[0].NamespaceSelector = shipped
	g.Expect(env.Client.Update(ctx, gotVWC)).To(Succeed())
	g.Eventually(guarded).WithTimeout(10*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(),
		"put right on the change itself, long before the periodic check")
}

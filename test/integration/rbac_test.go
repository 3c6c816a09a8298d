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

package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/manager"
)

// TestTheManagerMayTouchOnlyTheConfigurationsItScopes: under the shipped
// ClusterRole (config/rbac/role.yaml) on the real kube-apiserver, the
// manager's cache lists and watches its own ValidatingWebhookConfiguration
// and ExtensionConfig by name and may patch them, and may neither read nor
// patch any other: a compromised extension cannot switch off another
// webhook or point another extension elsewhere.
func TestTheManagerMayTouchOnlyTheConfigurationsItScopes(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	shipped := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(raw, shipped)).To(Succeed())
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe-manager"}, Rules: shipped.Rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe-manager"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "rbac-probe-manager"}}}
	own := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: manager.DefaultCredentialWebhookConfiguration}}
	for _, o := range []client.Object{role, binding, own} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "rbac-probe-manager", Groups: []string{"system:authenticated"}}

	// The manager's cache, as NewManager configures it for these two kinds.
	c, err := cache.New(cfg, cache.Options{Scheme: env.Scheme, ByObject: manager.ScopedConfigurations(manager.Options{})})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	vwcs := &metav1.PartialObjectMetadataList{}
	vwcs.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfigurationList"))
	g.Eventually(func(g Gomega) {
		g.Expect(c.List(ctx, vwcs)).To(Succeed())
		g.Expect(vwcs.Items).To(HaveLen(1), "only its own, though the suite's exists too")
		g.Expect(vwcs.Items[0].Name).To(Equal(manager.DefaultCredentialWebhookConfiguration))
	}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	ecs := &metav1.PartialObjectMetadataList{}
	ecs.SetGroupVersionKind(runtimev1.GroupVersion.WithKind("ExtensionConfigList"))
	g.Eventually(func(g Gomega) {
		g.Expect(c.List(ctx, ecs)).To(Succeed())
		g.Expect(ecs.Items).To(HaveLen(1))
		g.Expect(ecs.Items[0].Name).To(Equal(manager.DefaultDeletionExtensionConfig))
	}, 20*time.Second, 200*time.Millisecond).Should(Succeed())

	direct, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"probe":"x"}}}`))
	g.Expect(direct.Patch(ctx, own, patch)).To(Succeed(), "its own configuration")
	ownEC := &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: manager.DefaultDeletionExtensionConfig}}
	g.Expect(direct.Patch(ctx, ownEC, patch)).To(Succeed())

	other := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "capo-sharednet-integration"}}
	g.Expect(apierrors.IsForbidden(direct.Patch(ctx, other, patch))).To(BeTrue(), "another webhook configuration cannot be patched")
	g.Expect(apierrors.IsForbidden(direct.Get(ctx, client.ObjectKeyFromObject(other), other))).To(BeTrue())
	g.Expect(apierrors.IsForbidden(direct.List(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{}))).To(BeTrue(), "nor all of them listed")
	otherEC := &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: extensionConfigName}}
	g.Expect(apierrors.IsForbidden(direct.Patch(ctx, otherEC, patch))).To(BeTrue(), "another ExtensionConfig cannot be patched")
}

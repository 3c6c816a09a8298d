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
	"errors"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// extensionServiceAccount is the user the shipped manager runs as
// (config/base; test/shipping checks the policy names it).
const extensionServiceAccount = "system:serviceaccount:capo-sharednet-system:capo-sharednet-manager"

// installAttachmentPolicy installs the shipped config/policy/attachments.yaml
// and removes it at the end.
func installAttachmentPolicy(ctx context.Context, t *testing.T, g Gomega) {
	t.Helper()
	policy, binding, err := providers.AttachmentPolicy(filepath.Join("..", ".."))
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range []client.Object{policy, binding} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

// as is a client acting as user, whom a RoleBinding in namespace lets do
// anything with SharedNetworkAttachments there (and their status), as a
// namespace owner's RBAC commonly does.
func as(ctx context.Context, g Gomega, namespace, user string) client.Client {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "all-"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "all-"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}})).To(Succeed())
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// A tenant owns its namespace, not the extension's record of what it shared:
// it can neither forge an attachment (which the detach of a Cluster that is
// gone would trust to unshare another project's share) nor edit, delete or
// write the status of one.
func TestOnlyTheExtensionWritesAttachments(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	installAttachmentPolicy(ctx, t, g)
	ns, err := env.CreateNamespace(ctx, "tenant")
	g.Expect(err).NotTo(HaveOccurred())
	tenant := as(ctx, g, ns, "tenant-owner")
	extension := as(ctx, g, ns, extensionServiceAccount)

	forged := func(name string) *sharednetv1.SharedNetworkAttachment {
		return &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "gone", MachineDeploymentTopology: "md-a", SharedNetwork: "vm-net", Subnet: "sub-1"}}
	}
	refusal := ContainSubstring("SharedNetworkAttachments are written by capo-sharednet only")
	// The API server loads a new policy within a second or two.
	g.Eventually(func() error {
		err := tenant.Create(ctx, forged("probe"))
		if err == nil {
			_ = env.Client.Delete(ctx, forged("probe"))
			return errors.New("admitted")
		}
		return err
	}, 30*time.Second, 250*time.Millisecond).Should(MatchError(refusal))

	t.Run("the extension creates, records a share and deletes", func(t *testing.T) {
		g := NewWithT(t)
		a := forged("demo-md-a")
		g.Expect(extension.Create(ctx, a)).To(Succeed())
		a.Status.Share = &sharednetv1.Share{ProjectID: "cluster-project", RBACPolicyID: "rbac-1"}
		g.Expect(extension.Status().Update(ctx, a)).To(Succeed())
		g.Expect(extension.Delete(ctx, a)).To(Succeed())
	})

	t.Run("the tenant can do none of it", func(t *testing.T) {
		g := NewWithT(t)
		err := tenant.Create(ctx, forged("forged"))
		g.Expect(err).To(MatchError(And(refusal, ContainSubstring("tenant-owner may not create"))))

		a := forged("demo-md-b")
		g.Expect(extension.Create(ctx, a)).To(Succeed())
		a.Status.Share = &sharednetv1.Share{ProjectID: "cluster-project", RBACPolicyID: "rbac-1"}
		g.Expect(extension.Status().Update(ctx, a)).To(Succeed())

		pointed := a.DeepCopy()
		pointed.Status.Share.ProjectID = "another-tenants-project"
		g.Expect(tenant.Status().Update(ctx, pointed)).To(MatchError(And(refusal, ContainSubstring("may not update"))), "status")
		paused := a.DeepCopy()
		paused.Annotations = map[string]string{"cluster.x-k8s.io/paused": ""}
		g.Expect(tenant.Update(ctx, paused)).To(MatchError(refusal), "spec and metadata")
		g.Expect(tenant.Delete(ctx, a)).To(MatchError(And(refusal, ContainSubstring("may not delete"))))

		latest := &sharednetv1.SharedNetworkAttachment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), latest)).To(Succeed())
		g.Expect(latest.Status.Share.ProjectID).To(Equal("cluster-project"), "the record is as the extension wrote it")
		g.Expect(latest.Annotations).NotTo(HaveKey("cluster.x-k8s.io/paused"))
		g.Expect(env.Client.Delete(ctx, latest)).To(Succeed(), "a cluster administrator (system:masters) may")
	})

	t.Run("Kubernetes deletes them with their Cluster or their namespace", func(t *testing.T) {
		for _, user := range []string{"system:serviceaccount:kube-system:generic-garbage-collector", "system:serviceaccount:kube-system:namespace-controller", "system:kube-controller-manager"} {
			g := NewWithT(t)
			a := forged("demo-md-c")
			g.Expect(extension.Create(ctx, a)).To(Succeed())
			g.Expect(as(ctx, g, ns, user).Delete(ctx, a)).To(Succeed(), user)
		}
	})
}

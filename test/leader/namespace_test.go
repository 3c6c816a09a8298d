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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/test/loopback"
)

// TestNamespaceLimitsWhatTheManagerReads: with the clusterctl contract's
// --namespace, the manager (its controllers, hooks and webhook all read
// through it) sees that namespace's objects only, and still its own
// namespace's credential Secrets and the cluster-scoped SharedNetworks.
func TestNamespaceLimitsWhatTheManagerReads(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	suffix := fmt.Sprint(os.Getpid())
	watched, other := "watched-"+suffix, "other-"+suffix
	for _, ns := range []string{watched, other} {
		g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for _, ns := range []string{watched, other} {
		g.Expect(env.Client.Create(ctx, &sharednetv1.SharedNetworkAttachment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-md-a"},
			Spec:       sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: "s"},
		})).To(Succeed())
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "vm-" + suffix}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, secret) })

	port, err := loopback.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	deletionPort, err := loopback.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	m, err := manager.NewManager(env.Config, manager.Options{
		WebhookHost: "127.0.0.1", WebhookPort: port, DeletionHookPort: deletionPort, WebhookCertDir: env.CertDir,
		HealthProbeBindAddress: "0", Namespace: install.Namespace, WatchNamespace: watched,
	})
	g.Expect(err).NotTo(HaveOccurred())
	startManager(t, m)
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	g.Expect(m.GetCache().WaitForCacheSync(syncCtx)).To(BeTrue(), "the cache did not sync within a minute")

	list := &sharednetv1.SharedNetworkAttachmentList{}
	g.Eventually(func(g Gomega) {
		g.Expect(m.GetClient().List(ctx, list)).To(Succeed())
		var namespaces []string
		for _, a := range list.Items {
			namespaces = append(namespaces, a.Namespace)
		}
		g.Expect(namespaces).To(ConsistOf(watched), "only the watched namespace's attachments")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	err = m.GetClient().Get(ctx, client.ObjectKey{Namespace: other, Name: "demo-md-a"}, &sharednetv1.SharedNetworkAttachment{})
	g.Expect(err).To(HaveOccurred(), "another namespace's object is not readable")

	g.Eventually(func() error {
		return m.GetClient().Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})
	}).WithTimeout(30*time.Second).Should(Succeed(), "the credential Secrets of the extension's namespace are still read")
	g.Expect(m.GetClient().List(ctx, &sharednetv1.SharedNetworkList{})).To(Succeed(), "cluster-scoped SharedNetworks are still read")
}

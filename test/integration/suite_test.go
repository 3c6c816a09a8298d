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
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/loopback"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// extensionConfigName is the ExtensionConfig the ClusterClass's handler names refer to.
const extensionConfigName = "capo-sharednet"

var (
	env *testenv.Environment
	// openstackRequests counts every request the extension makes to OpenStack.
	openstackRequests = &testbed.Counter{}
)

// resync is short here so a test sees facts change within seconds.
const resync = 3 * time.Second

func TestMain(m *testing.M) {
	testenv.ExitIfShort()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	env, err = testenv.StartWithExtension(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	if err := startExtension(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "starting the extension:", err)
		return 1
	}
	return m.Run()
}

// startExtension runs this project's manager, built from the pieces main.go
// registers (see below), on its own HTTPS port, registers its Cluster
// admission webhook from config/webhook and an ExtensionConfig, and waits
// until CAPI has discovered its handlers.
func startExtension(ctx context.Context) error {
	port, err := loopback.FreePort()
	if err != nil {
		return err
	}
	deletionPort, err := loopback.FreePort()
	if err != nil {
		return err
	}
	mgr, err := manager.NewManager(env.Config, manager.Options{
		WebhookHost: "127.0.0.1", WebhookPort: port, DeletionHookPort: deletionPort, WebhookCertDir: env.CertDir,
		HealthProbeBindAddress: "0",
		Namespace:              install.Namespace, Resync: resync,
		OpenStack: openstack.Options{WrapTransport: func(next http.RoundTripper) http.RoundTripper {
			openstackRequests.Next = next
			return openstackRequests
		}},
	})
	if err != nil {
		return err
	}
	// Everything main.go registers but the attachment controller: the hook
	// tests stand in for it (they write the share the way it does); the
	// life-cycle tests run it themselves. The guardrails run as with their
	// feature gate on.
	for _, setup := range []func() error{mgr.SetupHooks, mgr.SetupWebhooks, mgr.SetupSharedNetworkController, mgr.SetupWorkloadGuardrails} {
		if err := setup(); err != nil {
			return err
		}
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "extension manager stopped:", err)
		}
	}()
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	if _, err := env.InstallWebhooks(ctx, "capo-sharednet-integration", url); err != nil {
		return err
	}
	// The two ExtensionConfigs of config/default; the deletion hook's
	// selects every namespace here (no NamespaceScope runs to keep it to
	// the attached ones).
	for name, ec := range map[string]struct {
		url      string
		handlers int
	}{extensionConfigName: {url, 3}, manager.DefaultDeletionExtensionConfig: {fmt.Sprintf("https://127.0.0.1:%d", deletionPort), 1}} {
		if err := registerExtension(ctx, name, ec.url, ec.handlers); err != nil {
			return err
		}
	}
	return nil
}

// registerExtension creates ExtensionConfig name for the server at url, for
// every namespace, and waits until CAPI has discovered its handlers.
func registerExtension(ctx context.Context, name, url string, handlers int) error {
	ec := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: runtimev1.ExtensionConfigSpec{
			ClientConfig:      runtimev1.ClientConfig{URL: url, CABundle: env.CAData},
			NamespaceSelector: &metav1.LabelSelector{},
		},
	}
	if err := env.Client.Create(ctx, ec); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return false, err
		}
		return len(ec.Status.Handlers) >= handlers, nil
	})
	if err != nil {
		return fmt.Errorf("ExtensionConfig %s was not discovered (conditions %+v): %w", ec.Name, ec.Status.Conditions, err)
	}
	return nil
}

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
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/test/loopback"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// extensionConfigName is the ExtensionConfig the ClusterClass's handler names refer to.
const extensionConfigName = "capo-sharednet"

var env *testenv.Environment

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
	stop, err := startHooks(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the hooks server:", err)
		return 1
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// startHooks serves the Runtime SDK hooks (GeneratePatches, ValidateTopology,
// DiscoverVariables) from a manager of their own, without leader election:
// every replica answers the hooks in production, so which replica leads does
// not matter to CAPI. It stands in for the extension's Service. The hooks ask
// no cloud, so the manager's real OpenStack sessions are never used.
func startHooks(ctx context.Context) (stop func() error, _ error) {
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	deletionPort, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	mgr, err := manager.NewManager(env.Config, manager.Options{
		WebhookHost: "127.0.0.1", WebhookPort: port, DeletionHookPort: deletionPort, WebhookCertDir: env.CertDir,
		HealthProbeBindAddress: "0", Namespace: install.Namespace,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.SetupHooks(); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	stop = func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("the hooks manager did not stop within 30s")
		}
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	ec := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: extensionConfigName},
		Spec: runtimev1.ExtensionConfigSpec{
			ClientConfig:      runtimev1.ClientConfig{URL: url, CABundle: env.CAData},
			NamespaceSelector: &metav1.LabelSelector{},
		},
	}
	if err := env.Client.Create(ctx, ec); err != nil {
		return nil, errors.Join(err, stop())
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return false, err
		}
		return len(ec.Status.Handlers) >= 3, nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("ExtensionConfig %s was not discovered (conditions %+v): %w", ec.Name, ec.Status.Conditions, err), stop())
	}
	return stop, nil
}

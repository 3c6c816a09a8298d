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

package shipping

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/test/loopback"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// certManagerVersion is the cert-manager clusterctl v1.12 installs by default
// (config.CertManagerDefaultVersion): its CRDs validate our Issuer and Certificate.
const certManagerVersion = "v1.20.1"

var (
	envOnce   sync.Once
	env       *testenv.Environment
	envErr    error
	envCancel context.CancelFunc
	extDone   chan struct{}
)

// environment starts, once for the package, a real kube-apiserver with the
// CRDs and webhooks of CAPI, CABPK, KCP and CAPO, CAPI's controllers, and the
// CRDs of cert-manager (from the cert-manager module, at the version clusterctl
// installs).
func environment(t *testing.T) *testenv.Environment {
	t.Helper()
	testenv.SkipIfShort(t, "starts a kube-apiserver")
	envOnce.Do(func() {
		certManager := moduleDir(t, "github.com/cert-manager/cert-manager", certManagerVersion)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		env, envErr = testenv.Start(ctx, testenv.Options{ExtraCRDPaths: []string{
			filepath.Join(certManager, "deploy", "crds", "cert-manager.io_issuers.yaml"),
			filepath.Join(certManager, "deploy", "crds", "cert-manager.io_certificates.yaml"),
		}})
	})
	if envErr != nil {
		t.Fatalf("starting the test environment: %v", envErr)
	}
	return env
}

func stopEnvironment() {
	if envCancel != nil {
		envCancel()
		<-extDone
	}
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the test environment:", err)
		}
	}
}

// extensionURLs are where the extension's two servers answer.
type extensionURLs struct {
	// Hooks serves the topology hooks and the admission webhooks.
	Hooks string
	// Deletion serves BeforeClusterDelete.
	Deletion string
}

var (
	extensionOnce sync.Once
	extensionURL  extensionURLs
	extensionErr  error
)

// extension runs this project's manager, built from the pieces main.go
// registers but the attachment controller, on HTTPS ports of 127.0.0.1
// (certificate of envtest, which covers 127.0.0.1), and returns its URLs. The
// CRDs must be installed first.
func extension(t *testing.T, e *testenv.Environment) extensionURLs {
	t.Helper()
	extensionOnce.Do(func() {
		port, err := loopback.FreePort()
		if err != nil {
			extensionErr = err
			return
		}
		deletionPort, err := loopback.FreePort()
		if err != nil {
			extensionErr = err
			return
		}
		mgr, err := manager.NewManager(e.Config, manager.Options{
			WebhookHost: "127.0.0.1", WebhookPort: port, DeletionHookPort: deletionPort, WebhookCertDir: e.CertDir,
			HealthProbeBindAddress: "0",
			Namespace:              install.Namespace,
		})
		if err != nil {
			extensionErr = err
			return
		}
		// Everything main.go registers but the attachment controller: there
		// is no cloud here, and nothing in these tests may need a share.
		for _, setup := range []func() error{mgr.SetupHooks, mgr.SetupWebhooks, mgr.SetupSharedNetworkController} {
			if extensionErr = setup(); extensionErr != nil {
				return
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		envCancel, extDone = cancel, make(chan struct{})
		go func() {
			defer close(extDone)
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "extension manager stopped:", err)
			}
		}()
		extensionURL = extensionURLs{Hooks: fmt.Sprintf("https://127.0.0.1:%d", port), Deletion: fmt.Sprintf("https://127.0.0.1:%d", deletionPort)}
	})
	if extensionErr != nil {
		t.Fatalf("starting the extension: %v", extensionErr)
	}
	return extensionURL
}

// warnings collects the API server's warnings: CAPI's Cluster webhook admits a
// Cluster whose ClusterClass is not reconciled with only a warning, and skips
// the topology validation then.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// clientWithWarnings is a client of e that records warnings instead of logging them.
func clientWithWarnings(t *testing.T, e *testenv.Environment) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

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

// Package testenv is the integration-test harness: a real kube-apiserver + etcd (envtest)
// with the CRDs and admission webhooks of CAPI, CABPK, KCP and CAPO, and CAPI's topology,
// ClusterClass, Cluster, MachineDeployment, MachineSet and ExtensionConfig controllers running
// in-process. Runtime extensions are reached over HTTPS with the real Runtime SDK wire format
// (see NewRuntimeClient). No KCP or CAPO controller runs: small stand-ins (standins.go) report
// the KubeadmControlPlane and OpenStackCluster status CAPI waits for.
//
// Two controller-runtime managers run in-process:
//   - the providers manager (lives as long as the Environment): serves all admission webhooks
//     and runs the stand-ins, so objects can be written while CAPI is stopped;
//   - the CAPI manager: CAPI's controllers. StopCAPI / StartCAPI stop and restart it against the
//     same API server (a fresh manager, runtime client and registry each time, as after a
//     restart of CAPI's pod).
//
// The kube-apiserver and etcd binaries come from KUBEBUILDER_ASSETS, else <repo root>/bin/k8s
// (hack/ensure-envtest-assets.sh builds them). CRDs and webhook manifests are read from the
// module cache, at the versions linked into the test binary.
//
// Debugging: TESTENV_LOG=1 sends the controllers' and webhooks' logs to stderr;
// TESTENV_APISERVER_LOG=<file> writes kube-apiserver's output to that file. Environment.Kubeconfig
// works with kubectl while the Environment runs.
package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	capowebhooks "sigs.k8s.io/cluster-api-provider-openstack/pkg/webhooks"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/api/core/v1beta2/index"
	bootstrapwebhooks "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks"
	capicontrollers "sigs.k8s.io/cluster-api/controllers"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	controlplanewebhooks "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks"
	runtimeclient "sigs.k8s.io/cluster-api/exp/runtime/client"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	capiwebhooks "sigs.k8s.io/cluster-api/webhooks"

	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/test/providers"
	"github.com/capo-sharednet/capo-sharednet/test/standins"
)

// Options configures Start.
type Options struct {
	// ExtraCRDPaths are more CRD folders or files to install (e.g. our own config/crd/bases).
	// Paths that do not exist are skipped.
	ExtraCRDPaths []string
}

// Environment is a running API server with CAPI's controllers and all webhooks.
type Environment struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a direct (uncached) client using Scheme.
	Client client.Client
	// Scheme is providers.NewScheme: the extension's types and every provider
	// type the environment installs.
	Scheme *runtime.Scheme
	// CertDir is envtest's webhook serving cert dir (tls.crt, tls.key; the cert covers
	// 127.0.0.1 and localhost). Other HTTPS servers, such as a runtime extension, may reuse it.
	CertDir string
	// CAData is the PEM bundle that verifies the cert in CertDir (for caBundle fields).
	CAData []byte
	// WebhookPort is the port of the in-process admission webhook server on 127.0.0.1.
	WebhookPort int
	// Dir is a temporary folder of this Environment only; removed by Stop.
	Dir string
	// Kubeconfig is the path of a kubeconfig file for the API server (inside Dir).
	Kubeconfig string

	env          *envtest.Environment
	stopProvider context.CancelFunc
	providerDone chan error

	capiMu   sync.Mutex
	capiStop func() error // stops the CAPI and ClusterCache managers
	capiRC   runtimeclient.Client
}

var (
	globalsOnce sync.Once
	globalsErr  error
)

// setGlobals sets the process-wide feature gates and loggers (once).
func setGlobals() error {
	globalsOnce.Do(func() {
		globalsErr = feature.MutableGates.Set("ClusterTopology=true,RuntimeSDK=true")
		log := logr.Discard()
		if os.Getenv("TESTENV_LOG") != "" {
			log = zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr))
		}
		ctrl.SetLogger(log)
		klog.SetLogger(log)
	})
	return globalsErr
}

// Start starts the API server, installs CRDs and webhooks, and starts the providers manager
// (webhooks, stand-ins) and the CAPI manager. ctx bounds the start-up only: everything runs
// until Stop.
func Start(ctx context.Context, opts Options) (_ *Environment, retErr error) {
	if err := setGlobals(); err != nil {
		return nil, err
	}
	assets, err := assetsDir()
	if err != nil {
		return nil, err
	}
	m, err := loadManifests()
	if err != nil {
		return nil, err
	}
	var extra []string
	for _, p := range opts.ExtraCRDPaths {
		if _, err := os.Stat(p); err == nil {
			extra = append(extra, p)
		}
	}
	dir, err := os.MkdirTemp("", "capo-sharednet-testenv-")
	if err != nil {
		return nil, err
	}

	scheme := providers.NewScheme()
	// Only the storage versions (v1beta2 for CAPI, v1beta1 for CAPO) are in the scheme, so
	// envtest configures no conversion webhooks: objects are only ever served in one version.
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		Scheme:                scheme,
		CRDs:                  m.crds,
		CRDDirectoryPaths:     extra,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			MutatingWebhooks:   m.mutating,
			ValidatingWebhooks: m.validating,
			LocalServingHost:   "127.0.0.1",
		},
	}
	if f := os.Getenv("TESTENV_APISERVER_LOG"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			return nil, err
		}
		env.ControlPlane.GetAPIServer().Out = out
		env.ControlPlane.GetAPIServer().Err = out
	}
	e := &Environment{Scheme: scheme, Dir: dir, env: env}
	defer func() {
		if retErr != nil {
			_ = e.Stop()
		}
	}()
	if e.Config, err = env.Start(); err != nil {
		return nil, fmt.Errorf("testenv: starting envtest: %w", err)
	}
	e.CertDir = env.WebhookInstallOptions.LocalServingCertDir
	e.CAData = env.WebhookInstallOptions.LocalServingCAData
	e.WebhookPort = env.WebhookInstallOptions.LocalServingPort
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	// CAPI converts v1beta2 objects to v1beta1 for Runtime SDK hook requests (e.g. the
	// AfterControlPlaneInitialized hook); the conversion needs the apiVersion of referenced kinds.
	getter := apiVersionGetter(e.Client)
	clusterv1beta1.SetAPIVersionGetter(getter)
	controlplanev1beta1.SetAPIVersionGetter(getter)

	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	kc := kubeconfig.FromEnvTestConfig(e.Config, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "testenv"}})
	if err := os.WriteFile(e.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}

	if err := e.startProviders(ctx); err != nil {
		return nil, err
	}
	if err := e.StartCAPI(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// startProviders starts the manager serving all admission webhooks plus the stand-ins.
func (e *Environment) startProviders(ctx context.Context) error {
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    e.env.WebhookInstallOptions.LocalServingHost,
			Port:    e.WebhookPort,
			CertDir: e.CertDir,
		}),
	})
	if err != nil {
		return err
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return err
	}
	c := mgr.GetClient()
	for _, s := range []interface{ SetupWebhookWithManager(ctrl.Manager) error }{
		&capiwebhooks.Cluster{Client: c},
		&capiwebhooks.ClusterClass{Client: c},
		&capiwebhooks.Machine{},
		&capiwebhooks.MachineSet{},
		&capiwebhooks.MachineDeployment{},
		&capiwebhooks.MachineDrainRule{},
		&capiwebhooks.MachineHealthCheck{},
		&capiwebhooks.MachinePool{},
		&capiwebhooks.ClusterResourceSet{},
		&capiwebhooks.ClusterResourceSetBinding{},
		&capiwebhooks.ExtensionConfig{},
		&capiwebhooks.IPAddress{Client: mgr.GetAPIReader()},
		&capiwebhooks.IPAddressClaim{},
		&bootstrapwebhooks.KubeadmConfig{},
		&bootstrapwebhooks.KubeadmConfigTemplate{},
		&controlplanewebhooks.KubeadmControlPlane{},
		&controlplanewebhooks.KubeadmControlPlaneTemplate{},
		&controlplanewebhooks.ScaleValidator{Client: c},
	} {
		if err := s.SetupWebhookWithManager(mgr); err != nil {
			return fmt.Errorf("testenv: webhook %T: %w", s, err)
		}
	}
	if errs := capowebhooks.RegisterAllWithManager(mgr); len(errs) > 0 {
		return fmt.Errorf("testenv: CAPO webhooks: %w", errors.Join(errs...))
	}
	if err := (&standins.ControlPlane{Client: c, Workload: e.Config}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&openStackClusterStandIn{client: c}).setup(mgr); err != nil {
		return err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.stopProvider = cancel
	e.providerDone = make(chan error, 1)
	go func() { e.providerDone <- mgr.Start(runCtx) }()

	// Wait until the webhook server accepts connections and the caches are synced.
	// (A full TLS handshake: a bare TCP probe makes the server log a handshake error.)
	addr := net.JoinHostPort(e.env.WebhookInstallOptions.LocalServingHost, strconv.Itoa(e.WebhookPort))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.CAData)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
		if err == nil {
			_ = conn.Close()
			break
		}
		select {
		case err := <-e.providerDone:
			e.providerDone <- err
			return fmt.Errorf("testenv: providers manager stopped: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("testenv: providers manager caches did not sync")
	}
	return nil
}

// StartCAPI starts a new CAPI manager (ClusterClass, ClusterTopology, MachineDeploymentTopology,
// MachineSetTopology, Cluster, MachineDeployment, MachineSet and ExtensionConfig reconcilers and
// a fresh Runtime SDK client) and, in a manager of its own, the ClusterCache. It returns once
// the caches are synced. ctx bounds the start-up only.
func (e *Environment) StartCAPI(ctx context.Context) error {
	e.capiMu.Lock()
	defer e.capiMu.Unlock()
	if e.capiStop != nil {
		return errors.New("testenv: CAPI is already running")
	}

	// The ClusterCache's reconciler sends Cluster events on unbuffered channels that CAPI's
	// controllers read. In one manager, a stop that ends those readers first leaves the send
	// blocked for the whole grace period; in its own manager, stopped first, it always has one.
	ccMgr, err := ctrl.NewManager(e.Config, capiManagerOptions(e.Scheme))
	if err != nil {
		return err
	}
	clusterCache, err := setupClusterCache(ctx, ccMgr)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(e.Config, capiManagerOptions(e.Scheme))
	if err != nil {
		return err
	}
	rc, err := setupCAPI(ctx, mgr, clusterCache)
	if err != nil {
		return err
	}
	stopCC, err := startManager(ctx, ccMgr)
	if err != nil {
		clusterCache.shutdown()
		return fmt.Errorf("testenv: ClusterCache manager: %w", err)
	}
	stopCAPI, err := startManager(ctx, mgr)
	if err != nil {
		_ = stopCC()
		clusterCache.shutdown()
		return fmt.Errorf("testenv: CAPI manager: %w", err)
	}
	e.capiRC = rc
	e.capiStop = func() error {
		errCC := stopCC()
		errCAPI := stopCAPI()
		clusterCache.shutdown()
		return errors.Join(errCC, errCAPI)
	}
	return nil
}

// StopCAPI stops the CAPI manager and waits for it to finish. The API server, the admission
// webhooks and the stand-ins keep running. A no-op when CAPI is not running.
func (e *Environment) StopCAPI() error {
	e.capiMu.Lock()
	defer e.capiMu.Unlock()
	if e.capiStop == nil {
		return nil
	}
	err := e.capiStop()
	e.capiStop, e.capiRC = nil, nil
	return err
}

// RuntimeClient returns the Runtime SDK client of the running CAPI manager (nil when stopped),
// e.g. to check which extension handlers are registered.
func (e *Environment) RuntimeClient() runtimeclient.Client {
	e.capiMu.Lock()
	defer e.capiMu.Unlock()
	return e.capiRC
}

// capiManagerOptions are the options of CAPI's main.go that matter here.
func capiManagerOptions(scheme *runtime.Scheme) ctrl.Options {
	req, _ := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	return ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// A restarted manager registers controllers with the same names again.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// In-flight reconciles may wait on a slow extension call (10 s timeout
		// each) on a loaded machine: give the stop room instead of failing it.
		GracefulShutdownTimeout: ptr.To(2 * time.Minute),
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.NewSelector().Add(*req)},
		}},
		Client: client.Options{Cache: &client.CacheOptions{
			DisableFor:   []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}},
			Unstructured: true,
		}},
	}
}

// startManager starts mgr and returns once it runs with synced caches, with the func that
// stops it and waits for it. ctx bounds the start-up only.
func startManager(ctx context.Context, mgr ctrl.Manager) (stop func() error, _ error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	stop = func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			// Leave a trace of what still runs: a stop that needs the grace period is a
			// bug to find from a CI log.
			fmt.Fprintln(os.Stderr, "testenv: a CAPI manager is still stopping after 30s; goroutines:")
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			return <-done
		}
	}
	select {
	case <-mgr.Elected():
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("stopped: %w", err)
	case <-ctx.Done():
		_ = stop()
		return nil, ctx.Err()
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		_ = stop()
		return nil, errors.New("caches did not sync")
	}
	return stop, nil
}

// clusterCache is CAPI's ClusterCache with the test-only shutdown of its workload caches.
type clusterCache struct {
	clustercache.ClusterCache
	shutdown func()
}

// setupClusterCache sets up CAPI's ClusterCache as CAPI's main.go does.
func setupClusterCache(ctx context.Context, mgr ctrl.Manager) (*clusterCache, error) {
	secretCachingClient, err := client.New(mgr.GetConfig(), client.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		Cache:      &client.CacheOptions{Reader: mgr.GetCache()},
	})
	if err != nil {
		return nil, err
	}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretCachingClient,
		Cache:        clustercache.CacheOptions{Indexes: []clustercache.CacheOptionsIndex{clustercache.NodeProviderIDIndex}},
		Client: clustercache.ClientOptions{
			UserAgent: "capo-sharednet-testenv",
			Cache: clustercache.ClientCacheOptions{DisableFor: []client.Object{
				&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Pod{}, &appsv1.DaemonSet{},
				&storagev1.VolumeAttachment{}, &corev1.PersistentVolume{},
			}},
		},
	}, controller.Options{MaxConcurrentReconciles: 10})
	if err != nil {
		return nil, err
	}
	out := &clusterCache{ClusterCache: cc, shutdown: func() {}}
	// The workload-cluster caches do not stop with the manager (their watches would keep
	// kube-apiserver from terminating): shut them down explicitly. Also skip the per-cluster
	// RSA key generation (only KCP's etcd client uses it).
	if sd, ok := cc.(interface{ Shutdown() }); ok {
		out.shutdown = sd.Shutdown
	}
	if d, ok := cc.(interface{ DisablePrivateKeyGeneration() }); ok {
		d.DisablePrivateKeyGeneration()
	}
	return out, nil
}

// setupCAPI wires CAPI's reconcilers like CAPI's main.go does (setupReconcilers) and returns
// the runtime client.
func setupCAPI(ctx context.Context, mgr ctrl.Manager, clusterCache clustercache.ClusterCache) (runtimeclient.Client, error) {
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, err
	}
	rc := NewRuntimeClient(mgr.GetClient())

	// A cache of Secret metadata for the ExtensionConfig controller (CA injection from Secrets).
	partialSecretCache, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(),
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(partialSecretCache); err != nil {
		return nil, err
	}

	opts := controller.Options{MaxConcurrentReconciles: 5}
	c, r := mgr.GetClient(), mgr.GetAPIReader()
	for name, setup := range map[string]func() error{
		"ClusterClass": func() error {
			return (&capicontrollers.ClusterClassReconciler{Client: c, RuntimeClient: rc}).SetupWithManager(ctx, mgr, opts)
		},
		"ClusterTopology": func() error {
			return (&capicontrollers.ClusterTopologyReconciler{Client: c, APIReader: r, RuntimeClient: rc, ClusterCache: clusterCache}).SetupWithManager(ctx, mgr, opts)
		},
		"MachineDeploymentTopology": func() error {
			return (&capicontrollers.MachineDeploymentTopologyReconciler{Client: c, APIReader: r}).SetupWithManager(ctx, mgr, controller.Options{})
		},
		"MachineSetTopology": func() error {
			return (&capicontrollers.MachineSetTopologyReconciler{Client: c, APIReader: r}).SetupWithManager(ctx, mgr, controller.Options{})
		},
		"ExtensionConfig": func() error {
			return (&capicontrollers.ExtensionConfigReconciler{Client: c, APIReader: r, RuntimeClient: rc, PartialSecretCache: partialSecretCache}).SetupWithManager(ctx, mgr, opts)
		},
		"Cluster": func() error {
			return (&capicontrollers.ClusterReconciler{Client: c, APIReader: r, ClusterCache: clusterCache, RemoteConnectionGracePeriod: 50 * time.Second}).SetupWithManager(ctx, mgr, opts)
		},
		"MachineDeployment": func() error {
			return (&capicontrollers.MachineDeploymentReconciler{Client: c, APIReader: r, RuntimeClient: rc}).SetupWithManager(ctx, mgr, opts)
		},
		// No preflight checks: the stand-in control plane has no Machines to check against.
		"MachineSet": func() error {
			return (&capicontrollers.MachineSetReconciler{Client: c, APIReader: r, ClusterCache: clusterCache, PreflightChecks: sets.Set[clusterv1.MachineSetPreflightCheck]{}}).SetupWithManager(ctx, mgr, opts)
		},
	} {
		if err := setup(); err != nil {
			return nil, fmt.Errorf("testenv: setting up %s controller: %w", name, err)
		}
	}
	return rc, nil
}

// Stop stops CAPI, the providers manager and the API server, and removes Dir.
func (e *Environment) Stop() error {
	errs := []error{e.StopCAPI()}
	if e.stopProvider != nil {
		e.stopProvider()
		errs = append(errs, <-e.providerDone)
		e.stopProvider = nil
	}
	if e.env != nil {
		errs = append(errs, e.env.Stop())
	}
	if e.Dir != "" {
		errs = append(errs, os.RemoveAll(e.Dir))
	}
	return errors.Join(errs...)
}

// apiVersionGetter mirrors CAPI's internal contract.GetAPIVersion: the apiVersion of a kind is
// its group with the latest version listed in the CRD's contract label
// (cluster.x-k8s.io/v1beta2, else cluster.x-k8s.io/v1beta1); CRDs without contract labels (CAPI's
// own) use their preferred version.
func apiVersionGetter(c client.Client) func(gk schema.GroupKind) (string, error) {
	return func(gk schema.GroupKind) (string, error) {
		mapping, err := c.RESTMapper().RESTMapping(gk)
		if err != nil {
			return "", err
		}
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := c.Get(context.Background(), client.ObjectKey{Name: mapping.Resource.Resource + "." + gk.Group}, crd); err != nil {
			return "", err
		}
		for _, contract := range []string{"v1beta2", "v1beta1"} {
			if v := crd.Labels[clusterv1.GroupVersion.Group+"/"+contract]; v != "" {
				versions := strings.Split(v, "_")
				return schema.GroupVersion{Group: gk.Group, Version: versions[len(versions)-1]}.String(), nil
			}
		}
		return mapping.GroupVersionKind.GroupVersion().String(), nil
	}
}

// CreateNamespace creates a namespace with a generated name starting with prefix.
func (e *Environment) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return "", err
	}
	return ns.Name, nil
}

// StartWithExtension is Start with what the extension's own test packages
// need on top: its CRDs (config/crd/bases) and its namespace
// (install.Namespace), where the credential Secrets live.
func StartWithExtension(ctx context.Context) (*Environment, error) {
	root, err := providers.RepoRoot()
	if err != nil {
		return nil, err
	}
	e, err := Start(ctx, Options{ExtraCRDPaths: []string{filepath.Join(root, "config", "crd", "bases")}})
	if err != nil {
		return nil, err
	}
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: install.Namespace}}); err != nil {
		return nil, errors.Join(fmt.Errorf("creating namespace %s: %w", install.Namespace, err), e.Stop())
	}
	return e, nil
}

// InstallWebhooks creates config/webhook/manifests.yaml's
// ValidatingWebhookConfiguration as name, each webhook (or only those
// named) sent to url plus its Service's path and trusting CAData: the
// shipped rules in front of this API server, for the extension's webhooks
// served on loopback instead of its in-cluster Service. It returns what it
// created.
func (e *Environment) InstallWebhooks(ctx context.Context, name, url string, only ...string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	root, err := providers.RepoRoot()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(raw, cfg); err != nil {
		return nil, fmt.Errorf("config/webhook/manifests.yaml: %w", err)
	}
	want := len(cfg.Webhooks)
	if len(only) > 0 {
		want = len(only)
	}
	var webhooks []admissionregistrationv1.ValidatingWebhook
	for _, wh := range cfg.Webhooks {
		if len(only) > 0 && !slices.Contains(only, wh.Name) {
			continue
		}
		full := url + ptr.Deref(wh.ClientConfig.Service.Path, "")
		wh.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &full, CABundle: e.CAData}
		webhooks = append(webhooks, wh)
	}
	if len(webhooks) != want {
		return nil, fmt.Errorf("config/webhook/manifests.yaml has %d of the webhooks %q", len(webhooks), only)
	}
	cfg.Name, cfg.Webhooks = name, webhooks
	return cfg, e.Client.Create(ctx, cfg)
}

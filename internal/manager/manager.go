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

// Package manager wires the extension into one controller-runtime manager
// whose webhook server is CAPI's runtime extension server: hooks, the Cluster
// admission webhook and controllers share one process, one port and one
// certificate. New builds it whole for main.go; NewManager and the Setup
// methods let a test register only the pieces it does not stand in for.
package manager

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	runtimecatalog "sigs.k8s.io/cluster-api/exp/runtime/catalog"
	"sigs.k8s.io/cluster-api/exp/runtime/server"

	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/exp/guardrails"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/hooks"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/records"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/version"
	"github.com/capo-sharednet/capo-sharednet/internal/webhooks"
)

// Options configure the manager; main.go fills them from flags.
type Options struct {
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// DeletionHookPort serves BeforeClusterDelete on a runtime extension
	// server of its own (its own ExtensionConfig, scoped to the namespaces
	// with attachments); DefaultDeletionHookPort when zero.
	DeletionHookPort int
	// TLSOpts apply to the webhook server (CAPI's --tls-min-version and
	// --tls-cipher-suites, util/flags).
	TLSOpts []func(*tls.Config)
	// Metrics is the diagnostics endpoint as CAPI's util/flags builds it
	// (--diagnostics-address, --insecure-diagnostics); nil serves none.
	Metrics                *metricsserver.Options
	HealthProbeBindAddress string
	// PprofBindAddress serves pprof (--profiler-address); empty: off.
	PprofBindAddress string
	LeaderElection   bool
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod tune the leader election;
	// zero keeps controller-runtime's defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Namespace holds the SharedNetwork credential Secrets; the manager
	// caches Secrets of this namespace only. install.Namespace when empty.
	Namespace string
	// WatchNamespace is the clusterctl contract's --namespace: Clusters,
	// their nodegroups and attachments are read in that namespace only;
	// every namespace when empty.
	WatchNamespace string
	// WatchFilterValue is CAPI's --watch-filter: the controllers reconcile
	// only objects labelled cluster.x-k8s.io/watch-filter=<value>.
	WatchFilterValue string
	// Resync is how often SharedNetwork facts are read again from Neutron.
	Resync time.Duration
	// OpenStack tunes the OpenStack sessions (tests count requests with it).
	OpenStack openstack.Options
	// WorkloadGuardrails is the value of the WorkloadGuardrails feature gate
	// (internal/feature): New then runs exp/guardrails.
	WorkloadGuardrails bool
	// Concurrency is how many objects each controller reconciles at once
	// (CAPI's --<kind>-concurrency); zero keeps DefaultConcurrency.
	Concurrency Concurrency
	// ReconcileTimeout bounds one reconcile (every OpenStack call in it);
	// DefaultReconcileTimeout when zero.
	ReconcileTimeout time.Duration
	// SyncPeriod is how often the cache relists every object (CAPI's
	// --sync-period); controller-runtime's default when zero.
	SyncPeriod time.Duration
	// CredentialWebhookConfiguration is the ValidatingWebhookConfiguration
	// whose credential webhook the manager scopes to the namespaces using a
	// shared network; DefaultCredentialWebhookConfiguration when empty.
	CredentialWebhookConfiguration string
	// DeletionExtensionConfig is the ExtensionConfig that registers
	// BeforeClusterDelete; the manager scopes it to the namespaces with
	// attachments. DefaultDeletionExtensionConfig when empty.
	DeletionExtensionConfig string
	// CAPIManagers are the users CAPI's managers run as: only they (and
	// system:masters) may set CAPI's ok-to-delete annotation on a Cluster
	// that uses a shared network; webhooks.DefaultCAPIManager when empty.
	CAPIManagers []string
}

// ScopedConfigurations is how the cache reads the two cluster-wide
// configurations NamespaceScope keeps: each by its name only, which is all
// the extension's RBAC grants (resourceNames allows a list or watch with a
// metadata.name field selector).
func ScopedConfigurations(opts Options) map[client.Object]cache.ByObject {
	named := func(name string) cache.ByObject {
		return cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", name)}
	}
	return map[client.Object]cache.ByObject{
		&admissionregistrationv1.ValidatingWebhookConfiguration{}: named(cmp.Or(opts.CredentialWebhookConfiguration, DefaultCredentialWebhookConfiguration)),
		&runtimev1.ExtensionConfig{}:                              named(cmp.Or(opts.DeletionExtensionConfig, DefaultDeletionExtensionConfig)),
	}
}

// DefaultDeletionHookPort is the port of the deletion hook's server.
const DefaultDeletionHookPort = 9444

// DefaultDeletionExtensionConfig is the name config/default gives the
// ExtensionConfig of BeforeClusterDelete.
const DefaultDeletionExtensionConfig = "capo-sharednet-deletion"

// DefaultCredentialWebhookConfiguration is the name config/ gives the
// ValidatingWebhookConfiguration (config/base's name prefix).
const DefaultCredentialWebhookConfiguration = "capo-sharednet-validating-webhook-configuration" //nolint:gosec // a configuration name, not a credential

// Concurrency is the workers of each controller.
type Concurrency struct {
	SharedNetworks, Attachments, WorkloadGuardrails int
}

// The defaults: a tenant whose cloud is slow holds one worker for at most
// one reconcile timeout, and the other tenants' clusters go on meanwhile.
const (
	DefaultConcurrency      = 10
	DefaultReconcileTimeout = 2 * time.Minute
)

// GoMemoryReserve is what the manager leaves of its container's memory
// limit to what the Go runtime does not count: the binary's pages, about
// 50 MiB resident (test/scale), which the container's limit counts too.
const GoMemoryReserve = 64 << 20

// GoMemoryLimit is the soft limit (GOMEMLIMIT) the manager gives the Go
// runtime in a container limited to limit bytes: the limit less
// GoMemoryReserve, and never less than half of it.
func GoMemoryLimit(limit uint64) uint64 {
	return max(limit-min(limit, GoMemoryReserve), limit/2)
}

// controllerOptions are the options of a controller with workers workers.
func (o Options) controllerOptions(workers int) controller.Options {
	if workers <= 0 {
		workers = DefaultConcurrency
	}
	timeout := o.ReconcileTimeout
	if timeout <= 0 {
		timeout = DefaultReconcileTimeout
	}
	return controller.Options{MaxConcurrentReconciles: workers, ReconciliationTimeout: timeout}
}

// Manager is the controller-runtime manager with what its pieces share: the
// runtime extension server, the OpenStack sessions, the credentials and the
// preflight checker. The Setup methods each register one piece.
type Manager struct {
	ctrl.Manager
	// Server serves the topology hooks and the admission webhooks on one port.
	Server *server.Server
	// DeletionServer serves BeforeClusterDelete on its own port.
	DeletionServer *server.Server
	Sessions       *openstack.Sessions
	Credentials    *credentials.Source
	Preflight      *preflight.Checker
	opts           Options
}

// New builds the manager main.go runs: every hook, webhook and controller
// registered, the workload guardrails when their feature gate is on.
func New(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	m, err := NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	setups := []func() error{m.SetupHooks, m.SetupWebhooks, m.SetupSharedNetworkController, m.SetupAttachmentController, m.SetupNamespaceScope}
	if opts.WorkloadGuardrails {
		setups = append(setups, m.SetupWorkloadGuardrails)
	}
	for _, setup := range setups {
		if err := setup(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// NewManager builds the manager with nothing registered yet: its scheme, its
// cache (Secrets of opts.Namespace only), metrics, health checks and the
// runtime extension server as its webhook server. Tests that stand in for a
// piece register the others themselves.
func NewManager(cfg *rest.Config, opts Options) (*Manager, error) {
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return nil, err
	}
	// Two servers, one certificate: the topology hooks with the admission
	// webhooks, and BeforeClusterDelete behind an ExtensionConfig of its own.
	newServer := func(port int) (*server.Server, error) {
		return server.New(server.Options{Catalog: catalog, Host: opts.WebhookHost, Port: port, CertDir: opts.WebhookCertDir, TLSOpts: opts.TLSOpts})
	}
	srv, err := newServer(opts.WebhookPort)
	if err != nil {
		return nil, fmt.Errorf("creating the runtime extension server: %w", err)
	}
	deletion, err := newServer(cmp.Or(opts.DeletionHookPort, DefaultDeletionHookPort))
	if err != nil {
		return nil, fmt.Errorf("creating the deletion hook's server: %w", err)
	}

	if opts.Namespace == "" {
		opts.Namespace = install.Namespace
	}
	// Credentials stay in the extension's namespace: never watch Secrets elsewhere.
	// Managed fields are never read: not cached, as CAPI's managers do
	// (a quarter less live heap at 500 Clusters x 4 nodegroups, test/scale).
	byObject := trimmedKinds()
	byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{opts.Namespace: {}}}
	maps.Copy(byObject, ScopedConfigurations(opts))
	cacheOpts := cache.Options{
		ByObject:         byObject,
		DefaultTransform: cache.TransformStripManagedFields(),
		NewInformer:      newListGate(maxListHold).newInformer,
	}
	if opts.SyncPeriod > 0 {
		cacheOpts.SyncPeriod = &opts.SyncPeriod
	}
	if opts.WatchNamespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.WatchNamespace: {}}
	}
	leaderElectionID := opts.LeaderElectionID
	if leaderElectionID == "" {
		leaderElectionID = "capo-sharednet.sharednet.capo.io"
	}
	metrics := metricsserver.Options{BindAddress: "0"}
	if opts.Metrics != nil {
		metrics = *opts.Metrics
	}
	mgrOpts := ctrl.Options{
		Scheme:                 scheme.New(),
		WebhookServer:          srv,
		Metrics:                metrics,
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		PprofBindAddress:       opts.PprofBindAddress,
		LeaderElection:         opts.LeaderElection,
		LeaderElectionID:       leaderElectionID,
		// The lease lives beside the credentials (also outside a cluster, as
		// with make run); a stopping leader hands it over at once, as CAPI's do.
		LeaderElectionNamespace:       opts.Namespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
		Controller:                    config.Controller{CacheSyncTimeout: cacheSyncTimeout},
	}
	if opts.LeaseDuration > 0 {
		mgrOpts.LeaseDuration = &opts.LeaseDuration
	}
	if opts.RenewDeadline > 0 {
		mgrOpts.RenewDeadline = &opts.RenewDeadline
	}
	if opts.RetryPeriod > 0 {
		mgrOpts.RetryPeriod = &opts.RetryPeriod
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	// The capacity rule reads the Clusters of one SharedNetwork, not all.
	if err := consumers.AddIndex(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	// ... and the sizes of a subnet's consumers from a table kept by events,
	// not decoded again on every admission.
	table := consumers.NewTable()
	if err := table.Watch(context.Background(), mgr.GetCache()); err != nil {
		return nil, err
	}
	// GetWebhookServer adds the server to the manager's runnables:
	// controller-runtime starts it only then, whichever pieces are registered.
	mgr.GetWebhookServer()
	if err := mgr.Add(deletion); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", srv.StartedChecker()); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("deletion-hook", deletion.StartedChecker()); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("consumers", table.ReadyzCheck); err != nil {
		return nil, err
	}

	sessions := &openstack.Sessions{Options: opts.OpenStack}
	creds := &credentials.Source{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: opts.Namespace, Sessions: sessions}
	return &Manager{
		Manager: mgr, Server: srv, DeletionServer: deletion, Sessions: sessions, Credentials: creds,
		Preflight: &preflight.Checker{Reader: mgr.GetClient(), Consumers: table, Cloud: creds, MaxFactAge: preflight.MaxFactAgeFor(resyncOrDefault(opts.Resync))},
		opts:      opts,
	}, nil
}

// SetupHooks registers the Runtime SDK hooks on the extension server.
func (m *Manager) SetupHooks() error {
	h := &hooks.Handlers{Reader: m.GetClient(), APIReader: m.GetAPIReader(), Client: m.GetClient(), Preflight: m.Preflight, Credentials: m.Credentials,
		Recorder: m.recorder()}
	if err := h.Register(m.Server); err != nil {
		return fmt.Errorf("registering hooks: %w", err)
	}
	if err := h.RegisterDeletion(m.DeletionServer); err != nil {
		return fmt.Errorf("registering the deletion hook: %w", err)
	}
	return nil
}

// SetupWebhooks registers the admission webhooks: Clusters and the deletion
// of a cluster's credential Secret.
func (m *Manager) SetupWebhooks() error {
	m.Server.Register(webhooks.ClusterPath, webhooks.NewClusterWebhook(m.Preflight, m.GetScheme(), m.opts.CAPIManagers...))
	m.Server.Register(webhooks.CredentialPath, webhooks.NewCredentialWebhook(m.GetClient(), m.Credentials, m.opts.WatchNamespace))
	m.Server.Register(webhooks.MachineDeploymentPath, webhooks.NewMachineDeploymentWebhook(m.GetAPIReader(), m.GetScheme()))
	return nil
}

// SetupSharedNetworkController registers the controller that reads each
// SharedNetwork's facts from Neutron.
func (m *Manager) SetupSharedNetworkController() error {
	if err := (&controllers.SharedNetworkReconciler{
		Client:           m.GetClient(),
		Namespace:        m.opts.Namespace,
		Resync:           m.opts.Resync,
		Recorder:         m.recorder(),
		WatchFilterValue: m.opts.WatchFilterValue,
		Clouds:           m.Credentials,
		AuditVMIngress:   m.opts.WorkloadGuardrails,
	}).SetupWithManager(m, m.opts.controllerOptions(m.opts.Concurrency.SharedNetworks)); err != nil {
		return fmt.Errorf("setting up the SharedNetwork controller: %w", err)
	}
	return nil
}

// SetupAttachmentController registers the attachment life cycle (share,
// nudge, rollout, detach, unshare).
func (m *Manager) SetupAttachmentController() error {
	// The key that seals the share records: made at start when missing
	// (leader only), read uncached.
	keys := &records.Keyring{Reader: m.GetAPIReader(), Writer: m.GetClient(), Namespace: m.opts.Namespace}
	if err := m.Add(keys); err != nil {
		return fmt.Errorf("setting up the record key: %w", err)
	}
	if err := (&controllers.AttachmentReconciler{
		Client:           m.GetClient(),
		Credentials:      m.Credentials,
		Checker:          m.Preflight,
		Recorder:         m.recorder(),
		Namespace:        m.opts.Namespace,
		Records:          &controllers.PolicyGuard{Reader: m.GetAPIReader()},
		Seals:            keys,
		WatchFilterValue: m.opts.WatchFilterValue,
	}).SetupWithManager(m, m.opts.controllerOptions(m.opts.Concurrency.Attachments)); err != nil {
		return fmt.Errorf("setting up the attachment controller: %w", err)
	}
	return nil
}

// SetupNamespaceScope registers the controller that keeps the credential
// webhook and the deletion hook to the namespaces that use a shared network.
func (m *Manager) SetupNamespaceScope() error {
	r := &controllers.NamespaceScope{Client: m.GetClient(), APIReader: m.GetAPIReader(),
		CredentialWebhookConfiguration: cmp.Or(m.opts.CredentialWebhookConfiguration, DefaultCredentialWebhookConfiguration),
		DeletionExtensionConfig:        cmp.Or(m.opts.DeletionExtensionConfig, DefaultDeletionExtensionConfig)}
	if err := r.SetupWithManager(m, m.opts.controllerOptions(1)); err != nil {
		return fmt.Errorf("setting up the namespace scope of the credential webhook and the deletion hook: %w", err)
	}
	return nil
}

// SetupWorkloadGuardrails registers exp/guardrails with CAPI's ClusterCache,
// through which it reaches the workload clusters.
func (m *Manager) SetupWorkloadGuardrails() error {
	clusterCache, err := clustercache.SetupWithManager(context.Background(), m, clustercache.Options{
		SecretClient:     m.GetAPIReader(),
		WatchFilterValue: m.opts.WatchFilterValue,
		Client: clustercache.ClientOptions{
			UserAgent: version.UserAgent(),
			Cache:     clustercache.ClientCacheOptions{DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}}},
		},
	}, controller.Options{})
	if err != nil {
		return fmt.Errorf("setting up the cluster cache: %w", err)
	}
	if err := (&guardrails.Reconciler{
		Client: m.GetClient(), ClusterCache: clusterCache, Credentials: m.Credentials,
		Recorder: m.recorder(), WatchFilterValue: m.opts.WatchFilterValue,
	}).SetupWithManager(m, m.opts.controllerOptions(m.opts.Concurrency.WorkloadGuardrails)); err != nil {
		return fmt.Errorf("setting up the workload guardrails: %w", err)
	}
	return nil
}

// recorder is the one event source of the extension.
func (m *Manager) recorder() record.EventRecorder {
	return m.GetEventRecorderFor("capo-sharednet")
}

// resyncOrDefault is the SharedNetwork controller's resync as it runs it:
// the facts a decision trusts are at most one resync (and a minute) old.
func resyncOrDefault(resync time.Duration) time.Duration {
	if resync > 0 {
		return resync
	}
	return controllers.DefaultResync
}

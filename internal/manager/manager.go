// Package manager wires the extension into one controller-runtime manager
// whose webhook server is CAPI's runtime extension server: hooks, the Cluster
// admission webhook and controllers share one process, one port and one
// certificate. main.go and the integration tests both start it from here.
package manager

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	runtimecatalog "sigs.k8s.io/cluster-api/exp/runtime/catalog"
	"sigs.k8s.io/cluster-api/exp/runtime/server"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/exp/guardrails"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/hooks"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/webhooks"
)

// Options configure the manager; main.go fills them from flags.
type Options struct {
	WebhookHost            string
	WebhookPort            int
	WebhookCertDir         string
	MetricsBindAddress     string
	HealthProbeBindAddress string
	LeaderElection         bool
	LeaderElectionID       string
	// Namespace holds the SharedNetwork credential Secrets; the manager
	// caches Secrets of this namespace only. install.Namespace when empty.
	Namespace string
	// Resync is how often SharedNetwork facts are read again from Neutron.
	Resync time.Duration
	// OpenStack tunes the OpenStack sessions (tests count requests with it).
	OpenStack openstack.Options
	// WithoutAttachmentController leaves the attachment life cycle out, for
	// tests that stand in for it to prove the hooks alone.
	WithoutAttachmentController bool
	// WorkloadGuardrails runs exp/guardrails (feature gate WorkloadGuardrails).
	WorkloadGuardrails bool
}

// NewScheme has every type the extension reads.
func NewScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme, infrav1alpha1.AddToScheme, sharednetv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return scheme
}

// New builds the manager with every hook, webhook and controller registered.
func New(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	scheme := NewScheme()
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return nil, err
	}
	srv, err := server.New(server.Options{
		Catalog: catalog,
		Host:    opts.WebhookHost,
		Port:    opts.WebhookPort,
		CertDir: opts.WebhookCertDir,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the runtime extension server: %w", err)
	}

	if opts.Namespace == "" {
		opts.Namespace = install.Namespace
	}
	// Credentials stay in the extension's namespace: never watch Secrets elsewhere.
	cacheOpts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Namespaces: map[string]cache.Config{opts.Namespace: {}}},
	}}
	leaderElectionID := opts.LeaderElectionID
	if leaderElectionID == "" {
		leaderElectionID = "capo-sharednet.sharednet.capo.io"
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		WebhookServer:          srv,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		LeaderElection:         opts.LeaderElection,
		LeaderElectionID:       leaderElectionID,
		Cache:                  cacheOpts,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}

	sessions := &openstack.Sessions{Options: opts.OpenStack}
	creds := &credentials.Source{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: opts.Namespace, Sessions: sessions}
	checker := &preflight.Checker{Reader: mgr.GetClient(), Cloud: creds}
	h := &hooks.Handlers{Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Client: mgr.GetClient(), Preflight: checker, Credentials: creds,
		Recorder: mgr.GetEventRecorderFor("capo-sharednet")}
	if err := h.Register(srv); err != nil {
		return nil, fmt.Errorf("registering hooks: %w", err)
	}
	// Registering through GetWebhookServer also adds the server to the
	// manager's runnables: controller-runtime starts it only then.
	mgr.GetWebhookServer().Register(webhooks.ClusterPath, webhooks.NewClusterWebhook(checker, scheme))
	mgr.GetWebhookServer().Register(webhooks.CredentialPath, webhooks.NewCredentialWebhook(mgr.GetClient(), creds))

	if err := (&controllers.SharedNetworkReconciler{
		Client:    mgr.GetClient(),
		Namespace: opts.Namespace,
		Resync:    opts.Resync,
		Recorder:  mgr.GetEventRecorderFor("capo-sharednet"),
		Connect: func(ctx context.Context, id, version string, cred openstack.Credential) (controllers.VMProjectCloud, error) {
			return sessions.Get(ctx, id, version, cred)
		},
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the SharedNetwork controller: %w", err)
	}

	if !opts.WithoutAttachmentController {
		if err := (&controllers.AttachmentReconciler{
			Client:      mgr.GetClient(),
			Credentials: creds,
			Recorder:    mgr.GetEventRecorderFor("capo-sharednet"),
		}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the attachment controller: %w", err)
		}
	}

	if opts.WorkloadGuardrails {
		clusterCache, err := clustercache.SetupWithManager(context.Background(), mgr, clustercache.Options{
			SecretClient: mgr.GetAPIReader(),
			Client: clustercache.ClientOptions{
				UserAgent: "capo-sharednet",
				Cache:     clustercache.ClientCacheOptions{DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}}},
			},
		}, controller.Options{})
		if err != nil {
			return nil, fmt.Errorf("setting up the cluster cache: %w", err)
		}
		if err := (&guardrails.Reconciler{
			Client: mgr.GetClient(), ClusterCache: clusterCache, Credentials: creds,
			Recorder: mgr.GetEventRecorderFor("capo-sharednet"),
		}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the workload guardrails: %w", err)
		}
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", srv.StartedChecker()); err != nil {
		return nil, err
	}
	return mgr, nil
}

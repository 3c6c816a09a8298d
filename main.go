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

// Command capo-sharednet is the manager of the capo-sharednet runtime
// extension: Runtime SDK hooks, the Cluster admission webhook and the
// controllers, in one process behind one TLS port.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/flags"

	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/internal/feature"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/internal/version"
	"github.com/capo-sharednet/capo-sharednet/internal/webhooks"
)

func main() {
	opts := manager.Options{}
	pflag.IntVar(&opts.WebhookPort, "webhook-port", 9443, "Port of the runtime extension and admission webhook server.")
	pflag.IntVar(&opts.DeletionHookPort, "deletion-hook-port", manager.DefaultDeletionHookPort, "Port of the runtime extension server of BeforeClusterDelete (its own ExtensionConfig, kept to the namespaces with attachments).")
	pflag.StringVar(&opts.WebhookHost, "webhook-host", "", "Address the webhook server listens on (all when empty).")
	pflag.StringVar(&opts.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Folder with tls.crt and tls.key of the webhook server.")
	// CAPI's manager flags (util/flags): --diagnostics-address (metrics over
	// HTTPS with authentication and authorization, pprof, the log level),
	// --insecure-diagnostics, --tls-min-version, --tls-cipher-suites.
	var managerOptions flags.ManagerOptions
	flags.AddManagerOptions(pflag.CommandLine, &managerOptions)
	pflag.StringVar(&opts.HealthProbeBindAddress, "health-addr", ":9440", "Address of /healthz and /readyz.")
	pflag.StringVar(&opts.PprofBindAddress, "profiler-address", "", "Address of pprof (for example localhost:6060); off when empty.")
	pflag.BoolVar(&opts.LeaderElection, "leader-elect", false, "Elect a leader so only one replica reconciles.")
	pflag.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a non-leader waits before it may take the lead.")
	pflag.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader retries renewing its lead before it gives it up.")
	pflag.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "How long the candidates wait between tries.")
	// The clusterctl contract's --namespace and CAPI's --watch-filter
	// (docs/admin-guide.md: several instances in one management cluster).
	pflag.StringVar(&opts.WatchNamespace, "namespace", "", "Namespace whose Clusters the extension reads and reconciles; every namespace when empty. Scope the ExtensionConfig and the Cluster webhook to the same namespace.")
	pflag.StringVar(&opts.WatchFilterValue, "watch-filter", "", fmt.Sprintf("Label value that the controllers watch: only Clusters and SharedNetworks labelled %s=<value> are reconciled; every one when empty.", clusterv1.WatchLabel))
	pflag.StringVar(&opts.Namespace, "credentials-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the SharedNetwork credential Secrets (the extension's own; default "+install.Namespace+").")
	pflag.DurationVar(&opts.Resync, "sharednetwork-resync", controllers.DefaultResync, "How often SharedNetwork facts are read again from Neutron when nothing changed.")
	// CAPI's controller and client flags.
	pflag.IntVar(&opts.Concurrency.Attachments, "sharednetworkattachment-concurrency", manager.DefaultConcurrency, "Number of Clusters whose nodegroups' attachments are reconciled at once.")
	pflag.IntVar(&opts.Concurrency.SharedNetworks, "sharednetwork-concurrency", manager.DefaultConcurrency, "Number of SharedNetworks whose facts are read at once.")
	pflag.IntVar(&opts.Concurrency.WorkloadGuardrails, "workloadguardrails-concurrency", manager.DefaultConcurrency, "Number of Clusters the workload guardrails check at once (WorkloadGuardrails feature).")
	pflag.DurationVar(&opts.ReconcileTimeout, "reconcile-timeout", manager.DefaultReconcileTimeout, "Deadline of one reconcile, every OpenStack call in it included; a slow cloud gives up and retries later.")
	pflag.StringVar(&opts.CredentialWebhookConfiguration, "credential-webhook-configuration", manager.DefaultCredentialWebhookConfiguration, "ValidatingWebhookConfiguration whose credential webhook the extension scopes to the namespaces where clusters use a shared network.")
	pflag.StringVar(&opts.DeletionExtensionConfig, "deletion-extension-config", manager.DefaultDeletionExtensionConfig, "ExtensionConfig of BeforeClusterDelete, which the extension scopes to the namespaces with attachments.")
	pflag.StringSliceVar(&opts.CAPIManagers, "capi-manager-user", []string{webhooks.DefaultCAPIManager}, "Users CAPI's managers run as: only they (and system:masters) may set CAPI's ok-to-delete annotation on a Cluster that uses a shared network.")
	pflag.DurationVar(&opts.SyncPeriod, "sync-period", 10*time.Minute, "How often the cache relists every object it watches.")
	kubeAPIQPS := pflag.Float32("kube-api-qps", 20, "Maximum queries per second from the manager to the Kubernetes API server.")
	kubeAPIBurst := pflag.Int("kube-api-burst", 30, "Maximum burst of queries from the manager to the Kubernetes API server.")
	feature.MutableGates.AddFlag(pflag.CommandLine)
	// Logging as CAPI's managers do it: --v for the level, --logging-format.
	logOptions := logs.NewOptions()
	logsv1.AddFlags(logOptions, pflag.CommandLine)
	showVersion := pflag.Bool("version", false, "Print the version and exit.")
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	pflag.Parse()
	if *showVersion {
		fmt.Println(version.Version)
		return
	}
	log := ctrl.Log.WithName("setup")
	if err := logsv1.ValidateAndApply(logOptions, nil); err != nil {
		log.Error(err, "invalid logging flags")
		os.Exit(1)
	}
	ctrl.SetLogger(klog.Background())
	// A memory limit on the manager's container becomes the Go runtime's
	// soft limit (GOMEMLIMIT, when set, wins): without one the collector
	// lets the heap grow to twice what is live, past the container's limit
	// at 2,000 Clusters (docs/performance.md). Without a container limit
	// nothing changes.
	fromContainer := func() (uint64, error) {
		limit, err := memlimit.FromCgroup()
		return manager.GoMemoryLimit(limit), err
	}
	if _, err := memlimit.Set(memlimit.WithProvider(fromContainer), memlimit.WithRatio(1), memlimit.WithLogger(slog.New(logr.ToSlogHandler(log)))); err != nil {
		log.Error(err, "the Go memory limit was not set from the container's; the manager runs without one")
	}
	tlsOpts, metrics, err := flags.GetManagerOptions(managerOptions)
	if err != nil {
		log.Error(err, "invalid TLS or diagnostics flags")
		os.Exit(1)
	}
	opts.TLSOpts, opts.Metrics = tlsOpts, metrics
	opts.WorkloadGuardrails = feature.Gates.Enabled(feature.WorkloadGuardrails)

	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = *kubeAPIQPS, *kubeAPIBurst
	mgr, err := manager.New(restConfig, opts)
	if err != nil {
		log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	log.Info("starting capo-sharednet", "version", version.Version, "webhookPort", opts.WebhookPort)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

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

// Package plane runs a local Cluster API management plane made of real
// programs, on one machine without containers:
//
//   - the management API server: kube-apiserver + etcd (built from source into
//     bin/k8s by hack/ensure-envtest-assets.sh), started through envtest;
//   - the managers of CAPI core, the kubeadm bootstrap provider (CABPK), the
//     kubeadm control plane provider (KCP, webhooks only) and CAPO, each built
//     with `go build` from the module versions in go.mod and run as its own
//     process, its admission and conversion webhooks served to the API server
//     (CAPI core with the ClusterTopology and RuntimeSDK feature gates);
//   - this repository's manager (`go build .`), registered through an
//     ExtensionConfig (config/default/extensionconfig.yaml) and its admission
//     webhook (config/webhook/manifests.yaml);
//   - the workload cluster's API server: a second kube-apiserver + etcd;
//   - kube-controller-manager beside each API server (bin/k8s, same
//     Kubernetes version): garbage collection and namespace deletion;
//   - per Cluster, the OpenStack cloud controller manager of
//     cloud-provider-openstack (ccm.go), configured as the templates configure
//     it: it initializes the Nodes and makes the Services' load balancers.
//
// CAPO reaches the OpenStack test bed (hack/openstack-testbed) through the
// clouds.yaml identityRef Secret of each cluster.
//
// Two parts are stand-ins, named as such in code, logs and object status:
// the control plane (test/standins.ControlPlane: KubeadmControlPlane status and the
// cluster's kubeconfig and CA Secrets) and the kubelets (nodeSimulator: a
// Ready Node per ACTIVE Nova server, registered for the cloud controller
// manager to initialize). Everything else is the real program.
package plane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/test/loopback"
	"github.com/capo-sharednet/capo-sharednet/test/providers"
	"github.com/capo-sharednet/capo-sharednet/test/standins"
)

// ExtensionConfigName is the name ClusterClasses use for the extension's
// handlers (<handler>.capo-sharednet).
const ExtensionConfigName = "capo-sharednet"

// DeletionExtensionConfigName registers BeforeClusterDelete; the extension
// keeps its namespaceSelector to the namespaces with attachments.
const DeletionExtensionConfigName = "capo-sharednet-deletion"

// ControlPlaneBoot is how long the control-plane stand-in takes to report a
// new cluster's control plane up once its infrastructure is provisioned: a
// real one boots a server first, and CAPI creates no worker Machine before
// (MachineSet preflight checks). Twenty seconds is far less than a real boot.
const ControlPlaneBoot = 20 * time.Second

// Options configure Start.
type Options struct {
	// Root is the repository root; found from the working directory when empty.
	Root string
	// Dir holds kubeconfigs, certificates, logs and etcd data. A new
	// temporary folder when empty (removed by Stop); a given Dir is kept.
	Dir string
	// Assets is the folder with kube-apiserver and etcd; KUBEBUILDER_ASSETS,
	// else <Root>/bin/k8s.
	Assets string
	// WaitForAssets, when set, is called before Assets is first used, so a
	// build of them can run alongside the managers' builds (make demo).
	WaitForAssets func() error
	// BinDir receives the managers built from source; <Root>/bin/plane.
	BinDir string
	// Resync is how often the extension reads SharedNetwork facts again.
	Resync time.Duration
	// Progress gets one line per step; io.Discard when nil.
	Progress io.Writer
	// ExtensionFeatureGates is the extension's --feature-gates (e.g.
	// "WorkloadGuardrails=true"); its defaults when empty.
	ExtensionFeatureGates string
}

// Plane is a running local management plane.
type Plane struct {
	// Dir holds everything the plane writes.
	Dir string
	// Kubeconfig is the management cluster's admin kubeconfig (a file in Dir).
	Kubeconfig string
	// WorkloadKubeconfig is the workload cluster's admin kubeconfig.
	WorkloadKubeconfig string
	// Config and Client reach the management API server as admin.
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// Workload and WorkloadClient reach the workload API server.
	Workload       *rest.Config
	WorkloadClient client.Client
	// WorkloadPort is the workload API server's port on 127.0.0.1.
	WorkloadPort int
	// ExtensionURL is where CAPI calls the extension's topology hooks.
	ExtensionURL string
	// DeletionHookURL is where CAPI calls BeforeClusterDelete (its own
	// server and ExtensionConfig, DeletionExtensionConfigName).
	DeletionHookURL string
	// ExtensionMetricsURL is the extension's /metrics (plain HTTP on
	// 127.0.0.1: --insecure-diagnostics).
	ExtensionMetricsURL string

	opts      Options
	ownDir    bool
	mgmt      *envtest.Environment
	workload  *envtest.Environment
	managers  []*process
	hooks     []*envtest.WebhookInstallOptions
	cancel    context.CancelFunc
	standInsD chan error
}

// State is what a plane writes to <Dir>/plane.json for other programs
// (the demo's commands, kubectl users).
type State struct {
	Kubeconfig         string `json:"kubeconfig"`
	WorkloadKubeconfig string `json:"workloadKubeconfig"`
	WorkloadPort       int    `json:"workloadPort"`
	ExtensionURL       string `json:"extensionURL"`
	// DeletionHookURL is where CAPI calls BeforeClusterDelete.
	DeletionHookURL string `json:"deletionHookURL,omitempty"`
	// ExtensionMetricsURL is the extension's /metrics (plain HTTP).
	ExtensionMetricsURL string         `json:"extensionMetricsURL,omitempty"`
	Logs                string         `json:"logs"`
	PIDs                map[string]int `json:"pids"`
	Started             time.Time      `json:"started"`
}

// Start builds what is missing and starts the plane. ctx bounds the start-up;
// the plane runs until Stop.
func Start(ctx context.Context, opts Options) (_ *Plane, retErr error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	step := func(format string, args ...any) { fmt.Fprintf(opts.Progress, format+"\n", args...) }
	var err error
	if opts.Root == "" {
		if opts.Root, err = providers.RepoRoot(); err != nil {
			return nil, err
		}
	}
	if opts.Assets == "" {
		opts.Assets = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if opts.Assets == "" {
		opts.Assets = filepath.Join(opts.Root, "bin", "k8s")
	}
	if opts.BinDir == "" {
		opts.BinDir = filepath.Join(opts.Root, "bin", "plane")
	}
	if opts.Resync == 0 {
		opts.Resync = 10 * time.Second
	}
	p := &Plane{opts: opts, Scheme: providers.NewScheme()}
	if opts.Dir == "" {
		if p.Dir, err = os.MkdirTemp("", "capo-sharednet-plane-"); err != nil {
			return nil, err
		}
		p.ownDir = true
	} else {
		p.Dir = opts.Dir
		if err := os.MkdirAll(p.Dir, 0o755); err != nil {
			return nil, err
		}
	}
	defer func() {
		if retErr != nil {
			_ = p.Stop()
		}
	}()
	logs := p.Logs()
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	setLoggers(filepath.Join(logs, "stand-ins.log"))

	// The managers, built from the module versions of go.mod.
	capi, cabpk, kcp, capo := &provider{Provider: providers.CAPI}, &provider{Provider: providers.CABPK}, &provider{Provider: providers.KCP}, &provider{Provider: providers.CAPO}
	orc := &provider{Provider: providers.ORC}
	managers := []*provider{capi, cabpk, kcp, capo}
	if err := resolveModules(opts.Root, append(managers, orc)); err != nil {
		return nil, err
	}
	binaries := map[string]string{}
	for _, pr := range managers {
		if binaries[pr.Name], err = ensureBinary(opts.Root, opts.BinDir, pr, opts.Progress); err != nil {
			return nil, err
		}
	}
	step("building the extension (go build .)")
	if binaries["capo-sharednet"], err = buildExtension(opts.Root, opts.BinDir); err != nil {
		return nil, err
	}
	if opts.WaitForAssets != nil {
		step("waiting for kube-apiserver, kube-controller-manager, etcd and the cloud controller manager (built alongside)")
		if err := opts.WaitForAssets(); err != nil {
			return nil, err
		}
	}
	kcm := filepath.Join(opts.Assets, "kube-controller-manager")
	if _, err := os.Stat(kcm); err != nil {
		return nil, fmt.Errorf("kube-controller-manager not found in %s (run hack/ensure-envtest-assets.sh): %w", opts.Assets, err)
	}
	if binaries[ccmBinary], err = findCCM(opts.Assets); err != nil {
		return nil, err
	}

	// Manifests, each provider with its own webhook serving cert and port.
	var crds []*apiextensionsv1.CustomResourceDefinition
	serving := map[string]*envtest.WebhookInstallOptions{}
	for _, pr := range managers {
		l, err := pr.load()
		if err != nil {
			return nil, err
		}
		wio := &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1", MutatingWebhooks: l.Mutating, ValidatingWebhooks: l.Validating}
		if err := wio.PrepWithoutInstalling(); err != nil {
			return nil, err
		}
		pointConversion(l, "https://"+addr(wio.LocalServingPort), wio.LocalServingCAData)
		crds = append(crds, l.CRDs...)
		serving[pr.Name] = wio
	}
	orcCRDs, err := orc.load()
	if err != nil {
		return nil, err
	}
	crds = append(crds, orcCRDs.CRDs...)
	ours, err := p.extensionManifests()
	if err != nil {
		return nil, err
	}
	crds = append(crds, ours.crds...)
	serving["capo-sharednet"] = ours.serving
	p.ExtensionURL = "https://" + addr(ours.serving.LocalServingPort)

	// The two API servers.
	assets, err := wrapAssets(opts.Assets, filepath.Join(p.Dir, "assets"))
	if err != nil {
		return nil, err
	}
	step("starting the management kube-apiserver + etcd (%d CRDs)", len(crds))
	p.mgmt = &envtest.Environment{BinaryAssetsDirectory: assets, CRDs: crds}
	if err := apiServerLog(p.mgmt, filepath.Join(logs, "kube-apiserver-management.log")); err != nil {
		return nil, err
	}
	if p.Config, err = p.mgmt.Start(); err != nil {
		return nil, fmt.Errorf("starting the management API server: %w", err)
	}
	if p.Client, err = client.New(p.Config, client.Options{Scheme: p.Scheme}); err != nil {
		return nil, err
	}
	p.Kubeconfig = filepath.Join(p.Dir, "management.kubeconfig")
	if err := os.WriteFile(p.Kubeconfig, p.mgmt.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	step("starting the workload cluster's kube-apiserver + etcd")
	p.workload = &envtest.Environment{BinaryAssetsDirectory: assets}
	if err := apiServerLog(p.workload, filepath.Join(logs, "kube-apiserver-workload.log")); err != nil {
		return nil, err
	}
	if p.Workload, err = p.workload.Start(); err != nil {
		return nil, fmt.Errorf("starting the workload API server: %w", err)
	}
	if p.WorkloadClient, err = client.New(p.Workload, client.Options{Scheme: p.Scheme}); err != nil {
		return nil, err
	}
	p.WorkloadKubeconfig = filepath.Join(p.Dir, "workload.kubeconfig")
	if err := os.WriteFile(p.WorkloadKubeconfig, p.workload.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	u, err := url.Parse(p.Workload.Host)
	if err != nil {
		return nil, err
	}
	if p.WorkloadPort, err = strconv.Atoi(u.Port()); err != nil {
		return nil, fmt.Errorf("workload API server %s: %w", p.Workload.Host, err)
	}

	// kube-controller-manager in both planes, as in every real cluster:
	// garbage collection of owner references, namespace deletion.
	for _, k := range []struct{ name, kubeconfig string }{{"management", p.Kubeconfig}, {"workload", p.WorkloadKubeconfig}} {
		pr, err := p.controllerManager(kcm, k.name, k.kubeconfig)
		if err != nil {
			return nil, err
		}
		p.managers = append(p.managers, pr)
	}

	// Admission webhooks, then the managers that serve them.
	for _, name := range []string{"capi", "cabpk", "kcp", "capo", "capo-sharednet"} {
		if err := serving[name].Install(p.Config); err != nil {
			return nil, fmt.Errorf("installing the %s webhooks: %w", name, err)
		}
		p.hooks = append(p.hooks, serving[name])
	}
	if err := p.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: install.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	common := func(name string, wio *envtest.WebhookInstallOptions) (*process, error) {
		health, err := loopback.FreePort()
		if err != nil {
			return nil, err
		}
		return &process{
			name: name, path: binaries[name], log: filepath.Join(logs, name+".log"),
			readyz: "http://" + addr(health) + "/readyz",
			args: []string{
				"--kubeconfig=" + p.Kubeconfig, "--leader-elect=false",
				"--webhook-port=" + strconv.Itoa(wio.LocalServingPort), "--webhook-cert-dir=" + wio.LocalServingCertDir,
				"--health-addr=" + addr(health), "--diagnostics-address=127.0.0.1:0", "--insecure-diagnostics=true",
			},
		}, nil
	}
	for _, name := range []string{"capi", "cabpk", "kcp", "capo"} {
		pr, err := common(name, serving[name])
		if err != nil {
			return nil, err
		}
		switch name {
		case "capi":
			pr.args = append(pr.args, "--feature-gates=MachinePool=true,ClusterTopology=true,RuntimeSDK=true")
		case "cabpk":
			// Its template webhooks accept ClusterClass templates only with the gate on.
			pr.args = append(pr.args, "--feature-gates=ClusterTopology=true")
		case "kcp":
			// Webhooks only: the control plane is a stand-in (see standins.ControlPlane).
			pr.args = append(pr.args, "--feature-gates=ClusterTopology=true", "--watch-filter=kcp-is-a-stand-in-in-the-local-plane")
		}
		p.managers = append(p.managers, pr)
	}
	health, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	diagnostics, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	p.ExtensionMetricsURL = "http://" + addr(diagnostics) + "/metrics"
	deletionHook, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	p.DeletionHookURL = "https://" + addr(deletionHook)
	extArgs := []string{
		"--kubeconfig=" + p.Kubeconfig, "--leader-elect=false",
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(ours.serving.LocalServingPort),
		"--webhook-cert-dir=" + ours.serving.LocalServingCertDir, "--deletion-hook-port=" + strconv.Itoa(deletionHook),
		"--diagnostics-address=" + addr(diagnostics), "--insecure-diagnostics=true", "--health-addr=" + addr(health),
		"--credentials-namespace=" + install.Namespace, "--sharednetwork-resync=" + opts.Resync.String(),
		// The webhook configurations carry the plane's tag (extensionManifests).
		"--credential-webhook-configuration=" + CredentialWebhookConfiguration,
	}
	if opts.ExtensionFeatureGates != "" {
		extArgs = append(extArgs, "--feature-gates="+opts.ExtensionFeatureGates)
	}
	p.managers = append(p.managers, &process{
		name: "capo-sharednet", path: binaries["capo-sharednet"], log: filepath.Join(logs, "capo-sharednet.log"),
		readyz: "http://" + addr(health) + "/readyz",
		env:    []string{"KUBECONFIG=" + p.Kubeconfig},
		args:   extArgs,
	})
	step("starting the managers: %s", strings.Join(names(p.managers), ", "))
	for _, m := range p.managers {
		if err := m.start(); err != nil {
			return nil, err
		}
	}
	for _, m := range p.managers {
		if err := m.waitReady(ctx, 2*time.Minute); err != nil {
			return nil, err
		}
	}

	step("registering the extension (ExtensionConfigs %s -> %s, %s -> %s) and its admission policy",
		ExtensionConfigName, p.ExtensionURL, DeletionExtensionConfigName, p.DeletionHookURL)
	if err := p.registerExtension(ctx, ours.serving.LocalServingCAData); err != nil {
		return nil, err
	}
	// As config/default ships it: only the extension writes attachments,
	// and the detach trusts their records only while it is in place.
	policy, binding, err := providers.AttachmentPolicy(p.opts.Root)
	if err != nil {
		return nil, err
	}
	for _, o := range []client.Object{policy, binding} {
		if err := p.Client.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("config/policy: %w", err)
		}
	}
	step("starting the stand-ins: control plane, node simulator; a cloud controller manager per cluster")
	if err := p.startStandIns(ctx, binaries[ccmBinary]); err != nil {
		return nil, err
	}
	return p, p.writeState()
}

func names(ps []*process) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.name)
	}
	return out
}

func apiServerLog(env *envtest.Environment, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	env.ControlPlane.GetAPIServer().Out = f
	env.ControlPlane.GetAPIServer().Err = f
	return nil
}

// setLoggers sends the in-process stand-ins' logs to a file.
func setLoggers(path string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	log := zap.New(zap.WriteTo(f))
	ctrl.SetLogger(log)
	klog.SetLogger(log)
}

// webhookTag suffixes the names of the extension's webhook configurations
// in the plane; CredentialWebhookConfiguration is the validating one's.
const (
	webhookTag                     = "capo-sharednet"
	CredentialWebhookConfiguration = "validating-webhook-configuration-" + webhookTag
)

type extension struct {
	crds    []*apiextensionsv1.CustomResourceDefinition
	serving *envtest.WebhookInstallOptions
}

// extensionManifests reads this repository's CRDs and admission webhook, as
// config/ ships them.
func (p *Plane) extensionManifests() (*extension, error) {
	config := filepath.Join(p.opts.Root, "config")
	files, err := filepath.Glob(filepath.Join(config, "crd", "bases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := &extension{}
	for _, f := range files {
		crds, err := providers.ReadCRDs(f)
		if err != nil {
			return nil, err
		}
		out.crds = append(out.crds, crds...)
	}
	mutating, validating, err := providers.WebhookConfigurations(filepath.Join(config, "webhook", "manifests.yaml"), webhookTag)
	if err != nil {
		return nil, err
	}
	out.serving = &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1", MutatingWebhooks: mutating, ValidatingWebhooks: validating}
	return out, out.serving.PrepWithoutInstalling()
}

// registerExtension creates config/default/extensionconfig.yaml's
// ExtensionConfigs pointed at the extension's URLs (there is no Service on
// this machine), the deletion one with its shipped namespaceSelector (the
// extension narrows it), and waits until CAPI has discovered their handlers.
func (p *Plane) registerExtension(ctx context.Context, caBundle []byte) error {
	f, err := os.Open(filepath.Join(p.opts.Root, "config", "default", "extensionconfig.yaml"))
	if err != nil {
		return err
	}
	defer f.Close()
	urls := map[string]string{ExtensionConfigName: p.ExtensionURL, DeletionExtensionConfigName: p.DeletionHookURL}
	decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		ec := &runtimev1.ExtensionConfig{}
		if err := decoder.Decode(ec); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("config/default/extensionconfig.yaml: %w", err)
		}
		url, ok := urls[ec.Name]
		if !ok {
			return fmt.Errorf("config/default/extensionconfig.yaml: ExtensionConfig %q is not one the plane knows (%s, %s)", ec.Name, ExtensionConfigName, DeletionExtensionConfigName)
		}
		delete(urls, ec.Name)
		ec.Annotations = nil // the CA comes from caBundle, not from cert-manager
		ec.Spec.ClientConfig = runtimev1.ClientConfig{URL: url, CABundle: caBundle}
		if err := p.Client.Create(ctx, ec); err != nil {
			return err
		}
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := p.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
				return false, err
			}
			return len(ec.Status.Handlers) > 0, nil
		})
		if err != nil {
			return fmt.Errorf("CAPI did not discover the handlers of ExtensionConfig %s (conditions %+v): %w", ec.Name, ec.Status.Conditions, err)
		}
	}
	if len(urls) > 0 {
		return fmt.Errorf("config/default/extensionconfig.yaml lacks ExtensionConfigs %v", slices.Sorted(maps.Keys(urls)))
	}
	return nil
}

// extension is the extension's process.
func (p *Plane) extension() (*process, error) {
	for _, m := range p.managers {
		if m.name == "capo-sharednet" {
			return m, nil
		}
	}
	return nil, errors.New("the extension does not run in this process's plane (plane.Connect)")
}

// StopExtension ends the extension's process, both servers with it: an
// outage as CAPI and the API server see it.
func (p *Plane) StopExtension() error {
	m, err := p.extension()
	if err != nil {
		return err
	}
	return m.stop()
}

// KillExtension kills the extension with SIGKILL: no deferred call, no
// graceful shutdown, as in a node failure or an OOM kill.
func (p *Plane) KillExtension() error {
	m, err := p.extension()
	if err != nil {
		return err
	}
	return m.kill()
}

// StartExtension starts the extension again with the same flags and waits
// until it serves (readyz).
func (p *Plane) StartExtension(ctx context.Context) error {
	m, err := p.extension()
	if err != nil {
		return err
	}
	if err := m.start(); err != nil {
		return err
	}
	return m.waitReady(ctx, 2*time.Minute)
}

// controllerManager is kube-controller-manager against one of the plane's
// API servers, built from the same Kubernetes version as kube-apiserver.
func (p *Plane) controllerManager(binary, plane, kubeconfig string) (*process, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	name := "kube-controller-manager-" + plane
	return &process{
		name: name, path: binary, log: filepath.Join(p.Logs(), name+".log"),
		readyz: "https://" + addr(port) + "/healthz",
		args: []string{
			"--kubeconfig=" + kubeconfig, "--leader-elect=false",
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port), "--cert-dir=" + filepath.Join(p.Dir, name),
		},
	}, nil
}

func (p *Plane) startStandIns(ctx context.Context, ccmBinary string) error {
	mgr, err := ctrl.NewManager(p.Config, ctrl.Options{
		Scheme:                 p.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if err := (&standins.ControlPlane{Client: mgr.GetClient(), Workload: p.Workload, Boot: ControlPlaneBoot}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&nodeSimulator{mgmt: p.Client, workload: p.WorkloadClient, every: 2 * time.Second}); err != nil {
		return err
	}
	if err := mgr.Add(&cloudControllerManagers{
		mgmt: p.Client, root: p.opts.Root, dir: filepath.Join(p.Dir, "ccm"), logs: p.Logs(), binary: ccmBinary,
		workload: p.WorkloadKubeconfig, every: 2 * time.Second, running: map[client.ObjectKey]*process{},
	}); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	p.standInsD = make(chan error, 1)
	go func() { p.standInsD <- mgr.Start(runCtx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("the stand-ins' caches did not sync")
	}
	return nil
}

func (p *Plane) writeState() error {
	s := State{
		Kubeconfig: p.Kubeconfig, WorkloadKubeconfig: p.WorkloadKubeconfig, WorkloadPort: p.WorkloadPort,
		ExtensionURL: p.ExtensionURL, DeletionHookURL: p.DeletionHookURL, ExtensionMetricsURL: p.ExtensionMetricsURL, Logs: p.Logs(), PIDs: map[string]int{"plane": os.Getpid()}, Started: time.Now(),
	}
	for _, m := range p.managers {
		s.PIDs[m.name] = m.pid()
	}
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.Dir, "plane.json"), raw, 0o644)
}

// Logs is the folder with every component's log.
func (p *Plane) Logs() string { return filepath.Join(p.Dir, "logs") }

// Stop stops the stand-ins, the managers (newest first) and both API
// servers. It removes Dir only when Start created it.
func (p *Plane) Stop() error {
	var errs []error
	if p.cancel != nil {
		p.cancel()
		if err := <-p.standInsD; err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
		p.cancel = nil
	}
	for i := len(p.managers) - 1; i >= 0; i-- {
		errs = append(errs, p.managers[i].stop())
	}
	p.managers = nil
	for _, env := range []*envtest.Environment{p.workload, p.mgmt} {
		if env != nil && env.ControlPlane.APIServer != nil {
			errs = append(errs, env.Stop())
		}
	}
	p.workload, p.mgmt = nil, nil
	for _, h := range p.hooks {
		errs = append(errs, h.Cleanup())
	}
	p.hooks = nil
	if p.ownDir && p.Dir != "" {
		errs = append(errs, os.RemoveAll(p.Dir))
	}
	return errors.Join(errs...)
}

// Connect is a client-only view of a plane another process runs (from its
// plane.json): clients and the helpers of this package, no Stop.
func Connect(root string, s State) (*Plane, error) {
	p := &Plane{opts: Options{Root: root}, Scheme: providers.NewScheme(), Kubeconfig: s.Kubeconfig, WorkloadKubeconfig: s.WorkloadKubeconfig,
		WorkloadPort: s.WorkloadPort, ExtensionURL: s.ExtensionURL, DeletionHookURL: s.DeletionHookURL, ExtensionMetricsURL: s.ExtensionMetricsURL, Dir: filepath.Dir(s.Logs)}
	var err error
	if p.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig); err != nil {
		return nil, err
	}
	if p.Workload, err = clientcmd.BuildConfigFromFlags("", s.WorkloadKubeconfig); err != nil {
		return nil, err
	}
	if p.Client, err = client.New(p.Config, client.Options{Scheme: p.Scheme}); err != nil {
		return nil, err
	}
	if p.WorkloadClient, err = client.New(p.Workload, client.Options{Scheme: p.Scheme}); err != nil {
		return nil, err
	}
	return p, nil
}

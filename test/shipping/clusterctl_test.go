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
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/hooks"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	sharednetmanager "github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

const (
	providerName  = "capo-sharednet"
	providerLabel = "runtime-extension-" + providerName
	image         = "ghcr.io/capo-sharednet/capo-sharednet"
	// fieldOwner is who applies in these tests, as `kubectl apply --server-side` would.
	fieldOwner = client.FieldOwner("capo-sharednet-shipping-test")
)

// clusterctlRepository lays the release assets out as a clusterctl local
// provider repository ({basepath}/{provider-label}/{version}/{components})
// and writes a clusterctl configuration that declares the provider there.
// It returns the configuration's path.
func clusterctlRepository(t *testing.T, home string) string {
	t.Helper()
	rel := release(t)
	dir := filepath.Join(home, "repository", providerLabel, releaseVersion)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(rel)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(rel, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(home, "clusterctl.yaml")
	content := fmt.Sprintf(`providers:
- name: %s
  type: RuntimeExtensionProvider
  url: file://%s
`, providerName, filepath.Join(dir, "runtime-extension-components.yaml"))
	if err := os.WriteFile(config, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// TestClusterctl installs the extension the way users do and creates a
// cluster from templates/, each step through clusterctl itself and a real API
// server: the release assets as a clusterctl provider repository, `clusterctl
// generate provider --runtime-extension`, a server-side dry run of every
// object, then the extension running with the rendered ExtensionConfig (CA
// injected from the Secret its annotation names) and admission webhook, the
// ClusterClass of templates/ reconciled with the variable the extension
// serves, and `clusterctl generate cluster --from` with every variable set,
// dry-run and created.
func TestClusterctl(t *testing.T) {
	testenv.SkipIfShort(t, "builds clusterctl and starts a kube-apiserver")
	bin := clusterctl(t)
	home := t.TempDir()
	config := clusterctlRepository(t, home)
	e := environment(t)
	ctx := context.Background()

	var components []unstructured.Unstructured
	t.Run("generate provider renders every object with the provider's labels", func(t *testing.T) {
		describe := string(run(t, home, clusterctlEnv(t, home), bin, "generate", "provider", "--config", config,
			"--runtime-extension", providerName+":"+releaseVersion, "--describe"))
		for _, want := range []string{
			"RuntimeExtensionProvider", "capo-sharednet-system",
			image + ":" + releaseVersion,
			"CAPO_SHAREDNET_LOG_LEVEL", "CAPO_SHAREDNET_DIAGNOSTICS_ADDRESS", "CAPO_SHAREDNET_INSECURE_DIAGNOSTICS",
		} {
			if !strings.Contains(describe, want) {
				t.Errorf("clusterctl generate provider --describe does not mention %q:\n%s", want, describe)
			}
		}
		docs, err := os.ReadFile(path("docs", "templates.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range describedVariables(describe) {
			if !strings.Contains(string(docs), "`"+v+"`") {
				t.Errorf("components placeholder %s is not documented in docs/templates.md", v)
			}
		}

		out := run(t, home, clusterctlEnv(t, home), bin, "generate", "provider", "--config", config,
			"--runtime-extension", providerName+":"+releaseVersion)
		if strings.Contains(string(out), "${") {
			t.Errorf("rendered components still hold a placeholder:\n%s", out)
		}
		objs, err := utilyaml.ToUnstructured(out)
		if err != nil {
			t.Fatal(err)
		}
		components = objs
		checkComponents(t, objs)
	})
	if components == nil {
		t.FailNow()
	}

	t.Run("every object passes a server-side dry run", func(t *testing.T) {
		c, warned := clientWithWarnings(t, e)
		// Namespaced objects can only be dry-run in a namespace that exists.
		for i := range components {
			if components[i].GetKind() == "Namespace" {
				apply(t, ctx, c, components[i].DeepCopy())
			}
		}
		for i := range components {
			obj := components[i].DeepCopy()
			apply(t, ctx, c, obj, client.DryRunAll)
			if obj.GetKind() == "ExtensionConfig" && obj.GetNamespace() != "" {
				t.Errorf("the API server kept namespace %q on the cluster-scoped ExtensionConfig", obj.GetNamespace())
			}
		}
		if w := warned.take(); len(w) > 0 {
			t.Errorf("the API server warned about the components: %q", w)
		}
	})

	t.Run("the rendered ExtensionConfig gets its CA from the Secret it names and CAPI discovers every handler", func(t *testing.T) {
		installExtension(t, ctx, e, components)
	})

	t.Run("generate cluster --from the template: every variable set, dry-run and created", func(t *testing.T) {
		generateCluster(t, ctx, e, bin, home, config)
	})
}

// describedVariables are the names under "Variables:" in `clusterctl generate provider --describe`.
func describedVariables(describe string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(describe, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "Variables:"):
			in = true
		case in && strings.HasPrefix(trimmed, "- "):
			out = append(out, strings.Fields(strings.TrimPrefix(trimmed, "- "))[0])
		case in && trimmed != "":
			in = false
		}
	}
	return out
}

// checkComponents checks what clusterctl move/delete, cert-manager and CAPI rely on.
func checkComponents(t *testing.T, objs []unstructured.Unstructured) {
	t.Helper()
	byKind := map[string][]unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
		labels := o.GetLabels()
		if labels[clusterv1.ProviderNameLabel] != providerLabel {
			t.Errorf("%s %s: label %s=%q, want %q", o.GetKind(), o.GetName(), clusterv1.ProviderNameLabel, labels[clusterv1.ProviderNameLabel], providerLabel)
		}
		if _, ok := labels["clusterctl.cluster.x-k8s.io"]; !ok {
			t.Errorf("%s %s: no clusterctl.cluster.x-k8s.io label", o.GetKind(), o.GetName())
		}
	}
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"Role", "RoleBinding", "Service", "Deployment", "PodDisruptionBudget", "Issuer", "Certificate", "ValidatingWebhookConfiguration", "ExtensionConfig",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if len(byKind[kind]) == 0 {
			t.Errorf("no %s in the components", kind)
		}
	}
	if t.Failed() {
		return
	}
	ns := byKind["Namespace"][0].GetName()
	for _, crd := range byKind["CustomResourceDefinition"] {
		if crd.GetLabels()["cluster.x-k8s.io/v1beta2"] == "" {
			t.Errorf("CRD %s has no contract label cluster.x-k8s.io/v1beta2", crd.GetName())
		}
	}

	var svc corev1.Service
	var deploy appsv1.Deployment
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	convert(t, byKind["Service"][0], &svc)
	convert(t, byKind["Deployment"][0], &deploy)
	convert(t, byKind["ValidatingWebhookConfiguration"][0], &vwc)
	cert := byKind["Certificate"][0]
	certSecret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")

	// Available through a drain: two replicas, and a budget that keeps one.
	var pdb policyv1.PodDisruptionBudget
	convert(t, byKind["PodDisruptionBudget"][0], &pdb)
	if deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas %v, want 2 (hooks and webhooks answered while one replica is away)", deploy.Spec.Replicas)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || !reflect.DeepEqual(pdb.Spec.Selector, deploy.Spec.Selector) {
		t.Errorf("PodDisruptionBudget %s: minAvailable %v, selector %v; want 1 of the Deployment's pods (%v)", pdb.Name, pdb.Spec.MinAvailable, pdb.Spec.Selector, deploy.Spec.Selector)
	}

	// The ExtensionConfigs: handler names in the ClusterClass are
	// <handler>.capo-sharednet; the deletion hook's is the one the manager
	// scopes (--deletion-extension-config), and selects no namespace until it
	// has.
	ecs := map[string]runtimev1.ExtensionConfig{}
	for _, o := range byKind["ExtensionConfig"] {
		var ec runtimev1.ExtensionConfig
		convert(t, o, &ec)
		ecs[ec.Name] = ec
	}
	if _, ok := ecs[providerName]; !ok || len(ecs) != 2 {
		t.Errorf("ExtensionConfigs %v; templates reference handlers as <handler>.%s", slices.Collect(maps.Keys(ecs)), providerName)
	}
	deletion, ok := ecs[sharednetmanager.DefaultDeletionExtensionConfig]
	if !ok {
		t.Errorf("no ExtensionConfig %s (--deletion-extension-config's default)", sharednetmanager.DefaultDeletionExtensionConfig)
	} else if sel, err := metav1.LabelSelectorAsSelector(deletion.Spec.NamespaceSelector); err != nil || deletion.Spec.NamespaceSelector == nil ||
		sel.Matches(labels.Set{corev1.LabelMetadataName: "default"}) {
		t.Errorf("ExtensionConfig %s namespaceSelector %v selects namespaces before the extension has scoped it (%v)", deletion.Name, deletion.Spec.NamespaceSelector, err)
	}
	containerPorts := map[int32]string{} // Service port -> the container port's name it targets
	for _, p := range svc.Spec.Ports {
		containerPorts[p.Port] = p.TargetPort.String()
	}
	for _, ec := range ecs {
		if s := ec.Spec.ClientConfig.Service; s.Name != svc.Name || s.Namespace != ns || s.Port == nil || containerPorts[*s.Port] == "" {
			t.Errorf("ExtensionConfig %s service %+v does not point at a port of Service %s/%s", ec.Name, s, ns, svc.Name)
		}
		if got, want := ec.Annotations[runtimev1.InjectCAFromSecretAnnotation], ns+"/"+certSecret; got != want {
			t.Errorf("ExtensionConfig %s %s=%q, want %q (the Certificate's Secret)", ec.Name, runtimev1.InjectCAFromSecretAnnotation, got, want)
		}
	}
	// cert-manager's CA injector: <namespace>/<Certificate>.
	if got, want := vwc.Annotations["cert-manager.io/inject-ca-from"], ns+"/"+cert.GetName(); got != want {
		t.Errorf("ValidatingWebhookConfiguration cert-manager.io/inject-ca-from=%q, want %q", got, want)
	}
	for _, w := range vwc.Webhooks {
		if s := w.ClientConfig.Service; s == nil || s.Name != svc.Name || s.Namespace != ns {
			t.Errorf("webhook %s does not point at Service %s/%s", w.Name, ns, svc.Name)
		}
	}
	for _, want := range []string{svc.Name + "." + ns + ".svc", svc.Name + "." + ns + ".svc.cluster.local"} {
		if !slices.Contains(dnsNames, want) {
			t.Errorf("Certificate dnsNames %q lack %q", dnsNames, want)
		}
	}

	// The manager serves the hooks and the webhook on the Service's target port with the Certificate's Secret.
	pod := deploy.Spec.Template.Spec
	var mgr *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == "manager" {
			mgr = &pod.Containers[i]
		}
	}
	if mgr == nil {
		t.Fatal("no container named manager in the Deployment")
	}
	if mgr.Image != image+":"+releaseVersion {
		t.Errorf("manager image %s, want %s:%s", mgr.Image, image, releaseVersion)
	}
	// Each ExtensionConfig's Service port reaches the server its flag sets.
	flags := map[string]string{providerName: "--webhook-port", sharednetmanager.DefaultDeletionExtensionConfig: "--deletion-hook-port"}
	for name, ec := range ecs {
		target := containerPorts[ptr.Deref(ec.Spec.ClientConfig.Service.Port, 0)]
		var port int32
		for _, p := range mgr.Ports {
			if p.Name == target {
				port = p.ContainerPort
			}
		}
		if port == 0 || !slices.Contains(mgr.Args, fmt.Sprintf("%s=%d", flags[name], port)) {
			t.Errorf("ExtensionConfig %s: Service targetPort %q is container port %d, but the manager's args are %q (want %s=%d)", name, target, port, mgr.Args, flags[name], port)
		}
	}
	certMounted := false
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == certSecret {
			for _, m := range mgr.VolumeMounts {
				certMounted = certMounted || (m.Name == v.Name && slices.Contains(mgr.Args, "--webhook-cert-dir="+m.MountPath))
			}
		}
	}
	if !certMounted {
		t.Errorf("the Certificate's Secret %s is not mounted where --webhook-cert-dir points", certSecret)
	}
	sc := mgr.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("manager securityContext %+v: want non-root, read-only root filesystem, no privilege escalation", sc)
	}
	if mgr.Resources.Requests.Cpu().IsZero() || mgr.Resources.Requests.Memory().IsZero() {
		t.Errorf("manager has no CPU and memory requests: %+v", mgr.Resources)
	}
	if pod.ServiceAccountName == "" {
		t.Error("the Deployment runs as the default ServiceAccount")
	}
	// The attachment policy lets the manager write attachments by its user
	// name: a name prefix or namespace changed in config/base must change it.
	manager := "'system:serviceaccount:" + ns + ":" + pod.ServiceAccountName + "'"
	for _, p := range byKind["ValidatingAdmissionPolicy"] {
		vars, _, _ := unstructured.NestedSlice(p.Object, "spec", "variables")
		found := false
		for _, v := range vars {
			found = found || strings.Contains(fmt.Sprint(v.(map[string]any)["expression"]), manager)
		}
		if !found {
			t.Errorf("ValidatingAdmissionPolicy %s does not let the manager's ServiceAccount write (%s not in %v)", p.GetName(), manager, vars)
		}
	}
	// The manager scopes the credential webhook of the configuration its
	// flag names by default.
	if names := namesOf(byKind["ValidatingWebhookConfiguration"]); !slices.Contains(names, sharednetmanager.DefaultCredentialWebhookConfiguration) {
		t.Errorf("the components have no ValidatingWebhookConfiguration %s, which --credential-webhook-configuration names by default (found %v)", sharednetmanager.DefaultCredentialWebhookConfiguration, names)
	}
	// The detach trusts an attachment's record only while the policy and
	// its binding the manager looks for (by name) are installed.
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if names := namesOf(byKind[kind]); !slices.Contains(names, install.AttachmentsPolicy) {
			t.Errorf("the components have no %s %s, which the manager checks before it trusts an attachment's record (found %v)", kind, install.AttachmentsPolicy, names)
		}
	}
	for _, b := range append(byKind["ClusterRoleBinding"], byKind["RoleBinding"]...) {
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		for _, s := range subjects {
			s := s.(map[string]any)
			if s["kind"] != "ServiceAccount" || s["name"] != pod.ServiceAccountName || s["namespace"] != ns {
				t.Errorf("%s %s binds %v, not the manager's ServiceAccount %s/%s", b.GetKind(), b.GetName(), s, ns, pod.ServiceAccountName)
			}
		}
	}
}

func convert(t *testing.T, u unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// apply is `kubectl apply --server-side` of one object; obj receives the result.
func apply(t *testing.T, ctx context.Context, c client.Client, obj *unstructured.Unstructured, opts ...client.PatchOption) {
	t.Helper()
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	opts = append(opts, fieldOwner, client.ForceOwnership)
	if err := c.Patch(ctx, obj, client.Apply, opts...); err != nil {
		t.Errorf("server-side apply (%v) of %s %s/%s: %v", opts, obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

// installExtension installs the rendered CRDs, runs the extension, and
// installs the rendered ExtensionConfig and admission webhook pointed at it:
// the in-cluster Service name does not resolve here, so clientConfig becomes
// the extension's URL. The ExtensionConfig keeps its inject-ca-from-secret
// annotation, and the Secret it names is written as cert-manager writes it
// (ca.crt, tls.crt, tls.key): CAPI injects the CA from there, which is the
// only way its discovery can succeed. cert-manager's own CA injector does not
// run here, so the webhook configuration gets its caBundle directly.
func installExtension(t *testing.T, ctx context.Context, e *testenv.Environment, components []unstructured.Unstructured) {
	t.Helper()
	var ns, certSecret string
	for _, o := range components {
		switch o.GetKind() {
		case "Namespace":
			ns = o.GetName()
		case "Certificate":
			certSecret, _, _ = unstructured.NestedString(o.Object, "spec", "secretName")
		}
	}
	if ns != install.Namespace {
		t.Fatalf("components install into %q, the manager defaults to %q", ns, install.Namespace)
	}
	for _, o := range components {
		if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
			apply(t, ctx, e.Client, o.DeepCopy())
		}
	}
	for _, kind := range []string{"SharedNetwork", "SharedNetworkAttachment"} {
		waitFor(t, ctx, 30*time.Second, "CRD of "+kind+" served", func() (bool, error) {
			_, err := e.Client.RESTMapper().RESTMapping(sharednetv1.GroupVersion.WithKind(kind).GroupKind())
			return err == nil, err
		})
	}
	urls := extension(t, e)

	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(e.CertDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: certSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"ca.crt": e.CAData, "tls.crt": read("tls.crt"), "tls.key": read("tls.key")},
	}
	if err := e.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	for _, o := range components {
		switch o.GetKind() {
		case "ExtensionConfig":
			ec := o.DeepCopy()
			url := urls.Hooks
			if ec.GetName() == sharednetmanager.DefaultDeletionExtensionConfig {
				url = urls.Deletion
			}
			if err := unstructured.SetNestedMap(ec.Object, map[string]any{"url": url}, "spec", "clientConfig"); err != nil {
				t.Fatal(err)
			}
			apply(t, ctx, e.Client, ec)
		case "ValidatingWebhookConfiguration":
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			convert(t, o, vwc)
			for i := range vwc.Webhooks {
				full := urls.Hooks + *vwc.Webhooks[i].ClientConfig.Service.Path
				vwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &full, CABundle: e.CAData}
			}
			if err := e.Client.Create(ctx, vwc); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each ExtensionConfig is discovered with the CA CAPI injected, and names
	// its handlers: the topology handlers, and the deletion hook on its own.
	for name, handlers := range map[string][]string{
		providerName: {hooks.DiscoverVariablesHandler, hooks.GeneratePatchesHandler, hooks.ValidateTopologyHandler},
		sharednetmanager.DefaultDeletionExtensionConfig: {hooks.BeforeClusterDeleteHandler},
	} {
		ec := &runtimev1.ExtensionConfig{}
		waitFor(t, ctx, 60*time.Second, "ExtensionConfig "+name+" discovered", func() (bool, error) {
			if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, ec); err != nil {
				return false, err
			}
			return meta.IsStatusConditionTrue(ec.Status.Conditions, runtimev1.ExtensionConfigDiscoveredCondition), nil
		})
		if !bytes.Equal(ec.Spec.ClientConfig.CABundle, e.CAData) {
			t.Errorf("ExtensionConfig %s: caBundle was not injected from Secret %s/%s", name, ns, certSecret)
		}
		var names []string
		for _, h := range ec.Status.Handlers {
			names = append(names, h.Name)
		}
		want := make([]string, 0, len(handlers))
		for _, h := range handlers {
			want = append(want, h+"."+name)
		}
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("ExtensionConfig %s discovered handlers %q, want %q", name, names, want)
		}
	}
}

func waitFor(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not after %s (last error: %v)", what, timeout, last)
	}
}

// clusterVariables are the values the test gives each placeholder of the
// cluster template; a placeholder missing here fails the test, so a new one
// cannot go untested.
var clusterVariables = map[string]string{
	"KUBERNETES_VERSION":                     "v1.35.0",
	"CONTROL_PLANE_MACHINE_COUNT":            "3",
	"WORKER_MACHINE_COUNT":                   "2",
	"OPENSTACK_CLOUD_YAML_B64":               "Y2xvdWRzOiB7fQo=", // clouds: {}
	"OPENSTACK_CLOUD_CACERT_B64":             "Cg==",
	"OPENSTACK_CLOUD":                        "cluster-project",
	"OPENSTACK_IMAGE_NAME":                   "ubuntu-2404-kube-v1.35.0",
	"OPENSTACK_CONTROL_PLANE_MACHINE_FLAVOR": "m1.large",
	"OPENSTACK_NODE_MACHINE_FLAVOR":          "m1.medium",
	"OPENSTACK_SSH_KEY_NAME":                 "ops-key",
	"OPENSTACK_EXTERNAL_NETWORK_ID":          "0b2c4e6a-1d3f-4a5b-8c7d-9e0f1a2b3c4d",
	"OPENSTACK_NODE_CIDR":                    "10.6.0.0/24",
	"OPENSTACK_DNS_NAMESERVERS":              "9.9.9.9", // one address, as in CAPO's templates
	"POD_CIDR":                               "192.168.0.0/16",
	"SERVICE_CIDR":                           "10.96.0.0/12",
	"SHARED_NETWORK_NAME":                    "vm-net",
	"SHARED_NETWORK_SUBNET_ID":               "5c2f1a8e-0c1d-4e2f-8a3b-1234567890ab",
}

// set by clusterctl from its arguments and flags, not from the environment.
var clusterctlSets = map[string]string{"CLUSTER_NAME": "", "NAMESPACE": ""}

const sharedSubnetCIDR = "10.50.0.0/24"

func generateCluster(t *testing.T, ctx context.Context, e *testenv.Environment, bin, home, config string) {
	t.Helper()
	template := path("templates", "cluster-template-shared-network.yaml")
	ns := "team-a"
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"sharednet.capo.io/vm-net": "true"}}}); err != nil {
		t.Fatal(err)
	}
	env := clusterctlEnv(t, home)
	args := func(name string, extra ...string) []string {
		return append([]string{"generate", "cluster", name, "-n", ns, "--config", config, "--kubeconfig", e.Kubeconfig, "--from", template}, extra...)
	}

	// Every placeholder clusterctl finds, and docs/templates.md documents each one.
	listed := string(run(t, home, env, bin, args("demo", "--list-variables")...))
	docs, err := os.ReadFile(path("docs", "templates.md"))
	if err != nil {
		t.Fatal(err)
	}
	var placeholders []string
	for _, line := range strings.Split(listed, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
			name := strings.Fields(rest)[0]
			placeholders = append(placeholders, name)
			_, given := clusterVariables[name]
			_, byClusterctl := clusterctlSets[name]
			if !given && !byClusterctl {
				t.Errorf("placeholder %s of the template has no value in this test: add it to clusterVariables", name)
			}
			if !strings.Contains(string(docs), "| `"+name+"` |") {
				t.Errorf("placeholder %s is not in the table of docs/templates.md", name)
			}
		}
	}
	if len(placeholders) == 0 {
		t.Fatalf("clusterctl listed no variables:\n%s", listed)
	}

	// The ClusterClass must exist and be reconciled, with the variable the
	// extension serves, before a Cluster of it is validated (else CAPI admits
	// it with a warning and validates nothing).
	cc, err := utilyaml.ToUnstructured(mustRead(t, path("templates", "clusterclass-shared-network.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range cc {
		obj := cc[i].DeepCopy()
		obj.SetNamespace(ns)
		apply(t, ctx, e.Client, obj)
	}
	if err := e.WaitForClusterClass(ctx, ns, "shared-network"); err != nil {
		t.Fatal(err)
	}
	class := &clusterv1.ClusterClass{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shared-network"}, class); err != nil {
		t.Fatal(err)
	}
	var classVariables []string
	for _, v := range class.Status.Variables {
		classVariables = append(classVariables, v.Name)
	}
	if !slices.Contains(classVariables, sharednetv1.VariableName) {
		t.Fatalf("ClusterClass status.variables %q lack %s (served by %s.%s)", classVariables, sharednetv1.VariableName, hooks.DiscoverVariablesHandler, providerName)
	}

	// The SharedNetwork the template names, granted to the namespace, with
	// facts as its controller reads them from Neutron.
	sn := &sharednetv1.SharedNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: clusterVariables["SHARED_NETWORK_NAME"]},
		Spec: sharednetv1.SharedNetworkSpec{
			Identity:          sharednetv1.VMProjectIdentity{SecretName: "vm-project-clouds", CloudName: "vm-project"},
			NetworkID:         "2b1d0c5e-6f3a-4c1e-9d2b-0a1b2c3d4e5f",
			Subnets:           []string{clusterVariables["SHARED_NETWORK_SUBNET_ID"]},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sharednet.capo.io/vm-net": "true"}},
		},
	}
	if err := e.Client.Create(ctx, sn); err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(sn), sn); err != nil {
			return err
		}
		// Ready and just read, for this spec and (missing) credential: its
		// controller leaves such facts alone for a resync, and admission
		// decides on them instead of asking Neutron (there is none here).
		now := metav1.Now()
		sn.Status.LastRefreshTime, sn.Status.ObservedGeneration = &now, sn.Generation
		meta.SetStatusCondition(&sn.Status.Conditions, metav1.Condition{Type: sharednetv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: sharednetv1.ReasonFactsCurrent, Message: "test fixture"})
		sn.Status.MTU = 1450
		sn.Status.Subnets = []sharednetv1.SubnetStatus{{
			ID: clusterVariables["SHARED_NETWORK_SUBNET_ID"], CIDR: sharedSubnetCIDR, IPVersion: 4,
			AllocationPools: []sharednetv1.AllocationPool{{Start: "10.50.0.10", End: "10.50.0.250"}},
			UsedAddresses:   ptr.To[int64](0), FreeAddresses: ptr.To[int64](241),
		}}
		return e.Client.Status().Update(ctx, sn)
	})
	if err != nil {
		t.Fatal(err)
	}

	c, warned := clientWithWarnings(t, e)
	generate := func(name string, vars map[string]string) []unstructured.Unstructured {
		t.Helper()
		genEnv := slices.Clone(env)
		for k, v := range vars {
			genEnv = append(genEnv, k+"="+v)
		}
		out := run(t, home, genEnv, bin, args(name)...)
		objs, err := utilyaml.ToUnstructured(out)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	dryRun := func(t *testing.T, objs []unstructured.Unstructured) {
		t.Helper()
		for i := range objs {
			apply(t, ctx, c, objs[i].DeepCopy(), client.DryRunAll)
		}
		if w := warned.take(); len(w) > 0 {
			t.Errorf("the API server warned (the Cluster was not fully validated): %q", w)
		}
	}

	all := generate("demo", clusterVariables)
	t.Run("every variable set: server-side dry run", func(t *testing.T) {
		dryRun(t, all)
	})

	t.Run("only the required variables: server-side dry run", func(t *testing.T) {
		required := map[string]string{}
		for _, line := range strings.Split(listed, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "Optional Variables:") {
				break
			}
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
				name := strings.Fields(rest)[0]
				if v, ok := clusterVariables[name]; ok {
					required[name] = v
				}
			}
		}
		dryRun(t, generate("minimal", required))
	})

	t.Run("the dry run really validates: schema and admission refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name, field, value, want string
		}{
			{"subnet that is not a subnet ID", "subnet", "not-a-uuid", "sharedNetwork.subnet must be one Neutron subnet ID"},
			{"SharedNetwork that does not exist", "name", "other-net", `SharedNetwork "other-net" does not exist`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cluster := findKind(t, all, "Cluster").DeepCopy()
				mds, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "topology", "workers", "machineDeployments")
				md := mds[0].(map[string]any)
				overrides := md["variables"].(map[string]any)["overrides"].([]any)
				overrides[0].(map[string]any)["value"].(map[string]any)[tc.field] = tc.value
				if err := unstructured.SetNestedSlice(cluster.Object, mds, "spec", "topology", "workers", "machineDeployments"); err != nil {
					t.Fatal(err)
				}
				err := c.Patch(ctx, cluster, client.Apply, fieldOwner, client.ForceOwnership, client.DryRunAll)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("dry run: got %v, want a refusal containing %q", err, tc.want)
				}
				warned.take()
			})
		}
	})

	t.Run("created: CAPI's topology controller applies every patch of the ClusterClass", func(t *testing.T) {
		for i := range all {
			apply(t, ctx, c, all[i].DeepCopy())
		}
		warned.take()
		cluster := &clusterv1.Cluster{}
		waitFor(t, ctx, 60*time.Second, "Cluster TopologyReconciled", func() (bool, error) {
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, cluster); err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
			if cond == nil || cond.Status != metav1.ConditionTrue {
				return false, fmt.Errorf("TopologyReconciled: %+v", cond)
			}
			return true, nil
		})
		osc := &infrav1.OpenStackCluster{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.InfrastructureRef.Name}, osc); err != nil {
			t.Fatal(err)
		}
		if osc.Spec.IdentityRef.Name != "demo-cloud-config" || osc.Spec.IdentityRef.CloudName != clusterVariables["OPENSTACK_CLOUD"] {
			t.Errorf("OpenStackCluster identityRef %+v", osc.Spec.IdentityRef)
		}
		if osc.Spec.ExternalNetwork == nil || osc.Spec.ExternalNetwork.ID == nil || *osc.Spec.ExternalNetwork.ID != clusterVariables["OPENSTACK_EXTERNAL_NETWORK_ID"] {
			t.Errorf("OpenStackCluster externalNetwork %+v", osc.Spec.ExternalNetwork)
		}
		if len(osc.Spec.ManagedSubnets) != 1 || osc.Spec.ManagedSubnets[0].CIDR != clusterVariables["OPENSTACK_NODE_CIDR"] ||
			!slices.Equal(osc.Spec.ManagedSubnets[0].DNSNameservers, []string{clusterVariables["OPENSTACK_DNS_NAMESERVERS"]}) {
			t.Errorf("OpenStackCluster managedSubnets %+v", osc.Spec.ManagedSubnets)
		}
		mds := &clusterv1.MachineDeploymentList{}
		waitFor(t, ctx, 60*time.Second, "MachineDeployments md-a and md-b", func() (bool, error) {
			err := e.Client.List(ctx, mds, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: "demo"})
			return err == nil && len(mds.Items) == 2, err
		})
		for _, md := range mds.Items {
			osmt := &infrav1.OpenStackMachineTemplate{}
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: md.Spec.Template.Spec.InfrastructureRef.Name}, osmt); err != nil {
				t.Fatal(err)
			}
			spec := osmt.Spec.Template.Spec
			if spec.Flavor == nil || *spec.Flavor != clusterVariables["OPENSTACK_NODE_MACHINE_FLAVOR"] ||
				spec.Image.Filter == nil || spec.Image.Filter.Name == nil || *spec.Image.Filter.Name != clusterVariables["OPENSTACK_IMAGE_NAME"] ||
				spec.SSHKeyName != clusterVariables["OPENSTACK_SSH_KEY_NAME"] {
				t.Errorf("MachineDeployment %s: worker template flavor %v, image %+v, sshKeyName %q", md.Name, spec.Flavor, spec.Image, spec.SSHKeyName)
			}
			// md-a, attached by the template, is created with its port (CAPO
			// can create it once the network is shared); md-b has none.
			want := []infrav1.PortOpts(nil)
			if md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] == "md-a" {
				want = []infrav1.PortOpts{{}, sharedport.Port(sn.Name, sn.Spec.NetworkID, clusterVariables["SHARED_NETWORK_SUBNET_ID"])}
			}
			if !equality.Semantic.DeepEqual(spec.Ports, want) {
				t.Errorf("MachineDeployment %s: ports %+v, want %+v", md.Name, spec.Ports, want)
			}
		}
	})

	t.Run("the cloud controller manager sorts the nodes' subnet first and names load balancers as the extension reads them", func(t *testing.T) {
		// The ClusterResourceSet and its Secret were created with the Cluster
		// above; what they deliver must be valid in a workload cluster.
		for _, obj := range checkCloudControllerManager(t, all, clusterVariables) {
			apply(t, ctx, c, obj.DeepCopy(), client.DryRunAll)
		}
		if w := warned.take(); len(w) > 0 {
			t.Errorf("the API server warned: %q", w)
		}
	})
}

// checkCloudControllerManager checks the cloud controller manager that a
// cluster generated from templates/cluster-template-shared-network.yaml with
// vars carries: its ClusterResourceSet selects the generated Cluster and
// delivers kube-system/cloud-config with the cluster's clouds.yaml and
// [Networking] address-sort-order = the nodes' subnet, and runs the CCM with
// the --cluster-name the extension attributes load balancers by. It returns
// the objects the ClusterResourceSet creates in the workload cluster.
func checkCloudControllerManager(t *testing.T, objs []unstructured.Unstructured, vars map[string]string) []unstructured.Unstructured {
	t.Helper()
	cluster := findKind(t, objs, "Cluster")
	crs := &addonsv1.ClusterResourceSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(findKind(t, objs, "ClusterResourceSet").Object, crs); err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(&crs.Spec.ClusterSelector)
	if err != nil || selector.Empty() || !selector.Matches(labels.Set(cluster.GetLabels())) {
		t.Errorf("ClusterResourceSet selector %v (%v) does not select the generated Cluster (labels %v)", selector, err, cluster.GetLabels())
	}
	var resource *corev1.Secret
	for i := range objs {
		if objs[i].GetKind() == "Secret" && objs[i].Object["type"] == string(addonsv1.ClusterResourceSetSecretType) {
			if resource != nil {
				t.Fatalf("two Secrets of type %s", addonsv1.ClusterResourceSetSecretType)
			}
			resource = &corev1.Secret{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[i].Object, resource); err != nil {
				t.Fatal(err)
			}
		}
	}
	if resource == nil {
		t.Fatalf("no Secret of type %s for the ClusterResourceSet", addonsv1.ClusterResourceSetSecretType)
	}
	if len(crs.Spec.Resources) != 1 || crs.Spec.Resources[0].Kind != "Secret" || crs.Spec.Resources[0].Name != resource.Name ||
		crs.Namespace != cluster.GetNamespace() || resource.Namespace != cluster.GetNamespace() {
		t.Errorf("ClusterResourceSet %s/%s resources %+v, Secret %s/%s, Cluster in %s", crs.Namespace, crs.Name, crs.Spec.Resources, resource.Namespace, resource.Name, cluster.GetNamespace())
	}
	// What the ClusterResourceSet creates in the workload cluster.
	inner := &corev1.Secret{}
	if err := yaml.UnmarshalStrict([]byte(resource.StringData["cloud-config.yaml"]), inner); err != nil {
		t.Fatalf("cloud-config.yaml of Secret %s: %v", resource.Name, err)
	}
	if inner.Namespace != "kube-system" || inner.Name != "cloud-config" {
		t.Errorf("the workload cluster's Secret is %s/%s, want kube-system/cloud-config (what the cloud controller manager's manifests mount)", inner.Namespace, inner.Name)
	}
	if want := decode(t, vars["OPENSTACK_CLOUD_YAML_B64"]); string(inner.Data["clouds.yaml"]) != want {
		t.Errorf("clouds.yaml %q, want %q", inner.Data["clouds.yaml"], want)
	}
	conf := inner.StringData["cloud.conf"]
	for _, want := range []string{
		"use-clouds = true", "clouds-file = /etc/config/clouds.yaml", "cloud = " + vars["OPENSTACK_CLOUD"],
		"[Networking]", "address-sort-order = " + vars["OPENSTACK_NODE_CIDR"],
	} {
		if !strings.Contains(conf, want+"\n") {
			t.Errorf("cloud.conf lacks the line %q:\n%s", want, conf)
		}
	}
	// The cloud controller manager the ClusterResourceSet runs names this
	// Cluster's load balancers as the extension reads them back (internal/ccm).
	ccmObjs, err := utilyaml.ToUnstructured([]byte(resource.StringData["cloud-controller-manager.yaml"]))
	if err != nil {
		t.Fatalf("cloud-controller-manager.yaml of Secret %s: %v", resource.Name, err)
	}
	ds := &appsv1.DaemonSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(findKind(t, ccmObjs, "DaemonSet").Object, ds); err != nil {
		t.Fatal(err)
	}
	wantName := "--cluster-name=" + ccm.ClusterName(cluster.GetNamespace(), cluster.GetName())
	if args := ds.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, wantName) {
		t.Errorf("the cloud controller manager runs with %q, want %s (how the extension attributes load balancers to this Cluster)", args, wantName)
	}
	return ccmObjs
}

func decode(t *testing.T, b64 string) string {
	t.Helper()
	out, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func findKind(t *testing.T, objs []unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for i := range objs {
		if objs[i].GetKind() == kind {
			return &objs[i]
		}
	}
	t.Fatalf("no %s in the generated cluster", kind)
	return nil
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func namesOf(objects []unstructured.Unstructured) []string {
	names := make([]string, 0, len(objects))
	for _, o := range objects {
		names = append(names, o.GetName())
	}
	return names
}

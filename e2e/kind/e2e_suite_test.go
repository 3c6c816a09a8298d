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

package kind

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/bootstrap"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// Flags, as CAPI's own e2e suites name them.
var (
	configPath           = flag.String("e2e.config", "", "Path to the e2e config file (e2e/kind/config/e2e.yaml). The suite is skipped without it.")
	artifactFolder       = flag.String("e2e.artifacts-folder", "_artifacts/e2e-kind", "Folder for logs, the clusterctl repository and dumps.")
	skipCleanup          = flag.Bool("e2e.skip-resource-cleanup", false, "Keep the management cluster (and what is left in it) after the run.")
	useExistingCluster   = flag.Bool("e2e.use-existing-cluster", false, "Use the cluster of KUBECONFIG as the management cluster instead of creating a kind cluster.")
	extensionNamespace   = install.Namespace
	vmProjectSecretName  = "e2e-vm-project-clouds"
	grantedNamespaceFlag = "sharednet.capo.io/e2e"
)

// Suite state, set by the first ginkgo process and handed to the others.
var (
	e2eConfig            *clusterctl.E2EConfig
	clusterctlConfigPath string
	bootstrapProvider    bootstrap.ClusterProvider
	bootstrapProxy       framework.ClusterProxy
	scheme               *runtime.Scheme
)

// TestE2E runs the suite. Without -e2e.config (as in `go test ./...`) it is
// skipped: it needs a Docker engine and an OpenStack cloud.
func TestE2E(t *testing.T) {
	if *configPath == "" {
		t.Skip("the kind e2e suite needs -e2e.config (a Docker engine and an OpenStack cloud): see docs/e2e.md")
	}
	RegisterFailHandler(Fail)
	ctrl.SetLogger(GinkgoLogr)
	RunSpecs(t, "capo-sharednet kind e2e")
}

// newScheme is the providers' scheme the harnesses share (the extension's
// own types included).
func newScheme() *runtime.Scheme {
	return providers.NewScheme()
}

// suiteData is what the first process hands to the others.
type suiteData struct {
	ConfigPath           string               `json:"configPath"`
	ClusterctlConfigPath string               `json:"clusterctlConfigPath"`
	KubeconfigPath       string               `json:"kubeconfigPath"`
	E2EConfig            clusterctl.E2EConfig `json:"e2eConfig"`
}

var _ = SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	Expect(*configPath).To(BeAnExistingFile(), "-e2e.config must be an existing file")
	Expect(os.MkdirAll(*artifactFolder, 0o750)).To(Succeed())
	scheme = newScheme()

	By("Loading the e2e configuration")
	e2eConfig = clusterctl.LoadE2EConfig(ctx, clusterctl.LoadE2EConfigInput{ConfigPath: *configPath})
	Expect(e2eConfig).NotTo(BeNil())
	for _, file := range []string{"OPENSTACK_CLOUD_YAML_FILE", "SHAREDNET_VM_CLOUD_YAML_FILE", "CNI"} {
		Expect(resolve(e2eConfig.MustGetVariable(file))).To(BeAnExistingFile(), "%s must name an existing file (see docs/e2e.md)", file)
	}
	for _, v := range []string{"SHARED_NETWORK_ID", "SHARED_NETWORK_SUBNET_ID"} {
		Expect(e2eConfig.MustGetVariable(v)).NotTo(BeEmpty(), "%s must be set: the network and subnet of the VM project (see docs/e2e.md)", v)
	}
	// The cluster template reads the cluster project's clouds.yaml as base64.
	cloudsYAML, err := os.ReadFile(resolve(e2eConfig.MustGetVariable("OPENSTACK_CLOUD_YAML_FILE")))
	Expect(err).NotTo(HaveOccurred())
	e2eConfig.Variables["OPENSTACK_CLOUD_YAML_B64"] = base64.StdEncoding.EncodeToString(cloudsYAML)

	By("Creating a clusterctl local repository")
	clusterctlConfigPath = clusterctl.CreateRepository(ctx, clusterctl.CreateRepositoryInput{
		E2EConfig:        e2eConfig,
		RepositoryFolder: filepath.Join(*artifactFolder, "repository"),
	})

	By("Setting up the management cluster")
	kubeconfigPath := ""
	if !*useExistingCluster {
		bootstrapProvider = bootstrap.CreateKindBootstrapClusterAndLoadImages(ctx, bootstrap.CreateKindBootstrapClusterAndLoadImagesInput{
			Name:              e2eConfig.ManagementClusterName,
			KubernetesVersion: e2eConfig.MustGetVariable("KUBERNETES_VERSION_MANAGEMENT"),
			Images:            e2eConfig.Images,
			LogFolder:         filepath.Join(*artifactFolder, "kind"),
		})
		Expect(bootstrapProvider).NotTo(BeNil())
		kubeconfigPath = bootstrapProvider.GetKubeconfigPath()
	}
	bootstrapProxy = framework.NewClusterProxy("bootstrap", kubeconfigPath, scheme)

	By("clusterctl init: CAPI, CABPK, KCP, CAPO, ORC and capo-sharednet")
	clusterctl.InitManagementClusterAndWatchControllerLogs(ctx, clusterctl.InitManagementClusterAndWatchControllerLogsInput{
		ClusterProxy:              bootstrapProxy,
		ClusterctlConfigPath:      clusterctlConfigPath,
		InfrastructureProviders:   e2eConfig.InfrastructureProviders(),
		RuntimeExtensionProviders: e2eConfig.RuntimeExtensionProviders(),
		LogFolder:                 filepath.Join(*artifactFolder, "clusters", bootstrapProxy.GetName()),
	}, e2eConfig.GetIntervals(bootstrapProxy.GetName(), "wait-controllers")...)

	By("The administrator offers the VM project's network: credential Secret and SharedNetwork")
	createSharedNetwork(ctx, bootstrapProxy.GetClient())

	data, err := yaml.Marshal(suiteData{
		ConfigPath:           *configPath,
		ClusterctlConfigPath: clusterctlConfigPath,
		KubeconfigPath:       bootstrapProxy.GetKubeconfigPath(),
		E2EConfig:            *e2eConfig,
	})
	Expect(err).NotTo(HaveOccurred())
	return data
}, func(data []byte) {
	var d suiteData
	Expect(yaml.UnmarshalStrict(data, &d)).To(Succeed())
	if scheme == nil {
		scheme = newScheme()
	}
	e2eConfig = &d.E2EConfig
	clusterctlConfigPath = d.ClusterctlConfigPath
	if bootstrapProxy == nil {
		bootstrapProxy = framework.NewClusterProxy("bootstrap", d.KubeconfigPath, scheme)
	}
})

var _ = SynchronizedAfterSuite(func() {}, func(ctx context.Context) {
	if *skipCleanup {
		return
	}
	if bootstrapProxy != nil {
		sn := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: e2eConfig.MustGetVariable("SHARED_NETWORK_NAME")}}
		_ = bootstrapProxy.GetClient().Delete(ctx, sn)
		bootstrapProxy.Dispose(ctx)
	}
	if bootstrapProvider != nil {
		bootstrapProvider.Dispose(ctx)
	}
})

// resolve makes a path of the e2e config absolute, relative to the config file.
func resolve(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(*configPath), p)
}

// createSharedNetwork creates the VM project's credential Secret in the
// extension's namespace and a SharedNetwork granted to the namespaces labelled
// for this suite, then waits until the controller read its facts from Neutron.
func createSharedNetwork(ctx context.Context, c client.Client) {
	clouds, err := os.ReadFile(resolve(e2eConfig.MustGetVariable("SHAREDNET_VM_CLOUD_YAML_FILE")))
	Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: extensionNamespace, Name: vmProjectSecretName},
		Data:       map[string][]byte{"clouds.yaml": clouds},
	}
	Expect(client.IgnoreAlreadyExists(c.Create(ctx, secret))).To(Succeed())
	sn := &sharednetv1.SharedNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: e2eConfig.MustGetVariable("SHARED_NETWORK_NAME")},
		Spec: sharednetv1.SharedNetworkSpec{
			Identity:          sharednetv1.VMProjectIdentity{SecretName: vmProjectSecretName, CloudName: e2eConfig.MustGetVariable("SHAREDNET_VM_CLOUD")},
			NetworkID:         e2eConfig.MustGetVariable("SHARED_NETWORK_ID"),
			Subnets:           []string{e2eConfig.MustGetVariable("SHARED_NETWORK_SUBNET_ID")},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{grantedNamespaceFlag: "true"}},
		},
	}
	Expect(client.IgnoreAlreadyExists(c.Create(ctx, sn))).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(sn), sn)).To(Succeed())
		ready := findCondition(sn.Status.Conditions, sharednetv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "SharedNetwork %s: %s: %s", sn.Name, ready.Reason, ready.Message)
	}, e2eConfig.GetIntervals("sharednet", "wait-facts")...).Should(Succeed())
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// specName names the namespace and cluster of one spec.
func specName(prefix string) string {
	return fmt.Sprintf("%s-%s", prefix, strings.ToLower(randomSuffix()))
}

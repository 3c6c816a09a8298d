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
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The seed's story on a real cloud, through the user's own steps: a cluster
// created from templates/ with md-a attached, md-b attached later and
// detached again (each rolled once, md-a never), and the share gone once the
// cluster is deleted.
var _ = Describe("A nodegroup on a shared network", Label("kind", "openstack"), func() {
	var (
		ctx        context.Context
		namespace  *corev1.Namespace
		cancelLogs context.CancelFunc
		result     *clusterctl.ApplyClusterTemplateAndWaitResult
	)

	BeforeEach(func() {
		ctx = context.Background()
		namespace, cancelLogs = framework.CreateNamespaceAndWatchEvents(ctx, framework.CreateNamespaceAndWatchEventsInput{
			Creator:   bootstrapProxy.GetClient(),
			ClientSet: bootstrapProxy.GetClientSet(),
			Name:      specName("sharednet"),
			LogFolder: filepath.Join(*artifactFolder, "clusters", bootstrapProxy.GetName()),
			// The SharedNetwork grants the namespaces with this label.
			Labels: map[string]string{grantedNamespaceFlag: "true"},
		})
		result = new(clusterctl.ApplyClusterTemplateAndWaitResult)
	})

	AfterEach(func() {
		if !*skipCleanup {
			if result.Cluster != nil {
				framework.DeleteAllClustersAndWait(ctx, framework.DeleteAllClustersAndWaitInput{
					ClusterProxy:         bootstrapProxy,
					ClusterctlConfigPath: clusterctlConfigPath,
					Namespace:            namespace.Name,
					ArtifactFolder:       *artifactFolder,
				}, e2eConfig.GetIntervals("default", "wait-delete-cluster")...)
			}
			framework.DeleteNamespace(ctx, framework.DeleteNamespaceInput{Deleter: bootstrapProxy.GetClient(), Name: namespace.Name})
		}
		cancelLogs()
	})

	It("attaches md-a at creation, attaches and detaches md-b with one rollout each, and unshares after the cluster is deleted", func() {
		c := bootstrapProxy.GetClient()
		sn := &sharednetv1.SharedNetwork{}
		Expect(c.Get(ctx, client.ObjectKey{Name: e2eConfig.MustGetVariable("SHARED_NETWORK_NAME")}, sn)).To(Succeed())
		subnetID := e2eConfig.MustGetVariable("SHARED_NETWORK_SUBNET_ID")
		facts, ok := sn.Status.Subnet(subnetID)
		Expect(ok).To(BeTrue(), "SharedNetwork %s has no facts for subnet %s", sn.Name, subnetID)
		subnet := netip.MustParsePrefix(facts.CIDR)

		By("Creating the cluster from templates/cluster-template-shared-network.yaml (md-a attached, md-b not)")
		clusterName := specName("sharednet")
		clusterctl.ApplyClusterTemplateAndWait(ctx, clusterctl.ApplyClusterTemplateAndWaitInput{
			ClusterProxy: bootstrapProxy,
			ConfigCluster: clusterctl.ConfigClusterInput{
				LogFolder:                filepath.Join(*artifactFolder, "clusters", bootstrapProxy.GetName()),
				ClusterctlConfigPath:     clusterctlConfigPath,
				KubeconfigPath:           bootstrapProxy.GetKubeconfigPath(),
				InfrastructureProvider:   "openstack",
				Flavor:                   "shared-network",
				Namespace:                namespace.Name,
				ClusterName:              clusterName,
				KubernetesVersion:        e2eConfig.MustGetVariable("KUBERNETES_VERSION"),
				ControlPlaneMachineCount: ptr.To[int64](1),
				WorkerMachineCount:       ptr.To[int64](1),
			},
			CNIManifestPath:              resolve(e2eConfig.MustGetVariable("CNI")),
			WaitForClusterIntervals:      e2eConfig.GetIntervals("default", "wait-cluster"),
			WaitForControlPlaneIntervals: e2eConfig.GetIntervals("default", "wait-control-plane"),
			WaitForMachineDeployments:    e2eConfig.GetIntervals("default", "wait-worker-nodes"),
		}, result)

		By("md-a is Attached: every node has an address on the shared subnet")
		waitAttached(ctx, c, namespace.Name, clusterName, "md-a", subnet)
		mdaTemplate := infraTemplate(ctx, c, namespace.Name, clusterName, "md-a")

		By("Attaching md-b: only md-b rolls out")
		mdbBefore := infraTemplate(ctx, c, namespace.Name, clusterName, "md-b")
		setOverride(ctx, c, namespace.Name, clusterName, "md-b", &sharednetv1.SharedNetworkVariable{Name: sn.Name, Subnet: subnetID})
		waitAttached(ctx, c, namespace.Name, clusterName, "md-b", subnet)
		Expect(infraTemplate(ctx, c, namespace.Name, clusterName, "md-b")).NotTo(Equal(mdbBefore), "md-b was not rolled out")
		Expect(infraTemplate(ctx, c, namespace.Name, clusterName, "md-a")).To(Equal(mdaTemplate), "md-a was rolled out by md-b's attach")

		By("Detaching md-b: md-b rolls out once more, its attachment goes, md-a stays attached")
		setOverride(ctx, c, namespace.Name, clusterName, "md-b", nil)
		Eventually(func() bool {
			err := c.Get(ctx, client.ObjectKey{Namespace: namespace.Name, Name: sharednetv1.AttachmentName(clusterName, "md-b")}, &sharednetv1.SharedNetworkAttachment{})
			return apierrors.IsNotFound(err)
		}, e2eConfig.GetIntervals("sharednet", "wait-detached")...).Should(BeTrue(), "md-b's attachment is still there")
		Expect(infraTemplate(ctx, c, namespace.Name, clusterName, "md-a")).To(Equal(mdaTemplate), "md-a was rolled out by md-b's detach")
		waitAttached(ctx, c, namespace.Name, clusterName, "md-a", subnet)

		a := &sharednetv1.SharedNetworkAttachment{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace.Name, Name: sharednetv1.AttachmentName(clusterName, "md-a")}, a)).To(Succeed())
		Expect(a.Status.Share).NotTo(BeNil())
		project := a.Status.Share.ProjectID

		By("Deleting the cluster: its load balancers on the shared subnet and then the share go with it")
		framework.DeleteClusterAndWait(ctx, framework.DeleteClusterAndWaitInput{
			ClusterProxy:         bootstrapProxy,
			ClusterctlConfigPath: clusterctlConfigPath,
			Cluster:              result.Cluster,
			ArtifactFolder:       *artifactFolder,
		}, e2eConfig.GetIntervals("default", "wait-delete-cluster")...)
		result.Cluster = nil
		vm := vmProjectSession(ctx)
		Eventually(func(g Gomega) {
			shares, err := vm.Shares(ctx, sn.Spec.NetworkID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(shares).NotTo(HaveKey(project), "network %s is still shared with project %s", sn.Spec.NetworkID, project)
		}, e2eConfig.GetIntervals("sharednet", "wait-unshared")...).Should(Succeed())
	})
})

// waitAttached waits until the nodegroup's attachment is Attached with every
// node's shared-subnet address inside the subnet.
func waitAttached(ctx context.Context, c client.Client, namespace, cluster, topology string, subnet netip.Prefix) {
	a := &sharednetv1.SharedNetworkAttachment{}
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: sharednetv1.AttachmentName(cluster, topology)}, a)).To(Succeed())
		g.Expect(a.Status.Phase).To(Equal(sharednetv1.PhaseAttached), "%s: %s", topology, a.Status.Message)
		g.Expect(a.Status.AttachedNodes).To(Equal(a.Status.DesiredNodes))
		g.Expect(a.Status.Nodes).To(HaveLen(int(ptr.Deref(a.Status.DesiredNodes, 0))))
		for _, n := range a.Status.Nodes {
			addr, err := netip.ParseAddr(n.Address)
			g.Expect(err).NotTo(HaveOccurred(), "machine %s", n.Machine)
			g.Expect(subnet.Contains(addr)).To(BeTrue(), "machine %s has %s, not on %s", n.Machine, addr, subnet)
		}
	}, e2eConfig.GetIntervals("sharednet", "wait-attached")...).Should(Succeed())
}

// infraTemplate is the OpenStackMachineTemplate the nodegroup's MachineDeployment runs on.
func infraTemplate(ctx context.Context, c client.Client, namespace, cluster, topology string) string {
	mds := &clusterv1.MachineDeploymentList{}
	Expect(c.List(ctx, mds, client.InNamespace(namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel: cluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology,
	})).To(Succeed())
	Expect(mds.Items).To(HaveLen(1))
	return mds.Items[0].Spec.Template.Spec.InfrastructureRef.Name
}

// setOverride sets (value != nil) or removes the nodegroup's sharedNetwork
// override, as a cluster owner edits the Cluster.
func setOverride(ctx context.Context, c client.Client, namespace, cluster, topology string, value *sharednetv1.SharedNetworkVariable) {
	Eventually(func() error {
		obj := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, obj); err != nil {
			return err
		}
		patch := client.MergeFrom(obj.DeepCopy())
		var raw []byte
		if value != nil {
			var err error
			if raw, err = json.Marshal(value); err != nil {
				return err
			}
		}
		variables.SetOverride(obj, topology, raw)
		return c.Patch(ctx, obj, patch)
	}, "1m", "5s").Should(Succeed())
}

// vmProjectSession opens the VM project with the SharedNetwork's own
// credential, to ask Neutron what it shares.
func vmProjectSession(ctx context.Context) *openstack.Session {
	clouds, err := os.ReadFile(resolve(e2eConfig.MustGetVariable("SHAREDNET_VM_CLOUD_YAML_FILE")))
	Expect(err).NotTo(HaveOccurred())
	cloud := e2eConfig.MustGetVariable("SHAREDNET_VM_CLOUD")
	cred, err := openstack.CredentialFromData(map[string][]byte{"clouds.yaml": clouds}, "SHAREDNET_VM_CLOUD_YAML_FILE", cloud)
	Expect(err).NotTo(HaveOccurred())
	s, err := openstack.NewSession(ctx, cred, openstack.Options{})
	Expect(err).NotTo(HaveOccurred())
	return s
}

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/manager"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack/fakekeystone"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/internal/testbed"
	"github.com/capo-sharednet/capo-sharednet/internal/testenv"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

const (
	vmNetworkID = "2b1d0c5e-6f3a-4c1e-9d2b-0a1b2c3d4e5f"
	vmSubnet    = "7c9e6679-7425-40de-944b-e07fc1f90ae7" // 172.30.0.0/24: overlaps nothing
	// Subnets of one network that overlap the cluster, one per range.
	podsSubnet     = "11111111-1111-4111-8111-111111111111" // 192.168.10.0/24 in pods 192.168.0.0/16
	servicesSubnet = "22222222-2222-4222-8222-222222222222" // 10.96.5.0/24 in kubeadm's default 10.96.0.0/12
	nodesSubnet    = "33333333-3333-4333-8333-333333333333" // 10.6.0.0/25 in the node subnet 10.6.0.0/24
	twoSubnetsA    = "44444444-4444-4444-8444-444444444444"
	twoSubnetsB    = "55555555-5555-4555-8555-555555555555"

	grantLabel = "sharednet.capo.io/vm-net"
	podCIDR    = "192.168.0.0/16"
)

// nodegroup is what a rollout changes, by name and UID.
type nodegroup struct {
	MachineDeployment types.UID
	Template          string
	TemplateUID       types.UID
	MachineSets       []string // "name/uid", sorted
}

// state is every template a rollout could touch.
type state struct {
	Nodegroups           map[string]nodegroup
	ControlPlaneTemplate string
}

func TestAttachRollsOnlyThatNodegroupOnceAndDetachRollsItOnceMore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	ns := grantedNamespace(ctx, g)
	createSharedNetworks(ctx, g, ns)
	class := "shared-network"
	cluster, initial := clusterOfTheExtension(ctx, t, ns, class, "c1")
	g.Expect(ports(ctx, g, ns, initial.Nodegroups["md-a"].Template)).To(BeEmpty())

	t.Run("setting the variable alone rolls nothing until the network is shared", func(t *testing.T) {
		g := NewWithT(t)
		setValue(ctx, g, cluster, "md-a", fmt.Sprintf(`{"name":"vm-net","subnet":%q}`, vmSubnet))
		nudge(ctx, g, cluster)
		g.Consistently(func(g Gomega) {
			g.Expect(observe(ctx, g, cluster)).To(Equal(initial))
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	var attached state
	t.Run("once shared, only md-a's template rotates, with the shared port after the cluster port", func(t *testing.T) {
		g := NewWithT(t)
		establishShare(ctx, g, cluster, "md-a", "vm-net", vmSubnet)
		nudge(ctx, g, cluster)
		g.Eventually(func(g Gomega) {
			attached = observe(ctx, g, cluster)
			g.Expect(attached.Nodegroups["md-a"].Template).NotTo(Equal(initial.Nodegroups["md-a"].Template))
			g.Expect(attached.Nodegroups["md-a"].MachineSets).To(HaveLen(2))
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())

		g.Expect(attached.Nodegroups["md-a"].MachineDeployment).To(Equal(initial.Nodegroups["md-a"].MachineDeployment))
		g.Expect(attached.Nodegroups["md-a"].MachineSets).To(ContainElements(initial.Nodegroups["md-a"].MachineSets))
		g.Expect(attached.Nodegroups["md-b"]).To(Equal(initial.Nodegroups["md-b"]), "md-b must not roll")
		g.Expect(attached.ControlPlaneTemplate).To(Equal(initial.ControlPlaneTemplate), "the control plane must not roll")

		got := ports(ctx, g, ns, attached.Nodegroups["md-a"].Template)
		g.Expect(got).To(HaveLen(2))
		g.Expect(got[0]).To(Equal(infrav1.PortOpts{}), "the cluster network's default port stays first")
		g.Expect(*got[1].Network.ID).To(Equal(vmNetworkID))
		g.Expect(*got[1].FixedIPs[0].Subnet.ID).To(Equal(vmSubnet))
		g.Expect(got[1].Tags).To(ContainElement(sharedport.Tag))
		g.Expect(ports(ctx, g, ns, attached.Nodegroups["md-b"].Template)).To(BeEmpty())
	})

	t.Run("a restarted topology controller, a lost status and more reconciles roll nothing", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(env.StopCAPI()).To(Succeed())
		g.Expect(env.StartCAPI(ctx)).To(Succeed())
		nudge(ctx, g, cluster)
		g.Consistently(func(g Gomega) {
			g.Expect(observe(ctx, g, cluster)).To(Equal(attached))
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())

		// The sticky rule: with the share's status gone the port is kept,
		// because md-a's current template carries it.
		loseShareStatus(ctx, g, cluster, "md-a")
		nudge(ctx, g, cluster)
		g.Consistently(func(g Gomega) {
			g.Expect(observe(ctx, g, cluster)).To(Equal(attached))
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	t.Run("bad input is refused at admission and nothing rolls", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			change func(*clusterv1.Cluster)
			want   []string
		}{{
			name:   "a shared subnet overlapping the pods range",
			change: override("md-b", fmt.Sprintf(`{"name":"vm-bad","subnet":%q}`, podsSubnet)),
			want:   []string{`"md-b"`, "overlap", "192.168.10.0/24", podCIDR, "choose another subnet"},
		}, {
			name:   "a shared subnet overlapping kubeadm's default Service range",
			change: override("md-b", fmt.Sprintf(`{"name":"vm-bad","subnet":%q}`, servicesSubnet)),
			want:   []string{`"md-b"`, "overlap", "10.96.5.0/24", "10.96.0.0/12", "new cluster with a Service range"},
		}, {
			name:   "a shared subnet overlapping the cluster's node subnet",
			change: override("md-b", fmt.Sprintf(`{"name":"vm-bad","subnet":%q}`, nodesSubnet)),
			want:   []string{`"md-b"`, "overlap", "10.6.0.0/25", "10.6.0.0/24"},
		}, {
			name:   "moving an attached nodegroup to another network in one step",
			change: override("md-a", fmt.Sprintf(`{"name":"vm-two","subnet":%q}`, twoSubnetsA)),
			want:   []string{`"md-a"`, "one-network", "vm-net", "remove the variable (detach) first"},
		}, {
			name:   "a network the namespace was not granted",
			change: override("md-b", `{"name":"vm-restricted"}`),
			want:   []string{`"md-b"`, "granted", "vm-restricted", "namespaceSelector"},
		}, {
			name:   "a network with two subnets and none named",
			change: override("md-b", `{"name":"vm-two"}`),
			want:   []string{`"md-b"`, "one-subnet", twoSubnetsA, twoSubnetsB, "sharedNetwork.subnet"},
		}, {
			name:   "a value naming two subnets",
			change: override("md-b", fmt.Sprintf(`{"name":"vm-two","subnet":"%s,%s"}`, twoSubnetsA, twoSubnetsB)),
			want:   []string{"subnet"},
		}, {
			name: "a cluster-level value",
			change: func(c *clusterv1.Cluster) {
				c.Spec.Topology.Variables = append(c.Spec.Topology.Variables, clusterv1.ClusterVariable{
					Name: sharednetv1.VariableName, Value: apiextensionsv1.JSON{Raw: []byte(`{"name":"vm-net"}`)}})
			},
			want: []string{"whole cluster", "machineDeployments[].variables.overrides"},
		}} {
			t.Run(tc.name, func(t *testing.T) {
				g := NewWithT(t)
				err := updateCluster(ctx, cluster, tc.change)
				g.Expect(err).To(HaveOccurred(), "want the change refused")
				for _, w := range tc.want {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				g.Consistently(func(g Gomega) {
					g.Expect(observe(ctx, g, cluster)).To(Equal(attached))
				}, time.Second, 250*time.Millisecond).Should(Succeed())
			})
		}

		t.Run("a topology version below v1.35.0", func(t *testing.T) {
			g := NewWithT(t)
			c2 := testenv.Cluster(ns, "c2", class, "md-a")
			c2.Spec.Topology.Version = "v1.34.3"
			c2.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{podCIDR}
			override("md-a", `{"name":"vm-net"}`)(c2)
			err := env.Client.Create(ctx, c2)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(And(ContainSubstring(`"md-a"`), ContainSubstring("version"), ContainSubstring("v1.34.3"), ContainSubstring("v1.35.0")))
			g.Expect(apiGet(ctx, client.ObjectKeyFromObject(c2), &clusterv1.Cluster{})).NotTo(Succeed(), "nothing was created")
		})
	})

	t.Run("removing the variable rolls md-a exactly once more, back to no shared port", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(updateCluster(ctx, cluster, func(c *clusterv1.Cluster) {
			for i := range c.Spec.Topology.Workers.MachineDeployments {
				c.Spec.Topology.Workers.MachineDeployments[i].Variables.Overrides = nil
			}
		})).To(Succeed())
		var detached state
		g.Eventually(func(g Gomega) {
			detached = observe(ctx, g, cluster)
			g.Expect(detached.Nodegroups["md-a"].Template).NotTo(Equal(attached.Nodegroups["md-a"].Template))
			// The new template's MachineSet follows it by a moment.
			g.Expect(detached.Nodegroups["md-a"].MachineSets).To(HaveLen(3))
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
		g.Consistently(func(g Gomega) {
			now := observe(ctx, g, cluster)
			g.Expect(now).To(Equal(detached), "one rotation only")
			g.Expect(now.Nodegroups["md-a"].MachineSets).To(HaveLen(3))
			g.Expect(now.Nodegroups["md-a"].MachineSets).To(ContainElements(attached.Nodegroups["md-a"].MachineSets))
			g.Expect(now.Nodegroups["md-b"]).To(Equal(initial.Nodegroups["md-b"]))
			g.Expect(now.ControlPlaneTemplate).To(Equal(initial.ControlPlaneTemplate))
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
		g.Expect(ports(ctx, g, ns, detached.Nodegroups["md-a"].Template)).To(BeEmpty())
	})
}

// clusterOfTheExtension creates, in ns, a ClusterClass whose external patch
// is this extension, the identity Secret its OpenStackClusterTemplate names
// (admission asks the cluster's project with it), and a Cluster with md-a and
// md-b; it returns the Cluster once both nodegroups have their MachineSet.
func clusterOfTheExtension(ctx context.Context, t *testing.T, ns, class, name string) (*clusterv1.Cluster, state) {
	g := NewWithT(t)
	clusterIdentity(ctx, t, ns, class)
	g.Expect(env.CreateObjects(ctx, testenv.ClusterClass(ns, class, clusterv1.ClusterClassPatch{
		Name: "shared-network",
		External: &clusterv1.ExternalPatchDefinition{
			GeneratePatchesExtension:   "generate-patches." + extensionConfigName,
			ValidateTopologyExtension:  "validate-topology." + extensionConfigName,
			DiscoverVariablesExtension: "discover-variables." + extensionConfigName,
		},
	})...)).To(Succeed())
	g.Expect(env.WaitForClusterClass(ctx, ns, class)).To(Succeed())
	cluster := testenv.Cluster(ns, name, class, "md-a", "md-b")
	cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{podCIDR}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	var initial state
	g.Eventually(func(g Gomega) {
		initial = observe(ctx, g, cluster)
		g.Expect(initial.Nodegroups).To(HaveLen(2))
		for _, ng := range initial.Nodegroups {
			g.Expect(ng.MachineSets).To(HaveLen(1))
		}
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
	return cluster, initial
}

// clusterIdentity writes the identityRef Secret the harness's
// OpenStackClusterTemplate names (<class>-cloud-config, cloud "openstack")
// with the test bed's cluster-project credential.
func clusterIdentity(ctx context.Context, t *testing.T, ns, class string) {
	g := NewWithT(t)
	var clouds map[string]map[string]any
	g.Expect(yaml.Unmarshal(testbed.CloudsYAML(t), &clouds)).To(Succeed())
	clouds["clouds"]["openstack"] = clouds["clouds"][testbed.ClusterProject]
	raw, err := yaml.Marshal(clouds)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: class + "-cloud-config"},
		Data:       map[string][]byte{openstack.CloudsSecretKey: raw},
	})).To(Succeed())
}

// grantedNamespace makes a namespace the SharedNetwork vm-net grants.
func grantedNamespace(ctx context.Context, g Gomega) string {
	ns, err := env.CreateNamespace(ctx, "team-a")
	g.Expect(err).NotTo(HaveOccurred())
	obj := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, obj)).To(Succeed())
	obj.Labels[grantLabel] = "true"
	g.Expect(env.Client.Update(ctx, obj)).To(Succeed())
	return ns
}

// createSharedNetworks creates the administrator's SharedNetworks with the
// status their controller would read from Neutron.
func createSharedNetworks(ctx context.Context, g Gomega, ns string) {
	// Their VM project is the test bed's (when it runs): admission asks its
	// Keystone to vouch for the cluster's project. The network is made up,
	// so the SharedNetwork controller keeps the facts written below.
	if path := os.Getenv(testbed.CloudsEnv); path != "" {
		clouds, err := os.ReadFile(filepath.Clean(path))
		g.Expect(err).NotTo(HaveOccurred())
		err = env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: manager.DefaultNamespace, Name: "vm-project"},
			Data: map[string][]byte{openstack.CloudsSecretKey: clouds}})
		g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	}
	granted := &metav1.LabelSelector{MatchLabels: map[string]string{grantLabel: "true"}}
	subnet := func(id, cidr string) sharednetv1.SubnetStatus {
		return sharednetv1.SubnetStatus{ID: id, CIDR: cidr, IPVersion: 4, FreeAddresses: 200}
	}
	for _, sn := range []struct {
		name     string
		selector *metav1.LabelSelector
		subnets  []sharednetv1.SubnetStatus
	}{
		{"vm-net", granted, []sharednetv1.SubnetStatus{subnet(vmSubnet, "172.30.0.0/24")}},
		{"vm-bad", granted, []sharednetv1.SubnetStatus{subnet(podsSubnet, "192.168.10.0/24"), subnet(servicesSubnet, "10.96.5.0/24"), subnet(nodesSubnet, "10.6.0.0/25")}},
		{"vm-two", granted, []sharednetv1.SubnetStatus{subnet(twoSubnetsA, "172.31.0.0/24"), subnet(twoSubnetsB, "172.31.1.0/24")}},
		{"vm-restricted", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "other"}}, []sharednetv1.SubnetStatus{subnet("66666666-6666-4666-8666-666666666666", "172.29.0.0/24")}},
	} {
		obj := &sharednetv1.SharedNetwork{
			ObjectMeta: metav1.ObjectMeta{Name: sn.name},
			Spec: sharednetv1.SharedNetworkSpec{
				Identity:          sharednetv1.VMProjectIdentity{SecretName: "vm-project", CloudName: "vm-project"},
				NetworkID:         vmNetworkID,
				NamespaceSelector: sn.selector,
			},
		}
		for _, s := range sn.subnets {
			obj.Spec.Subnets = append(obj.Spec.Subnets, s.ID)
		}
		if err := env.Client.Create(ctx, obj); err != nil {
			g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
			continue
		}
		// The SharedNetwork controller (with no credential for these) writes
		// status too: retry on conflicts; it keeps facts it cannot refresh.
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			obj.Status.MTU, obj.Status.Subnets = 1450, sn.subnets
			return env.Client.Status().Update(ctx, obj)
		})).To(Succeed())
	}
	_ = ns
}

// establishShare records the share as the attachment controller does once
// Neutron holds the RBAC policy.
func establishShare(ctx context.Context, g Gomega, cluster *clusterv1.Cluster, topology, network, subnet string) {
	a := &sharednetv1.SharedNetworkAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: sharednetv1.AttachmentName(cluster.Name, topology)},
		Spec: sharednetv1.SharedNetworkAttachmentSpec{
			ClusterName: cluster.Name, MachineDeploymentTopology: topology, SharedNetwork: network, Subnet: subnet,
		},
	}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	a.Status.Phase = sharednetv1.PhaseRollingOut
	a.Status.Share = &sharednetv1.Share{ProjectID: "cluster-project", RBACPolicyID: "rbac-1"}
	g.Expect(env.Client.Status().Update(ctx, a)).To(Succeed())
}

func loseShareStatus(ctx context.Context, g Gomega, cluster *clusterv1.Cluster, topology string) {
	a := &sharednetv1.SharedNetworkAttachment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: sharednetv1.AttachmentName(cluster.Name, topology)}, a)).To(Succeed())
	a.Status = sharednetv1.SharedNetworkAttachmentStatus{}
	g.Expect(env.Client.Status().Update(ctx, a)).To(Succeed())
}

// nudge makes the topology controller reconcile the Cluster (an annotation
// change is enough), as the attachment controller does after sharing.
func nudge(ctx context.Context, g Gomega, cluster *clusterv1.Cluster) {
	g.Expect(updateCluster(ctx, cluster, func(c *clusterv1.Cluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations["sharednet.capo.io/nudge"] = time.Now().Format(time.RFC3339Nano)
	})).To(Succeed())
}

func override(topology, value string) func(*clusterv1.Cluster) {
	return func(c *clusterv1.Cluster) { variables.SetOverride(c, topology, []byte(value)) }
}

func setValue(ctx context.Context, g Gomega, cluster *clusterv1.Cluster, topology, value string) {
	g.Expect(updateCluster(ctx, cluster, override(topology, value))).To(Succeed())
}

// updateCluster applies change to the latest Cluster; a refusal is returned.
func updateCluster(ctx context.Context, cluster *clusterv1.Cluster, change func(*clusterv1.Cluster)) error {
	for {
		latest := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), latest); err != nil {
			return err
		}
		change(latest)
		err := env.Client.Update(ctx, latest)
		if err == nil || !isConflict(err) {
			return err
		}
	}
}

// observe reads every template a rollout could change, by name and UID.
func observe(ctx context.Context, g Gomega, cluster *clusterv1.Cluster) state {
	s := state{Nodegroups: map[string]nodegroup{}}
	mds := &clusterv1.MachineDeploymentList{}
	g.Expect(env.Client.List(ctx, mds, client.InNamespace(cluster.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name})).To(Succeed())
	for _, md := range mds.Items {
		topology := md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]
		tmpl := &infrav1.OpenStackMachineTemplate{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: md.Spec.Template.Spec.InfrastructureRef.Name}, tmpl)).To(Succeed())
		ng := nodegroup{MachineDeployment: md.UID, Template: tmpl.Name, TemplateUID: tmpl.UID}
		sets := &clusterv1.MachineSetList{}
		g.Expect(env.Client.List(ctx, sets, client.InNamespace(md.Namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name})).To(Succeed())
		for _, ms := range sets.Items {
			ng.MachineSets = append(ng.MachineSets, ms.Name+"/"+string(ms.UID))
		}
		sort.Strings(ng.MachineSets)
		s.Nodegroups[topology] = ng
	}
	c := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
	if c.Spec.ControlPlaneRef.Name != "" {
		kcp := &controlplanev1.KubeadmControlPlane{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}, kcp)).To(Succeed())
		s.ControlPlaneTemplate = kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name
	}
	return s
}

func ports(ctx context.Context, g Gomega, ns, template string) []infrav1.PortOpts {
	tmpl := &infrav1.OpenStackMachineTemplate{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: template}, tmpl)).To(Succeed())
	return tmpl.Spec.Template.Spec.Ports
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }

func apiGet(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	return env.Client.Get(ctx, key, obj)
}

// TestAClusterOfAnotherKeystoneIsRefused: a tenant points its cluster's
// clouds.yaml at a Keystone of its own (a FAKE on 127.0.0.1 that claims the
// test bed's cluster project) and attaches: admission refuses it, naming
// the rule and the cluster's own Keystone, and nothing rolls.
func TestAClusterOfAnotherKeystoneIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createSharedNetworks(ctx, g, "")
	ns := grantedNamespace(ctx, g)
	c, initial := clusterOfTheExtension(ctx, t, ns, "foreign", "c-foreign")

	keystone := fakekeystone.Start(t, fakekeystone.Options{Project: testbed.NewClients(t, testbed.ClusterProject).ProjectID})
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "foreign-cloud-config"}, secret)).To(Succeed())
	secret.Data[openstack.CloudsSecretKey] = keystone.CloudsYAML("openstack")
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())

	err := updateCluster(ctx, c, override("md-a", `{"name":"vm-net"}`))
	g.Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("same-cloud:"), ContainSubstring(keystone.URL), ContainSubstring("another Keystone"))))
	g.Consistently(func(g Gomega) {
		g.Expect(observe(ctx, g, c)).To(Equal(initial))
	}, 2*time.Second, 250*time.Millisecond).Should(Succeed())
}

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

package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakekeystone"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

const (
	grantLabel = "sharednet.capo.io/vm-net"
	podCIDR    = "192.168.0.0/16"
)

// The administrator's networks: real networks of the test bed's VM project,
// made once per run by createSharedNetworks.
var (
	vmNetworkID string
	vmSubnet    string // vm-net: 172.30.0.0/24, overlaps nothing
	// vm-bad: one subnet per range of the cluster it overlaps.
	podsSubnet     string // 192.168.10.0/24 in pods 192.168.0.0/16
	servicesSubnet string // 10.96.5.0/24 in kubeadm's default 10.96.0.0/12
	nodesSubnet    string // 10.6.0.0/25 in the node subnet 10.6.0.0/24
	// vm-two: two subnets.
	twoSubnetsA, twoSubnetsB string
	// vm-small: 172.28.0.0/24 with 4 addresses in its allocation pool.
	smallSubnet string

	fixtureOnce sync.Once
	fixtureErr  error
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
	createSharedNetworks(ctx, t)
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
			want:   []string{`"md-b"`, "granted", "vm-restricted", "does not exist or is not granted to namespace"},
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

		t.Run("a new cluster whose nodeCIDR variable is the shared subnet", func(t *testing.T) {
			g := NewWithT(t)
			// The overlap is checked against what the ClusterClass patches
			// the variable into, not the template's default.
			c3 := testenv.Cluster(ns, "c3", class, "md-a")
			c3.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{podCIDR}
			c3.Spec.Topology.Variables = append(c3.Spec.Topology.Variables, clusterv1.ClusterVariable{Name: "nodeCIDR", Value: apiextensionsv1.JSON{Raw: []byte(`"172.30.0.0/24"`)}})
			override("md-a", fmt.Sprintf(`{"name":"vm-net","subnet":%q}`, vmSubnet))(c3)
			err := env.Client.Create(ctx, c3)
			g.Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("overlap:"), ContainSubstring("172.30.0.0/24"), ContainSubstring("node"))))
			g.Expect(apiGet(ctx, client.ObjectKeyFromObject(c3), &clusterv1.Cluster{})).NotTo(Succeed(), "nothing was created")

			// The same cluster with a node subnet of its own is admitted.
			c3.Spec.Topology.Variables[len(c3.Spec.Topology.Variables)-1].Value.Raw = []byte(`"10.7.0.0/24"`)
			g.Expect(env.Client.Create(ctx, c3)).To(Succeed())
			g.Expect(env.Client.Delete(ctx, c3)).To(Succeed())
		})

		t.Run("growing an attached nodegroup past the room on its subnet is refused with the numbers; nothing rolls", func(t *testing.T) {
			g := NewWithT(t)
			// vm-small's pool has 4 addresses: md-b at 1 replica in 1 zone needs 2.
			setValue(ctx, g, cluster, "md-b", fmt.Sprintf(`{"name":"vm-small","subnet":%q}`, smallSubnet))
			before := observe(ctx, g, cluster)
			for _, tc := range []struct {
				name   string
				change func(*clusterv1.Cluster)
				want   []string
			}{{
				name:   "replicas 1 -> 6",
				change: func(c *clusterv1.Cluster) { topologyOf(c, "md-b").Replicas = ptr.To[int32](6) },
				want:   []string{`"md-b"`, "capacity:", "has 4 free addresses", "needs 7 (max size 6 + 1 availability zone(s))", "3 more addresses"},
			}, {
				name: "the autoscaler's max size 10",
				change: func(c *clusterv1.Cluster) {
					md := topologyOf(c, "md-b")
					md.Replicas = nil
					md.Metadata.Annotations = map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "1", clusterv1.AutoscalerMaxSizeAnnotation: "10"}
				},
				want: []string{`"md-b"`, "capacity:", "has 4 free addresses", "needs 11 (max size 10 + 1"},
			}, {
				name: "a max size that would wrap around",
				change: func(c *clusterv1.Cluster) {
					md := topologyOf(c, "md-b")
					md.Replicas = nil // CAPI refuses replicas next to the autoscaler's annotations
					md.Metadata.Annotations = map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "1", clusterv1.AutoscalerMaxSizeAnnotation: "9223372036854775807"}
				},
				want: []string{`"md-b"`, "capacity:", `"9223372036854775807" is not a node count`},
			}} {
				t.Run(tc.name, func(t *testing.T) {
					g := NewWithT(t)
					err := updateCluster(ctx, cluster, tc.change)
					g.Expect(err).To(HaveOccurred(), "want the growth refused")
					for _, w := range tc.want {
						g.Expect(err.Error()).To(ContainSubstring(w))
					}
					latest := &clusterv1.Cluster{}
					g.Expect(apiGet(ctx, client.ObjectKeyFromObject(cluster), latest)).To(Succeed())
					g.Expect(topologyOf(latest, "md-b").Replicas).To(Equal(ptr.To[int32](1)), "the Cluster is as it was")
					g.Consistently(func(g Gomega) {
						g.Expect(observe(ctx, g, cluster)).To(Equal(before), "no new MachineSet, no template rotation")
					}, time.Second, 250*time.Millisecond).Should(Succeed())
				})
			}
			// Shrinking is never refused.
			g.Expect(updateCluster(ctx, cluster, func(c *clusterv1.Cluster) { topologyOf(c, "md-b").Replicas = ptr.To[int32](0) })).To(Succeed())
			g.Expect(updateCluster(ctx, cluster, func(c *clusterv1.Cluster) {
				md := topologyOf(c, "md-b")
				md.Replicas = ptr.To[int32](1)
				md.Variables.Overrides = nil
			})).To(Succeed())
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
	t.Helper()
	g := NewWithT(t)
	clusterIdentity(ctx, t, ns, class)
	objs := testenv.ClusterClass(ns, class, clusterv1.ClusterClassPatch{
		Name: "shared-network",
		External: &clusterv1.ExternalPatchDefinition{
			GeneratePatchesExtension:   "generate-patches." + extensionConfigName,
			ValidateTopologyExtension:  "validate-topology." + extensionConfigName,
			DiscoverVariablesExtension: "discover-variables." + extensionConfigName,
		},
	}, nodeSubnetPatch)
	cc := objs[len(objs)-1].(*clusterv1.ClusterClass)
	cc.Spec.Variables = append(cc.Spec.Variables, nodeCIDRVariable)
	g.Expect(env.CreateObjects(ctx, objs...)).To(Succeed())
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

// nodeCIDRVariable and nodeSubnetPatch set the node subnet CAPO creates, as
// templates/clusterclass-shared-network.yaml does.
var (
	nodeCIDRVariable = clusterv1.ClusterClassVariable{Name: "nodeCIDR", Required: ptr.To(false), Schema: clusterv1.VariableSchema{
		OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"10.6.0.0/24"`)}}}}
	nodeSubnetPatch = clusterv1.ClusterClassPatch{Name: "nodeSubnet", Definitions: []clusterv1.PatchDefinition{{
		Selector: clusterv1.PatchSelector{APIVersion: infrav1.SchemeGroupVersion.String(), Kind: "OpenStackClusterTemplate",
			MatchResources: clusterv1.PatchSelectorMatch{InfrastructureCluster: ptr.To(true)}},
		JSONPatches: []clusterv1.JSONPatch{{Op: "replace", Path: "/spec/template/spec/managedSubnets",
			ValueFrom: &clusterv1.JSONPatchValue{Template: "- cidr: {{ .nodeCIDR | quote }}"}}},
	}}}
)

// clusterIdentity writes the identityRef Secret the harness's
// OpenStackClusterTemplate names (<class>-cloud-config, cloud "openstack")
// with the test bed's cluster-project credential.
func clusterIdentity(ctx context.Context, t *testing.T, ns, class string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: class + "-cloud-config"},
		Data:       map[string][]byte{openstack.CloudsSecretKey: cloudsAs(t, testbed.ClusterProject)},
	})).To(Succeed())
}

// cloudsAs is the test bed's clouds.yaml whose cloud "openstack" (the one
// the harness's identityRef names) authenticates as project.
func cloudsAs(t *testing.T, project string) []byte {
	t.Helper()
	g := NewWithT(t)
	var clouds map[string]map[string]any
	g.Expect(yaml.Unmarshal(testbed.CloudsYAML(t), &clouds)).To(Succeed())
	clouds["clouds"]["openstack"] = clouds["clouds"][project]
	raw, err := yaml.Marshal(clouds)
	g.Expect(err).NotTo(HaveOccurred())
	return raw
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

// createSharedNetworks creates the administrator's SharedNetworks over real
// networks of the test bed's VM project and waits until their controller has
// read the facts from Neutron: admission decides on fresh facts only.
func createSharedNetworks(ctx context.Context, tb testing.TB) {
	tb.Helper()
	g := NewWithT(tb)
	clouds := testbed.CloudsYAML(tb) // skips without the test bed
	vm := testbed.NewClients(tb, testbed.VMProject)
	fixtureOnce.Do(func() { fixtureErr = makeNetworks(ctx, vm.Network) })
	g.Expect(fixtureErr).NotTo(HaveOccurred())

	err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "vm-project"},
		Data: map[string][]byte{openstack.CloudsSecretKey: clouds}})
	g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	granted := &metav1.LabelSelector{MatchLabels: map[string]string{grantLabel: "true"}}
	for _, sn := range []struct {
		name, network string
		selector      *metav1.LabelSelector
		subnets       []string
	}{
		{"vm-net", vmNetworkID, granted, []string{vmSubnet}},
		{"vm-bad", networkOf[podsSubnet], granted, []string{podsSubnet, servicesSubnet, nodesSubnet}},
		{"vm-two", networkOf[twoSubnetsA], granted, []string{twoSubnetsA, twoSubnetsB}},
		{"vm-small", networkOf[smallSubnet], granted, []string{smallSubnet}},
		{"vm-restricted", networkOf[restrictedSubnet], &metav1.LabelSelector{MatchLabels: map[string]string{"team": "other"}}, []string{restrictedSubnet}},
	} {
		obj := &sharednetv1.SharedNetwork{
			ObjectMeta: metav1.ObjectMeta{Name: sn.name},
			Spec: sharednetv1.SharedNetworkSpec{
				Identity:          sharednetv1.VMProjectIdentity{SecretName: "vm-project", CloudName: testbed.VMProject},
				NetworkID:         sn.network,
				Subnets:           sn.subnets,
				NamespaceSelector: sn.selector,
			},
		}
		g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, obj))).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(obj.Status.Conditions, sharednetv1.ReadyCondition)).To(BeTrue(), "%+v", obj.Status.Conditions)
			g.Expect(obj.Status.Subnets).To(HaveLen(len(sn.subnets)))
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	}
}

var (
	restrictedSubnet string                // vm-restricted: 172.29.0.0/24, granted to no test namespace
	networkOf        = map[string]string{} // subnet ID -> network ID
)

// makeNetworks creates the networks and subnets of the SharedNetworks.
func makeNetworks(ctx context.Context, c *gophercloud.ServiceClient) error {
	for _, n := range []struct {
		name    string
		network *string
		subnets map[string]*string // CIDR -> ID
		pool    *subnets.AllocationPool
	}{
		{name: "vm-net", network: &vmNetworkID, subnets: map[string]*string{"172.30.0.0/24": &vmSubnet}},
		{name: "vm-bad", subnets: map[string]*string{"192.168.10.0/24": &podsSubnet, "10.96.5.0/24": &servicesSubnet, "10.6.0.0/25": &nodesSubnet}},
		{name: "vm-two", subnets: map[string]*string{"172.31.0.0/24": &twoSubnetsA, "172.31.1.0/24": &twoSubnetsB}},
		{name: "vm-small", subnets: map[string]*string{"172.28.0.0/24": &smallSubnet}, pool: &subnets.AllocationPool{Start: "172.28.0.10", End: "172.28.0.13"}},
		{name: "vm-restricted", subnets: map[string]*string{"172.29.0.0/24": &restrictedSubnet}},
	} {
		network, err := networks.Create(ctx, c, networks.CreateOpts{Name: "integration-" + n.name}).Extract()
		if err != nil {
			return fmt.Errorf("network %s: %w", n.name, err)
		}
		if n.network != nil {
			*n.network = network.ID
		}
		for cidr, id := range n.subnets {
			opts := subnets.CreateOpts{NetworkID: network.ID, CIDR: cidr, IPVersion: 4, EnableDHCP: ptr.To(false)}
			if n.pool != nil {
				opts.AllocationPools = []subnets.AllocationPool{*n.pool}
			}
			s, err := subnets.Create(ctx, c, opts).Extract()
			if err != nil {
				return fmt.Errorf("subnet %s of %s: %w", cidr, n.name, err)
			}
			*id = s.ID
			networkOf[s.ID] = network.ID
		}
	}
	return nil
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

// loseShareStatus empties the attachment's status, as a restore without
// status or a lost write would; a write of another controller in between
// (the workload guardrails write the same status) is retried.
func loseShareStatus(ctx context.Context, g Gomega, cluster *clusterv1.Cluster, topology string) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		a := &sharednetv1.SharedNetworkAttachment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: sharednetv1.AttachmentName(cluster.Name, topology)}, a); err != nil {
			return err
		}
		a.Status = sharednetv1.SharedNetworkAttachmentStatus{}
		return env.Client.Status().Update(ctx, a)
	})).To(Succeed())
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

func topologyOf(c *clusterv1.Cluster, topology string) *clusterv1.MachineDeploymentTopology {
	for i := range c.Spec.Topology.Workers.MachineDeployments {
		if c.Spec.Topology.Workers.MachineDeployments[i].Name == topology {
			return &c.Spec.Topology.Workers.MachineDeployments[i]
		}
	}
	panic("no MachineDeployment topology " + topology)
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
	createSharedNetworks(ctx, t)
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

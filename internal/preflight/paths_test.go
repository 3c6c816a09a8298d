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

package preflight

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
)

// world is a management cluster over controller-runtime's fake client and
// the in-memory fake cloud: namespace team-a granted SharedNetwork "vm"
// (network MTU 1450, subnet 172.16.5.0/24; its status says what the test
// sets), Cluster team-a/demo of ClusterClass "class" whose md-a asks for it.
type world struct {
	t        *testing.T
	cloud    *fakecloud.Cloud
	project  *fakecloud.Project
	sn       *sharednetv1.SharedNetwork
	cluster  *clusterv1.Cluster
	objs     []client.Object
	now      time.Time
	vmSubnet string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	cloud := fakecloud.New()
	network, subnet := cloud.AddNetwork("vm-project", 1450, "172.16.5.0/24")
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	refreshed := metav1.NewTime(now.Add(-time.Minute))
	w := &world{t: t, cloud: cloud, now: now, vmSubnet: subnet, project: &fakecloud.Project{Cloud: cloud, ID: "cluster-project"}}
	w.sn = &sharednetv1.SharedNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "vm"},
		Spec: sharednetv1.SharedNetworkSpec{NetworkID: network, Subnets: []string{subnet},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"vm": "yes"}}},
		Status: sharednetv1.SharedNetworkStatus{MTU: 1450, LastRefreshTime: &refreshed,
			Subnets:    []sharednetv1.SubnetStatus{{ID: subnet, CIDR: "172.16.5.0/24", FreeAddresses: ptr.To[int64](200)}},
			Conditions: []metav1.Condition{{Type: sharednetv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: sharednetv1.ReasonFactsCurrent, LastTransitionTime: refreshed}}},
	}
	w.cluster = &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.35.0",
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{Class: "w", Name: "md-a", Replicas: ptr.To[int32](1)}}}}},
	}
	variables.SetOverride(w.cluster, "md-a", []byte(`{"name":"vm"}`))
	w.objs = []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"vm": "yes"}}}}
	return w
}

// running gives the Cluster the OpenStackCluster CAPO made, with a cluster
// network of mtu in the cluster's project.
func (w *world) running(mtu int) {
	network, subnet := w.cloud.AddNetwork("cluster-project", mtu, "10.6.0.0/24")
	osc := &infrav1.OpenStackCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
		Spec:       infrav1.OpenStackClusterSpec{ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "10.6.0.0/24"}}},
		Status: infrav1.OpenStackClusterStatus{Network: &infrav1.NetworkStatusWithSubnets{
			NetworkStatus: infrav1.NetworkStatus{ID: network}, Subnets: []infrav1.Subnet{{ID: subnet, CIDR: "10.6.0.0/24"}}}},
	}
	w.project.OpenStackCluster = osc
	w.cluster.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.SchemeGroupVersion.Group, Kind: "OpenStackCluster", Name: "demo"}
	w.objs = append(w.objs, osc)
}

// class adds ClusterClass "class" whose OpenStackClusterTemplate gets its
// node subnet from the nodeCIDR variable (default 10.6.0.0/24), as the
// shipped ClusterClass does, and its MTU from networkMTU when set.
func (w *world) class() {
	tmpl := &infrav1.OpenStackClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "class-openstackcluster"},
		Spec: infrav1.OpenStackClusterTemplateSpec{Template: infrav1.OpenStackClusterTemplateResource{Spec: infrav1.OpenStackClusterSpec{
			ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "10.255.0.0/24"}}}}}}
	str := func(s string) clusterv1.VariableSchema {
		return clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"` + s + `"`)}}}
	}
	selector := clusterv1.PatchSelector{APIVersion: infrav1.SchemeGroupVersion.String(), Kind: "OpenStackClusterTemplate",
		MatchResources: clusterv1.PatchSelectorMatch{InfrastructureCluster: ptr.To(true)}}
	cc := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "class"}, Spec: clusterv1.ClusterClassSpec{
		Infrastructure: clusterv1.InfrastructureClass{TemplateRef: clusterv1.ClusterClassTemplateReference{Kind: "OpenStackClusterTemplate", Name: tmpl.Name}},
		Variables:      []clusterv1.ClusterClassVariable{{Name: "nodeCIDR", Schema: str("10.6.0.0/24")}, {Name: "networkMTU", Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "integer"}}}},
		Patches: []clusterv1.ClusterClassPatch{{
			Name: "nodeSubnet", Definitions: []clusterv1.PatchDefinition{{Selector: selector, JSONPatches: []clusterv1.JSONPatch{{
				Op: "replace", Path: "/spec/template/spec/managedSubnets", ValueFrom: &clusterv1.JSONPatchValue{Template: "- cidr: {{ .nodeCIDR | quote }}"}}}}},
		}, {
			Name: "networkMTU", EnabledIf: "{{ if .networkMTU }}true{{ end }}", Definitions: []clusterv1.PatchDefinition{{Selector: selector, JSONPatches: []clusterv1.JSONPatch{{
				Op: "add", Path: "/spec/template/spec/networkMTU", ValueFrom: &clusterv1.JSONPatchValue{Variable: "networkMTU"}}}}},
		}},
	}}
	w.objs = append(w.objs, tmpl, cc)
}

func (w *world) variable(name, raw string) {
	w.cluster.Spec.Topology.Variables = append(w.cluster.Spec.Topology.Variables, clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: []byte(raw)}})
}

func (w *world) checker() *Checker {
	scheme := sharednetscheme.New()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(w.objs, w.sn, w.cluster)...).WithIndex(&clusterv1.Cluster{}, consumers.SharedNetworkIndex, consumers.SharedNetworksOf).Build()
	return &Checker{Reader: c, Now: func() time.Time { return w.now }, Cloud: &fakecloud.Clouds{
		Clusters:       map[string]*fakecloud.Project{"team-a/demo": w.project},
		SharedNetworks: map[string]*fakecloud.Project{"vm": {Cloud: w.cloud, ID: "vm-project"}},
	}}
}

func md(c *clusterv1.Cluster, name string) *clusterv1.MachineDeploymentTopology {
	for i := range c.Spec.Topology.Workers.MachineDeployments {
		if c.Spec.Topology.Workers.MachineDeployments[i].Name == name {
			return &c.Spec.Topology.Workers.MachineDeployments[i]
		}
	}
	panic(name)
}

var value = sharednetv1.SharedNetworkVariable{Name: "vm"}

func TestCreationChecksWhatTheClusterAsksFor(t *testing.T) {
	t.Run("the nodeCIDR variable, as the ClusterClass patches it in, overlapping the shared subnet: refused", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t)
		w.class()
		w.variable("nodeCIDR", `"172.16.5.0/24"`)
		err := ask(w.checker(), Attach, w.cluster)
		g.Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("overlap:"), ContainSubstring("172.16.5.0/24"))))
	})
	t.Run("the class's default node subnet, not the template's, when the Cluster sets none: admitted", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t)
		w.class()
		g.Expect(ask(w.checker(), Attach, w.cluster)).To(Succeed())
		nw, err := w.checker().clusterNetwork(context.Background(), &gathering{q: Question{Cluster: w.cluster}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nw.subnetCIDRs).To(Equal([]string{"10.6.0.0/24"}))
	})
	t.Run("a network MTU the Cluster asks for that differs from the shared network's: refused", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t)
		w.class()
		w.variable("networkMTU", `1400`)
		err := ask(w.checker(), Attach, w.cluster)
		g.Expect(err).To(MatchError(And(ContainSubstring("mtu:"), ContainSubstring("MTU 1450 but the cluster network has MTU 1400"))))
	})
	t.Run("an MTU left to Neutron is not decided at admission but before the share", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t)
		w.class()
		c := w.checker()
		g.Expect(ask(c, Attach, w.cluster)).To(Succeed())
		d, err := c.Decide(context.Background(), Question{Ask: BeforeShare, Cluster: w.cluster, Nodegroup: "md-a", Value: value})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Waiting).To(ContainSubstring("waiting for CAPO to create the cluster network"), "waits for the cluster network")
		g.Expect(d.Refusal).To(BeEmpty())
	})
}

func TestBeforeShareRunsEveryRuleOnTheClusterCAPOMade(t *testing.T) {
	t.Run("MTU", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t)
		w.running(1500)
		err := ask(w.checker(), BeforeShare, w.cluster)
		g.Expect(err).To(MatchError(And(ContainSubstring("mtu:"), ContainSubstring("MTU 1450 but the cluster network has MTU 1500"))))
	})
	t.Run("the cluster project's port quota", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t)
		w.running(1450)
		w.project.PortQuota = &openstack.Quota{Limit: 10, Used: 9}
		err := ask(w.checker(), BeforeShare, w.cluster)
		g.Expect(err).To(MatchError(And(ContainSubstring("capacity:"), ContainSubstring("port quota allows 1 more ports"), ContainSubstring("needs 2"))))
	})
	t.Run("every rule holds", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t)
		w.running(1450)
		g.Expect(ask(w.checker(), BeforeShare, w.cluster)).To(Succeed())
	})
}

func TestGrowthOfAnAttachedNodegroup(t *testing.T) {
	grow := func(change func(*clusterv1.Cluster)) (*world, *clusterv1.Cluster) {
		w := newWorld(t)
		w.running(1450)
		old := w.cluster.DeepCopy()
		change(w.cluster)
		return w, old
	}
	for _, tc := range []struct {
		name   string
		change func(*clusterv1.Cluster)
		grows  bool
	}{
		{"more replicas", func(c *clusterv1.Cluster) { md(c, "md-a").Replicas = ptr.To[int32](6) }, true},
		{"fewer replicas", func(c *clusterv1.Cluster) { md(c, "md-a").Replicas = ptr.To[int32](0) }, false},
		{"the autoscaler's max size above replicas", func(c *clusterv1.Cluster) {
			md(c, "md-a").Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "5"}
		}, true},
		{"a failure domain given up: the nodegroup spreads over the cluster's three", func(c *clusterv1.Cluster) {
			c.Status.FailureDomains = []clusterv1.FailureDomain{{Name: "az-1"}, {Name: "az-2"}, {Name: "az-3"}}
		}, true},
		{"nothing about its size", func(c *clusterv1.Cluster) { c.Labels = map[string]string{"x": "y"} }, false},
		{"replicas removed: CAPI leaves the MachineDeployment to kubectl scale", func(c *clusterv1.Cluster) { md(c, "md-a").Replicas = nil }, true},
		{"replicas removed, the autoscaler's max size kept", func(c *clusterv1.Cluster) {
			md(c, "md-a").Replicas = nil
			md(c, "md-a").Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "1"}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w, old := grow(tc.change)
			if tc.name == "a failure domain given up: the nodegroup spreads over the cluster's three" {
				md(old, "md-a").FailureDomain = "az-1"
			}
			g.Expect(Grows(old, w.cluster, "md-a")).To(Equal(tc.grows))
		})
	}

	t.Run("past the free addresses: refused with needed, free and who holds what", func(t *testing.T) {
		g := NewWithT(t)
		w, _ := grow(func(c *clusterv1.Cluster) { md(c, "md-a").Replicas = ptr.To[int32](6) })
		w.sn.Status.Subnets[0].FreeAddresses = ptr.To[int64](8)
		other := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "other"}, Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{Name: "md-x", Replicas: ptr.To[int32](3)}}}}}}
		variables.SetOverride(other, "md-x", []byte(`{"name":"vm"}`))
		holds := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: sharednetv1.AttachmentName("other", "md-x")},
			Spec:   sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "other", MachineDeploymentTopology: "md-x", SharedNetwork: "vm"},
			Status: sharednetv1.SharedNetworkAttachmentStatus{Nodes: []sharednetv1.AttachedNode{{}, {}}}}
		w.objs = append(w.objs, other, holds)
		err := judgeGrowth(w.checker(), w.cluster)
		g.Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("capacity:"), ContainSubstring("has 8 free addresses"),
			ContainSubstring("needs 7 (max size 6 + 1 availability zone(s))"), ContainSubstring("2 by nodegroups of other namespaces"), Not(ContainSubstring("team-b")))))
	})
	t.Run("one address per availability zone the nodegroup spreads over", func(t *testing.T) {
		g := NewWithT(t)
		w, _ := grow(func(c *clusterv1.Cluster) {
			c.Status.FailureDomains = []clusterv1.FailureDomain{{Name: "az-1"}, {Name: "az-2"}, {Name: "az-3"}}
		})
		w.sn.Status.Subnets[0].FreeAddresses = ptr.To[int64](3)
		err := judgeGrowth(w.checker(), w.cluster)
		g.Expect(err).To(MatchError(ContainSubstring("needs 4 (max size 1 + 3 availability zone(s))")))
		md(w.cluster, "md-a").FailureDomain = "az-2"
		g.Expect(judgeGrowth(w.checker(), w.cluster)).To(Succeed(), "pinned to one zone it needs 2")
	})
	t.Run("a cloud that changed since the attach refuses growth with the reason", func(t *testing.T) {
		g := NewWithT(t)
		w, _ := grow(func(c *clusterv1.Cluster) { md(c, "md-a").Replicas = ptr.To[int32](2) })
		w.sn.Status.MTU = 1400
		err := judgeGrowth(w.checker(), w.cluster)
		g.Expect(err).To(MatchError(And(ContainSubstring("mtu:"), ContainSubstring("MTU 1400 but the cluster network has MTU 1450"))))
		g.Expect(ask(w.checker(), StillFits, w.cluster)).To(MatchError(ContainSubstring("mtu:")), "and the controller reports it")
	})
	t.Run("removing the bound of an attached nodegroup is refused naming the fix", func(t *testing.T) {
		g := NewWithT(t)
		w, _ := grow(func(c *clusterv1.Cluster) { md(c, "md-a").Replicas = nil })
		err := judgeGrowth(w.checker(), w.cluster)
		g.Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("capacity:"), ContainSubstring("sets neither replicas nor"),
			ContainSubstring("set replicas on the nodegroup in the Cluster's topology"))))
	})
	t.Run("a max size that does not fit an int32 is refused, not wrapped into a pass", func(t *testing.T) {
		g := NewWithT(t)
		w, old := grow(func(c *clusterv1.Cluster) {
			md(c, "md-a").Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "9223372036854775807"}
		})
		g.Expect(Grows(old, w.cluster, "md-a")).To(BeTrue(), "a size that is not a node count is judged")
		err := judgeGrowth(w.checker(), w.cluster)
		g.Expect(err).To(MatchError(And(ContainSubstring(`"md-a"`), ContainSubstring("capacity:"), ContainSubstring(`"9223372036854775807" is not a node count`))))
	})
}

func TestFactsAreFreshOrAskedLive(t *testing.T) {
	stale := func(w *world) {
		w.sn.Status.LastRefreshTime = &metav1.Time{Time: w.now.Add(-MaxFactAgeFor(5*time.Minute) - time.Second)}
	}
	notReady := func(w *world) { w.sn.Status.Conditions[0].Status = metav1.ConditionFalse }
	for name, age := range map[string]func(*world){"stale": stale, "not Ready": notReady} {
		t.Run(name+" status: Neutron's answer decides", func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t)
			w.running(1450)
			age(w)
			// The status says 200 free; Neutron says the /24's pool is all free
			// but the nodegroup wants more.
			md(w.cluster, "md-a").Replicas = ptr.To[int32](260)
			err := ask(w.checker(), Attach, w.cluster)
			g.Expect(err).To(MatchError(And(ContainSubstring("capacity:"), ContainSubstring("has 254 free addresses"))))
			g.Expect(w.cloud.Calls["Subnets"]).To(Equal(1))
		})
		t.Run(name+" status and Neutron cannot be asked: cannot verify, nothing was changed", func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t)
			w.running(1450)
			age(w)
			w.cloud.Fail = func(method string) error {
				if method == "Network" {
					return errors.New("connection refused by 10.0.0.1")
				}
				return nil
			}
			err := ask(w.checker(), Attach, w.cluster)
			g.Expect(err).To(MatchError(And(ContainSubstring("cannot-verify: the facts of SharedNetwork vm are not current"), ContainSubstring("nothing was changed"))))
			g.Expect(err.Error()).NotTo(ContainSubstring("10.0.0.1"), "the VM project's errors are not the tenant's")
		})
	}
	t.Run("fresh and Ready status: no call to the VM project", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t)
		w.running(1450)
		g.Expect(ask(w.checker(), Attach, w.cluster)).To(Succeed())
		g.Expect(w.cloud.Calls["Subnets"]).To(BeZero())
	})
}

// judgeGrowth judges md-a's growth as admission does.
func judgeGrowth(c *Checker, cluster *clusterv1.Cluster) error {
	return ask(c, Grow, cluster)
}

// ask asks c about md-a's value: the refusal, an object that could not be
// read, or why it waits.
func ask(c *Checker, a Ask, cluster *clusterv1.Cluster) error {
	d, err := c.Decide(context.Background(), Question{Ask: a, Cluster: cluster, Nodegroup: "md-a", Value: value})
	switch {
	case err != nil:
		return err
	case d.Waiting != "":
		return errors.New(d.Waiting)
	}
	return d.Err()
}

// The cluster's project is asked its three questions (does the
// SharedNetwork's Keystone vouch for its token, its network's MTU, its port
// quota) at once: each is a round trip to a cloud on the path of both the
// admission and the share, and none needs another's answer. Each fake call
// here waits until the other two were made: asked one after another, the
// first waits in vain and the decision says it cannot verify.
func TestTheClusterProjectIsAskedItsQuestionsAtOnce(t *testing.T) {
	for name, ask := range map[string]Ask{"admission": Attach, "before the share": BeforeShare} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t)
			w.running(1450)
			var mu sync.Mutex
			asked, all := 0, make(chan struct{})
			w.cloud.Fail = func(method string) error {
				switch method {
				case "ProjectOfToken", "Network", "Ports":
				default:
					return nil
				}
				mu.Lock()
				if asked++; asked == 3 {
					close(all)
				}
				mu.Unlock()
				select {
				case <-all:
					return nil
				case <-time.After(5 * time.Second):
					return errors.New(method + " was asked alone: the other questions waited for its answer")
				}
			}
			d, err := w.checker().Decide(context.Background(), Question{Ask: ask, Cluster: w.cluster, Nodegroup: "md-a", Value: value})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Refusal).To(BeEmpty())
			g.Expect(d.Project).To(Equal("cluster-project"), "vouched for by the SharedNetwork's Keystone")
		})
	}
}

// The share acts on the answers its admission got from the cluster's
// project a moment before (each a round trip on the path to the rollout),
// once, within 15 s, and only with the same session: a second share, an
// older admission or a changed credential ask again. Every rule still runs.
func TestTheShareActsOnItsAdmissionsAnswersOnce(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.running(1450)
	c := w.checker()
	c.Now = func() time.Time { return w.now }
	asked := func() int { return w.cloud.Calls["ProjectOfToken"] + w.cloud.Calls["Network"] + w.cloud.Calls["Ports"] }
	decide := func(a Ask) Decision {
		t.Helper()
		d, err := c.Decide(context.Background(), Question{Ask: a, Cluster: w.cluster, Nodegroup: "md-a", Value: value})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Refusal).To(BeEmpty())
		return d
	}

	decide(Attach)
	g.Expect(asked()).To(Equal(3), "admission asks the three questions")
	d := decide(BeforeShare)
	g.Expect(asked()).To(Equal(3), "the share that follows asks nothing again")
	g.Expect(d.Project).To(Equal("cluster-project"), "the project the admission's vouch named")
	decide(BeforeShare)
	g.Expect(asked()).To(Equal(6), "once: a second check before a share asks")

	decide(Attach)
	g.Expect(asked()).To(Equal(8), "a second admission within a minute reuses the Keystone's answer about the same token")
	w.now = w.now.Add(16 * time.Second)
	decide(BeforeShare)
	g.Expect(asked()).To(Equal(11), "an admission older than 15 s: asked again")

	decide(Attach)
	clouds := c.Cloud.(*fakecloud.Clouds)
	clouds.Clusters["team-a/demo"] = &fakecloud.Project{Cloud: w.cloud, ID: "cluster-project", OpenStackCluster: w.project.OpenStackCluster}
	decide(BeforeShare)
	g.Expect(asked()).To(Equal(16), "another session (the cluster's Secret changed): vouched for again")

	// An admission before CAPO made the cluster network read no MTU: the
	// share asks, for the network there is now.
	network := w.project.OpenStackCluster.Status.Network
	w.project.OpenStackCluster.Status.Network = nil
	decide(Attach)
	g.Expect(asked()).To(Equal(17), "the quota (the vouch reused); no network, no MTU")
	w.project.OpenStackCluster.Status.Network = network
	decide(BeforeShare)
	g.Expect(asked()).To(Equal(20), "the MTU was never read: asked, with the rest")

	// Every rule still runs on reused answers: a subnet grown full since
	// the admission refuses the share.
	decide(Attach)
	w.sn.Status.Subnets[0].FreeAddresses = ptr.To[int64](0)
	g.Expect(c.Reader.(client.Client).Update(context.Background(), w.sn)).To(Succeed())
	refused, err := c.Decide(context.Background(), Question{Ask: BeforeShare, Cluster: w.cluster, Nodegroup: "md-a", Value: value})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(asked()).To(Equal(22), "the admission's answers reused")
	g.Expect(refused.Refusal.Error()).To(ContainSubstring("capacity:"))
}

// TestANamespacesAdmissionsAskTheCloudsWithinABudget: a tenant's admissions
// (dry runs included) are what make the VM project's Keystone validate
// tokens and its Neutron answer. Repeated ones reuse the Keystone's answer
// about the same token; past the namespace's budget an admission that would
// ask is refused as cannot-verify (never admitted unchecked), and the budget
// refills with time. Other namespaces have their own.
func TestANamespacesAdmissionsAskTheCloudsWithinABudget(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.running(1450)
	c := w.checker()
	c.AdmissionBurst, c.AdmissionsPerMinute = 5, 60
	c.Now = func() time.Time { return w.now }
	attach := func() rules.Refusal {
		d, err := c.Decide(context.Background(), Question{Ask: Attach, Cluster: w.cluster, Nodegroup: "md-a", Value: value})
		g.Expect(err).NotTo(HaveOccurred())
		return d.Refusal
	}
	for range 5 {
		g.Expect(attach()).To(BeEmpty())
	}
	g.Expect(w.cloud.Calls["ProjectOfToken"]).To(Equal(1), "one token validation for five admissions of the same session")
	over := attach()
	g.Expect(over.Error()).To(And(ContainSubstring(rules.RuleCannotVerify+":"), ContainSubstring("namespace team-a has asked the cloud for more admissions than its budget (5, then 60 a minute)"),
		ContainSubstring("nothing was changed")))
	g.Expect(w.cloud.Calls["Ports"]).To(Equal(5), "the refused one asked nothing")
	w.now = w.now.Add(time.Second)
	g.Expect(attach()).To(BeEmpty(), "the budget refills")

	b := &budgets{}
	for range 3 {
		g.Expect(b.take("team-a", 60, 3, w.now)).To(Succeed())
	}
	g.Expect(b.take("team-a", 60, 3, w.now)).NotTo(Succeed())
	g.Expect(b.take("team-b", 60, 3, w.now)).To(Succeed(), "another namespace has its own budget")
}

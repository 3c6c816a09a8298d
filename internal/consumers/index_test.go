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

package consumers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// consumersOfEveryCluster is consumers.SubnetConsumers as it was before
// consumers.SharedNetworkIndex: every Cluster listed and decoded. The indexed one must
// answer the same.
func consumersOfEveryCluster(ctx context.Context, reader client.Reader, sn *sharednetv1.SharedNetwork, subnet, except string) ([]rules.Consumer, error) {
	clusters := &clusterv1.ClusterList{}
	if err := reader.List(ctx, clusters); err != nil {
		return nil, err
	}
	var out []rules.Consumer
	for i := range clusters.Items {
		cl := &clusters.Items[i]
		values, err := variables.Nodegroups(cl)
		if err != nil {
			continue
		}
		for other, value := range values {
			name := rules.ConsumerName(cl.Namespace, cl.Name, other)
			if name == except || value.Name != sn.Name {
				continue
			}
			if s, v := rules.OneSubnet(sn.Name, sn.Status.SubnetIDs(), sn.Spec.Subnets, value.Subnet); v != nil || s != subnet {
				continue
			}
			size := consumers.SizeOf(cl, other)
			maxSize, v := rules.MaxSize(size.Annotations, size.Replicas)
			if v != nil {
				return nil, v
			}
			attached, err := consumers.AttachedAddresses(ctx, reader, cl, other)
			if err != nil {
				return nil, err
			}
			out = append(out, rules.Consumer{Name: name, MaxSize: maxSize,
				Zones: rules.Zones(size.FailureDomain, size.ClusterFailureDomains), Attached: attached})
		}
	}
	return out, nil
}

// indexWorld: SharedNetwork "vm" with subnets s-1 and s-2, "other" with
// s-9, and Clusters that name vm (one subnet or the other, with an
// attachment, zones, the autoscaler's max size), name other, name both, set
// nothing, or hold a value that cannot be decoded next to one naming vm.
func indexWorld(t *testing.T) (client.Client, *sharednetv1.SharedNetwork) {
	t.Helper()
	subnets := func(ids ...string) []sharednetv1.SubnetStatus {
		var out []sharednetv1.SubnetStatus
		for i, id := range ids {
			var s sharednetv1.SubnetStatus
			// JSON: the same literal whatever Go type the count has.
			if err := json.Unmarshal(fmt.Appendf(nil, `{"id":%q,"cidr":"172.16.%d.0/24","freeAddresses":200}`, id, i), &s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	vm := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm"},
		Spec:   sharednetv1.SharedNetworkSpec{NetworkID: "net-1", Subnets: []string{"s-1", "s-2"}},
		Status: sharednetv1.SharedNetworkStatus{Subnets: subnets("s-1", "s-2")}}
	other := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec:   sharednetv1.SharedNetworkSpec{NetworkID: "net-9", Subnets: []string{"s-9"}},
		Status: sharednetv1.SharedNetworkStatus{Subnets: subnets("s-9")}}

	cluster := func(namespace, name string, zones int, values map[string]string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.35.0"}}}
		for i := range zones {
			c.Status.FailureDomains = append(c.Status.FailureDomains, clusterv1.FailureDomain{Name: fmt.Sprintf("az-%d", i), ControlPlane: ptr.To(true)})
		}
		for _, md := range []string{"md-a", "md-b", "md-c", "md-d"} {
			c.Spec.Topology.Workers.MachineDeployments = append(c.Spec.Topology.Workers.MachineDeployments,
				clusterv1.MachineDeploymentTopology{Class: "w", Name: md, Replicas: ptr.To[int32](int32(len(name)))})
			if v, ok := values[md]; ok {
				variables.SetOverride(c, md, []byte(v))
			}
		}
		return c
	}
	autoscaled := cluster("team-a", "autoscaled", 3, map[string]string{"md-a": `{"name":"vm","subnet":"s-1"}`, "md-b": `{"name":"vm","subnet":"s-2"}`})
	autoscaled.Spec.Topology.Workers.MachineDeployments[0].Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "12"}
	autoscaled.Spec.Topology.Workers.MachineDeployments[0].FailureDomain = "az-1"
	objs := []client.Object{vm, other, autoscaled,
		cluster("team-a", "demo", 2, map[string]string{"md-a": `{"name":"vm","subnet":"s-1"}`, "md-b": `{"name":"other"}`, "md-c": `{"name":"vm","subnet":"s-1"}`}),
		cluster("team-a", "both", 0, map[string]string{"md-a": `{"name":"other"}`, "md-b": `{"name":"vm","subnet":"s-2"}`}),
		cluster("team-b", "demo", 1, map[string]string{"md-a": `{"name":"vm","subnet":"s-1"}`}),
		cluster("team-b", "elsewhere", 1, map[string]string{"md-a": `{"name":"other"}`, "md-d": `{"name":"other"}`}),
		cluster("team-b", "nothing", 1, nil),
		// md-a's value cannot be decoded: the whole Cluster is nobody's consumer.
		cluster("team-c", "undecodable", 1, map[string]string{"md-a": `{"name":"vm","subnet":"s-1","size":3}`, "md-b": `{"name":"vm","subnet":"s-1"}`}),
		cluster("team-c", "not-a-value", 1, map[string]string{"md-a": `"vm"`, "md-c": `{"name":"vm","subnet":"s-1"}`}),
		// No subnet named, and vm has two: no consumer of either.
		cluster("team-c", "ambiguous", 1, map[string]string{"md-a": `{"name":"vm"}`}),
		&sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: sharednetv1.AttachmentName("demo", "md-c")},
			Spec:   sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-c", SharedNetwork: "vm", Subnet: "s-1"},
			Status: sharednetv1.SharedNetworkAttachmentStatus{Nodes: []sharednetv1.AttachedNode{{Machine: "m-1"}, {Machine: "m-2"}}}},
	}
	c := fake.NewClientBuilder().WithScheme(sharednetscheme.New()).WithObjects(objs...).
		WithIndex(&clusterv1.Cluster{}, consumers.SharedNetworkIndex, consumers.SharedNetworksOf).Build()
	return c, vm
}

func TestSharedNetworksOfNamesEachNetworkOnce(t *testing.T) {
	g := NewWithT(t)
	c := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{Workers: clusterv1.WorkersTopology{
		MachineDeployments: []clusterv1.MachineDeploymentTopology{{Name: "md-a"}, {Name: "md-b"}, {Name: "md-c"}, {Name: "md-d"}}}}}}
	g.Expect(consumers.SharedNetworksOf(c)).To(BeEmpty(), "no value set")
	variables.SetOverride(c, "md-a", []byte(`{"name":"vm"}`))
	variables.SetOverride(c, "md-b", []byte(`{"name":"other","subnet":"s-9"}`))
	variables.SetOverride(c, "md-c", []byte(`{"name":"vm","subnet":"s-2"}`))
	g.Expect(consumers.SharedNetworksOf(c)).To(Equal([]string{"other", "vm"}))
	variables.SetOverride(c, "md-d", []byte(`{"name":"vm","extra":true}`))
	g.Expect(consumers.SharedNetworksOf(c)).To(BeEmpty(), "a value that cannot be decoded: nobody's consumer, as before the index")
	g.Expect(consumers.SharedNetworksOf(&sharednetv1.SharedNetwork{})).To(BeEmpty(), "not a Cluster")
}

func TestIndexedSubnetConsumersAreThoseOfEveryCluster(t *testing.T) {
	ctx := context.Background()
	c, vm := indexWorld(t)
	for _, tc := range []struct {
		subnet, except string
		want           []rules.Consumer
	}{{
		subnet: "s-1",
		want: []rules.Consumer{
			{Name: "team-a/autoscaled/md-a", MaxSize: 12, Zones: 1},
			{Name: "team-a/demo/md-a", MaxSize: 4, Zones: 2},
			{Name: "team-a/demo/md-c", MaxSize: 4, Zones: 2, Attached: 2},
			{Name: "team-b/demo/md-a", MaxSize: 4, Zones: 1},
		},
	}, {
		subnet: "s-1", except: "team-a/demo/md-c",
		want: []rules.Consumer{
			{Name: "team-a/autoscaled/md-a", MaxSize: 12, Zones: 1},
			{Name: "team-a/demo/md-a", MaxSize: 4, Zones: 2},
			{Name: "team-b/demo/md-a", MaxSize: 4, Zones: 1},
		},
	}, {
		subnet: "s-2",
		want: []rules.Consumer{
			{Name: "team-a/autoscaled/md-b", MaxSize: 10, Zones: 3},
			{Name: "team-a/both/md-b", MaxSize: 4, Zones: 1}, // no zones counts as one
		},
	}, {
		subnet: "s-2", except: "team-a/both/md-b",
		want: []rules.Consumer{{Name: "team-a/autoscaled/md-b", MaxSize: 10, Zones: 3}},
	}, {
		subnet: "s-3", // not vm's: nobody
	}} {
		t.Run(tc.subnet+" except "+tc.except, func(t *testing.T) {
			g := NewWithT(t)
			got, err := consumers.SubnetConsumers(ctx, c, vm, tc.subnet, tc.except)
			g.Expect(err).NotTo(HaveOccurred())
			before, err := consumersOfEveryCluster(ctx, c, vm, tc.subnet, tc.except)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(byName(got)).To(Equal(byName(before)), "the same consumers as listing every Cluster")
			g.Expect(byName(got)).To(Equal(tc.want))
		})
	}
}

func TestSubnetConsumersNeedTheIndex(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithScheme(sharednetscheme.New()).Build()
	_, err := consumers.SubnetConsumers(context.Background(), c, &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm"}}, "s-1", "")
	g.Expect(err).To(MatchError(ContainSubstring("listing the Clusters using SharedNetwork vm")), "a reader without the index is an error, never no consumers")
}

// byName sorts consumers (answers are in map order).
func byName(cs []rules.Consumer) []rules.Consumer {
	slices.SortFunc(cs, func(a, b rules.Consumer) int { return strings.Compare(a.Name, b.Name) })
	return cs
}

func md(c *clusterv1.Cluster, name string) *clusterv1.MachineDeploymentTopology {
	for i := range c.Spec.Topology.Workers.MachineDeployments {
		if c.Spec.Topology.Workers.MachineDeployments[i].Name == name {
			return &c.Spec.Topology.Workers.MachineDeployments[i]
		}
	}
	return nil
}

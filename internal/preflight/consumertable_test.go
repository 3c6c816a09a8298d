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
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakeinformers"
)

// tableOver is a table fed, through Watch, with every Cluster and
// attachment c holds, its informers synced.
func tableOver(t *testing.T, c client.Client) (*ConsumerTable, fakeinformers.Informers) {
	t.Helper()
	ctx := context.Background()
	table, informers := NewConsumerTable(), fakeinformers.Informers{}
	if err := table.Watch(ctx, informers); err != nil {
		t.Fatal(err)
	}
	clusters := &clusterv1.ClusterList{}
	attachments := &sharednetv1.SharedNetworkAttachmentList{}
	if err := c.List(ctx, clusters); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, attachments); err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for i := range clusters.Items {
		objs = append(objs, &clusters.Items[i])
	}
	for i := range attachments.Items {
		objs = append(objs, &attachments.Items[i])
	}
	informers.Synced(objs...)
	return table, informers
}

// agree checks that the table answers as listing the Clusters does, for
// each subnet of sn, with no consumer left out and with each left out.
func agree(t *testing.T, g Gomega, c client.Client, table *ConsumerTable, sn *sharednetv1.SharedNetwork, subnets ...string) {
	t.Helper()
	ctx := context.Background()
	for _, subnet := range subnets {
		listed, listErr := SubnetConsumers(ctx, c, sn, subnet, "")
		excepts := []string{"", "team-z/none/md-a"}
		for _, consumer := range listed {
			excepts = append(excepts, consumer.Name)
		}
		for _, except := range excepts {
			want, wantErr := SubnetConsumers(ctx, c, sn, subnet, except)
			got, err := table.SubnetConsumers(sn, subnet, except)
			if listErr != nil || wantErr != nil {
				g.Expect(err).To(Equal(wantErr), "subnet %s except %q: the same refusal as the listing", subnet, except)
				continue
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(ConsistOf(want), "subnet %s except %q: the consumers the listing finds", subnet, except)
		}
	}
}

func TestConsumerTableAnswersAsListingTheClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, vm := indexWorld(t)
	table, informers := tableOver(t, c)
	clusters, attachmentInformer := informers.Of(&clusterv1.Cluster{}), informers.Of(&sharednetv1.SharedNetworkAttachment{})
	check := func(step string) {
		t.Helper()
		t.Log(step)
		agree(t, g, c, table, vm, "s-1", "s-2", "s-9")
	}
	check("as created")
	got, err := table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(ContainElement(rules.Consumer{Name: "team-a/demo/md-c", MaxSize: 4, Zones: 2, Attached: 2}), "the addresses its attachment holds")

	update := func(namespace, name string, change func(*clusterv1.Cluster)) {
		t.Helper()
		cl := &clusterv1.Cluster{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl)).To(Succeed())
		old := cl.DeepCopy()
		change(cl)
		g.Expect(c.Update(ctx, cl)).To(Succeed())
		clusters.Update(old, cl)
	}
	update("team-a", "demo", func(cl *clusterv1.Cluster) {
		cl.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](9)
		variables.SetOverride(cl, "md-c", []byte(`{"name":"other"}`)) // moves to another network
		variables.SetOverride(cl, "md-d", []byte(`{"name":"vm","subnet":"s-2"}`))
	})
	check("a Cluster grows one nodegroup, moves one away and attaches another")
	update("team-b", "elsewhere", func(cl *clusterv1.Cluster) {
		variables.SetOverride(cl, "md-a", []byte(`{"name":"vm","subnet":"s-1"}`))
	})
	check("a Cluster of another network's comes to vm")
	update("team-c", "undecodable", func(cl *clusterv1.Cluster) {
		variables.SetOverride(cl, "md-a", []byte(`{"name":"vm","subnet":"s-1"}`))
	})
	check("a value that could not be decoded is mended: its Cluster counts again")
	update("team-a", "both", func(cl *clusterv1.Cluster) {
		variables.SetOverride(cl, "md-a", []byte(`{"name":"vm","subnet":"s-1,s-2"}`))
	})
	check("a value naming two subnets counts on neither")

	// A Cluster deleted; another whose deletion the watch missed (a tombstone).
	for _, key := range []client.ObjectKey{{Namespace: "team-b", Name: "demo"}, {Namespace: "team-a", Name: "autoscaled"}} {
		cl := &clusterv1.Cluster{}
		g.Expect(c.Get(ctx, key, cl)).To(Succeed())
		g.Expect(c.Delete(ctx, cl)).To(Succeed())
		if key.Name == "demo" {
			clusters.Delete(cl)
		} else {
			table.ClusterEvents().OnDelete(toolscache.DeletedFinalStateUnknown{Key: key.String(), Obj: cl})
		}
	}
	check("Clusters deleted, one seen only as a tombstone")

	// Attachments: one written, one whose name belongs to another nodegroup
	// (attachments.Get does not take it), one deleted.
	attachment := func(cluster, topology, name string, nodes int) *sharednetv1.SharedNetworkAttachment {
		a := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: name},
			Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: cluster, MachineDeploymentTopology: topology, SharedNetwork: "vm", Subnet: "s-1"}}
		for i := range nodes {
			a.Status.Nodes = append(a.Status.Nodes, sharednetv1.AttachedNode{Machine: fmt.Sprintf("m-%d", i)})
		}
		g.Expect(c.Create(ctx, a)).To(Succeed())
		attachmentInformer.Add(a)
		return a
	}
	attachment("elsewhere", "md-a", sharednetv1.AttachmentName("elsewhere", "md-a"), 3)
	attachment("elsewhere", "md-b", sharednetv1.AttachmentName("elsewhere", "md-a")+"-x", 5)
	check("attachments written, one of a name that is not its nodegroup's")
	a := &sharednetv1.SharedNetworkAttachment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: sharednetv1.AttachmentName("demo", "md-c")}, a)).To(Succeed())
	g.Expect(c.Delete(ctx, a)).To(Succeed())
	attachmentInformer.Delete(a)
	check("an attachment deleted")

	// A max size that is not a node count: neither judges the subnet.
	update("team-b", "elsewhere", func(cl *clusterv1.Cluster) {
		cl.Spec.Topology.Workers.MachineDeployments[0].Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "lots"}
	})
	_, err = table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).To(MatchError(ContainSubstring(`nodegroup team-b/elsewhere/md-a: capacity: annotation cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size="lots" is not a node count`)))
	check("a max size that is not a node count")
}

func TestConsumerTableAnswersNothingUntilItReadEveryObject(t *testing.T) {
	g := NewWithT(t)
	vm := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Spec: sharednetv1.SharedNetworkSpec{Subnets: []string{"s-1"}}}

	_, err := NewConsumerTable().SubnetConsumers(vm, "s-1", "")
	g.Expect(err).To(MatchError(ErrConsumersNotRead), "not watching anything: no answer")

	table, informers := NewConsumerTable(), fakeinformers.Informers{}
	g.Expect(table.Watch(context.Background(), informers)).To(Succeed())
	informers.Of(&clusterv1.Cluster{}).Synced = true
	_, err = table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).To(MatchError(ErrConsumersNotRead), "the attachments not read yet: the addresses they hold are unknown")
	informers.Of(&sharednetv1.SharedNetworkAttachment{}).Synced = true
	got, err := table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeEmpty())
}

func TestAnAttachIsCannotVerifyUntilTheTableReadEveryObject(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.class()
	c := w.checker()
	c.Consumers = NewConsumerTable()
	before := w.cluster.DeepCopy()
	before.Spec.Topology.Workers.MachineDeployments[0].Variables.Overrides = nil
	facts := c.Admission(context.Background(), before, w.cluster)
	g.Expect(facts.Nodegroups).To(HaveLen(1))
	g.Expect(facts.Nodegroups[0].CannotVerify).To(Equal(ErrConsumersNotRead.Error()+"; nothing was changed, retry later"),
		"a manager that just started refuses the attach rather than judging it on half the consumers")
	g.Expect(c.Attach(context.Background(), w.cluster, "md-a", value, All)).To(MatchError(ContainSubstring(ErrConsumersNotRead.Error())))

	c.Consumers, _ = tableOver(t, c.Reader.(client.Client))
	g.Expect(c.Attach(context.Background(), w.cluster, "md-a", value, All)).To(Succeed(), "once it read them")
}

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
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakeinformers"
)

// tableOver is a table fed, through Watch, with every Cluster and
// attachment c holds, its informers synced.
func tableOver(t *testing.T, c client.Client) (*consumers.Table, *fakeinformers.Informers) {
	t.Helper()
	table, informers, err := fakeinformers.Table(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return table, informers
}

// agree checks that the table answers as listing the Clusters does, for
// each subnet of sn, leaving out no nodegroup and each nodegroup of every
// Cluster in turn.
func agree(t *testing.T, g Gomega, c client.Client, table *consumers.Table, sn *sharednetv1.SharedNetwork, subnets ...string) {
	t.Helper()
	ctx := context.Background()
	clusters := &clusterv1.ClusterList{}
	g.Expect(c.List(ctx, clusters)).To(Succeed())
	excepts := []string{""}
	for _, cl := range clusters.Items {
		for _, md := range cl.Spec.Topology.Workers.MachineDeployments {
			excepts = append(excepts, rules.ConsumerName(cl.Namespace, cl.Name, md.Name))
		}
	}
	for _, subnet := range subnets {
		for _, except := range excepts {
			want, wantErr := consumers.SubnetConsumers(ctx, c, sn, subnet, except)
			got, err := table.SubnetConsumers(sn, subnet, except)
			if wantErr != nil {
				g.Expect(err).To(Equal(wantErr), "subnet %s except %q: the same refusal as the listing", subnet, except)
				continue
			}
			g.Expect(err).NotTo(HaveOccurred(), "subnet %s except %q", subnet, except)
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
	consumer := func(name string) rules.Consumer {
		t.Helper()
		for _, subnet := range []string{"s-1", "s-2"} {
			got, err := table.SubnetConsumers(vm, subnet, "")
			g.Expect(err).NotTo(HaveOccurred())
			for _, c := range got {
				if c.Name == name {
					return c
				}
			}
		}
		return rules.Consumer{}
	}
	// check compares the table with the listing, and says what moved.
	check := func(step string, name string, want rules.Consumer) {
		t.Helper()
		t.Log(step)
		agree(t, g, c, table, vm, "s-1", "s-2", "s-9")
		g.Expect(consumer(name)).To(Equal(want), step)
	}
	check("as created: the addresses its attachment holds", "team-a/demo/md-c", rules.Consumer{Name: "team-a/demo/md-c", MaxSize: 4, Zones: 2, Attached: 2})

	update := func(namespace, name string, change func(*clusterv1.Cluster)) {
		t.Helper()
		cl := &clusterv1.Cluster{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl)).To(Succeed())
		old := cl.DeepCopy()
		change(cl)
		g.Expect(c.Update(ctx, cl)).To(Succeed())
		clusters.Update(old, cl)
	}
	// Attachments in team-b.
	writeAttachment := func(cluster, topology string, nodes int) *sharednetv1.SharedNetworkAttachment {
		t.Helper()
		a := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: sharednetv1.AttachmentName(cluster, topology)},
			Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: cluster, MachineDeploymentTopology: topology, SharedNetwork: "vm", Subnet: "s-1"}}
		for i := range nodes {
			a.Status.Nodes = append(a.Status.Nodes, sharednetv1.AttachedNode{Machine: fmt.Sprintf("m-%d", i)})
		}
		g.Expect(c.Create(ctx, a)).To(Succeed())
		attachmentInformer.Add(a)
		return a
	}
	deleteAttachment := func(a *sharednetv1.SharedNetworkAttachment) {
		t.Helper()
		g.Expect(c.Delete(ctx, a)).To(Succeed())
		attachmentInformer.Delete(a)
	}
	// One fact of one claim at a time: each must reach the table.
	update("team-b", "demo", func(cl *clusterv1.Cluster) { md(cl, "md-a").Replicas = ptr.To[int32](9) })
	check("replicas", "team-b/demo/md-a", rules.Consumer{Name: "team-b/demo/md-a", MaxSize: 9, Zones: 1})
	update("team-b", "demo", func(cl *clusterv1.Cluster) {
		cl.Status.FailureDomains = append(cl.Status.FailureDomains, clusterv1.FailureDomain{Name: "az-9"})
	})
	check("the Cluster's failure domains (status)", "team-b/demo/md-a", rules.Consumer{Name: "team-b/demo/md-a", MaxSize: 9, Zones: 2})
	update("team-b", "demo", func(cl *clusterv1.Cluster) {
		md(cl, "md-a").Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "30"}
	})
	check("the autoscaler's max size", "team-b/demo/md-a", rules.Consumer{Name: "team-b/demo/md-a", MaxSize: 30, Zones: 2})
	update("team-b", "demo", func(cl *clusterv1.Cluster) { md(cl, "md-a").FailureDomain = "az-9" })
	check("its own failure domain", "team-b/demo/md-a", rules.Consumer{Name: "team-b/demo/md-a", MaxSize: 30, Zones: 1})
	update("team-b", "demo", func(cl *clusterv1.Cluster) { variables.SetOverride(cl, "md-a", []byte(`{"name":"vm","subnet":"s-2"}`)) })
	check("another subnet of the same network", "team-b/demo/md-a", rules.Consumer{Name: "team-b/demo/md-a", MaxSize: 30, Zones: 1})
	got, err := table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).NotTo(ContainElement(HaveField("Name", "team-b/demo/md-a")), "no longer on s-1")
	update("team-b", "demo", func(cl *clusterv1.Cluster) {
		cl.Status.Conditions = append(cl.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue})
	})
	check("a condition (no claim changes)", "team-b/demo/md-a", rules.Consumer{Name: "team-b/demo/md-a", MaxSize: 30, Zones: 1})

	update("team-a", "demo", func(cl *clusterv1.Cluster) {
		variables.SetOverride(cl, "md-c", []byte(`{"name":"other"}`)) // moves to another network
		variables.SetOverride(cl, "md-d", []byte(`{"name":"vm","subnet":"s-2"}`))
	})
	check("a Cluster moves one nodegroup away and attaches another", "team-a/demo/md-c", rules.Consumer{})
	// An object of the name of team-b/elsewhere/md-a's attachment that
	// belongs to another pair (names joined with a dash collide;
	// attachments.Get does not take it).
	foreign := writeAttachment("elsewhere-md", "a", 5)
	g.Expect(foreign.Name).To(Equal(sharednetv1.AttachmentName("elsewhere", "md-a")))
	update("team-b", "elsewhere", func(cl *clusterv1.Cluster) {
		variables.SetOverride(cl, "md-a", []byte(`{"name":"vm","subnet":"s-1"}`))
	})
	elsewhere := rules.Consumer{Name: "team-b/elsewhere/md-a", MaxSize: 9, Zones: 1}
	check("a Cluster of another network's comes to vm; the attachment of its name is another pair's", elsewhere.Name, elsewhere)
	update("team-c", "undecodable", func(cl *clusterv1.Cluster) {
		variables.SetOverride(cl, "md-a", []byte(`{"name":"vm","subnet":"s-1"}`))
	})
	check("a value that could not be decoded is mended: its Cluster counts again", "team-c/undecodable/md-b", rules.Consumer{Name: "team-c/undecodable/md-b", MaxSize: 11, Zones: 1})
	update("team-a", "both", func(cl *clusterv1.Cluster) {
		variables.SetOverride(cl, "md-b", []byte(`{"name":"vm","subnet":"s-1,s-2"}`))
	})
	check("a value naming two subnets counts on neither", "team-a/both/md-b", rules.Consumer{})

	// Then its own attachment, whose nodes change, then none.
	deleteAttachment(foreign)
	own := writeAttachment("elsewhere", "md-a", 3)
	holding := elsewhere
	holding.Attached = 3
	check("its own attachment", elsewhere.Name, holding)
	old := own.DeepCopy()
	own.Status.Nodes = own.Status.Nodes[:1]
	g.Expect(c.Update(ctx, own)).To(Succeed())
	attachmentInformer.Update(old, own)
	holding.Attached = 1
	check("its attachment lists fewer nodes", elsewhere.Name, holding)
	deleteAttachment(own)
	check("its attachment deleted", elsewhere.Name, elsewhere)

	// A max size that is not a node count: neither judges the subnet, unless
	// that nodegroup is the one being judged (agree leaves out each in turn).
	update("team-b", "elsewhere", func(cl *clusterv1.Cluster) {
		md(cl, "md-a").Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "lots"}
	})
	_, err = table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).To(MatchError(ContainSubstring(`nodegroup team-b/elsewhere/md-a: capacity: annotation cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size="lots" is not a node count`)))
	_, err = table.SubnetConsumers(vm, "s-1", "team-b/elsewhere/md-a")
	g.Expect(err).NotTo(HaveOccurred(), "the nodegroup being judged is not its own consumer")
	agree(t, g, c, table, vm, "s-1", "s-2", "s-9")
	update("team-b", "elsewhere", func(cl *clusterv1.Cluster) { md(cl, "md-a").Metadata.Annotations = nil })
	check("a max size mended", elsewhere.Name, elsewhere)

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
	check("Clusters deleted, one seen only as a tombstone", "team-a/autoscaled/md-a", rules.Consumer{})
}

func TestConsumerTableAnswersNothingUntilItsHandlersGotTheFirstList(t *testing.T) {
	g := NewWithT(t)
	vm := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Spec: sharednetv1.SharedNetworkSpec{Subnets: []string{"s-1"}}}

	_, err := consumers.NewTable().SubnetConsumers(vm, "s-1", "")
	g.Expect(err).To(MatchError(consumers.ErrNotRead), "not watching anything: no answer")

	table, informers := consumers.NewTable(), fakeinformers.New()
	g.Expect(table.Watch(context.Background(), informers)).To(Succeed())
	g.Expect(table.Watch(context.Background(), informers)).NotTo(Succeed(), "watched once")
	informers.Of(&clusterv1.Cluster{}).Synced = true
	informers.Of(&sharednetv1.SharedNetworkAttachment{}).Synced = true
	_, err = table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).To(MatchError(consumers.ErrNotRead), "the informers synced, but the first list not yet handed to the table")
	g.Expect(table.ReadyzCheck(nil)).To(MatchError(consumers.ErrNotRead))
	informers.Delivered(&clusterv1.Cluster{})
	_, err = table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).To(MatchError(consumers.ErrNotRead), "the attachments not read yet: the addresses they hold are unknown")
	informers.Delivered(&sharednetv1.SharedNetworkAttachment{})
	got, err := table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeEmpty())
	g.Expect(table.ReadyzCheck(nil)).To(Succeed())
}

func TestConsumerTableServesWhileItIsFed(t *testing.T) {
	c, vm := indexWorld(t)
	table, informers := tableOver(t, c)
	clusters := &clusterv1.ClusterList{}
	if err := c.List(context.Background(), clusters); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			cl := clusters.Items[i%len(clusters.Items)].DeepCopy()
			md(cl, "md-a").Replicas = ptr.To(int32(i))
			informers.Of(&clusterv1.Cluster{}).Update(&clusters.Items[i%len(clusters.Items)], cl)
		}
	}()
	for range 200 {
		if _, err := table.SubnetConsumers(vm, "s-1", ""); err != nil {
			t.Fatal(err)
		}
	}
	<-done
}

// A decision reads a subnet's consumers as made once per change; a value
// without a subnet resolves against the SharedNetwork's subnets, so when
// those change the list is made again: the table still answers as the
// listing does.
func TestConsumerTableFollowsTheSharedNetworksSubnets(t *testing.T) {
	g := NewWithT(t)
	c, vm := indexWorld(t)
	table, _ := tableOver(t, c)
	agree(t, g, c, table, vm, "s-1", "s-2")
	before, err := table.SubnetConsumers(vm, "s-1", "")
	g.Expect(err).NotTo(HaveOccurred())

	one := vm.DeepCopy() // the administrator narrows it to one subnet: values without a subnet now name s-1
	one.Spec.Subnets, one.Status.Subnets = []string{"s-1"}, vm.Status.Subnets[:1]
	agree(t, g, c, table, one, "s-1", "s-2")
	after, err := table.SubnetConsumers(one, "s-1", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(after)).To(BeNumerically(">", len(before)), "the world has nodegroups whose value names no subnet")
	agree(t, g, c, table, vm, "s-1", "s-2")
}

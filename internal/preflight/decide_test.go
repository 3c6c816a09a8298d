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
*/package preflight

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakeinformers"
)

// TestEveryQuestionJudgesTheFactsOfItsRow: each entry point's question,
// facts in (a world changed one way), refusal out; a fact its row does not
// list is not judged, so the same world may be refused by one question
// and not by another.
func TestEveryQuestionJudgesTheFactsOfItsRow(t *testing.T) {
	ungranted := func(w *world) {
		w.sn.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"vm": "no"}}
	}
	smallerMTU := func(w *world) { w.sn.Status.MTU = 1400 }
	full := func(w *world) { w.sn.Status.Subnets[0].FreeAddresses = ptr.To[int64](1) }
	overlapping := func(w *world) { w.cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"172.16.0.0/16"} }
	oldVersion := func(w *world) { w.cluster.Spec.Topology.Version = "v1.34.2" }
	stale := func(w *world) { w.sn.Status.LastRefreshTime = &metav1.Time{Time: w.now.Add(-time.Hour)} }
	foreign := func(w *world) { w.project.KeystoneURL = "http://127.0.0.1:35357/" }
	quota := func(w *world) { w.project.PortQuota = &openstack.Quota{Limit: 10, Used: 10} }
	noPolicyLeft := func(w *world) {
		w.sn.Status.RBACPolicies = sharednetv1.QuotaUsage{Used: ptr.To[int32](10), Limit: ptr.To[int32](10)}
	}
	shared := func(w *world) {
		noPolicyLeft(w)
		w.sn.Status.Shares = []sharednetv1.Share{{ProjectID: "cluster-project", RBACPolicyID: "rbac-1"}}
	}
	attachedWithLB := func(w *world) {
		w.objs = append(w.objs, &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: sharednetv1.AttachmentName("demo", "md-a")},
			Spec:   sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: w.vmSubnet},
			Status: sharednetv1.SharedNetworkAttachmentStatus{LoadBalancers: []sharednetv1.LoadBalancer{{ID: "lb-1", Name: "kube_service_x", VIP: "172.16.5.9", Service: "shop/web"}}}})
	}
	for _, tc := range []struct {
		name    string
		ask     Ask
		running bool
		change  func(*world)
		want    []string // the rules refused, in order; nil: admitted
		waiting bool
		skipped bool
	}{
		{"attach, every rule holds", Attach, true, nil, nil, false, false},
		{"attach, not granted: nothing else is looked at", Attach, true, func(w *world) { ungranted(w); smallerMTU(w) }, []string{rules.RuleGranted}, false, false},
		{"attach, version and overlap and MTU at once", Attach, true, func(w *world) { oldVersion(w); overlapping(w); smallerMTU(w) }, []string{rules.RuleVersion, rules.RuleOverlap, rules.RuleMTU}, false, false},
		{"attach, another Keystone", Attach, true, foreign, []string{rules.RuleSameCloud}, false, false},
		{"attach, the project's port quota", Attach, true, quota, []string{rules.RuleCapacity}, false, false},
		{"attach, a new share with no RBAC policy left", Attach, true, noPolicyLeft, []string{rules.RuleShareQuota}, false, false},
		{"attach, the project's share reused needs no policy", Attach, true, shared, nil, false, false},
		{"attach, a cluster being created: its project is asked before the share", Attach, false, noPolicyLeft, nil, false, false},
		{"attach, stale facts read from Neutron", Attach, true, func(w *world) { stale(w); full(w) }, nil, false, false},
		{"topology: the cache's rules only (no MTU, no capacity)", Topology, true, func(w *world) { smallerMTU(w); full(w) }, nil, false, false},
		{"topology: overlap", Topology, true, overlapping, []string{rules.RuleOverlap}, false, false},
		{"topology: not granted", Topology, false, ungranted, []string{rules.RuleGranted}, false, false},
		{"before the share, no cluster network yet: waits", BeforeShare, false, smallerMTU, nil, true, false},
		{"before the share: every rule", BeforeShare, true, func(w *world) { smallerMTU(w); full(w) }, []string{rules.RuleMTU, rules.RuleCapacity}, false, false},
		{"before the share: no RBAC policy left", BeforeShare, true, noPolicyLeft, []string{rules.RuleShareQuota}, false, false},
		{"grow: an attached nodegroup's share is made, no policy needed", Grow, true, noPolicyLeft, nil, false, false},
		{"grow: no version, no overlap", Grow, true, func(w *world) { oldVersion(w); overlapping(w) }, nil, false, false},
		{"grow: a revoked grant allows no more nodes", Grow, true, ungranted, []string{rules.RuleGranted}, false, false},
		{"grow: room", Grow, true, full, []string{rules.RuleCapacity}, false, false},
		{"still fits: never the grant", StillFits, true, ungranted, nil, false, false},
		{"still fits: the MTU changed", StillFits, true, smallerMTU, []string{rules.RuleMTU}, false, false},
		{"still fits: stale facts are not judged", StillFits, true, func(w *world) { stale(w); smallerMTU(w) }, nil, false, true},
		{"detach of a nodegroup never attached: nothing to judge", Detach, true, nil, nil, false, true},
		{"detach with the cluster's load balancer on the subnet", Detach, false, attachedWithLB, []string{rules.RuleDetach}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t)
			md(w.cluster, "md-a").Replicas = ptr.To[int32](2)
			if tc.running {
				w.running(1450)
			}
			if tc.change != nil {
				tc.change(w)
			}
			d, err := w.checker().Decide(context.Background(), Question{Ask: tc.ask, Cluster: w.cluster, Nodegroup: "md-a", Value: value})
			g.Expect(err).NotTo(HaveOccurred())
			got := []string{}
			for _, v := range d.Refusal {
				got = append(got, v.Rule)
				g.Expect(v.Nodegroup).To(Equal("md-a"))
			}
			g.Expect(got).To(Equal(append([]string{}, tc.want...)), "refusal: %v", d.Refusal)
			if tc.waiting {
				g.Expect(d.Waiting).NotTo(BeEmpty())
			} else {
				g.Expect(d.Waiting).To(BeEmpty())
			}
			g.Expect(d.Skipped).To(Equal(tc.skipped))
		})
	}
}

// TestResolveIsWhatGeneratePatchesAndTheControllerActOn: the SharedNetwork,
// the subnet and the grant, from the cache only.
func TestResolveIsWhatGeneratePatchesAndTheControllerActOn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		value    sharednetv1.SharedNetworkVariable
		change   func(*world)
		network  bool
		subnet   bool
		granted  bool
		noSubnet bool
	}{
		{"granted, the one allowed subnet chosen", value, nil, true, true, true, false},
		{"no such SharedNetwork", sharednetv1.SharedNetworkVariable{Name: "nope"}, nil, false, false, false, false},
		{"a subnet the network does not have", sharednetv1.SharedNetworkVariable{Name: "vm", Subnet: "other"}, nil, true, false, false, true},
		{"not granted", value, func(w *world) { w.sn.Spec.NamespaceSelector = nil }, true, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t)
			if tc.change != nil {
				tc.change(w)
			}
			res, err := w.checker().Resolve(context.Background(), "team-a", tc.value)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.SharedNetwork != nil).To(Equal(tc.network))
			if tc.subnet {
				g.Expect(res.Subnet).To(Equal(w.vmSubnet))
			} else {
				g.Expect(res.Subnet).To(BeEmpty())
			}
			g.Expect(res.Granted()).To(Equal(tc.granted))
			g.Expect(res.NoSubnet != nil).To(Equal(tc.noSubnet))
			g.Expect(w.cloud.Calls).To(BeEmpty(), "no OpenStack call")
		})
	}
}

// TestAQuestionReusesTheCallersResolution: the attachment controller's
// resolution is not read again (the namespace is read once per attach).
func TestAQuestionReusesTheCallersResolution(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.running(1450)
	c := w.checker()
	ctx := context.Background()
	res, err := c.Resolve(ctx, "team-a", value)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Reader.(client.Client).Delete(ctx, w.objs[0])).To(Succeed(), "the namespace cannot be read any more")
	_, err = c.Decide(ctx, Question{Ask: BeforeShare, Cluster: w.cluster, Nodegroup: "md-a", Value: value})
	g.Expect(err).To(MatchError(ContainSubstring("reading namespace team-a")), "a question that resolves reads it")
	d, err := c.Decide(ctx, Question{Ask: BeforeShare, Cluster: w.cluster, Nodegroup: "md-a", Value: value, Resolved: &res})
	g.Expect(err).NotTo(HaveOccurred(), "given the resolution, it is not read again")
	g.Expect(d.Refusal).To(BeEmpty())
	g.Expect(d.Project).To(Equal("cluster-project"), "the project the share will use, vouched for once")
	g.Expect(w.cloud.Calls["ProjectOfToken"]).To(Equal(1))
}

func TestUntilTheTableReadEveryObjectTheCheckerListsTheConsumers(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.class()
	// Another cluster reserves 201 of the 200 free addresses.
	big := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "big"},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.35.0",
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{Class: "w", Name: "md-a", Replicas: ptr.To[int32](200)}}}}}}
	variables.SetOverride(big, "md-a", []byte(`{"name":"vm"}`))
	w.objs = append(w.objs, big)
	c := w.checker()
	c.Consumers = consumers.NewTable() // has read nothing: an empty answer would admit
	refused := MatchError(And(ContainSubstring("capacity:"), ContainSubstring("team-a/big/md-a holds 0 and may take 201 more")))
	g.Expect(ask(c, Attach, w.cluster)).To(refused, "a replica that just started lists the consumers")

	c.Consumers = fedTable(t, c.Reader.(client.Client))
	g.Expect(ask(c, Attach, w.cluster)).To(refused, "once it read them, from the table")
}

// fedTable is a consumer table that has read every Cluster and attachment
// c holds.
func fedTable(t *testing.T, c client.Client) *consumers.Table {
	t.Helper()
	table, _, err := fakeinformers.Table(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

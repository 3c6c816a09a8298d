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

package controllers

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// resetSubnetMetrics starts a test from no series: the gauges are global
// and other tests of this package (the test bed's too) leave series.
func resetSubnetMetrics() {
	published.Lock()
	defer published.Unlock()
	published.subnets = map[string]map[string]bool{}
	freeAddresses.Reset()
	reservedAddresses.Reset()
}

// seriesOf gathers a gauge's series, "<sharednetwork>/<subnet>" to value,
// through a registry of its own (reading a series by its labels would
// create it).
func seriesOf(t *testing.T, g prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(g)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["sharednetwork"]+"/"+labels["subnet"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// consumerCluster is a Cluster of namespace with nodegroups md-a (replicas
// 3, no failure domain of its own) and md-b; the Cluster reports zones
// failure domains.
func consumerCluster(namespace, name string, zones int) *clusterv1.Cluster {
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.35.0",
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "w", Name: "md-a", Replicas: ptr.To[int32](3)}, {Class: "w", Name: "md-b", Replicas: ptr.To[int32](1)}}}}},
	}
	for i := range zones {
		c.Status.FailureDomains = append(c.Status.FailureDomains, clusterv1.FailureDomain{Name: "az" + strconv.Itoa(i+1)})
	}
	return c
}

// TestSubnetMetricsSayWhetherTheSubnetFitsItsNodegroups: per subnet, the
// free addresses and what the nodegroups using it may still take, so that
// `free - reserved < 0` fires exactly when the capacity rule refuses their
// growth; both series go with the subnet and with the SharedNetwork.
func TestSubnetMetricsSayWhetherTheSubnetFitsItsNodegroups(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	resetSubnetMetrics()
	s := newNetworkStory(t)
	key := "vm/" + s.subnet

	// team-a/demo: md-a (3 replicas over the cluster's 2 zones) holds 2
	// addresses; md-b does not use the network. team-b/big: md-a sized by
	// the autoscaler's max size, in one zone of its own, not attached yet.
	// team-c/elsewhere uses another SharedNetwork.
	demo := consumerCluster("team-a", "demo", 2)
	variables.SetOverride(demo, "md-a", []byte(`{"name":"vm"}`))
	big := consumerCluster("team-b", "big", 3)
	big.Spec.Topology.Workers.MachineDeployments[0].FailureDomain = "az1"
	big.Spec.Topology.Workers.MachineDeployments[0].Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "10"}
	variables.SetOverride(big, "md-a", []byte(`{"name":"vm","subnet":"`+s.subnet+`"}`))
	elsewhere := consumerCluster("team-c", "elsewhere", 1)
	variables.SetOverride(elsewhere, "md-a", []byte(`{"name":"other"}`))
	attachment := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-md-a"},
		Spec:   sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: s.subnet},
		Status: sharednetv1.SharedNetworkAttachmentStatus{Nodes: []sharednetv1.AttachedNode{{Machine: "m1"}, {Machine: "m2"}}}}
	for _, o := range []client.Object{demo, big, elsewhere, attachment} {
		g.Expect(s.client.Create(ctx, o)).To(Succeed())
	}

	s.reconcile()
	facts, _ := s.sharedNetwork().Status.Subnet(s.subnet)
	g.Expect(seriesOf(t, freeAddresses)).To(Equal(map[string]float64{key: float64(ptr.Deref(facts.FreeAddresses, 0))}))
	// demo/md-a: 3 + 2 zones - 2 held = 3; big/md-a: 10 + 1 zone = 11.
	g.Expect(seriesOf(t, reservedAddresses)).To(Equal(map[string]float64{key: 14}))

	// The nodegroup grows: the next reconcile says so from the cache, with
	// no call to Neutron.
	calls := s.cloud.Calls["Network"]
	g.Expect(s.client.Get(ctx, client.ObjectKeyFromObject(demo), demo)).To(Succeed())
	demo.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](5)
	g.Expect(s.client.Update(ctx, demo)).To(Succeed())
	s.reconcile()
	g.Expect(s.cloud.Calls["Network"]).To(Equal(calls), "fresh facts: no call to Neutron")
	g.Expect(seriesOf(t, reservedAddresses)).To(Equal(map[string]float64{key: 16}))

	// The alert's expression and the capacity rule agree: free equal to
	// reserved still fits, one address fewer does not.
	checker := &preflight.Checker{Reader: s.client, Now: func() time.Time { return s.now }}
	stillFits := func() error {
		g.Expect(s.client.Get(ctx, client.ObjectKeyFromObject(demo), demo)).To(Succeed())
		d, err := checker.Decide(ctx, preflight.Question{Ask: preflight.StillFits, Cluster: demo, Nodegroup: "md-a", Value: sharednetv1.SharedNetworkVariable{Name: "vm"}})
		if err != nil {
			return err
		}
		return d.Err()
	}
	for _, tc := range []struct {
		headroom float64 // free - reserved
		fits     bool
	}{{0, true}, {-1, false}} {
		g.Expect(s.client.Get(ctx, client.ObjectKeyFromObject(big), big)).To(Succeed())
		maxSize := int(float64(ptr.Deref(facts.FreeAddresses, 0))-16+11-tc.headroom) - 1 // 11 = 10 + its zone
		big.Spec.Topology.Workers.MachineDeployments[0].Metadata.Annotations[clusterv1.AutoscalerMaxSizeAnnotation] = strconv.Itoa(maxSize)
		g.Expect(s.client.Update(ctx, big)).To(Succeed())
		s.reconcile()
		g.Expect(seriesOf(t, freeAddresses)[key] - seriesOf(t, reservedAddresses)[key]).To(Equal(tc.headroom))
		if tc.fits {
			g.Expect(stillFits()).To(Succeed())
		} else {
			g.Expect(stillFits()).To(MatchError(ContainSubstring(rules.RuleCapacity + ":")))
		}
	}

	// A nodegroup whose size is not a node count cannot be sized: no
	// reserved series rather than a wrong one; the free one stays.
	g.Expect(s.client.Get(ctx, client.ObjectKeyFromObject(big), big)).To(Succeed())
	big.Spec.Topology.Workers.MachineDeployments[0].Metadata.Annotations[clusterv1.AutoscalerMaxSizeAnnotation] = "lots"
	g.Expect(s.client.Update(ctx, big)).To(Succeed())
	s.reconcile()
	g.Expect(seriesOf(t, reservedAddresses)).To(BeEmpty())
	g.Expect(seriesOf(t, freeAddresses)).To(HaveKey(key))
	big.Spec.Topology.Workers.MachineDeployments[0].Metadata.Annotations[clusterv1.AutoscalerMaxSizeAnnotation] = "10"
	g.Expect(s.client.Update(ctx, big)).To(Succeed())
	s.reconcile()
	g.Expect(seriesOf(t, reservedAddresses)).To(Equal(map[string]float64{key: 16}))

	// Addresses the administrator keeps for load balancers are reserved
	// too, and the rule counts them the same way.
	free := int32(ptr.Deref(facts.FreeAddresses, 0))
	keep := func(n int32) {
		sn := s.sharedNetwork()
		sn.Spec.LoadBalancerAddresses = nil
		if n > 0 {
			sn.Spec.LoadBalancerAddresses = []sharednetv1.LoadBalancerAddresses{{Subnet: s.subnet, Keep: n}}
		}
		g.Expect(s.client.Update(ctx, sn)).To(Succeed())
		s.reconcile()
	}
	keep(free - 16)
	g.Expect(seriesOf(t, reservedAddresses)).To(Equal(map[string]float64{key: float64(free)}))
	g.Expect(stillFits()).To(Succeed())
	keep(free - 15)
	g.Expect(seriesOf(t, freeAddresses)[key] - seriesOf(t, reservedAddresses)[key]).To(Equal(-1.0))
	g.Expect(stillFits()).To(MatchError(ContainSubstring(fmt.Sprintf("and %d kept for load balancers", free-15))))
	keep(0)
	g.Expect(seriesOf(t, reservedAddresses)).To(Equal(map[string]float64{key: 16}))

	// The subnet leaves the SharedNetwork: both series go at the next
	// reconcile, before Neutron is read again.
	sn := s.sharedNetwork()
	sn.Spec.Subnets = nil
	g.Expect(s.client.Update(ctx, sn)).To(Succeed())
	s.reconcile()
	g.Expect(seriesOf(t, freeAddresses)).To(BeEmpty())
	g.Expect(seriesOf(t, reservedAddresses)).To(BeEmpty())

	// Back, then deleted: kept while a nodegroup still uses it (the alert
	// still matters), gone with the SharedNetwork.
	sn = s.sharedNetwork()
	sn.Spec.Subnets = []string{s.subnet}
	g.Expect(s.client.Update(ctx, sn)).To(Succeed())
	s.now = s.now.Add(DefaultResync + time.Second)
	s.reconcile()
	g.Expect(seriesOf(t, reservedAddresses)).To(HaveKey(key))
	g.Expect(s.client.Delete(ctx, s.sharedNetwork())).To(Succeed())
	s.reconcile()
	g.Expect(seriesOf(t, freeAddresses)).To(HaveKey(key), "in use: still there")
	g.Expect(seriesOf(t, reservedAddresses)).To(HaveKey(key), "in use: still there")
	g.Expect(s.client.Delete(ctx, attachment)).To(Succeed())
	s.reconcile()
	g.Expect(seriesOf(t, freeAddresses)).To(BeEmpty())
	g.Expect(seriesOf(t, reservedAddresses)).To(BeEmpty())
}

// TestSubnetMetricsOfASharedNetworkGoneUnseen: a SharedNetwork that is
// gone when it is reconciled (its finalizer removed by hand) leaves no
// series either.
func TestSubnetMetricsOfASharedNetworkGoneUnseen(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	resetSubnetMetrics()
	s := newNetworkStory(t)
	s.reconcile()
	g.Expect(seriesOf(t, freeAddresses)).To(HaveLen(1))
	g.Expect(seriesOf(t, reservedAddresses)).To(Equal(map[string]float64{"vm/" + s.subnet: 0}), "no nodegroup uses it")

	sn := s.sharedNetwork()
	sn.Finalizers = nil
	g.Expect(s.client.Update(ctx, sn)).To(Succeed())
	g.Expect(s.client.Delete(ctx, sn)).To(Succeed())
	s.reconcile()
	g.Expect(seriesOf(t, freeAddresses)).To(BeEmpty())
	g.Expect(seriesOf(t, reservedAddresses)).To(BeEmpty())
}

// TestTheVMProjectsRBACPoliciesAreInStatusAndMetrics: the quota every share
// takes one of is in status and exported, so an administrator sees it
// coming; where the credential may not read it, the status says so and no
// series is a wrong value.
func TestTheVMProjectsRBACPoliciesAreInStatusAndMetrics(t *testing.T) {
	g := NewWithT(t)
	policiesUsed.Reset()
	policiesLimit.Reset()
	s := newNetworkStory(t)
	s.vm.RBACPolicyLimit = ptr.To(10)
	for _, project := range []string{"p1", "p2", "p3"} {
		_, err := s.vm.Share(context.Background(), "net", project)
		g.Expect(err).NotTo(HaveOccurred())
	}
	s.reconcile()
	g.Expect(s.sharedNetwork().Status.RBACPolicies).To(Equal(sharednetv1.QuotaUsage{Used: ptr.To[int32](3), Limit: ptr.To[int32](10)}))
	g.Expect(s.ready().Message).To(ContainSubstring("the VM project uses 3 of 10 RBAC policies"))
	g.Expect(seriesOf(t, policiesUsed)).To(Equal(map[string]float64{"vm/": 3}))
	g.Expect(seriesOf(t, policiesLimit)).To(Equal(map[string]float64{"vm/": 10}))

	s.vm.RBACPolicyQuotaHidden = true
	s.now = s.now.Add(time.Hour)
	s.reconcile()
	g.Expect(s.ready().Status).To(Equal(metav1.ConditionTrue), "the other facts are current")
	g.Expect(s.ready().Message).To(ContainSubstring("not readable with its credential"))
	g.Expect(s.sharedNetwork().Status.RBACPolicies).To(BeZero())
	g.Expect(seriesOf(t, policiesUsed)).To(BeEmpty())
}

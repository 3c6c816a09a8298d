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
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// The subnet gauges share their labels, so `free - reserved < 0` (the subnet
// cannot fit what its nodegroups may still take: the capacity rule refuses
// their growth) is an alert expression without any matching clause.
var (
	// freeAddresses is what an administrator alerts on before nodegroups
	// stop joining: nodes that cannot get an address never join the cluster.
	freeAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capo_sharednet_subnet_free_addresses",
		Help: "Free addresses in the allocation pools of a shared subnet, as last read from Neutron.",
	}, []string{"sharednetwork", "subnet"})

	// reservedAddresses is what the capacity rule keeps free for the
	// nodegroups already using (or asking for) the subnet: per nodegroup,
	// one address per node at its maximum size plus one per availability
	// zone (a rolling update's surge), minus the addresses it holds
	// (rules.Consumer.Headroom), plus the addresses kept for load balancers
	// (spec.loadBalancerAddresses).
	reservedAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capo_sharednet_subnet_reserved_addresses",
		Help: "Addresses of a shared subnet its nodegroups may still take (per nodegroup, its maximum size plus one per availability zone, minus the addresses it holds), plus those the SharedNetwork keeps for load balancers. Fewer free addresses than this: their growth is refused.",
	}, []string{"sharednetwork", "subnet"})
)

// The VM project's RBAC policies: every share takes one, across all its
// networks, and Neutron refuses the share past the quota.
var (
	policiesUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capo_sharednet_vm_project_rbac_policies_used",
		Help: "RBAC policies the SharedNetwork's VM project uses (every share takes one), as last read from Neutron's quota details.",
	}, []string{"sharednetwork"})
	policiesLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capo_sharednet_vm_project_rbac_policies_limit",
		Help: "The SharedNetwork's VM project's quota of RBAC policies (rbac_policy; -1: unlimited), as last read from Neutron.",
	}, []string{"sharednetwork"})
)

func init() {
	metrics.Registry.MustRegister(freeAddresses, reservedAddresses, policiesUsed, policiesLimit)
}

// publishPolicies sets the RBAC policy series of sharedNetwork; none while
// the quota is not known (never a wrong value).
func publishPolicies(sharedNetwork string, q *sharednetv1.QuotaUsage) {
	if q == nil || q.Used == nil || q.Limit == nil {
		policiesUsed.DeleteLabelValues(sharedNetwork)
		policiesLimit.DeleteLabelValues(sharedNetwork)
		return
	}
	policiesUsed.WithLabelValues(sharedNetwork).Set(float64(*q.Used))
	policiesLimit.WithLabelValues(sharedNetwork).Set(float64(*q.Limit))
}

// subnetMetrics are one subnet's values; reserved is nil when its consumers
// could not be sized (its series is then absent, never a wrong value).
type subnetMetrics struct {
	subnet   string
	free     int64
	reserved *int
}

// published are the subnets each SharedNetwork has series for, so a new
// set replaces the old one without a moment with no series.
var published = struct {
	sync.Mutex
	subnets map[string]map[string]bool
}{subnets: map[string]map[string]bool{}}

// publishSubnets sets the series of sharedNetwork to subnets and deletes
// those of any other subnet: a subnet that left the SharedNetwork must not
// keep alerting with its last value.
func publishSubnets(sharedNetwork string, subnets []subnetMetrics) {
	published.Lock()
	defer published.Unlock()
	now := map[string]bool{}
	for _, s := range subnets {
		now[s.subnet] = true
		freeAddresses.WithLabelValues(sharedNetwork, s.subnet).Set(float64(s.free))
		if s.reserved != nil {
			reservedAddresses.WithLabelValues(sharedNetwork, s.subnet).Set(float64(*s.reserved))
		} else {
			reservedAddresses.DeleteLabelValues(sharedNetwork, s.subnet)
		}
	}
	for subnet := range published.subnets[sharedNetwork] {
		if !now[subnet] {
			freeAddresses.DeleteLabelValues(sharedNetwork, subnet)
			reservedAddresses.DeleteLabelValues(sharedNetwork, subnet)
		}
	}
	published.subnets[sharedNetwork] = now
}

// forgetSubnetMetrics deletes every series of a SharedNetwork: a deleted
// network must not keep alerting with its last values.
func forgetSubnetMetrics(sharedNetwork string) {
	published.Lock()
	defer published.Unlock()
	delete(published.subnets, sharedNetwork)
	for _, g := range []*prometheus.GaugeVec{freeAddresses, reservedAddresses, policiesUsed, policiesLimit} {
		g.DeletePartialMatch(prometheus.Labels{"sharednetwork": sharedNetwork})
	}
}

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

package rules

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// FieldMaxSize is the autoscaler's max-size annotation of a MachineDeployment topology.
const FieldMaxSize = "metadata.annotations[" + clusterv1.AutoscalerMaxSizeAnnotation + "]"

// Consumer is one nodegroup using (or asking to use) a shared subnet.
type Consumer struct {
	Name     string // "<namespace>/<cluster>/<machineDeploymentTopology>"
	MaxSize  int    // from MaxSize()
	Zones    int    // availability zones it uses (Zones()); 0 counts as 1
	Attached int    // addresses it already holds on the subnet (already counted as used in the subnet)
}

// MaxSize is the largest number of nodes a nodegroup can have: CAPI's
// autoscaler max-size annotation when set, else replicas, else 1. A value
// that is not a node count (not a number, negative, or beyond what the
// autoscaler's int32 sizes hold) is refused: wrapped into the sums below it
// could turn a full subnet into a pass.
func MaxSize(annotations map[string]string, replicas *int32) (int, *Violation) {
	if v, ok := annotations[clusterv1.AutoscalerMaxSizeAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 0 {
			return 0, &Violation{Rule: RuleCapacity, Field: FieldMaxSize, Message: fmt.Sprintf(
				"annotation %s=%q is not a node count; set it to a whole number from 0 to %d (the nodegroup's largest size)",
				clusterv1.AutoscalerMaxSizeAnnotation, v, math.MaxInt32)}
		}
		return int(n), nil
	}
	if replicas != nil {
		if *replicas < 0 {
			return 0, &Violation{Rule: RuleCapacity, Field: "replicas", Message: fmt.Sprintf("replicas %d is negative; set 0 or more", *replicas)}
		}
		return int(*replicas), nil
	}
	return 1, nil
}

// Zones is how many availability zones a nodegroup's nodes land in: its
// MachineDeployment topology's failure domain when set (one), else every
// failure domain the cluster reports (CAPI spreads the nodegroup over them),
// and one for a cluster that reports none.
func Zones(failureDomain string, clusterFailureDomains int) int {
	if failureDomain != "" {
		return 1
	}
	return max(clusterFailureDomains, 1)
}

func (c Consumer) zones() int { return max(c.Zones, 1) }

// Need is the addresses the nodegroup needs on the subnet: one per node at
// maximum size plus one per availability zone it uses.
func (c Consumer) Need() int { return c.MaxSize + c.zones() }

// Headroom is the addresses it may still take: Need minus what it already
// holds, never negative.
func (c Consumer) Headroom() int { return max(0, c.Need()-c.Attached) }

// Reserved is what the consumers may still take together: the sum of their
// headroom, which the capacity rule keeps free and the reserved-addresses
// metric exports.
func Reserved(consumers []Consumer) int {
	reserved := 0
	for _, c := range consumers {
		reserved += c.Headroom()
	}
	return reserved
}

// Sized refuses to attach a nodegroup whose size nothing bounds: with
// neither replicas in its topology nor the cluster autoscaler's max size,
// CAPI leaves the MachineDeployment's replicas to whoever scales it (kubectl
// scale on the MachineDeployment), past any room judged for it on the
// subnet. An attached nodegroup that grows, or gives its bound up, is
// refused the same way; one kept unchanged is not (CloudFits judges the
// cloud, not this).
func Sized(annotations map[string]string, replicas *int32) *Violation {
	if replicas != nil {
		return nil
	}
	if _, ok := annotations[clusterv1.AutoscalerMaxSizeAnnotation]; ok {
		return nil
	}
	return &Violation{Rule: RuleCapacity, Field: "replicas", Message: fmt.Sprintf(
		"the nodegroup sets neither replicas nor the cluster autoscaler's annotation %s, so CAPI leaves its MachineDeployment's replicas to whoever scales it "+
			"and the addresses it may take on the shared subnet cannot be judged; set replicas on the nodegroup in the Cluster's topology, "+
			"or the autoscaler's min-size and max-size annotations", clusterv1.AutoscalerMaxSizeAnnotation)}
}

// CapacityInput are the facts the capacity rule needs.
type CapacityInput struct {
	Subnet        string
	FreeAddresses int // free addresses in the subnet's allocation pools (pool size minus used)
	// KeptForLoadBalancers are free addresses the administrator keeps for
	// the next load balancers (SharedNetwork spec.loadBalancerAddresses).
	KeptForLoadBalancers int
	New                  Consumer   // the nodegroup being attached (Attached may be >0 on a re-check)
	Others               []Consumer // every other nodegroup, of all clusters, using the subnet
	PortQuotaFree        *int       // ports the cluster project may still create; nil = unknown/unlimited
}

// Capacity checks that the subnet has room for the new nodegroup at its
// maximum size plus one address per availability zone, on top of the
// headroom every other nodegroup on the subnet still needs (nodes that cannot
// get an address never join the cluster), and that the cluster project's port
// quota allows the new nodegroup's ports. Free equal to needed passes.
func Capacity(in CapacityInput) *Violation {
	fail := func(format string, a ...any) *Violation {
		return &Violation{Rule: RuleCapacity, Field: FieldSubnet, Message: fmt.Sprintf(format, a...)}
	}
	need, reserved, kept := in.New.Headroom(), Reserved(in.Others), in.KeptForLoadBalancers
	if in.FreeAddresses < need+reserved+kept {
		// The tenant's own nodegroups are named; other tenants' are only
		// counted (their namespaces, clusters and nodegroups are not this
		// tenant's business).
		var others []string
		elsewhere := 0
		namespace, _, _ := strings.Cut(in.New.Name, "/")
		for _, o := range byName(in.Others) {
			h := o.Headroom()
			switch {
			case h <= 0:
			case strings.HasPrefix(o.Name, namespace+"/"):
				others = append(others, fmt.Sprintf("%s holds %d and may take %d more", o.Name, o.Attached, h))
			default:
				elsewhere += h
			}
		}
		if elsewhere > 0 {
			others = append(others, fmt.Sprintf("%d by nodegroups of other namespaces", elsewhere))
		}
		attached := ""
		if in.New.Attached > 0 {
			attached = fmt.Sprintf(", %d already attached", in.New.Attached)
		}
		reservedBy := ""
		if len(others) > 0 {
			reservedBy = " (" + strings.Join(others, ", ") + ")"
		}
		keptBy := ""
		if kept > 0 {
			keptBy = fmt.Sprintf(", and %d kept for load balancers", kept)
		}
		return fail("subnet %s has %d free addresses in its allocation pools, but nodegroup %s needs %d (max size %d + %d availability zone(s)%s) and other nodegroups still reserve %d%s%s; "+
			"use a larger subnet or allocation pool (%d more addresses), or lower the nodegroup's max size",
			in.Subnet, in.FreeAddresses, in.New.Name, need, in.New.MaxSize, in.New.zones(), attached, reserved, reservedBy, keptBy,
			need+reserved+kept-in.FreeAddresses)
	}
	if in.PortQuotaFree != nil && *in.PortQuotaFree < need {
		return fail("the cluster project's port quota allows %d more ports, but nodegroup %s needs %d on subnet %s (max size %d + %d availability zone(s)); "+
			"ask for a higher port quota on the cluster project, or lower the nodegroup's max size",
			*in.PortQuotaFree, in.New.Name, need, in.Subnet, in.New.MaxSize, in.New.zones())
	}
	return nil
}

// byName is consumers sorted by name, so a refusal reads the same whatever
// order they were gathered in.
func byName(consumers []Consumer) []Consumer {
	sorted := slices.Clone(consumers)
	slices.SortFunc(sorted, func(a, b Consumer) int { return strings.Compare(a.Name, b.Name) })
	return sorted
}

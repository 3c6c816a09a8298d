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
	"net/netip"
	"sort"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// Rollout is where a nodegroup's machines stand with respect to the shared
// subnet; computed from Kubernetes objects only.
type Rollout struct {
	// Desired is the MachineDeployment's replica count.
	Desired int32
	// OnCurrentTemplate counts machines created from the MachineDeployment's
	// current OpenStackMachineTemplate.
	OnCurrentTemplate int
	// Machines counts every machine of the nodegroup.
	Machines int
	// Nodes are the machines with an address on the shared subnet.
	Nodes []sharednetv1.AttachedNode
}

// MeasureRollout reads a nodegroup's rollout: machines, the template each
// was cloned from, and which of them hold an address in subnet.
func MeasureRollout(md *clusterv1.MachineDeployment, machines []clusterv1.Machine, infraMachines map[string]*infrav1.OpenStackMachine, subnet netip.Prefix) Rollout {
	r := Rollout{Machines: len(machines)}
	if md.Spec.Replicas != nil {
		r.Desired = *md.Spec.Replicas
	}
	current := md.Spec.Template.Spec.InfrastructureRef.Name
	for _, m := range machines {
		osm := infraMachines[m.Spec.InfrastructureRef.Name]
		if osm == nil {
			continue
		}
		if osm.Annotations[clusterv1.TemplateClonedFromNameAnnotation] == current {
			r.OnCurrentTemplate++
		}
		for _, a := range osm.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if err == nil && subnet.IsValid() && subnet.Contains(ip) {
				r.Nodes = append(r.Nodes, sharednetv1.AttachedNode{Machine: m.Name, Node: m.Status.NodeRef.Name, Address: ip.String()})
				break
			}
		}
	}
	sort.Slice(r.Nodes, func(i, j int) bool { return r.Nodes[i].Machine < r.Nodes[j].Machine })
	return r
}

// Attached says the rollout is over: every machine runs on the current
// template (which carries the port) and has its shared-subnet address.
func (r Rollout) Attached(templateCarriesPort bool) bool {
	return templateCarriesPort && r.Machines == int(r.Desired) && r.OnCurrentTemplate == r.Machines && len(r.Nodes) == r.Machines
}

// Detached says no machine holds an address on the shared subnet any more
// and the current template carries no port.
func (r Rollout) Detached(templateCarriesPort bool) bool {
	return !templateCarriesPort && len(r.Nodes) == 0
}

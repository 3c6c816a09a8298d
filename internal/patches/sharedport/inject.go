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

// Package sharedport is the one patch of this extension: the extra port on the
// shared subnet in a nodegroup's OpenStackMachineTemplate. Pure functions; the
// GeneratePatches hook decides whether to call them.
package sharedport

import (
	"encoding/json"
	"fmt"

	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
)

const (
	// Tag marks the ports this extension adds, so a template that already
	// carries one is recognised (the sticky rule) whatever else it lists.
	Tag = "capo-sharednet"
	// NameSuffix makes CAPO name the port <machine>-shared.
	NameSuffix = "shared"

	portsPath = "/spec/template/spec/ports"
)

// Port is the port on the shared subnet: CAPO creates it in the cluster's
// project on the shared network with one address from that subnet (no fixed
// address: Neutron's default policy refuses ip_address on a shared network).
func Port(sharedNetwork, networkID, subnetID string) infrav1.PortOpts {
	return infrav1.PortOpts{
		Network:     &infrav1.NetworkParam{ID: ptr.To(networkID)},
		Description: ptr.To(fmt.Sprintf("capo-sharednet: shared network %s, subnet %s", sharedNetwork, subnetID)),
		NameSuffix:  ptr.To(NameSuffix),
		FixedIPs:    []infrav1.FixedIP{{Subnet: &infrav1.SubnetParam{ID: ptr.To(subnetID)}}},
		Tags:        []string{Tag},
	}
}

// Operation is one RFC 6902 operation.
type Operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// template is the part of an OpenStackMachineTemplate the patch looks at.
type template struct {
	Spec struct {
		Template struct {
			Spec struct {
				Ports []json.RawMessage `json:"ports"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// Inject returns the JSON patch adding port to an OpenStackMachineTemplate.
// With no ports listed CAPO makes one default port on the cluster network,
// and none once any port is listed: so an empty list becomes [{}, port] and a
// non-empty one gets port appended, keeping the cluster network first and the
// node's primary address where it was. The operation is written here rather
// than diffed from a typed template by CAPI's topologymutation.WalkTemplates,
// which costs 4-8x the whole GeneratePatches call (docs/design.md).
func Inject(osmt []byte, port infrav1.PortOpts) ([]Operation, error) {
	var t template
	if err := json.Unmarshal(osmt, &t); err != nil {
		return nil, fmt.Errorf("reading OpenStackMachineTemplate: %w", err)
	}
	if len(t.Spec.Template.Spec.Ports) == 0 {
		return []Operation{{Op: "add", Path: portsPath, Value: []infrav1.PortOpts{{}, port}}}, nil
	}
	return []Operation{{Op: "add", Path: portsPath + "/-", Value: port}}, nil
}

// Carried returns the shared port a template already carries, if any.
func Carried(ports []infrav1.PortOpts) *infrav1.PortOpts {
	for i := range ports {
		for _, tag := range ports[i].Tags {
			if tag == Tag {
				return &ports[i]
			}
		}
	}
	return nil
}

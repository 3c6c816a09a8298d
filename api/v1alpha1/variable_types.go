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

package v1alpha1

// VariableName is the name of the ClusterClass variable a cluster owner sets
// on one MachineDeployment topology to attach that nodegroup.
const VariableName = "sharedNetwork"

// SharedNetworkVariable is the value of the ClusterClass variable
// `sharedNetwork`. It names one SharedNetwork and at most one of its subnets:
// a nodegroup reaches exactly one subnet of one shared network, by construction.
//
// It is set only in `spec.topology.workers.machineDeployments[].variables.overrides`;
// a cluster-wide value is refused: a shared network is attached to one nodegroup,
// never the whole cluster.
//
// +kubebuilder:validation:XValidation:rule="!has(self.subnet) || self.subnet.matches('^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')",messageExpression="'sharedNetwork.subnet must be one Neutron subnet ID (a lowercase UUID), got ' + self.subnet + ': a nodegroup reaches only one subnet; use one nodegroup per subnet'",fieldPath=".subnet",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",messageExpression="'sharedNetwork.name must be the name of a SharedNetwork (a DNS subdomain), got ' + self.name",fieldPath=".name",reason=FieldValueInvalid
type SharedNetworkVariable struct {
	// name is the SharedNetwork (created by the management-cluster
	// administrator) whose network the nodegroup is attached to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// subnet is the ID of the one subnet of that network the nodegroup's nodes
	// get their second address on. Required when the SharedNetwork allows
	// several subnets.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=36
	Subnet string `json:"subnet,omitempty"`
}

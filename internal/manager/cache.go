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

package manager

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// The kinds a management cluster holds one of per node or nodegroup are
// cached with only what the extension reads of them: at 2,000 Clusters of
// 4 nodegroups that is 8,000 each, and their specs and statuses (resolved
// ports, node info, conditions) are most of the manager's heap. The
// extension never writes these kinds, so no update can carry a trimmed
// copy back. A new read of another of their fields must keep it here, and
// join TestTheCacheKeepsWhatTheExtensionReads, which runs every read of
// them on full and trimmed copies.
func trimmedKinds() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		// MeasureRollout: the template each was cloned from (an
		// annotation) and its addresses.
		&infrav1.OpenStackMachine{}: {Transform: trim(func(o *infrav1.OpenStackMachine) *infrav1.OpenStackMachine {
			return &infrav1.OpenStackMachine{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta,
				Status: infrav1.OpenStackMachineStatus{Addresses: o.Status.Addresses}}
		})},
		// MeasureRollout: its OpenStackMachine and Node; GeneratePatches:
		// whether it has a server.
		&clusterv1.Machine{}: {Transform: trim(func(o *clusterv1.Machine) *clusterv1.Machine {
			return &clusterv1.Machine{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta,
				Spec:   clusterv1.MachineSpec{ClusterName: o.Spec.ClusterName, InfrastructureRef: o.Spec.InfrastructureRef, ProviderID: o.Spec.ProviderID},
				Status: clusterv1.MachineStatus{NodeRef: o.Status.NodeRef, Phase: o.Status.Phase}}
		})},
		// The rollout: its size and current templates.
		&clusterv1.MachineDeployment{}: {Transform: trim(func(o *clusterv1.MachineDeployment) *clusterv1.MachineDeployment {
			return &clusterv1.MachineDeployment{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta,
				Spec: clusterv1.MachineDeploymentSpec{ClusterName: o.Spec.ClusterName, Replicas: o.Spec.Replicas,
					Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: o.Spec.Template.Spec.ClusterName,
						InfrastructureRef: o.Spec.Template.Spec.InfrastructureRef, Bootstrap: clusterv1.Bootstrap{ConfigRef: o.Spec.Template.Spec.Bootstrap.ConfigRef}}}}}
		})},
		// Whether the template carries the shared port.
		&infrav1.OpenStackMachineTemplate{}: {Transform: trim(func(o *infrav1.OpenStackMachineTemplate) *infrav1.OpenStackMachineTemplate {
			return &infrav1.OpenStackMachineTemplate{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta,
				Spec: infrav1.OpenStackMachineTemplateSpec{Template: infrav1.OpenStackMachineTemplateResource{
					Spec: infrav1.OpenStackMachineSpec{Ports: o.Spec.Template.Spec.Ports}}}}
		})},
	}
}

// trim is a cache transform keeping what keep returns, without managed
// fields; anything else (a tombstone) is left as it is.
func trim[T client.Object](keep func(T) T) func(any) (any, error) {
	return func(in any) (any, error) {
		o, ok := in.(T)
		if !ok {
			return in, nil
		}
		out := keep(o)
		out.SetManagedFields(nil)
		return out, nil
	}
}

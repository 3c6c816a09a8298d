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
	"fmt"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
)

// transform applies the manager's cache transform of obj's kind.
func transform[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	for kind, by := range trimmedKinds() {
		if _, same := kind.(T); same {
			out, err := by.Transform(obj.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			return out.(T)
		}
	}
	panic(fmt.Sprintf("%T is not trimmed", obj))
}

// Every read the extension makes of a trimmed kind answers the same on the
// cached copy as on the object the API server holds: the rollout measured
// (templates, addresses, nodes), the shared port a template carries, a
// machine's server, a nodegroup's bootstrap template. What is dropped is
// what it never reads.
func TestTheCacheKeepsWhatTheExtensionReads(t *testing.T) {
	g := NewWithT(t)
	managed := []metav1.ManagedFieldsEntry{{Manager: "capi", Operation: metav1.ManagedFieldsOperationApply}}
	port := sharedport.Port("vm-net", "net-1", "subnet-1")
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-md-a", ManagedFields: managed,
			Labels: map[string]string{clusterv1.ClusterNameLabel: "demo", clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-a"}},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: "demo", Replicas: ptr.To[int32](2),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"a": "b"}}, Spec: clusterv1.MachineSpec{
				ClusterName: "demo", Version: "v1.35.0", FailureDomain: "nova",
				Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{Kind: "KubeadmConfigTemplate", Name: "kct-2"}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{Kind: "OpenStackMachineTemplate", Name: "osmt-2"}}}},
		Status: clusterv1.MachineDeploymentStatus{Replicas: ptr.To[int32](2), Phase: "ScalingUp"},
	}
	machine := func(name, osm, node, providerID string) clusterv1.Machine {
		return clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, ManagedFields: managed, Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name}},
			Spec: clusterv1.MachineSpec{ClusterName: "demo", Version: "v1.35.0", ProviderID: providerID,
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{Kind: "OpenStackMachine", Name: osm},
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(name)}},
			Status: clusterv1.MachineStatus{Phase: "Running", NodeRef: clusterv1.MachineNodeReference{Name: node},
				NodeInfo:   &corev1.NodeSystemInfo{KernelVersion: "6.8", OSImage: "Ubuntu"},
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}}}
	}
	osm := func(name, template string, addresses ...string) *infrav1.OpenStackMachine {
		o := &infrav1.OpenStackMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, ManagedFields: managed,
			Annotations: map[string]string{clusterv1.TemplateClonedFromNameAnnotation: template}},
			Spec: infrav1.OpenStackMachineSpec{Flavor: ptr.To("m1.medium"), Ports: []infrav1.PortOpts{{}, port}},
			Status: infrav1.OpenStackMachineStatus{InstanceID: ptr.To("server-" + name),
				Resolved: &infrav1.ResolvedMachineSpec{ImageID: "image", Ports: []infrav1.ResolvedPortSpec{{Name: name + "-0", NetworkID: "n"}}}}}
		for _, a := range addresses {
			o.Status.Addresses = append(o.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		return o
	}
	machines := []clusterv1.Machine{
		machine("m-new", "osm-new", "node-new", "openstack:///server-new"),
		machine("m-old", "osm-old", "node-old", ""),
	}
	osms := map[string]*infrav1.OpenStackMachine{
		"osm-new": osm("osm-new", "osmt-2", "10.6.0.10", "172.16.5.11"),
		"osm-old": osm("osm-old", "osmt-1", "10.6.0.11"),
	}
	subnet := netip.MustParsePrefix("172.16.5.0/24")

	cachedMachines := make([]clusterv1.Machine, 0, len(machines))
	for i := range machines {
		cachedMachines = append(cachedMachines, *transform(t, &machines[i]))
	}
	cachedOSMs := map[string]*infrav1.OpenStackMachine{}
	for name, o := range osms {
		cachedOSMs[name] = transform(t, o)
	}
	cachedMD := transform(t, md)
	want := controllers.MeasureRollout(md, machines, osms, subnet)
	g.Expect(want.Nodes).To(HaveLen(1), "the fixture measures something")
	g.Expect(controllers.MeasureRollout(cachedMD, cachedMachines, cachedOSMs, subnet)).To(Equal(want))
	g.Expect(cachedMD.Spec.Template.Spec.Bootstrap.ConfigRef).To(Equal(md.Spec.Template.Spec.Bootstrap.ConfigRef))
	g.Expect(cachedMD.Labels).To(Equal(md.Labels))
	for i := range machines {
		g.Expect(cachedMachines[i].Spec.ProviderID).To(Equal(machines[i].Spec.ProviderID))
	}

	tmpl := &infrav1.OpenStackMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "osmt-2", ManagedFields: managed},
		Spec: infrav1.OpenStackMachineTemplateSpec{Template: infrav1.OpenStackMachineTemplateResource{Spec: infrav1.OpenStackMachineSpec{
			Flavor: ptr.To("m1.medium"), Ports: []infrav1.PortOpts{{}, port}, Tags: []string{"x"}}}}}
	g.Expect(sharedport.Carried(transform(t, tmpl).Spec.Template.Spec.Ports)).To(Equal(sharedport.Carried(tmpl.Spec.Template.Spec.Ports)))

	// What is dropped.
	g.Expect(cachedOSMs["osm-new"].Spec).To(BeZero())
	g.Expect(cachedOSMs["osm-new"].Status.Resolved).To(BeNil())
	g.Expect(cachedMachines[0].Status.NodeInfo).To(BeNil())
	g.Expect(cachedMachines[0].Status.Conditions).To(BeEmpty())
	g.Expect(cachedMD.Status).To(BeZero())
	for _, o := range []client.Object{cachedMD, &cachedMachines[0], cachedOSMs["osm-new"], transform(t, tmpl)} {
		g.Expect(o.GetManagedFields()).To(BeNil(), "%T", o)
	}
}

// A deleted object's tombstone passes through the transforms as it is.
func TestATombstoneIsLeftAsItIs(t *testing.T) {
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "team-a/m"}
	for kind, by := range trimmedKinds() {
		out, err := by.Transform(tombstone)
		if err != nil || out != tombstone {
			t.Errorf("%T: the tombstone became %v (%v)", kind, out, err)
		}
	}
}

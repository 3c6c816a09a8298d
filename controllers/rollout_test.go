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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestMeasureRollout(t *testing.T) {
	subnet := netip.MustParsePrefix("172.30.0.0/24")
	md := &clusterv1.MachineDeployment{}
	md.Spec.Replicas = ptr.To[int32](2)
	md.Spec.Template.Spec.InfrastructureRef.Name = "md-a-new"
	machine := func(name, infra, node string) clusterv1.Machine {
		m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name}}
		m.Spec.InfrastructureRef.Name = infra
		m.Status.NodeRef.Name = node
		return m
	}
	osm := func(name, template string, addresses ...string) *infrav1.OpenStackMachine {
		o := &infrav1.OpenStackMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{clusterv1.TemplateClonedFromNameAnnotation: template}}}
		for _, a := range addresses {
			o.Status.Addresses = append(o.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		return o
	}

	t.Run("mid-rollout: one old machine without, one new with an address", func(t *testing.T) {
		r := MeasureRollout(md, []clusterv1.Machine{machine("m-old", "o-old", "n-old"), machine("m-new", "o-new", "n-new")},
			map[string]*infrav1.OpenStackMachine{"o-old": osm("o-old", "md-a-old", "10.6.0.5"), "o-new": osm("o-new", "md-a-new", "10.6.0.6", "172.30.0.12")}, subnet)
		if r.OnCurrentTemplate != 1 || len(r.Nodes) != 1 || r.Nodes[0].Address != "172.30.0.12" || r.Nodes[0].Node != "n-new" {
			t.Fatalf("got %+v", r)
		}
		if r.Attached(true) {
			t.Fatal("one of two nodes is not attached yet")
		}
	})
	t.Run("done: every machine on the new template with its address", func(t *testing.T) {
		r := MeasureRollout(md, []clusterv1.Machine{machine("m1", "o1", "n1"), machine("m2", "o2", "n2")},
			map[string]*infrav1.OpenStackMachine{"o1": osm("o1", "md-a-new", "10.6.0.5", "172.30.0.10"), "o2": osm("o2", "md-a-new", "172.30.0.11", "10.6.0.6")}, subnet)
		if !r.Attached(true) {
			t.Fatalf("want attached, got %+v", r)
		}
		if r.Attached(false) {
			t.Fatal("a template without the port is never attached")
		}
		if r.Detached(false) {
			t.Fatal("nodes still hold shared addresses: not detached")
		}
	})
	t.Run("detached: no node holds a shared address any more", func(t *testing.T) {
		r := MeasureRollout(md, []clusterv1.Machine{machine("m1", "o1", "n1")},
			map[string]*infrav1.OpenStackMachine{"o1": osm("o1", "md-a-new", "10.6.0.5")}, subnet)
		if !r.Detached(false) || r.Detached(true) {
			t.Fatalf("got %+v", r)
		}
	})
}

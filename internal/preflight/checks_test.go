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

package preflight

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
)

// checker is admission's Checker over controller-runtime's fake client and
// the fake cloud, for a running Cluster team-a/demo (its OpenStackCluster
// exists) and SharedNetwork "vm" granted to team-a.
func checker(t *testing.T, clusterProject *fakecloud.Project) (*Checker, *clusterv1.Cluster) {
	t.Helper()
	cloud := fakecloud.New()
	clusterProject.Cloud = cloud
	scheme := sharednetscheme.New()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"vm": "yes"}}}
	now := metav1.Now()
	sn := &sharednetv1.SharedNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "vm"},
		Spec: sharednetv1.SharedNetworkSpec{NetworkID: "net-1", Subnets: []string{"subnet-1"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"vm": "yes"}}},
		Status: sharednetv1.SharedNetworkStatus{MTU: 1450, Subnets: []sharednetv1.SubnetStatus{{ID: "subnet-1", CIDR: "172.16.5.0/24", FreeAddresses: ptr.To[int64](200)}},
			LastRefreshTime: &now, Conditions: []metav1.Condition{{Type: sharednetv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: sharednetv1.ReasonFactsCurrent, LastTransitionTime: now}}},
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.SchemeGroupVersion.Group, Kind: "OpenStackCluster", Name: "demo"},
			Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.35.0",
				Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{Class: "w", Name: "md-a", Replicas: ptr.To[int32](1)}}}},
		},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns, sn, cluster).WithIndex(&clusterv1.Cluster{}, consumers.SharedNetworkIndex, consumers.SharedNetworksOf).Build()
	return &Checker{Reader: c, Cloud: &fakecloud.Clouds{
		Clusters:       map[string]*fakecloud.Project{"team-a/demo": clusterProject},
		SharedNetworks: map[string]*fakecloud.Project{"vm": {Cloud: cloud, ID: "vm-project"}},
	}}, cluster
}

func TestAdmissionRefusesAClusterOfAnotherKeystone(t *testing.T) {
	t.Run("the shared network's own cloud: admitted", func(t *testing.T) {
		g := NewWithT(t)
		c, cluster := checker(t, &fakecloud.Project{ID: "cluster-project"})
		g.Expect(ask(c, Attach, cluster)).To(Succeed())
	})
	t.Run("a Keystone of the tenant's own: refused, naming the rule and the fix", func(t *testing.T) {
		g := NewWithT(t)
		foreign := &fakecloud.Project{ID: "victim-project", KeystoneURL: "http://127.0.0.1:35357/"}
		c, cluster := checker(t, foreign)
		err := ask(c, Attach, cluster)
		g.Expect(foreign.Cloud.Calls).NotTo(HaveKey(BeElementOf("ProjectOfToken", "Network", "Ports")),
			"a cloud of the tenant's choosing is sent no request: its Keystone is compared first")
		g.Expect(err).To(MatchError(And(ContainSubstring(`MachineDeployment topology "md-a"`), ContainSubstring(rules.RuleSameCloud+":"),
			ContainSubstring("http://127.0.0.1:35357/, another Keystone"), ContainSubstring("fix the cluster's clouds.yaml"))))
		g.Expect(err.Error()).NotTo(ContainSubstring(fakecloud.DefaultKeystone), "the VM project's Keystone is not shown")
	})
}

// The detach asks the cluster's Octavia whether load balancers remain, at
// the URL its catalog gives: only once its Keystone is the shared network's.
// A Keystone of the tenant's own would name any Octavia, whose "none" would
// admit the detach (and the unshare) with load balancers still on the subnet.
func TestTheDetachAsksOnlyTheSharedNetworksCloud(t *testing.T) {
	for name, tc := range map[string]struct {
		project *fakecloud.Project
		want    string
	}{
		"the shared network's own cloud: its load balancer is named":   {&fakecloud.Project{ID: "cluster-project"}, rules.RuleDetach + ":"},
		"a Keystone of the tenant's own: refused, its Octavia unasked": {&fakecloud.Project{ID: "cluster-project", KeystoneURL: "http://127.0.0.1:35357/"}, rules.RuleSameCloud + ":"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c, cluster := checker(t, tc.project)
			attachment := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: sharednetv1.AttachmentName("demo", "md-a"),
				Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
				Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: "subnet-1"}}
			g.Expect(c.Reader.(client.Client).Create(context.Background(), attachment)).To(Succeed())
			tc.project.Cloud.AddLoadBalancer("subnet-1", "kube_service_team-a.demo_default_web")
			err := ask(c, Detach, cluster)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			if tc.project.KeystoneURL != "" {
				g.Expect(tc.project.Cloud.Calls).NotTo(HaveKey("OnSubnet"), "a catalog of the tenant's choosing is sent no request")
			}
		})
	}
}

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

package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/consumers"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	sharednetscheme "github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
)

// fixture: a running Cluster team-a/demo (its OpenStackCluster and network
// exist, MTU 1450) with md-a and md-b, SharedNetworks "vm" (subnet
// 172.16.5.0/24, 6 free addresses) and "other", both granted to team-a, over
// controller-runtime's fake client and the in-memory fake cloud.
type fixture struct {
	cloud   *fakecloud.Cloud
	subnet  string
	cluster *clusterv1.Cluster
	objs    []client.Object
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cloud := fakecloud.New()
	clusterNet, clusterSubnet := cloud.AddNetwork("cluster-project", 1450, "10.6.0.0/24")
	f := &fixture{cloud: cloud}
	now := metav1.Now()
	ready := []metav1.Condition{{Type: sharednetv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: sharednetv1.ReasonFactsCurrent, LastTransitionTime: now}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"vm": "yes"}}
	for _, name := range []string{"vm", "other"} {
		network, subnet := cloud.AddNetwork("vm-project", 1450, map[string]string{"vm": "172.16.5.0/24", "other": "172.16.6.0/24"}[name])
		if name == "vm" {
			f.subnet = subnet
		}
		f.objs = append(f.objs, &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: sharednetv1.SharedNetworkSpec{NetworkID: network, Subnets: []string{subnet}, NamespaceSelector: selector},
			Status: sharednetv1.SharedNetworkStatus{MTU: 1450, LastRefreshTime: &now, Conditions: ready,
				Subnets: []sharednetv1.SubnetStatus{{ID: subnet, CIDR: map[string]string{"vm": "172.16.5.0/24", "other": "172.16.6.0/24"}[name], FreeAddresses: ptr.To[int64](6)}}}})
	}
	osc := &infrav1.OpenStackCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
		Status: infrav1.OpenStackClusterStatus{Network: &infrav1.NetworkStatusWithSubnets{
			NetworkStatus: infrav1.NetworkStatus{ID: clusterNet}, Subnets: []infrav1.Subnet{{ID: clusterSubnet, CIDR: "10.6.0.0/24"}}}},
	}
	f.cluster = &clusterv1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.SchemeGroupVersion.Group, Kind: "OpenStackCluster", Name: "demo"},
			Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.35.0",
				Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
					{Class: "w", Name: "md-a", Replicas: ptr.To[int32](1)}, {Class: "w", Name: "md-b", Replicas: ptr.To[int32](1)}}}},
		},
	}
	f.objs = append(f.objs, osc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"vm": "yes"}}})
	return f
}

func (f *fixture) validator(t *testing.T) *ClusterValidator {
	t.Helper()
	scheme := sharednetscheme.New()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(f.objs...).WithIndex(&clusterv1.Cluster{}, consumers.SharedNetworkIndex, consumers.SharedNetworksOf).Build()
	project := &fakecloud.Project{Cloud: f.cloud, ID: "cluster-project"}
	osc := &infrav1.OpenStackCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "demo"}, osc); err != nil {
		t.Fatal(err)
	}
	project.OpenStackCluster = osc
	vm := &fakecloud.Project{Cloud: f.cloud, ID: "vm-project"}
	checker := &preflight.Checker{Reader: c, Cloud: &fakecloud.Clouds{
		Clusters: map[string]*fakecloud.Project{"team-a/demo": project}, SharedNetworks: map[string]*fakecloud.Project{"vm": vm, "other": vm}}}
	return &ClusterValidator{Checker: checker, Decoder: admission.NewDecoder(scheme)}
}

// decide sends old -> now through the webhook as the API server does; nil
// old is a create.
func (f *fixture) decide(t *testing.T, old, now *clusterv1.Cluster) admission.Response {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create}}
	raw, err := json.Marshal(now)
	if err != nil {
		t.Fatal(err)
	}
	req.Object.Raw = raw
	if old != nil {
		req.Operation = admissionv1.Update
		if req.OldObject.Raw, err = json.Marshal(old); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.validator(t).Handle(ctx, req)
}

func attached(c *clusterv1.Cluster, topology, value string) *clusterv1.Cluster {
	c = c.DeepCopy()
	variables.SetOverride(c, topology, []byte(value))
	return c
}

func TestTheWebhookDecidesEveryPath(t *testing.T) {
	vm := `{"name":"vm"}`
	for _, tc := range []struct {
		name    string
		old     func(f *fixture) *clusterv1.Cluster // nil: a create
		now     func(f *fixture) *clusterv1.Cluster
		allowed bool
		want    []string
		absent  []string // must not be in the refusal
	}{{
		name:    "create with a nodegroup attached",
		now:     func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		allowed: true,
	}, {
		name: "create with a cluster-level value",
		now: func(f *fixture) *clusterv1.Cluster {
			c := f.cluster.DeepCopy()
			c.Spec.Topology.Variables = append(c.Spec.Topology.Variables, clusterv1.ClusterVariable{Name: sharednetv1.VariableName})
			c.Spec.Topology.Variables[0].Value.Raw = []byte(vm)
			return c
		},
		want: []string{"one-nodegroup:", "whole cluster"},
	}, {
		name:    "set on a running cluster",
		old:     func(f *fixture) *clusterv1.Cluster { return f.cluster },
		now:     func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		allowed: true,
	}, {
		name: "set on a running cluster at a size the subnet cannot hold",
		old:  func(f *fixture) *clusterv1.Cluster { return f.cluster },
		now: func(f *fixture) *clusterv1.Cluster {
			c := attached(f.cluster, "md-a", vm)
			c.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](6)
			return c
		},
		want: []string{`"md-a": capacity:`, "6 free", "needs 7"},
	}, {
		name: "changed to another network in one step",
		old:  func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		now:  func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", `{"name":"other"}`) },
		want: []string{`"md-a": one-network:`, `remove the variable (detach) first`},
	}, {
		name: "scaled past the subnet's room",
		old:  func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		now: func(f *fixture) *clusterv1.Cluster {
			c := attached(f.cluster, "md-a", vm)
			c.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](6)
			return c
		},
		want: []string{"nothing was changed", `"md-a": capacity:`, "6 free", "needs 7 (max size 6 + 1 availability zone(s))"},
	}, {
		name: "scaled within the subnet's room",
		old:  func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		now: func(f *fixture) *clusterv1.Cluster {
			c := attached(f.cluster, "md-a", vm)
			c.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](5)
			return c
		},
		allowed: true,
	}, {
		name: "the autoscaler's max size raised past the subnet's room",
		old:  func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		now: func(f *fixture) *clusterv1.Cluster {
			c := attached(f.cluster, "md-a", vm)
			c.Spec.Topology.Workers.MachineDeployments[0].Replicas = nil
			c.Spec.Topology.Workers.MachineDeployments[0].Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "20"}
			return c
		},
		want: []string{`"md-a": capacity:`, "needs 21 (max size 20"},
	}, {
		name: "a version below the minimum while attached",
		old:  func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		now: func(f *fixture) *clusterv1.Cluster {
			c := attached(f.cluster, "md-a", vm)
			c.Spec.Topology.Version = "v1.34.2"
			return c
		},
		want: []string{"spec.topology.version", "v1.34.2", "md-a"},
	}, {
		name: "an upgrade while attached",
		old:  func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		now: func(f *fixture) *clusterv1.Cluster {
			c := attached(f.cluster, "md-a", vm)
			c.Spec.Topology.Version = "v1.35.1"
			return c
		},
		allowed: true,
	}, {
		name: "removed while this cluster's load balancer is on the subnet",
		old: func(f *fixture) *clusterv1.Cluster {
			f.objs = append(f.objs, &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: sharednetv1.AttachmentName("demo", "md-a")},
				Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: f.subnet}})
			name := ccm.LoadBalancerName(ccm.ClusterName("team-a", "demo"), "shop", "web")
			f.cloud.AddLoadBalancer(f.subnet, name, name)
			return attached(f.cluster, "md-a", vm)
		},
		now:  func(f *fixture) *clusterv1.Cluster { return f.cluster },
		want: []string{`"md-a": detach:`, "shop/web"},
	}, {
		name: "removed while the cluster's load balancers cannot be listed: refused, not admitted unchecked",
		old: func(f *fixture) *clusterv1.Cluster {
			f.objs = append(f.objs, &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: sharednetv1.AttachmentName("demo", "md-a")},
				Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: f.subnet}})
			f.cloud.Fail = func(method string) error {
				if method == "OnSubnet" {
					return errors.New("Octavia answered 503")
				}
				return nil
			}
			return attached(f.cluster, "md-a", vm)
		},
		now:  func(f *fixture) *clusterv1.Cluster { return f.cluster },
		want: []string{`"md-a": cannot-verify:`, "cannot list the load balancers", "Octavia answered 503"},
	}, {
		name: "scaled after the namespace's grant was revoked: no more nodes on that network",
		old: func(f *fixture) *clusterv1.Cluster {
			for _, o := range f.objs {
				if ns, ok := o.(*corev1.Namespace); ok {
					ns.Labels = nil
				}
			}
			return attached(f.cluster, "md-a", vm)
		},
		now: func(f *fixture) *clusterv1.Cluster {
			c := attached(f.cluster, "md-a", vm)
			c.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To[int32](2)
			return c
		},
		want: []string{`"md-a": granted:`, `SharedNetwork "vm" does not exist or is not granted to namespace`},
	}, {
		name: "set to a network not granted whose facts are corrupt: refused as not granted, no fact of the network shown",
		old: func(f *fixture) *clusterv1.Cluster {
			for _, o := range f.objs {
				switch o := o.(type) {
				case *corev1.Namespace:
					o.Labels = nil
				case *sharednetv1.SharedNetwork:
					o.Status.Subnets[0].CIDR = "172.16.5.0/33"
				}
			}
			return f.cluster
		},
		now:    func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		want:   []string{`"md-a": granted:`},
		absent: []string{"cannot-verify", "172.16.5", "CIDR"},
	}, {
		name: "set to a SharedNetwork that does not exist",
		old:  func(f *fixture) *clusterv1.Cluster { return f.cluster },
		now:  func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-b", `{"name":"nope"}`) },
		want: []string{`"md-b": granted:`, `SharedNetwork "nope" does not exist or is not granted to namespace`},
	}, {
		name: "a value that is not {name, subnet}: refused, naming it",
		old:  func(f *fixture) *clusterv1.Cluster { return f.cluster },
		now: func(f *fixture) *clusterv1.Cluster {
			return attached(f.cluster, "md-a", `{"name":"vm","subnets":["a","b"]}`)
		},
		want: []string{"sharedNetwork refused, nothing was changed:", "is not {name, subnet}"},
	}, {
		name:    "removed with nothing on the subnet",
		old:     func(f *fixture) *clusterv1.Cluster { return attached(f.cluster, "md-a", vm) },
		now:     func(f *fixture) *clusterv1.Cluster { return f.cluster },
		allowed: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFixture(t)
			var old *clusterv1.Cluster
			if tc.old != nil {
				old = tc.old(f)
			}
			resp := f.decide(t, old, tc.now(f))
			g.Expect(resp.Allowed).To(Equal(tc.allowed), "%+v", resp.Result)
			for _, w := range tc.want {
				g.Expect(resp.Result.Message).To(ContainSubstring(w))
			}
			for _, a := range tc.absent {
				g.Expect(resp.Result.Message).NotTo(ContainSubstring(a))
			}
		})
	}

	t.Run("a change that touches no attached nodegroup's size asks no cloud", func(t *testing.T) {
		g := NewWithT(t)
		f := newFixture(t)
		old := attached(f.cluster, "md-a", vm)
		now := old.DeepCopy()
		now.Labels = map[string]string{"team": "shop"}
		now.Spec.Topology.Workers.MachineDeployments[1].Replicas = ptr.To[int32](40) // md-b is not attached
		g.Expect(f.decide(t, old, now).Allowed).To(BeTrue())
		g.Expect(f.cloud.Calls).To(BeEmpty())
	})
}

// CAPI skips BeforeClusterDelete for a Cluster carrying its ok-to-delete
// annotation: on a Cluster that uses a shared network only CAPI (and
// system:masters) may set it, or the deletion would leave the cluster's
// load balancers on the shared subnet and the share behind.
func TestOnlyCAPIMaySkipTheDeletionHookOfAClusterOnASharedNetwork(t *testing.T) {
	cluster := func(attached, okToDelete bool) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c", Annotations: map[string]string{}}, Spec: clusterv1.ClusterSpec{
			Topology: clusterv1.Topology{Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{Class: "w", Name: "md-a"}}}}}}
		if attached {
			variables.SetOverride(c, "md-a", []byte(`{"name":"vm"}`))
		}
		if okToDelete {
			c.Annotations[runtimev1.OkToDeleteAnnotation] = ""
		}
		return c
	}
	tenant := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	capi := authenticationv1.UserInfo{Username: DefaultCAPIManager}
	masters := authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}}
	v := &ClusterValidator{}
	for _, tc := range []struct {
		name     string
		user     authenticationv1.UserInfo
		old, now *clusterv1.Cluster
		refused  bool
	}{
		{"a tenant sets it on an attached Cluster", tenant, cluster(true, false), cluster(true, true), true},
		{"a tenant creates an attached Cluster with it", tenant, &clusterv1.Cluster{}, cluster(true, true), true},
		{"a tenant attaches a Cluster that carries it", tenant, cluster(false, true), cluster(true, true), true},
		{"CAPI sets it once the hook answered", capi, cluster(true, false), cluster(true, true), false},
		{"system:masters (clusterctl move, break-glass)", masters, cluster(true, false), cluster(true, true), false},
		{"kept as CAPI set it, on a later update", tenant, cluster(true, true), cluster(true, true), false},
		{"a Cluster on no shared network", tenant, cluster(false, false), cluster(false, true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			msg := v.keepsDeletionHook(tc.user, tc.old, tc.now)
			if !tc.refused {
				g.Expect(msg).To(BeEmpty())
				return
			}
			g.Expect(msg).To(And(ContainSubstring("metadata.annotations[runtime.cluster.x-k8s.io/ok-to-delete]"), ContainSubstring("Remove the annotation")))
		})
	}
	t.Run("other CAPI users can be named (--capi-manager-user)", func(t *testing.T) {
		g := NewWithT(t)
		named := &ClusterValidator{CAPIManagers: []string{"system:serviceaccount:capi:manager"}}
		g.Expect(named.keepsDeletionHook(authenticationv1.UserInfo{Username: "system:serviceaccount:capi:manager"}, cluster(true, false), cluster(true, true))).To(BeEmpty())
		g.Expect(named.keepsDeletionHook(capi, cluster(true, false), cluster(true, true))).NotTo(BeEmpty())
	})
}

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

package guardrails

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/conditions"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
)

const (
	clusterSubnet = "cluster-subnet"
	sharedSubnet  = "shared-subnet"
)

// world is one Cluster (team-a/demo) whose nodegroup md-a is attached
// (share established, node n1 with 172.16.5.11 on the shared subnet), the
// management cluster and its workload cluster as fake clients, and the
// guardrails reconciler between them.
type world struct {
	t        *testing.T
	mgmt     client.Client
	workload client.Client
	// connects counts the reconciler's asks for a workload client.
	connects int
	// notConnected makes the ClusterCache answer "not connected yet".
	notConnected bool
	recorder     *record.FakeRecorder
	r            *Reconciler
	// cloud is the fake OpenStack behind the reconciler's clouds.
	cloud  *fakecloud.Cloud
	clouds *fakecloud.Clouds
}

func newWorld(t *testing.T, attached bool, workload ...client.Object) *world {
	t.Helper()
	w := &world{t: t, recorder: record.NewFakeRecorder(100)}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.SchemeGroupVersion.Group, Kind: "OpenStackCluster", Name: "demo"}}}
	osc := &infrav1.OpenStackCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"},
		Status: infrav1.OpenStackClusterStatus{Network: &infrav1.NetworkStatusWithSubnets{Subnets: []infrav1.Subnet{{ID: clusterSubnet, CIDR: "10.6.0.0/24"}}}}}
	sn := &sharednetv1.SharedNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Spec: sharednetv1.SharedNetworkSpec{NetworkID: "vm-net", Subnets: []string{sharedSubnet}},
		Status: sharednetv1.SharedNetworkStatus{Subnets: []sharednetv1.SubnetStatus{{ID: sharedSubnet, CIDR: "172.16.5.0/24", IPVersion: 4,
			VMPorts: ptr.To(int32(2)), AdmittingVMPorts: ptr.To(int32(0)), AdmittingIngressRules: ptr.To(int32(0))}}}}
	a := &sharednetv1.SharedNetworkAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: sharednetv1.AttachmentName("demo", "md-a"), Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
		Spec:       sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm", Subnet: sharedSubnet},
		Status: sharednetv1.SharedNetworkAttachmentStatus{Nodes: []sharednetv1.AttachedNode{{Machine: "m1", Node: "n1", Address: "172.16.5.11"}},
			Conditions: []metav1.Condition{{Type: sharednetv1.SharedCondition, Status: metav1.ConditionTrue, Reason: sharednetv1.ReasonShared, LastTransitionTime: metav1.Now()}}},
	}
	if attached {
		a.Status.Share = &sharednetv1.Share{ProjectID: "cluster-project", RBACPolicyID: "rbac-1"}
	}
	w.mgmt = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cluster, osc, sn, a).
		WithStatusSubresource(&sharednetv1.SharedNetworkAttachment{}).Build()
	w.workload = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(workload...).Build()
	w.cloud = fakecloud.New()
	w.clouds = &fakecloud.Clouds{
		Clusters:       map[string]*fakecloud.Project{"team-a/demo": {Cloud: w.cloud, ID: "cluster-project"}},
		SharedNetworks: map[string]*fakecloud.Project{"vm": {Cloud: w.cloud, ID: "vm-project"}},
	}
	w.r = &Reconciler{Client: w.mgmt, Recorder: w.recorder, Credentials: w.clouds,
		WorkloadClient: func(context.Context, client.ObjectKey) (client.Client, error) {
			w.connects++
			if w.notConnected {
				return nil, clustercache.ErrClusterNotConnected
			}
			return w.workload, nil
		}}
	return w
}

func (w *world) reconcile() reconcile.Result {
	w.t.Helper()
	res, err := w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "demo"}})
	if err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (w *world) attachment() *sharednetv1.SharedNetworkAttachment {
	w.t.Helper()
	a := &sharednetv1.SharedNetworkAttachment{}
	if err := w.mgmt.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "demo-md-a"}, a); err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (w *world) policyInstalled() bool {
	w.t.Helper()
	err := w.workload.Get(context.Background(), client.ObjectKey{Name: PolicyName}, &admissionregistrationv1.ValidatingAdmissionPolicy{})
	if err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatal(err)
	}
	return err == nil
}

func (w *world) installedAnnotation() bool {
	w.t.Helper()
	c := &clusterv1.Cluster{}
	if err := w.mgmt.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "demo"}, c); err != nil {
		w.t.Fatal(err)
	}
	return c.Annotations[installedAnnotation] != ""
}

// policyValues are the policy's compiled lists and the record's values, as
// "variable=expression" and "key=value".
func (w *world) policyValues() []string {
	w.t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := w.workload.Get(context.Background(), client.ObjectKey{Name: PolicyName}, policy); err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, v := range policy.Spec.Variables {
		if v.Name == "sharedNetworks" || v.Name == "sharedPorts" {
			out = append(out, v.Name+"="+v.Expression)
		}
	}
	record := &corev1.ConfigMap{}
	if err := w.workload.Get(context.Background(), client.ObjectKey{Namespace: ParamsNamespace, Name: ParamsName}, record); err != nil {
		w.t.Fatal(err)
	}
	return append(out, "sharedNetworks="+record.Data["sharedNetworks"], "sharedPorts="+record.Data["sharedPorts"])
}

func loadBalancerService(name string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
}

func node(internalIPs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, ip := range internalIPs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

var (
	internal = map[string]string{SubnetAnnotation: sharedSubnet, InternalAnnotation: "true", MemberSubnetAnnotation: clusterSubnet}
	public   = map[string]string{SubnetAnnotation: sharedSubnet}
)

// TestGuardrailsReportWhatThePolicyCannotPrevent: with an attached
// nodegroup, the policy is installed in the workload cluster and the
// attachment says which objects created before it break its rules, in
// status.workload and the WorkloadGuarded condition.
func TestGuardrailsReportWhatThePolicyCannotPrevent(t *testing.T) {
	for _, tt := range []struct {
		name        string
		workload    []client.Object
		wantGuarded metav1.ConditionStatus
		wantIssues  []string // names in status.workload
		wantWords   string   // in WorkloadGuarded's message
	}{
		{name: "nothing wrong", workload: []client.Object{loadBalancerService("web", internal), node("10.6.0.10", "172.16.5.11")},
			wantGuarded: metav1.ConditionTrue},
		{name: "a public load balancer on the shared subnet, created before the policy",
			workload:    []client.Object{loadBalancerService("web", public), node("10.6.0.10", "172.16.5.11")},
			wantGuarded: metav1.ConditionFalse, wantIssues: []string{"web"}, wantWords: "Service default/web: not internal"},
		{name: "a node whose InternalIP is its shared-subnet address",
			workload:    []client.Object{node("172.16.5.11", "10.6.0.10")},
			wantGuarded: metav1.ConditionFalse, wantIssues: []string{"n1"}, wantWords: "Node n1: InternalIP 172.16.5.11 is not on the cluster network"},
		{name: "a Service elsewhere is none of its business",
			workload:    []client.Object{loadBalancerService("other", map[string]string{SubnetAnnotation: "another-subnet"}), node("10.6.0.10", "172.16.5.11")},
			wantGuarded: metav1.ConditionTrue},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t, true, tt.workload...)
			res := w.reconcile()
			g.Expect(res.RequeueAfter).To(Equal(pollWorkload))
			g.Expect(w.policyInstalled()).To(BeTrue())
			g.Expect(w.installedAnnotation()).To(BeTrue(), "recorded, so the policy is removed later")

			a := w.attachment()
			g.Expect(a.Status.Workload).NotTo(BeZero())
			g.Expect(a.Status.Workload.Policy).To(Equal(sharednetv1.WorkloadPolicyInstalled))
			var issues []string
			for _, m := range append(append([]sharednetv1.WorkloadObjectIssue{}, a.Status.Workload.Misconfigured...), a.Status.Workload.Nodes...) {
				issues = append(issues, m.Name)
			}
			g.Expect(issues).To(Equal(tt.wantIssues))
			guarded := conditions.Get(a, sharednetv1.WorkloadGuardedCondition)
			g.Expect(guarded).NotTo(BeNil())
			g.Expect(guarded.Status).To(Equal(tt.wantGuarded))
			g.Expect(guarded.Message).To(ContainSubstring(tt.wantWords))
			g.Expect(conditions.Get(a, sharednetv1.SharedCondition)).NotTo(BeNil(), "the attachment controller's conditions stay")
			g.Expect(a.Status.VMIngress).NotTo(BeZero())
			g.Expect(a.Status.VMIngress.Suggestion).To(ContainSubstring("--remote-ip 172.16.5.0/24"), "no VM port's security group admits the subnet yet")
		})
	}
}

// TestGuardrailsConnectOnlyToAttachedClusters: a cluster that never had an
// attached nodegroup is never connected to; one whose last nodegroup was
// detached gets the policy removed; a workload cluster not connected yet is
// tried again, without an error.
func TestGuardrailsConnectOnlyToAttachedClusters(t *testing.T) {
	t.Run("never attached: never connected", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t, false)
		w.reconcile()
		g.Expect(w.connects).To(BeZero())
	})

	t.Run("detached: the policy is removed", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t, true, node("10.6.0.10", "172.16.5.11"))
		w.reconcile()
		g.Expect(w.policyInstalled()).To(BeTrue())

		a := w.attachment()
		a.Status.Share = nil
		g.Expect(w.mgmt.Status().Update(context.Background(), a)).To(Succeed())
		w.reconcile()
		g.Expect(w.policyInstalled()).To(BeFalse())
		g.Expect(w.installedAnnotation()).To(BeFalse())
		w.reconcile()
		g.Expect(w.connects).To(Equal(2), "not connected again once removed")
	})

	t.Run("a paused Cluster (clusterctl move): nothing is connected or written", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t, true, node("10.6.0.10", "172.16.5.11"))
		c := &clusterv1.Cluster{}
		g.Expect(w.mgmt.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "demo"}, c)).To(Succeed())
		c.Spec.Paused = ptr.To(true)
		g.Expect(w.mgmt.Update(context.Background(), c)).To(Succeed())
		w.reconcile()
		g.Expect(w.connects).To(BeZero())
		g.Expect(w.installedAnnotation()).To(BeFalse())
		g.Expect(w.attachment().Status.Workload).To(BeZero())
	})

	t.Run("not connected yet: tried again", func(t *testing.T) {
		g := NewWithT(t)
		w := newWorld(t, true)
		w.notConnected = true
		g.Expect(w.reconcile().RequeueAfter).To(Equal(pollWorkload))
		g.Expect(w.attachment().Status.Workload).To(BeZero())
	})
}

// TestWorkloadGuardedIsNeverTrueUnchecked: a Node that cannot be read makes
// WorkloadGuarded Unknown, not True, and the reconcile is retried.
func TestWorkloadGuardedIsNeverTrueUnchecked(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t, true, node("10.6.0.10", "172.16.5.11"))
	w.workload = interceptor.NewClient(w.workload.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Node); ok {
				return apierrors.NewServiceUnavailable("the workload API server is restarting")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	_, err := w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "demo"}})
	g.Expect(err).To(HaveOccurred(), "retried")
	guarded := conditions.Get(w.attachment(), sharednetv1.WorkloadGuardedCondition)
	g.Expect(guarded).NotTo(BeNil())
	g.Expect(guarded.Status).To(Equal(metav1.ConditionUnknown))
	g.Expect(guarded.Reason).To(Equal(sharednetv1.ReasonWorkloadUnchecked))
}

// readFaults are the reads of the policy's values that can fail, each with
// the words WorkloadGuarded then names it with.
var readFaults = []struct {
	name   string
	inject func(w *world)
	words  string
}{
	{name: "Neutron fails to list the cluster project's ports", words: "the cluster project's ports on network vm-net of SharedNetwork vm",
		inject: func(w *world) {
			w.cloud.Fail = func(method string) error {
				if method == "PortIDsOnNetwork" {
					return errors.New("listing the project's ports on network vm-net: Neutron answered 503 Service Unavailable")
				}
				return nil
			}
		}},
	{name: "the cluster's cloud cannot be opened", words: "the cluster's OpenStack project cannot be opened",
		inject: func(w *world) { w.clouds.ClusterErr = errors.New("Keystone answered 503") }},
	{name: "the SharedNetwork cannot be read", words: "SharedNetwork vm, so its network",
		inject: func(w *world) {
			w.r.Client = interceptor.NewClient(w.mgmt.(client.WithWatch), interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*sharednetv1.SharedNetwork); ok {
						return apierrors.NewServiceUnavailable("the management API server is restarting")
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
		}},
}

// TestAFailedReadKeepsThePolicysPreviousValues: once the policy holds the
// shared network and the cluster project's port on it, a read that fails
// (Neutron, the cluster's cloud, the SharedNetwork) never takes them out of
// the policy (a Service naming that port would no longer be judged), and
// WorkloadGuarded says what could not be read.
func TestAFailedReadKeepsThePolicysPreviousValues(t *testing.T) {
	for _, tt := range readFaults {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t, true, node("10.6.0.10", "172.16.5.11"))
			w.cloud.AddPort("cluster-project", "vm-net")
			w.reconcile()
			good := []string{"sharedNetworks=['vm-net']", "sharedPorts=['port-cluster-project-0']", "sharedNetworks=vm-net", "sharedPorts=port-cluster-project-0"}
			g.Expect(w.policyValues()).To(Equal(good))
			g.Expect(conditions.Get(w.attachment(), sharednetv1.WorkloadGuardedCondition).Status).To(Equal(metav1.ConditionTrue))

			tt.inject(w)
			g.Expect(w.reconcile().RequeueAfter).To(Equal(pollWorkload))
			g.Expect(w.policyValues()).To(Equal(good), "the policy and its record keep the values of the last good read")
			guarded := conditions.Get(w.attachment(), sharednetv1.WorkloadGuardedCondition)
			g.Expect(guarded.Status).To(Equal(metav1.ConditionUnknown), "never True while a value could not be read")
			g.Expect(guarded.Reason).To(Equal(sharednetv1.ReasonWorkloadUnchecked))
			g.Expect(guarded.Message).To(And(ContainSubstring("keeps its previous values"), ContainSubstring(tt.words)))
		})
	}
}

// TestAFailedReadOnTheFirstInstallInstallsWhatWasRead: with no values
// installed to keep, the policy is installed with the values that could be
// read (it only refuses: part of its values judge more than no policy),
// WorkloadGuarded says what is missing, and the next poll completes it.
func TestAFailedReadOnTheFirstInstallInstallsWhatWasRead(t *testing.T) {
	for _, tt := range readFaults {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t, true, node("10.6.0.10", "172.16.5.11"))
			w.cloud.AddPort("cluster-project", "vm-net")
			tt.inject(w)
			g.Expect(w.reconcile().RequeueAfter).To(Equal(pollWorkload), "tried again at the next poll")
			g.Expect(w.policyInstalled()).To(BeTrue(), "a policy with what was read refuses more than none")
			g.Expect(w.policyValues()).To(ContainElement("sharedPorts=[]"), "nothing made up for what could not be read")
			guarded := conditions.Get(w.attachment(), sharednetv1.WorkloadGuardedCondition)
			g.Expect(guarded).NotTo(BeNil())
			g.Expect(guarded.Message).To(ContainSubstring(tt.words))
			g.Expect(guarded.Status).NotTo(Equal(metav1.ConditionTrue), "never a True that was not checked")

			w.cloud.Fail, w.clouds.ClusterErr, w.r.Client = nil, nil, w.mgmt
			w.reconcile()
			g.Expect(w.policyValues()).To(ContainElement("sharedPorts=['port-cluster-project-0']"), "completed once every value is read")
		})
	}
}

// The VM-side report comes from the SharedNetwork's status, read once per
// its resync: the guardrails never ask the VM project, however often they
// reconcile. The attachment, in the cluster owner's namespace, gets counts
// and names no port, group or rule.
func TestVMIngressIsCopiedFromTheSharedNetworkWithoutAskingTheVMProject(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t, true, node("10.6.0.10", "172.16.5.11"))
	w.reconcile()
	in := w.attachment().Status.VMIngress
	g.Expect(in.Admission).To(Equal(sharednetv1.VMIngressRefused))
	g.Expect(in.Message).To(Equal("0 of 2 VM ports on the subnet accept traffic from the nodes; add an ingress rule for 172.16.5.0/24 to their security groups"))
	g.Expect(in.Suggestion).To(Equal("openstack security group rule create --ingress --ethertype IPv4 --remote-ip 172.16.5.0/24 <security group of the VMs the cluster should reach>"))

	w.setVMSide(ptr.To(int32(2)), ptr.To(int32(2)), ptr.To(int32(3))) // the VM project added rules; its resync counted them
	w.reconcile()
	in = w.attachment().Status.VMIngress
	g.Expect(in.Admission).To(Equal(sharednetv1.VMIngressAdmitted))
	g.Expect(in.Message).To(Equal("2 of 2 VM ports on the subnet accept traffic from the nodes"))
	g.Expect(in.AdmittingRules).To(HaveValue(BeEquivalentTo(3)))
	g.Expect(in.Suggestion).To(BeEmpty())

	w.setVMSide(nil, nil, nil) // the credential may no longer list them
	w.reconcile()
	g.Expect(w.attachment().Status.VMIngress.Admission).To(Equal(sharednetv1.VMIngressAdmitted), "no count: the last answer is kept")
	g.Expect(w.cloud.Calls["PortsOnSubnets"]+w.cloud.Calls["IngressRules"]).To(BeZero(), "the VM project is never asked")
}

// What an attachment says of the VM ports on its subnet, for each count the
// SharedNetwork's resync can find.
func TestVMIngressSaysHowManyVMPortsAcceptTheNodes(t *testing.T) {
	v4 := sharednetv1.SubnetStatus{CIDR: "10.77.0.0/24", IPVersion: 4}
	v6 := sharednetv1.SubnetStatus{CIDR: "2001:db8:77::/64", IPVersion: 6}
	with := func(s sharednetv1.SubnetStatus, ports, admitting, rules int32) sharednetv1.SubnetStatus {
		s.VMPorts, s.AdmittingVMPorts, s.AdmittingIngressRules = &ports, &admitting, &rules
		return s
	}
	suggestion := "openstack security group rule create --ingress --ethertype IPv4 --remote-ip 10.77.0.0/24 <security group of the VMs the cluster should reach>"
	for name, tc := range map[string]struct {
		subnet     sharednetv1.SubnetStatus
		admission  sharednetv1.VMIngressAdmission
		message    string
		suggestion string
	}{
		"every VM port": {with(v4, 3, 3, 1), sharednetv1.VMIngressAdmitted, "3 of 3 VM ports on the subnet accept traffic from the nodes", ""},
		"some VM ports": {with(v4, 3, 2, 1), sharednetv1.VMIngressPartial,
			"2 of 3 VM ports on the subnet accept traffic from the nodes; add an ingress rule for 10.77.0.0/24 to the security groups of the others the cluster should reach", suggestion},
		"no VM port": {with(v4, 1, 0, 0), sharednetv1.VMIngressRefused,
			"0 of 1 VM ports on the subnet accept traffic from the nodes; add an ingress rule for 10.77.0.0/24 to their security groups", suggestion},
		"no VM port on the subnet": {with(v4, 0, 0, 0), sharednetv1.VMIngressNoVMPorts,
			"the VM project has no port on the subnet (besides Neutron's and load balancers'): no virtual machine there to accept traffic from the nodes yet", ""},
		"an IPv6 subnet": {with(v6, 1, 0, 0), sharednetv1.VMIngressRefused,
			"0 of 1 VM ports on the subnet accept traffic from the nodes; add an ingress rule for 2001:db8:77::/64 to their security groups",
			"openstack security group rule create --ingress --ethertype IPv6 --remote-ip 2001:db8:77::/64 <security group of the VMs the cluster should reach>"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			in := vmIngress(tc.subnet)
			g.Expect(in.Admission).To(Equal(tc.admission))
			g.Expect(in.Message).To(Equal(tc.message))
			g.Expect(len(in.Message)).To(BeNumerically("<=", 1024), "the field's limit")
			g.Expect(in.Suggestion).To(Equal(tc.suggestion))
			g.Expect(in.VMPorts).To(Equal(tc.subnet.VMPorts))
			g.Expect(in.AdmittingVMPorts).To(Equal(tc.subnet.AdmittingVMPorts))
			g.Expect(in.AdmittingRules).To(Equal(tc.subnet.AdmittingIngressRules))
		})
	}
}

func (w *world) setVMSide(vmPorts, admitting, rules *int32) {
	w.t.Helper()
	sn := &sharednetv1.SharedNetwork{}
	if err := w.mgmt.Get(context.Background(), client.ObjectKey{Name: "vm"}, sn); err != nil {
		w.t.Fatal(err)
	}
	s := &sn.Status.Subnets[0]
	s.VMPorts, s.AdmittingVMPorts, s.AdmittingIngressRules = vmPorts, admitting, rules
	if err := w.mgmt.Update(context.Background(), sn); err != nil {
		w.t.Fatal(err)
	}
}

// An attach changes the attachment's phase, conditions and counts dozens of
// times: only a change to what the guardrails read starts a reconcile (each
// asks the cluster's project for its ports and writes the policy).
func TestOnlyWhatTheGuardrailsReadWakesThem(t *testing.T) {
	base := newWorld(t, false).attachment()
	for _, tc := range []struct {
		name   string
		change func(a *sharednetv1.SharedNetworkAttachment)
		wakes  bool
	}{
		{"phase", func(a *sharednetv1.SharedNetworkAttachment) { a.Status.Phase = sharednetv1.PhaseRollingOut }, false},
		{"a condition", func(a *sharednetv1.SharedNetworkAttachment) {
			conditions.Set(a, metav1.Condition{Type: sharednetv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "RollingOut"})
		}, false},
		{"attached nodes count", func(a *sharednetv1.SharedNetworkAttachment) { a.Status.AttachedNodes = ptr.To(int32(1)) }, false},
		{"their own findings", func(a *sharednetv1.SharedNetworkAttachment) {
			a.Status.VMIngress = sharednetv1.VMIngressStatus{Admission: sharednetv1.VMIngressRefused}
			a.Status.Workload.Policy = sharednetv1.WorkloadPolicyInstalled
			conditions.Set(a, metav1.Condition{Type: sharednetv1.WorkloadGuardedCondition, Status: metav1.ConditionTrue, Reason: sharednetv1.ReasonGuarded})
		}, false},
		{"share established", func(a *sharednetv1.SharedNetworkAttachment) {
			a.Status.Share = &sharednetv1.Share{ProjectID: "p", RBACPolicyID: "rbac-1"}
		}, true},
		{"a node's shared address", func(a *sharednetv1.SharedNetworkAttachment) { a.Status.Nodes[0].Address = "172.16.5.12" }, true},
		{"a load balancer", func(a *sharednetv1.SharedNetworkAttachment) {
			a.Status.LoadBalancers = []sharednetv1.LoadBalancer{{Name: "kube_service_x", VIP: "172.16.5.20"}}
		}, true},
		{"deletion", func(a *sharednetv1.SharedNetworkAttachment) { a.DeletionTimestamp = ptr.To(metav1.Now()) }, true},
		{"the subnet", func(a *sharednetv1.SharedNetworkAttachment) { a.Spec.Subnet = "other" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tc.change(updated)
			NewWithT(t).Expect(guardedChanged(base, updated)).To(Equal(tc.wakes))
		})
	}
}

// A resync wakes the guardrails of the SharedNetwork's Clusters, once each,
// only when a subnet's VM-side counts changed.
func TestAResyncWakesTheConsumersOnlyWhenTheVMSideChanged(t *testing.T) {
	g := NewWithT(t)
	old := &sharednetv1.SharedNetwork{Status: sharednetv1.SharedNetworkStatus{
		Subnets: []sharednetv1.SubnetStatus{{ID: "s1", VMPorts: ptr.To(int32(1)), AdmittingVMPorts: ptr.To(int32(0)), AdmittingIngressRules: ptr.To(int32(0)), FreeAddresses: ptr.To(int64(10))}},
		Consumers: []sharednetv1.Consumer{
			{Namespace: "team-a", Cluster: "demo", MachineDeployment: "md-a"},
			{Namespace: "team-a", Cluster: "demo", MachineDeployment: "md-b"},
			{Namespace: "team-b", Cluster: "demo", MachineDeployment: "md-a"},
		}}}
	fewer := old.DeepCopy()
	fewer.Status.Subnets[0].FreeAddresses = ptr.To(int64(9))
	g.Expect(vmIngressChanged(old, fewer)).To(BeFalse(), "another fact")
	admitted := old.DeepCopy()
	admitted.Status.Subnets[0].AdmittingIngressRules = ptr.To(int32(1))
	g.Expect(vmIngressChanged(old, admitted)).To(BeTrue())
	for _, set := range []func(*sharednetv1.SubnetStatus){
		func(s *sharednetv1.SubnetStatus) { s.VMPorts = ptr.To(int32(2)) },          // a VM came
		func(s *sharednetv1.SubnetStatus) { s.AdmittingVMPorts = ptr.To(int32(1)) }, // a VM's group admits it now
	} {
		changed := old.DeepCopy()
		set(&changed.Status.Subnets[0])
		g.Expect(vmIngressChanged(old, changed)).To(BeTrue())
	}
	g.Expect(clustersOfConsumers(context.Background(), admitted)).To(ConsistOf(
		reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "demo"}},
		reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-b", Name: "demo"}}))
}

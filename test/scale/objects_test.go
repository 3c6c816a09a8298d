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

package scale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/controllers"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// The management cluster of the measure: namespaces of clustersPerNamespace
// Clusters (as many as the size measured) of len(nodegroups) nodegroups of
// one node each; the first attachedPerCluster nodegroups of every Cluster
// are attached to one of sharedNetworks SharedNetworks.
const (
	clustersPerNamespace = 10
	sharedNetworks       = 4
	attachedPerCluster   = 2
	className            = "scale"
	identitySecret       = "cloud-config"
	// workers is how many writes are in flight at once; createTimeout
	// bounds each write.
	workers       = 16
	createTimeout = 30 * time.Second
)

var nodegroups = []string{"md-0", "md-1", "md-2", "md-3"}

// Counts are the objects the scale run wrote, by kind.
type Counts map[string]int

// uuid is a Neutron-shaped ID, distinct for each (kind, index).
func uuid(kind, index int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", kind, index)
}

const (
	idNetwork = iota + 1
	idSubnet
	idProject
	idPolicy
	idServer
	idPort
	idClusterNetwork
	idClusterSubnet
)

// cloudsYAML is a clouds.yaml whose Keystone is a closed port of
// 127.0.0.1: any OpenStack call the manager makes fails at once with
// "connection refused", without waiting on a timeout.
func cloudsYAML(closedPort int, cloud string) []byte {
	return fmt.Appendf(nil, `clouds:
  %s:
    auth:
      auth_url: http://127.0.0.1:%d/v3
      username: scale
      password: scale
      project_name: scale
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    interface: public
    identity_api_version: 3
`, cloud, closedPort)
}

// pool runs the jobs with at most workers at once, each bounded by
// createTimeout; the first error stops the others.
func pool(ctx context.Context, jobs []func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) || ctx.Err() != nil {
					return
				}
				jctx, jcancel := context.WithTimeout(ctx, createTimeout)
				err := jobs[i](jctx)
				jcancel()
				if err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// createWithStatus creates obj and then writes the status it was given
// (the status subresource ignores it on create), as the object's controller
// would have. A merge patch: another writer (testenv's OpenStackCluster
// stand-in) may have changed the object in between.
func createWithStatus(ctx context.Context, c client.Client, obj client.Object, setStatus func()) error {
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	if setStatus == nil {
		return nil
	}
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not a client.Object", obj)
	}
	setStatus()
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("writing the status of %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// scaleWorld is what the measure writes and needs to remember.
type scaleWorld struct {
	closedPort int
	now        metav1.Time
	secrets    [sharedNetworks]*corev1.Secret
}

func namespaceName(n int) string { return fmt.Sprintf("scale-%02d", n) }

func clusterName(n, c int) string { return fmt.Sprintf("c-%02d-%d", n, c) }

func sharedNetworkName(i int) string { return fmt.Sprintf("vm-net-%d", i) }

// sharedNetworkOf is the SharedNetwork nodegroup g of cluster index i is
// attached to (-1: none).
func sharedNetworkOf(i, g int) int {
	if g >= attachedPerCluster {
		return -1
	}
	return (i + g) % sharedNetworks
}

// Each shared subnet is a /20: 2,000 Clusters put 1,000 nodes on each.
const subnetBlocks = 16 // /24s in a /20

func subnetCIDR(sn int) string { return fmt.Sprintf("172.16.%d.0/20", subnetBlocks*sn) }

// subnetPool is the allocation pool of each shared subnet: .2 of its first
// /24 to .254 of its last, as Neutron's default.
const subnetPool = subnetBlocks*256 - 3

// sharedAddress is the shared-subnet address of the node of nodegroup g of
// cluster index i: numbered per SharedNetwork (nodegroup g of cluster i is
// on sharedNetworkOf(i, g) = (i+g) mod 4, so (i+g)/4 and g tell its nodes
// apart), from .10 on, inside the pool at every size.
func sharedAddress(sn, i, g int) string {
	k := 2*((i+g)/sharedNetworks) + g + 10
	return fmt.Sprintf("172.16.%d.%d", subnetBlocks*sn+k/256, k%256)
}

// createNamespacesAndClasses writes the namespaces, a cluster credential
// Secret and a ClusterClass (with the sharedNetwork variable inline, so no
// extension is needed to discover it) in each, and waits until CAPI has
// reconciled every ClusterClass (its Cluster webhook needs that).
func (w *scaleWorld) createNamespacesAndClasses(ctx context.Context, counts Counts, namespaces int) error {
	schema, err := variables.Schema()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	var props clusterv1.JSONSchemaProps
	if err := json.Unmarshal(raw, &props); err != nil {
		return fmt.Errorf("the sharedNetwork schema as CAPI v1beta2's: %w", err)
	}
	var jobs []func(context.Context) error
	for n := range namespaces {
		ns := namespaceName(n)
		jobs = append(jobs, func(ctx context.Context) error {
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return err
			}
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identitySecret},
				Data: map[string][]byte{openstack.CloudsSecretKey: cloudsYAML(w.closedPort, "openstack")}}
			if err := env.Client.Create(ctx, secret); err != nil {
				return err
			}
			objs := testenv.ClusterClass(ns, className)
			cc, ok := objs[len(objs)-1].(*clusterv1.ClusterClass)
			if !ok {
				return fmt.Errorf("testenv.ClusterClass ends with %T", objs[len(objs)-1])
			}
			cc.Spec.Variables = []clusterv1.ClusterClassVariable{{
				Name: sharednetv1.VariableName, Required: ptr.To(false),
				Schema: clusterv1.VariableSchema{OpenAPIV3Schema: props},
			}}
			return env.CreateObjects(ctx, objs...)
		})
	}
	if err := pool(ctx, jobs); err != nil {
		return err
	}
	counts["Namespace"] += namespaces
	counts["Secret"] += namespaces
	counts["ClusterClass"] += namespaces
	counts["ClusterClass templates"] += 5 * namespaces
	jobs = jobs[:0]
	for n := range namespaces {
		jobs = append(jobs, func(ctx context.Context) error { return env.WaitForClusterClass(ctx, namespaceName(n), className) })
	}
	// WaitForClusterClass bounds itself (30 s each).
	return pool(ctx, jobs)
}

// createSharedNetworks writes the VM project's credential Secrets (in the
// extension's namespace) and the SharedNetworks, without their status:
// writeSharedNetworkStatus writes it last.
func (w *scaleWorld) createSharedNetworks(ctx context.Context, counts Counts) error {
	for i := range sharedNetworks {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: sharedNetworkName(i) + "-credential"},
			Data: map[string][]byte{openstack.CloudsSecretKey: cloudsYAML(w.closedPort, "vm-project")}}
		if err := env.Client.Create(ctx, secret); err != nil {
			return err
		}
		w.secrets[i] = secret
		sn := &sharednetv1.SharedNetwork{
			ObjectMeta: metav1.ObjectMeta{Name: sharedNetworkName(i), Finalizers: []string{sharednetv1.SharedNetworkFinalizer}},
			Spec: sharednetv1.SharedNetworkSpec{
				Identity:  sharednetv1.VMProjectIdentity{SecretName: secret.Name, CloudName: "vm-project"},
				NetworkID: uuid(idNetwork, i), Subnets: []string{uuid(idSubnet, i)},
				NamespaceSelector: &metav1.LabelSelector{},
			},
		}
		if err := env.Client.Create(ctx, sn); err != nil {
			return err
		}
	}
	counts["Secret"] += sharedNetworks
	counts["SharedNetwork"] += sharedNetworks
	return nil
}

// writeSharedNetworkStatus writes the facts the SharedNetwork controller
// would have read from Neutron, as just read (lastRefreshTime now, for this
// generation and credential): with the default resync (5 minutes) the
// controller makes no OpenStack call during the measure.
func (w *scaleWorld) writeSharedNetworkStatus(ctx context.Context, namespaces int) error {
	shares := make([][]sharednetv1.Share, sharedNetworks)
	consumers := make([][]sharednetv1.Consumer, sharedNetworks)
	used := make([]int64, sharedNetworks)
	seen := map[[2]int]bool{}
	for n := range namespaces {
		for c := range clustersPerNamespace {
			i := n*clustersPerNamespace + c
			for g, md := range nodegroups {
				sn := sharedNetworkOf(i, g)
				if sn < 0 {
					continue
				}
				used[sn]++
				consumers[sn] = append(consumers[sn], sharednetv1.Consumer{Namespace: namespaceName(n), Cluster: clusterName(n, c), MachineDeployment: md, Subnet: uuid(idSubnet, sn)})
				if !seen[[2]int{sn, i}] {
					seen[[2]int{sn, i}] = true
					shares[sn] = append(shares[sn], sharednetv1.Share{ProjectID: uuid(idProject, i), RBACPolicyID: policyID(sn, i)})
				}
			}
		}
	}
	// In the controller's order, by namespace/cluster/nodegroup as strings:
	// scale-100 comes before scale-11 (from 1,001 Clusters on).
	key := func(c sharednetv1.Consumer) string { return c.Namespace + "/" + c.Cluster + "/" + c.MachineDeployment }
	for _, c := range consumers {
		slices.SortFunc(c, func(a, b sharednetv1.Consumer) int { return strings.Compare(key(a), key(b)) })
	}
	for i := range sharedNetworks {
		sn := &sharednetv1.SharedNetwork{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: sharedNetworkName(i)}, sn); err != nil {
			return err
		}
		before := sn.DeepCopy()
		ready := sharednetv1.NewCondition(sharednetv1.ReadyCondition, metav1.ConditionTrue, sharednetv1.ReasonFactsCurrent,
			fmt.Sprintf("network %s: MTU 1450, 1 subnet(s) read from Neutron", sn.Spec.NetworkID))
		ready.LastTransitionTime = metav1.Now()
		paused := sharednetv1.NewCondition(sharednetv1.PausedCondition, metav1.ConditionFalse, sharednetv1.ReasonNotPaused, "")
		paused.LastTransitionTime, paused.ObservedGeneration = ready.LastTransitionTime, sn.Generation
		sn.Status = sharednetv1.SharedNetworkStatus{
			Conditions: []metav1.Condition{ready, paused},
			MTU:        1450,
			Subnets: []sharednetv1.SubnetStatus{{
				ID: uuid(idSubnet, i), CIDR: subnetCIDR(i), IPVersion: 4,
				AllocationPools: []sharednetv1.AllocationPool{{Start: fmt.Sprintf("172.16.%d.2", subnetBlocks*i), End: fmt.Sprintf("172.16.%d.254", subnetBlocks*(i+1)-1)}},
				UsedAddresses:   ptr.To(used[i]), FreeAddresses: ptr.To(subnetPool - used[i]),
			}},
			Shares:                  shares[i],
			Consumers:               consumers[i],
			LastRefreshTime:         ptr.To(metav1.Now()),
			ObservedGeneration:      sn.Generation,
			ObservedIdentityVersion: w.secrets[i].ResourceVersion,
		}
		if err := env.Client.Status().Patch(ctx, sn, client.MergeFrom(before)); err != nil {
			return err
		}
	}
	return nil
}

func policyID(sn, i int) string { return uuid(idPolicy, sn*100000+i) }

// createClusters writes every Cluster of namespaces [from, to) with its OpenStackCluster (network
// made, as CAPO reports it), and every nodegroup: its
// OpenStackMachineTemplate, MachineDeployment, Machine and
// OpenStackMachine, labelled and annotated as CAPI's topology controller,
// CAPI's MachineSet controller and CAPO leave them; attached nodegroups run
// on a template with the shared port and have their shared address, and
// their SharedNetworkAttachment says Attached.
func (w *scaleWorld) createClusters(ctx context.Context, counts Counts, from, to int) error {
	var jobs []func(context.Context) error
	for n := from; n < to; n++ {
		for c := range clustersPerNamespace {
			jobs = append(jobs, func(ctx context.Context) error { return w.createCluster(ctx, n, c) })
		}
	}
	if err := pool(ctx, jobs); err != nil {
		return err
	}
	clusters := (to - from) * clustersPerNamespace
	groups := clusters * len(nodegroups)
	counts["Cluster"] += clusters
	counts["OpenStackCluster"] += clusters
	counts["MachineDeployment"] += groups
	counts["Machine"] += groups
	counts["OpenStackMachine"] += groups
	counts["OpenStackMachineTemplate"] += groups
	counts["SharedNetworkAttachment"] += clusters * attachedPerCluster
	return nil
}

func (w *scaleWorld) createCluster(ctx context.Context, n, c int) error {
	ns, name, i := namespaceName(n), clusterName(n, c), n*clustersPerNamespace+c
	infraGroup := infrav1.SchemeGroupVersion.Group
	osc := &infrav1.OpenStackCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-x7k2p", Labels: map[string]string{
			clusterv1.ClusterNameLabel: name, clusterv1.ClusterTopologyOwnedLabel: "",
		}},
		Spec: infrav1.OpenStackClusterSpec{
			IdentityRef:                infrav1.OpenStackIdentityReference{Name: identitySecret, CloudName: "openstack"},
			ManagedSubnets:             []infrav1.SubnetSpec{{CIDR: "10.6.0.0/24", DNSNameservers: []string{"8.8.8.8"}}},
			DisableExternalNetwork:     ptr.To(true),
			DisableAPIServerFloatingIP: ptr.To(true),
			APIServerLoadBalancer:      &infrav1.APIServerLoadBalancer{Enabled: ptr.To(false)},
		},
	}
	if err := createWithStatus(ctx, env.Client, osc, func() {
		osc.Status.Network = &infrav1.NetworkStatusWithSubnets{
			NetworkStatus: infrav1.NetworkStatus{ID: uuid(idClusterNetwork, i), Name: "k8s-clusterapi-cluster-" + ns + "-" + name},
			Subnets:       []infrav1.Subnet{{ID: uuid(idClusterSubnet, i), Name: "k8s-clusterapi-cluster-" + ns + "-" + name, CIDR: "10.6.0.0/24"}},
		}
	}); err != nil {
		return err
	}

	cluster := testenv.Cluster(ns, name, className, nodegroups...)
	cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"192.168.0.0/16"}
	cluster.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infraGroup, Kind: "OpenStackCluster", Name: osc.Name}
	for g, md := range nodegroups {
		if sn := sharedNetworkOf(i, g); sn >= 0 {
			variables.SetOverride(cluster, md, fmt.Appendf(nil, `{"name":%q,"subnet":%q}`, sharedNetworkName(sn), uuid(idSubnet, sn)))
			if cluster.Annotations == nil {
				cluster.Annotations = map[string]string{}
			}
			// The nudge the attachment controller left when it shared.
			cluster.Annotations["sharednet.capo.io/shared."+md] = policyID(sn, i)
		}
	}
	if err := createWithStatus(ctx, env.Client, cluster, nil); err != nil {
		return err
	}
	for g, md := range nodegroups {
		if err := w.createNodegroup(ctx, cluster, i, g, md); err != nil {
			return err
		}
	}
	return nil
}

func (w *scaleWorld) createNodegroup(ctx context.Context, cluster *clusterv1.Cluster, i, g int, topology string) error {
	ns, name := cluster.Namespace, cluster.Name
	sn := sharedNetworkOf(i, g)
	mdName := fmt.Sprintf("%s-%s-b8x4q", name, topology)
	tmplName := fmt.Sprintf("%s-%s-m9z5t", name, topology)
	msName := mdName + "-r2v7w"
	machineName := msName + "-k4j8d"
	bootGroup := "bootstrap.cluster.x-k8s.io"
	infraGroup := infrav1.SchemeGroupVersion.Group
	topologyLabels := map[string]string{
		clusterv1.ClusterNameLabel:                          name,
		clusterv1.ClusterTopologyOwnedLabel:                 "",
		clusterv1.ClusterTopologyMachineDeploymentNameLabel: topology,
	}
	labels := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range topologyLabels {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}

	// The machine spec CAPI clones from the template, with the shared
	// port when the nodegroup is attached.
	ports := []infrav1.PortOpts{{}}
	if sn >= 0 {
		ports = append(ports, infrav1.PortOpts{
			Network:     &infrav1.NetworkParam{ID: ptr.To(uuid(idNetwork, sn))},
			FixedIPs:    []infrav1.FixedIP{{Subnet: &infrav1.SubnetParam{ID: ptr.To(uuid(idSubnet, sn))}}},
			Description: ptr.To("capo-sharednet shared subnet port"),
			Tags:        []string{sharedport.Tag},
		})
	}
	machineSpec := infrav1.OpenStackMachineSpec{
		Flavor:         ptr.To("m1.medium"),
		Image:          infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To("ubuntu-2404-kube-v1.35.0")}},
		SSHKeyName:     "default",
		Ports:          ports,
		SecurityGroups: []infrav1.SecurityGroupParam{{Filter: &infrav1.SecurityGroupFilter{Name: "default"}}},
		Tags:           []string{"cluster-" + name},
	}
	tmpl := &infrav1.OpenStackMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tmplName, Labels: labels(nil),
			Annotations: map[string]string{
				clusterv1.TemplateClonedFromNameAnnotation:      testenv.WorkerMachineTemplateName(className),
				clusterv1.TemplateClonedFromGroupKindAnnotation: "OpenStackMachineTemplate." + infraGroup,
			}},
		Spec: infrav1.OpenStackMachineTemplateSpec{Template: infrav1.OpenStackMachineTemplateResource{Spec: machineSpec}},
	}
	if err := createWithStatus(ctx, env.Client, tmpl, nil); err != nil {
		return err
	}

	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mdName, Labels: labels(nil),
			Annotations: map[string]string{"machinedeployment.clusters.x-k8s.io/revision": "1"}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: name,
			Replicas:    ptr.To[int32](1),
			Selector:    metav1.LabelSelector{MatchLabels: labels(map[string]string{clusterv1.MachineDeploymentNameLabel: mdName})},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels(map[string]string{clusterv1.MachineDeploymentNameLabel: mdName})},
				Spec: clusterv1.MachineSpec{
					ClusterName:       name,
					Version:           testenv.KubernetesVersion,
					Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootGroup, Kind: "KubeadmConfigTemplate", Name: fmt.Sprintf("%s-%s-q3w9e", name, topology)}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infraGroup, Kind: "OpenStackMachineTemplate", Name: tmplName},
					FailureDomain:     "nova",
				},
			},
		},
	}
	if err := createWithStatus(ctx, env.Client, md, func() {
		md.Status = clusterv1.MachineDeploymentStatus{
			ObservedGeneration: md.Generation,
			Selector:           metav1.FormatLabelSelector(&md.Spec.Selector),
			Replicas:           ptr.To[int32](1), ReadyReplicas: ptr.To[int32](1), AvailableReplicas: ptr.To[int32](1), UpToDateReplicas: ptr.To[int32](1),
			Phase: "Running",
			Conditions: []metav1.Condition{
				{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue, Reason: clusterv1.AvailableReason, LastTransitionTime: w.now},
				{Type: clusterv1.MachineDeploymentMachinesReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: w.now},
				{Type: clusterv1.MachineDeploymentMachinesUpToDateCondition, Status: metav1.ConditionTrue, Reason: "UpToDate", LastTransitionTime: w.now},
			},
		}
	}); err != nil {
		return err
	}

	machineLabels := labels(map[string]string{clusterv1.MachineDeploymentNameLabel: mdName, clusterv1.MachineSetNameLabel: msName})
	server := uuid(idServer, i*len(nodegroups)+g)
	addresses := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.6.0.%d", 10+g)}}
	if sn >= 0 {
		addresses = append(addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: sharedAddress(sn, i, g)})
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: machineName, Labels: machineLabels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: msName, UID: "6b1f0a52-1d5e-4f6c-9f4e-2b7d3c1a0e9f", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Finalizers:      []string{clusterv1.MachineFinalizer}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       name,
			Version:           testenv.KubernetesVersion,
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootGroup, Kind: "KubeadmConfig", Name: machineName}, DataSecretName: ptr.To(machineName)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infraGroup, Kind: "OpenStackMachine", Name: machineName},
			ProviderID:        "openstack:///" + server,
			FailureDomain:     "nova",
		},
	}
	machineAddresses := make(clusterv1.MachineAddresses, 0, len(addresses)+1)
	for _, a := range addresses {
		machineAddresses = append(machineAddresses, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: a.Address})
	}
	machineAddresses = append(machineAddresses, clusterv1.MachineAddress{Type: clusterv1.MachineHostName, Address: machineName})
	if err := createWithStatus(ctx, env.Client, machine, func() {
		machine.Status = clusterv1.MachineStatus{
			ObservedGeneration: machine.Generation,
			Phase:              string(clusterv1.MachinePhaseRunning),
			NodeRef:            clusterv1.MachineNodeReference{Name: machineName},
			Addresses:          machineAddresses,
			Initialization:     clusterv1.MachineInitializationStatus{BootstrapDataSecretCreated: ptr.To(true), InfrastructureProvisioned: ptr.To(true)},
			LastUpdated:        w.now,
			NodeInfo: &corev1.NodeSystemInfo{
				MachineID: server, SystemUUID: server, BootID: server, KernelVersion: "6.8.0-60-generic", OSImage: "Ubuntu 24.04.2 LTS",
				ContainerRuntimeVersion: "containerd://2.0.5", KubeletVersion: testenv.KubernetesVersion,
				OperatingSystem: "linux", Architecture: "amd64",
			},
			Conditions: []metav1.Condition{
				{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue, Reason: clusterv1.AvailableReason, LastTransitionTime: w.now},
				{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ReadyReason, LastTransitionTime: w.now},
				{Type: clusterv1.MachineUpToDateCondition, Status: metav1.ConditionTrue, Reason: clusterv1.MachineUpToDateReason, LastTransitionTime: w.now},
				{Type: clusterv1.MachineBootstrapConfigReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: w.now},
				{Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: w.now},
				{Type: clusterv1.MachineNodeReadyCondition, Status: metav1.ConditionTrue, Reason: "NodeReady", LastTransitionTime: w.now},
				{Type: clusterv1.MachineNodeHealthyCondition, Status: metav1.ConditionTrue, Reason: "NodeHealthy", LastTransitionTime: w.now},
			},
		}
	}); err != nil {
		return err
	}

	osm := &infrav1.OpenStackMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: machineName, Labels: machineLabels,
			Annotations: map[string]string{
				clusterv1.TemplateClonedFromNameAnnotation:      tmplName,
				clusterv1.TemplateClonedFromGroupKindAnnotation: "OpenStackMachineTemplate." + infraGroup,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: machineName, UID: "0c3e2f4a-7b8d-4e1f-a2c3-5d6e7f8a9b0c", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Finalizers:      []string{infrav1.MachineFinalizer}},
		Spec: *machineSpec.DeepCopy(),
	}
	osm.Spec.ProviderID = ptr.To("openstack:///" + server)
	if err := createWithStatus(ctx, env.Client, osm, func() {
		var resolvedPorts []infrav1.ResolvedPortSpec
		for p := range ports {
			resolvedPorts = append(resolvedPorts, infrav1.ResolvedPortSpec{
				Name:        fmt.Sprintf("%s-%d", machineName, p),
				Description: "Created by cluster-api-provider-openstack cluster " + ns + "-" + name,
				NetworkID:   uuid(idClusterNetwork, i),
				FixedIPs:    []infrav1.ResolvedFixedIP{{SubnetID: ptr.To(uuid(idClusterSubnet, i))}},
				Tags:        []string{"cluster-" + name},
			})
		}
		if sn >= 0 {
			resolvedPorts[1].NetworkID = uuid(idNetwork, sn)
			resolvedPorts[1].FixedIPs = []infrav1.ResolvedFixedIP{{SubnetID: ptr.To(uuid(idSubnet, sn))}}
			resolvedPorts[1].Tags = []string{sharedport.Tag}
		}
		var portStatus []infrav1.PortStatus
		for p := range ports {
			portStatus = append(portStatus, infrav1.PortStatus{ID: uuid(idPort, (i*len(nodegroups)+g)*2+p)})
		}
		osm.Status = infrav1.OpenStackMachineStatus{
			Ready:          true, //nolint:staticcheck // CAPO v0.14 still sets it
			Initialization: &infrav1.MachineInitialization{Provisioned: true},
			InstanceID:     ptr.To(server),
			InstanceState:  ptr.To(infrav1.InstanceStateActive),
			Addresses:      addresses,
			Resolved: &infrav1.ResolvedMachineSpec{
				ImageID: uuid(idServer, 0xffffff), FlavorID: "3", Ports: resolvedPorts,
			},
			Resources: &infrav1.MachineResources{Ports: portStatus},
			Conditions: clusterv1beta1.Conditions{
				{Type: clusterv1beta1.ReadyCondition, Status: corev1.ConditionTrue, LastTransitionTime: w.now},
				{Type: infrav1.InstanceReadyCondition, Status: corev1.ConditionTrue, LastTransitionTime: w.now},
			},
		}
	}); err != nil {
		return err
	}

	if sn < 0 {
		return nil
	}
	attachment := &sharednetv1.SharedNetworkAttachment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: sharednetv1.AttachmentName(name, topology),
			Labels:     map[string]string{clusterv1.ClusterNameLabel: name},
			Finalizers: []string{controllers.AttachmentFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: cluster.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: name, MachineDeploymentTopology: topology, SharedNetwork: sharedNetworkName(sn), Subnet: uuid(idSubnet, sn)},
	}
	message := fmt.Sprintf("1/1 nodes have an address on subnet %s", uuid(idSubnet, sn))
	return createWithStatus(ctx, env.Client, attachment, func() {
		attachment.Status = sharednetv1.SharedNetworkAttachmentStatus{
			Phase:              sharednetv1.PhaseAttached,
			Share:              &sharednetv1.Share{ProjectID: uuid(idProject, i), RBACPolicyID: policyID(sn, i)},
			DesiredNodes:       ptr.To[int32](1),
			AttachedNodes:      ptr.To[int32](1),
			Nodes:              []sharednetv1.AttachedNode{{Machine: machineName, Node: machineName, Address: sharedAddress(sn, i, g)}},
			Message:            message,
			ObservedGeneration: attachment.Generation,
		}
		for _, c := range []metav1.Condition{
			sharednetv1.NewCondition(sharednetv1.GrantedCondition, metav1.ConditionTrue, sharednetv1.ReasonGranted, fmt.Sprintf("namespace %s may use subnet %s of SharedNetwork %s", ns, uuid(idSubnet, sn), sharedNetworkName(sn))),
			sharednetv1.NewCondition(sharednetv1.SharedCondition, metav1.ConditionTrue, sharednetv1.ReasonShared, fmt.Sprintf("network %s is shared with the cluster's project %s (RBAC policy %s)", uuid(idNetwork, sn), uuid(idProject, i), policyID(sn, i))),
			sharednetv1.NewCondition(sharednetv1.AttachedCondition, metav1.ConditionTrue, sharednetv1.ReasonAttached, message),
			sharednetv1.NewCondition(sharednetv1.CloudFitsCondition, metav1.ConditionTrue, sharednetv1.ReasonCloudFits, fmt.Sprintf("subnet %s of SharedNetwork %s still fits the nodegroup", uuid(idSubnet, sn), sharedNetworkName(sn))),
			sharednetv1.NewCondition(sharednetv1.DeletingCondition, metav1.ConditionFalse, sharednetv1.ReasonNotDeleting, ""),
			sharednetv1.NewCondition(sharednetv1.PausedCondition, metav1.ConditionFalse, sharednetv1.ReasonNotPaused, ""),
		} {
			c.LastTransitionTime = w.now
			conditions.Set(attachment, c)
		}
		setReady(attachment)
	})
}

// setReady is the attachment controller's summary (controllers'
// setReady), so that the status written here is the one the controller
// would write: a manager in steady state rewrites nothing.
func setReady(a *sharednetv1.SharedNetworkAttachment) {
	_ = conditions.SetSummaryCondition(a, a, sharednetv1.AttachmentReadyCondition,
		conditions.ForConditionTypes{sharednetv1.SharedCondition, sharednetv1.AttachedCondition, sharednetv1.GrantedCondition,
			sharednetv1.CloudFitsCondition, sharednetv1.DeletingCondition},
		conditions.IgnoreTypesIfMissing{sharednetv1.GrantedCondition, sharednetv1.CloudFitsCondition},
		conditions.CustomMergeStrategy{MergeStrategy: conditions.DefaultMergeStrategy(
			conditions.GetPriorityFunc(conditions.GetDefaultMergePriorityFunc(sharednetv1.DeletingCondition)),
			conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(sharednetv1.ReasonNotReady, sharednetv1.ReasonReadyUnknown, sharednetv1.ReasonReady)),
		)},
	)
}

// snapshot is every object of a list kind by namespace/name, to tell which
// ones a run of the manager wrote and what it changed.
func snapshot(ctx context.Context, list client.ObjectList) (map[string]client.Object, error) {
	if err := env.Client.List(ctx, list); err != nil {
		return nil, err
	}
	out := map[string]client.Object{}
	err := meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok {
			return fmt.Errorf("%T is not a client.Object", o)
		}
		out[obj.GetNamespace()+"/"+obj.GetName()] = obj
		return nil
	})
	return out, err
}

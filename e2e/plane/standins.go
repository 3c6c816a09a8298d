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

package plane

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// uninitializedTaint is the taint a kubelet with --cloud-provider=external
// registers its Node with (k8s.io/cloud-provider/api.TaintExternalCloudProvider).
const uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// Labels the node simulator puts on the Nodes it registers.
const (
	SimulatedNodeLabel     = "stand-in.capo-sharednet.io/simulated-node"
	SimulatedNodeNamespace = "stand-in.capo-sharednet.io/cluster-namespace"
	SimulatedNodeCluster   = "stand-in.capo-sharednet.io/cluster-name"
)

// nodeSimulator is a STAND-IN for the kubelets of the worker servers. The
// test bed's Nova runs a fake virt driver: its servers boot nothing, so no
// kubelet would ever register. Like a kubelet on a booted server, the
// simulator registers a Node in the workload cluster for each ACTIVE Nova
// server of a cluster's OpenStackMachines (asking Nova with the cluster's own
// identityRef credential), as a kubelet with --cloud-provider=external does:
// providerID openstack:///<server ID>, the uninitialized taint, Ready, no
// memory, disk or PID pressure, and no address but its hostname: the
// cluster's real cloud controller manager (ccm.go) reads the addresses from
// Nova and Neutron and removes the taint. It deletes a
// Node whose server is no longer ACTIVE or whose OpenStackMachine is gone
// (CAPI does not delete worker Nodes of a cluster without control-plane
// Machines, which a stand-in control plane never has).
type nodeSimulator struct {
	mgmt     client.Client
	workload client.Client
	every    time.Duration

	mu     sync.Mutex
	clouds map[string]*cachedCloud // by identity Secret namespace/name/cloud
}

type cachedCloud struct {
	resourceVersion string
	cloud           *Cloud
}

// Start implements manager.Runnable.
func (s *nodeSimulator) Start(ctx context.Context) error {
	loop(ctx, s.every, "stand-in-node-simulator", s.sync)
	return nil
}

// loop runs sync every interval until ctx ends, logging its errors.
func loop(ctx context.Context, every time.Duration, name string, sync func(context.Context) error) {
	log := ctrl.LoggerFrom(ctx).WithName(name)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := sync(ctx); err != nil && ctx.Err() == nil {
			log.Info(name, "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *nodeSimulator) sync(ctx context.Context) error {
	clusters := &clusterv1.ClusterList{}
	if err := s.mgmt.List(ctx, clusters); err != nil {
		return err
	}
	nodes := &corev1.NodeList{}
	if err := s.workload.List(ctx, nodes, client.HasLabels{SimulatedNodeLabel}); err != nil {
		return err
	}
	byCluster := map[string][]corev1.Node{}
	for _, n := range nodes.Items {
		k := n.Labels[SimulatedNodeNamespace] + "/" + n.Labels[SimulatedNodeCluster]
		byCluster[k] = append(byCluster[k], n)
	}
	var errs []string
	for i := range clusters.Items {
		c := &clusters.Items[i]
		k := c.Namespace + "/" + c.Name
		if err := s.syncCluster(ctx, c, byCluster[k]); err != nil {
			errs = append(errs, fmt.Sprintf("cluster %s: %v", k, err))
		}
		delete(byCluster, k)
	}
	// Nodes of clusters that are gone.
	for _, rest := range byCluster {
		for i := range rest {
			if err := s.workload.Delete(ctx, &rest[i]); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (s *nodeSimulator) syncCluster(ctx context.Context, c *clusterv1.Cluster, existing []corev1.Node) error {
	machines := &infrav1.OpenStackMachineList{}
	if err := s.mgmt.List(ctx, machines, client.InNamespace(c.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.Name}); err != nil {
		return err
	}
	withServer := map[string]*infrav1.OpenStackMachine{} // server ID -> machine
	for i := range machines.Items {
		m := &machines.Items[i]
		if id, ok := strings.CutPrefix(ptr.Deref(m.Spec.ProviderID, ""), providerIDPrefix); ok && id != "" {
			withServer[id] = m
		}
	}
	active := map[string]servers.Server{}
	if len(withServer) > 0 {
		cloud, err := s.cloudOf(ctx, c)
		if err != nil {
			return err
		}
		pages, err := servers.List(cloud.Compute, servers.ListOpts{}).AllPages(ctx)
		if err != nil {
			return fmt.Errorf("listing Nova servers: %w", err)
		}
		all, err := servers.ExtractServers(pages)
		if err != nil {
			return err
		}
		for _, srv := range all {
			if _, ours := withServer[srv.ID]; ours && srv.Status == "ACTIVE" {
				active[srv.ID] = srv
			}
		}
	}
	have := map[string]bool{}
	for i := range existing {
		n := &existing[i]
		id := ServerID(n.Spec.ProviderID)
		if _, ok := active[id]; !ok {
			if err := s.workload.Delete(ctx, n); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			continue
		}
		have[id] = true
		if !ready(n) {
			if err := s.report(ctx, c, withServer[id], active[id], n); err != nil {
				return err
			}
		}
		if err := s.renewLease(ctx, n); err != nil {
			return err
		}
	}
	for id, srv := range active {
		if have[id] {
			continue
		}
		if err := s.register(ctx, c, withServer[id], srv); err != nil {
			return err
		}
	}
	return nil
}

// renewLease renews the Node's Lease in kube-node-lease, the heartbeat a
// kubelet sends every 10 s: kube-controller-manager's node lifecycle
// controller then keeps the Node Ready and removes the not-ready taint the
// API server gave it at registration. Owned by the Node, as the kubelet's is,
// so the garbage collector deletes it with the Node.
func (s *nodeSimulator) renewLease(ctx context.Context, n *corev1.Node) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: n.Name}}
	_, err := controllerutil.CreateOrPatch(ctx, s.workload, lease, func() error {
		lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
		lease.Spec.HolderIdentity = ptr.To(n.Name)
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](40)
		if lease.Spec.RenewTime == nil || time.Since(lease.Spec.RenewTime.Time) > 10*time.Second {
			lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		}
		return nil
	})
	return err
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// register creates a Node as a kubelet does, then reports its status.
func (s *nodeSimulator) register(ctx context.Context, c *clusterv1.Cluster, m *infrav1.OpenStackMachine, srv servers.Server) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: srv.Name,
			Labels: map[string]string{
				SimulatedNodeLabel: "true", SimulatedNodeNamespace: c.Namespace, SimulatedNodeCluster: c.Name,
				corev1.LabelHostname: srv.Name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
			},
			Annotations: map[string]string{"stand-in.capo-sharednet.io/note": "registered by the local plane's node simulator, not by a kubelet"},
		},
		// As a kubelet with --cloud-provider=external registers: the cloud
		// controller manager initializes the Node (addresses, zone, instance
		// type) and removes the taint.
		Spec: corev1.NodeSpec{ProviderID: providerIDPrefix + srv.ID, Taints: []corev1.Taint{{
			Key: uninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}
	labels, err := s.kubeletLabels(ctx, m)
	if err != nil {
		return err
	}
	for k, v := range labels {
		node.Labels[k] = v
	}
	if err := s.workload.Create(ctx, node); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	return s.report(ctx, c, m, srv, node)
}

// kubeletLabels are the labels a kubelet started by kubeadm from the
// machine's KubeadmConfig registers its Node with: its --node-labels (the
// init and join configurations' kubeletExtraArgs).
func (s *nodeSimulator) kubeletLabels(ctx context.Context, m *infrav1.OpenStackMachine) (map[string]string, error) {
	machine, err := util.GetOwnerMachine(ctx, s.mgmt, m.ObjectMeta)
	if err != nil || machine == nil {
		return nil, err
	}
	ref := machine.Spec.Bootstrap.ConfigRef
	if ref.Kind != "KubeadmConfig" || ref.Name == "" {
		return nil, nil
	}
	config := &bootstrapv1.KubeadmConfig{}
	if err := s.mgmt.Get(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: ref.Name}, config); err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for _, args := range [][]bootstrapv1.Arg{config.Spec.InitConfiguration.NodeRegistration.KubeletExtraArgs, config.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs} {
		for _, a := range args {
			if a.Name != "node-labels" || a.Value == nil {
				continue
			}
			for _, l := range strings.Split(*a.Value, ",") {
				if k, v, ok := strings.Cut(l, "="); ok {
					labels[k] = v
				}
			}
		}
	}
	return labels, nil
}

// report writes the status a kubelet reports (a merge patch: CAPI labels and
// annotates the Node meanwhile).
func (s *nodeSimulator) report(ctx context.Context, c *clusterv1.Cluster, m *infrav1.OpenStackMachine, srv servers.Server, node *corev1.Node) error {
	before := node.DeepCopy()
	now := metav1.Now()
	condition := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: "node simulator (stand-in)", LastHeartbeatTime: now, LastTransitionTime: now}
	}
	node.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{
			condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
			condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
			condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
			condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
		},
		// The addresses are the cloud controller manager's (read from Nova);
		// a kubelet with an external cloud provider reports only its hostname.
		Addresses: before.Status.Addresses,
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: versionOf(c), OperatingSystem: "linux", Architecture: "amd64",
			KernelVersion: "stand-in", OSImage: "node simulator", ContainerRuntimeVersion: "stand-in://0",
		},
	}
	if len(node.Status.Addresses) == 0 {
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: srv.Name}}
	}
	// Optimistic: never overwrite addresses the CCM wrote meanwhile (a
	// conflict is retried on the next pass).
	return s.workload.Status().Patch(ctx, node, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func versionOf(c *clusterv1.Cluster) string {
	if c.Spec.Topology.Version != "" {
		return c.Spec.Topology.Version
	}
	return "v0.0.0"
}

// cloudOf opens (and caches) a Nova client with the cluster's identityRef.
func (s *nodeSimulator) cloudOf(ctx context.Context, c *clusterv1.Cluster) (*Cloud, error) {
	osc, sec, err := clusterIdentity(ctx, s.mgmt, c)
	if err != nil {
		return nil, err
	}
	id := osc.Spec.IdentityRef
	key := c.Namespace + "/" + id.Name + "/" + id.CloudName
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clouds == nil {
		s.clouds = map[string]*cachedCloud{}
	}
	if cc, ok := s.clouds[key]; ok && cc.resourceVersion == sec.ResourceVersion {
		return cc.cloud, nil
	}
	cloud, err := NewCloud(ctx, sec.Data[openstack.CloudsSecretKey], id.CloudName)
	if err != nil {
		return nil, err
	}
	s.clouds[key] = &cachedCloud{resourceVersion: sec.ResourceVersion, cloud: cloud}
	return cloud, nil
}

// clusterIdentity is a cluster's OpenStackCluster and its identityRef Secret
// (the plane's clusters name a Secret in their own namespace).
func clusterIdentity(ctx context.Context, mgmt client.Client, c *clusterv1.Cluster) (*infrav1.OpenStackCluster, *corev1.Secret, error) {
	if c.Spec.InfrastructureRef.Name == "" {
		return nil, nil, fmt.Errorf("no OpenStackCluster yet")
	}
	osc := &infrav1.OpenStackCluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.InfrastructureRef.Name}, osc); err != nil {
		return nil, nil, err
	}
	sec := &corev1.Secret{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: osc.Spec.IdentityRef.Name}, sec); err != nil {
		return nil, nil, err
	}
	return osc, sec, nil
}

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
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/internal/watchfilter"
)

const (
	fieldOwner   = client.FieldOwner("capo-sharednet")
	pollWorkload = 30 * time.Second
	// installedAnnotation on a Cluster says its workload cluster holds the policy.
	installedAnnotation = "sharednet.capo.io/guardrails"
)

var gatewayList = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "GatewayList"}

// Reconciler installs the policy into each workload cluster with an
// attachment, removes it when the last attachment goes, and reports on the
// attachments what the policy cannot prevent: objects that existed before it,
// load balancers no object accounts for, nodes with the wrong InternalIP, and
// whether the VM project's security groups admit the shared subnet.
type Reconciler struct {
	Client       client.Client
	ClusterCache clustercache.ClusterCache
	Credentials  credentials.Clouds
	Recorder     record.EventRecorder
	// WorkloadClient returns a client of a Cluster's workload cluster;
	// ClusterCache.GetClient when nil (fast tests give a fake client).
	WorkloadClient func(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
	// WatchFilterValue is CAPI's --watch-filter: only Clusters with that
	// watch label are guarded; every one when empty.
	WatchFilterValue string
}

func (r *Reconciler) workloadClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error) {
	if r.WorkloadClient != nil {
		return r.WorkloadClient(ctx, cluster)
	}
	return r.ClusterCache.GetClient(ctx, cluster)
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&sharednetv1.SharedNetworkAttachment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: o.(*sharednetv1.SharedNetworkAttachment).Spec.ClusterName}}}
		})).
		// Reconcile as soon as the ClusterCache connects to a workload cluster, instead of at
		// the next poll after a first "not connected".
		WatchesRawSource(r.ClusterCache.GetClusterSource("workloadguardrails", func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		})).
		Named("workloadguardrails").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// A paused Cluster (e.g. during clusterctl move) is left alone, as CAPI's
	// contract asks: nothing is written in it or in its workload cluster.
	if !cluster.DeletionTimestamp.IsZero() || annotations.IsPaused(cluster, cluster) || !watchfilter.Matches(cluster, r.WatchFilterValue) {
		return reconcile.Result{}, nil
	}
	list := &sharednetv1.SharedNetworkAttachmentList{}
	if err := r.Client.List(ctx, list, client.InNamespace(cluster.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}); err != nil {
		return reconcile.Result{}, err
	}
	var attached []*sharednetv1.SharedNetworkAttachment
	for i := range list.Items {
		if a := &list.Items[i]; a.DeletionTimestamp.IsZero() && a.ShareEstablished() {
			attached = append(attached, a)
		}
	}

	installed := cluster.Annotations[installedAnnotation] != ""
	if len(attached) == 0 && !installed {
		return reconcile.Result{}, nil // never touch a workload cluster that was never attached
	}
	wc, err := r.workloadClient(ctx, req.NamespacedName)
	if err != nil {
		if errors.Is(err, clustercache.ErrClusterNotConnected) {
			return reconcile.Result{RequeueAfter: pollWorkload}, nil
		}
		return reconcile.Result{}, err
	}
	if len(attached) == 0 {
		if err := remove(ctx, wc); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.markInstalled(ctx, cluster, false)
	}

	osc := &infrav1.OpenStackCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Spec.InfrastructureRef.Name}, osc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if osc.Status.Network == nil || len(osc.Status.Network.Subnets) == 0 {
		return reconcile.Result{RequeueAfter: pollWorkload}, nil // the cluster network is not there yet
	}
	clusterSubnet := osc.Status.Network.Subnets[0]
	params := r.params(ctx, cluster, clusterSubnet.ID, attached)
	policy, binding, cm := Objects(params)
	for _, obj := range []client.Object{cm, policy, binding} {
		if err := wc.Patch(ctx, obj, client.Apply, fieldOwner, client.ForceOwnership); err != nil {
			return reconcile.Result{}, fmt.Errorf("installing %T %s in the workload cluster: %w", obj, obj.GetName(), err)
		}
	}

	if err := r.markInstalled(ctx, cluster, true); err != nil {
		return reconcile.Result{}, err
	}

	misconfigured, services, err := audit(ctx, wc, params)
	if err != nil {
		return reconcile.Result{}, err
	}
	clusterCIDR, _ := netip.ParsePrefix(clusterSubnet.CIDR)
	var errs []error
	for _, a := range attached {
		errs = append(errs, r.report(ctx, wc, cluster, a, misconfigured, services, clusterCIDR))
	}
	return reconcile.Result{RequeueAfter: pollWorkload}, errors.Join(errs...)
}

// report writes on one attachment what the guardrails found, through CAPI's
// patch helper: only status.workload, status.vmIngress and WorkloadGuarded,
// the fields this controller owns, so the attachment controller's writes
// in between are kept.
func (r *Reconciler) report(ctx context.Context, wc client.Client, cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment,
	misconfigured []sharednetv1.WorkloadObjectIssue, services map[string]bool, clusterCIDR netip.Prefix) error {
	helper, err := patch.NewHelper(a, r.Client)
	if err != nil {
		return err
	}
	before := a.Status.DeepCopy()
	a.Status.Workload = sharednetv1.WorkloadStatus{Policy: sharednetv1.WorkloadPolicyInstalled, Misconfigured: misconfigured,
		UnaccountedLoadBalancers: unaccounted(a.Status.LoadBalancers, services)}
	nodes, nodesErr := nodeIssues(ctx, wc, a, clusterCIDR)
	a.Status.Workload.Nodes = nodes
	r.vmIngress(ctx, a)
	issues := append(append([]sharednetv1.WorkloadObjectIssue{}, misconfigured...), nodes...)
	conditions.Set(a, guardedCondition(issues, nodesErr))
	if equality.Semantic.DeepEqual(before, &a.Status) {
		return nodesErr
	}
	for _, m := range issues {
		r.Recorder.Eventf(cluster, corev1.EventTypeWarning, sharednetv1.ReasonWorkloadMisconfigured, "%s %s/%s: %s", m.Kind, m.Namespace, m.Name, m.Reason)
	}
	if err := helper.Patch(ctx, a, patch.WithOwnedConditions{Conditions: []string{sharednetv1.WorkloadGuardedCondition}}); err != nil {
		return errors.Join(nodesErr, fmt.Errorf("writing the guardrails' findings on SharedNetworkAttachment %s: %w", a.Name, err))
	}
	return nodesErr
}

// guardedCondition is WorkloadGuarded: True when nothing in the workload
// cluster breaks the policy's rules, else False naming each object; Unknown
// when nothing was found but not every Node could be read (never a True
// that was not checked).
func guardedCondition(issues []sharednetv1.WorkloadObjectIssue, nodesErr error) metav1.Condition {
	if len(issues) == 0 && nodesErr != nil {
		return sharednetv1.NewCondition(sharednetv1.WorkloadGuardedCondition, metav1.ConditionUnknown, sharednetv1.ReasonWorkloadUnchecked,
			fmt.Sprintf("the policy is installed in the workload cluster, but its Nodes could not all be read: %v", nodesErr))
	}
	if len(issues) == 0 {
		return sharednetv1.NewCondition(sharednetv1.WorkloadGuardedCondition, metav1.ConditionTrue, sharednetv1.ReasonGuarded,
			"the policy is installed in the workload cluster and no Service, Gateway or Node breaks its rules")
	}
	var lines []string
	for _, m := range issues {
		lines = append(lines, fmt.Sprintf("%s %s: %s", m.Kind, strings.TrimPrefix(m.Namespace+"/"+m.Name, "/"), m.Reason))
	}
	return sharednetv1.NewCondition(sharednetv1.WorkloadGuardedCondition, metav1.ConditionFalse, sharednetv1.ReasonWorkloadMisconfigured, strings.Join(lines, "; "))
}

// params are the shared subnets and networks of the cluster's attachments
// and the cluster project's ports on those networks (a Service may name one
// as its VIP port). Ports made since the last poll are caught by the audit.
func (r *Reconciler) params(ctx context.Context, cluster *clusterv1.Cluster, clusterSubnet string, attached []*sharednetv1.SharedNetworkAttachment) Params {
	params := Params{ClusterSubnet: clusterSubnet}
	var cloud openstack.ClusterCloud
	if c, _, err := r.Credentials.ForCluster(ctx, cluster); err == nil {
		cloud = c
	}
	for _, a := range attached {
		params.SharedSubnets = append(params.SharedSubnets, a.Spec.Subnet)
		sn := &sharednetv1.SharedNetwork{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: a.Spec.SharedNetwork}, sn); err != nil {
			continue
		}
		params.SharedNetworks = append(params.SharedNetworks, sn.Spec.NetworkID)
		if cloud != nil {
			if ids, err := cloud.PortIDsOnNetwork(ctx, sn.Spec.NetworkID); err == nil {
				params.SharedPorts = append(params.SharedPorts, ids...)
			}
		}
	}
	return params
}

// audit lists the Services and Gateways that break the policy's rules
// (created before it), and the Services and Gateways on shared subnets.
func audit(ctx context.Context, wc client.Client, p Params) ([]sharednetv1.WorkloadObjectIssue, map[string]bool, error) {
	var issues []sharednetv1.WorkloadObjectIssue
	onShared := map[string]bool{}
	check := func(kind, namespace, name string, annotations map[string]string) {
		if !p.OnShared(annotations) {
			return
		}
		onShared[namespace+"/"+name] = true
		if reason := Violation(annotations, p.ClusterSubnet); reason != "" {
			issues = append(issues, sharednetv1.WorkloadObjectIssue{Kind: kind, Namespace: namespace, Name: name, Reason: reason})
		}
	}
	services := &corev1.ServiceList{}
	if err := wc.List(ctx, services); err != nil {
		return nil, nil, fmt.Errorf("listing Services of the workload cluster: %w", err)
	}
	for _, s := range services.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			check("Service", s.Namespace, s.Name, s.Annotations)
		}
	}
	gateways := &unstructured.UnstructuredList{}
	gateways.SetGroupVersionKind(gatewayList)
	if err := wc.List(ctx, gateways); err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("listing Gateways of the workload cluster: %w", err)
	}
	for _, gw := range gateways.Items {
		annotations, _, _ := unstructured.NestedStringMap(gw.Object, "spec", "infrastructure", "annotations")
		check("Gateway", gw.GetNamespace(), gw.GetName(), annotations)
	}
	sort.Slice(issues, func(i, j int) bool { return issues[i].Namespace+issues[i].Name < issues[j].Namespace+issues[j].Name })
	return issues, onShared, nil
}

// Violation is the reason, in the policy's words, an object's annotations
// break a rule, or "" (used by the audit of objects the policy never saw).
func Violation(annotations map[string]string, clusterSubnet string) string {
	if annotations[InternalAnnotation] != "true" {
		return "not internal: set " + InternalAnnotation + `: "true" (without it the load balancer gets a public IP and is reachable from the internet); delete and recreate the object`
	}
	if annotations[MemberSubnetAnnotation] != clusterSubnet {
		return "members not on the cluster's subnet: set " + MemberSubnetAnnotation + ": " + clusterSubnet + " (without it the load balancer cannot reach any node, so every request fails); delete and recreate the object"
	}
	return ""
}

// unaccounted are the LBs on the subnet whose Service (or Gateway) is unknown
// or does not exist in the workload cluster.
func unaccounted(lbs []sharednetv1.LoadBalancer, onShared map[string]bool) []string {
	var out []string
	for _, lb := range lbs {
		if lb.Service == "" || !onShared[lb.Service] {
			out = append(out, fmt.Sprintf("%s (VIP %s)", lb.Name, lb.VIP))
		}
	}
	return out
}

// nodeIssues checks every Node of an attached nodegroup: InternalIP on the
// cluster network and the shared-subnet address present (the CCM may pick
// the shared address as InternalIP when a node has two NICs).
func nodeIssues(ctx context.Context, wc client.Client, a *sharednetv1.SharedNetworkAttachment, clusterCIDR netip.Prefix) ([]sharednetv1.WorkloadObjectIssue, error) {
	var out []sharednetv1.WorkloadObjectIssue
	for _, n := range a.Status.Nodes {
		if n.Node == "" {
			continue
		}
		node := &corev1.Node{}
		if err := wc.Get(ctx, client.ObjectKey{Name: n.Node}, node); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return out, err
		}
		if reason := NodeAddressViolation(node.Status.Addresses, clusterCIDR, n.Address); reason != "" {
			out = append(out, sharednetv1.WorkloadObjectIssue{Kind: "Node", Name: node.Name, Reason: reason})
		}
	}
	return out, nil
}

// NodeAddressViolation says what is wrong with a Node's addresses, or "".
func NodeAddressViolation(addresses []corev1.NodeAddress, clusterCIDR netip.Prefix, sharedAddress string) string {
	var internal []string
	hasShared := false
	for _, a := range addresses {
		if a.Address == sharedAddress {
			hasShared = true
		}
		if a.Type == corev1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if len(internal) > 0 {
		if ip, err := netip.ParseAddr(internal[0]); err != nil || !clusterCIDR.Contains(ip) {
			return fmt.Sprintf("InternalIP %s is not on the cluster network %s: configure the OpenStack cloud controller manager's [Networking] address-sort-order = %s (templates/cluster-template-shared-network.yaml does) so the cluster address comes first", internal[0], clusterCIDR, clusterCIDR)
		}
	}
	if !hasShared && sharedAddress != "" {
		return fmt.Sprintf("the shared-subnet address %s is not among the Node's addresses", sharedAddress)
	}
	return ""
}

// vmIngress reports whether the VM project's security groups admit the
// shared subnet (the seed: allow the shared subnet's range in the security
// groups of the VMs the cluster should reach).
func (r *Reconciler) vmIngress(ctx context.Context, a *sharednetv1.SharedNetworkAttachment) {
	sn := &sharednetv1.SharedNetwork{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: a.Spec.SharedNetwork}, sn); err != nil {
		return
	}
	facts, ok := sn.Status.Subnet(a.Spec.Subnet)
	cidr, err := netip.ParsePrefix(facts.CIDR)
	if !ok || err != nil {
		return
	}
	session, err := r.Credentials.ForSharedNetwork(ctx, sn)
	if err != nil {
		return
	}
	rules, err := session.IngressFrom(ctx, cidr)
	if err != nil {
		return // keep the last answer
	}
	status := sharednetv1.VMIngressStatus{Admission: sharednetv1.VMIngressRefused}
	if len(rules) > 0 {
		status.Admission = sharednetv1.VMIngressAdmitted
	}
	for _, rule := range rules {
		status.Rules = append(status.Rules, rule.SecurityGroupID+"/"+rule.ID)
	}
	if status.Admission != sharednetv1.VMIngressAdmitted {
		status.Suggestion = fmt.Sprintf("openstack security group rule create --ingress --ethertype IPv%d --remote-ip %s <security group of the VMs the cluster should reach>", facts.IPVersion, cidr)
	}
	a.Status.VMIngress = status
}

// markInstalled records on the Cluster that its workload cluster holds the
// policy, so the policy is removed there later, and no other workload
// cluster is ever connected to.
func (r *Reconciler) markInstalled(ctx context.Context, cluster *clusterv1.Cluster, installed bool) error {
	if (cluster.Annotations[installedAnnotation] != "") == installed {
		return nil
	}
	patch := client.MergeFrom(cluster.DeepCopy())
	if installed {
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[installedAnnotation] = PolicyName
	} else {
		delete(cluster.Annotations, installedAnnotation)
	}
	return r.Client.Patch(ctx, cluster, patch)
}

// remove deletes the policy objects from the workload cluster.
func remove(ctx context.Context, wc client.Client) error {
	policy, binding, cm := Objects(Params{})
	var errs []error
	for _, obj := range []client.Object{binding, policy, cm} {
		errs = append(errs, client.IgnoreNotFound(wc.Delete(ctx, obj)))
	}
	return errors.Join(errs...)
}

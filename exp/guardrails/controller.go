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
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
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

// SetupWithManager registers the reconciler. Each watch passes only the
// changes to what the guardrails read (everything else waits for the
// poll): during an attach the attachment's and the Cluster's status change
// dozens of times, and each reconcile asks the cluster's project for its
// ports and writes the policy.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(options).
		For(&clusterv1.Cluster{}, builder.WithPredicates(
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&sharednetv1.SharedNetworkAttachment{}, handler.EnqueueRequestsFromMapFunc(clusterOfAttachment),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return guardedChanged(e.ObjectOld, e.ObjectNew) }})).
		Watches(&sharednetv1.SharedNetwork{}, handler.EnqueueRequestsFromMapFunc(clustersOfConsumers),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return vmIngressChanged(e.ObjectOld, e.ObjectNew) }})).
		// Reconcile as soon as the ClusterCache connects to a workload cluster, instead of at
		// the next poll after a first "not connected".
		WatchesRawSource(r.ClusterCache.GetClusterSource("workloadguardrails", func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		})).
		Named("workloadguardrails").
		Complete(r)
}

func clusterOfAttachment(_ context.Context, o client.Object) []reconcile.Request {
	a, ok := o.(*sharednetv1.SharedNetworkAttachment)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.ClusterName}}}
}

// clustersOfConsumers are the Clusters with a nodegroup on the SharedNetwork.
func clustersOfConsumers(_ context.Context, o client.Object) []reconcile.Request {
	sn, ok := o.(*sharednetv1.SharedNetwork)
	if !ok {
		return nil
	}
	seen := map[client.ObjectKey]bool{}
	var out []reconcile.Request
	for _, c := range sn.Status.Consumers {
		key := client.ObjectKey{Namespace: c.Namespace, Name: c.Cluster}
		if !seen[key] {
			seen[key] = true
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// guardedChanged says whether an attachment changed in what the guardrails
// read of it: not its phase, its other conditions, nor their own findings.
func guardedChanged(old, updated client.Object) bool {
	a, okOld := old.(*sharednetv1.SharedNetworkAttachment)
	b, okNew := updated.(*sharednetv1.SharedNetworkAttachment)
	if !okOld || !okNew {
		return true
	}
	return !equality.Semantic.DeepEqual(a.Labels, b.Labels) || !equality.Semantic.DeepEqual(a.Spec, b.Spec) ||
		!a.DeletionTimestamp.Equal(b.DeletionTimestamp) || a.ShareEstablished() != b.ShareEstablished() ||
		!equality.Semantic.DeepEqual(a.Status.Nodes, b.Status.Nodes) || !equality.Semantic.DeepEqual(a.Status.LoadBalancers, b.Status.LoadBalancers)
}

// vmIngressChanged says whether a resync changed a subnet's VM-side
// counts (its VM ports, those that admit it, the rules that do): the report
// each attachment copies.
func vmIngressChanged(old, updated client.Object) bool {
	a, okOld := old.(*sharednetv1.SharedNetwork)
	b, okNew := updated.(*sharednetv1.SharedNetwork)
	if !okOld || !okNew {
		return true
	}
	counts := func(sn *sharednetv1.SharedNetwork) map[string][3]*int32 {
		out := map[string][3]*int32{}
		for _, s := range sn.Status.Subnets {
			out[s.ID] = [3]*int32{s.VMPorts, s.AdmittingVMPorts, s.AdmittingIngressRules}
		}
		return out
	}
	return !equality.Semantic.DeepEqual(counts(a), counts(b))
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

	return r.guard(ctx, cluster, wc, attached)
}

// guard installs the policy compiled with the values read now (the installed
// ones kept for what could not be read) and reports on each attachment what
// the policy cannot prevent.
func (r *Reconciler) guard(ctx context.Context, cluster *clusterv1.Cluster, wc client.Client, attached []*sharednetv1.SharedNetworkAttachment) (reconcile.Result, error) {
	osc := &infrav1.OpenStackCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Spec.InfrastructureRef.Name}, osc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if osc.Status.Network == nil || len(osc.Status.Network.Subnets) == 0 {
		return reconcile.Result{RequeueAfter: pollWorkload}, nil // the cluster network is not there yet
	}
	found := findings{clusterSubnet: osc.Status.Network.Subnets[0]}
	f := r.params(ctx, cluster, found.clusterSubnet.ID, attached)
	found.sharedNetworks, found.unread = f.sharedNetworks, f.unread
	params, err := r.policyParams(ctx, wc, cluster, f)
	if err != nil {
		return reconcile.Result{}, err
	}
	// The record last: it then holds what the policy was compiled with,
	// which policyParams keeps when a read fails.
	policy, binding, cm := Objects(params)
	for _, obj := range []client.Object{policy, binding, cm} {
		if err := wc.Patch(ctx, obj, client.Apply, fieldOwner, client.ForceOwnership); err != nil {
			return reconcile.Result{}, fmt.Errorf("installing %T %s in the workload cluster of Cluster %s/%s: %w", obj, obj.GetName(), cluster.Namespace, cluster.Name, err)
		}
	}
	if err := r.markInstalled(ctx, cluster, true); err != nil {
		return reconcile.Result{}, err
	}

	found.misconfigured, found.services, err = audit(ctx, wc, params)
	if err != nil {
		return reconcile.Result{}, err
	}
	var errs []error
	for _, a := range attached {
		errs = append(errs, r.report(ctx, wc, cluster, a, found))
	}
	return reconcile.Result{RequeueAfter: pollWorkload}, errors.Join(errs...)
}

// findings are what one reconcile found, for every attachment's report.
type findings struct {
	clusterSubnet infrav1.Subnet
	misconfigured []sharednetv1.WorkloadObjectIssue
	// services are the Services and Gateways on shared subnets.
	services map[string]bool
	// sharedNetworks are the attachments' SharedNetworks that could be read, by name.
	sharedNetworks map[string]*sharednetv1.SharedNetwork
	// unread names each value of the policy that could not be read.
	unread []string
}

// report writes on one attachment what the guardrails found.
func (r *Reconciler) report(ctx context.Context, wc client.Client, cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment, found findings) error {
	nodes, nodesErr := nodeIssues(ctx, wc, a, found.clusterSubnet)
	ingress, ingressRead := observeVMIngress(ctx, a, found.sharedNetworks)
	issues := append(append([]sharednetv1.WorkloadObjectIssue{}, found.misconfigured...), nodes...)
	var unchecked []string
	if len(found.unread) > 0 {
		unchecked = append(unchecked, "the policy keeps its previous values for what could not be read: "+strings.Join(found.unread, ", "))
	}
	if nodesErr != nil {
		unchecked = append(unchecked, fmt.Sprintf("its Nodes could not all be read: %v", nodesErr))
	}
	changed, err := r.writeStatus(ctx, a, func() {
		a.Status.Workload = sharednetv1.WorkloadStatus{Policy: sharednetv1.WorkloadPolicyInstalled, Misconfigured: found.misconfigured,
			UnaccountedLoadBalancers: unaccounted(a.Status.LoadBalancers, found.services), Nodes: nodes}
		if ingressRead {
			a.Status.VMIngress = ingress
		}
		conditions.Set(a, guardedCondition(issues, unchecked))
	})
	if changed {
		for _, m := range issues {
			r.Recorder.Eventf(cluster, corev1.EventTypeWarning, sharednetv1.ReasonWorkloadMisconfigured, "%s %s/%s: %s", m.Kind, m.Namespace, m.Name, m.Reason)
		}
	}
	return errors.Join(nodesErr, err)
}

// writeStatus applies change to a and, when it changed anything, writes it
// through CAPI's patch helper: only status.workload, status.vmIngress and
// WorkloadGuarded, the fields this controller owns, so the attachment
// controller's writes in between are kept.
func (r *Reconciler) writeStatus(ctx context.Context, a *sharednetv1.SharedNetworkAttachment, change func()) (changed bool, err error) {
	helper, err := patch.NewHelper(a, r.Client)
	if err != nil {
		return false, err
	}
	before := a.Status.DeepCopy()
	change()
	if equality.Semantic.DeepEqual(before, &a.Status) {
		return false, nil
	}
	if err := helper.Patch(ctx, a, patch.WithOwnedConditions{Conditions: []string{sharednetv1.WorkloadGuardedCondition}}); err != nil {
		return true, fmt.Errorf("writing the guardrails' findings on SharedNetworkAttachment %s/%s: %w", a.Namespace, a.Name, err)
	}
	return true, nil
}

// guardedCondition is WorkloadGuarded: True when nothing in the workload
// cluster breaks the policy's rules, else False naming each object; Unknown
// when nothing was found but not everything could be checked (unchecked says
// what: never a True that was not checked).
func guardedCondition(issues []sharednetv1.WorkloadObjectIssue, unchecked []string) metav1.Condition {
	if len(issues) == 0 && len(unchecked) > 0 {
		return sharednetv1.NewCondition(sharednetv1.WorkloadGuardedCondition, metav1.ConditionUnknown, sharednetv1.ReasonWorkloadUnchecked,
			"the policy is installed in the workload cluster, but not everything could be checked: "+strings.Join(unchecked, "; "))
	}
	if len(issues) == 0 {
		return sharednetv1.NewCondition(sharednetv1.WorkloadGuardedCondition, metav1.ConditionTrue, sharednetv1.ReasonGuarded,
			"the policy is installed in the workload cluster and no Service, Gateway or Node breaks its rules")
	}
	var lines []string
	for _, m := range issues {
		lines = append(lines, fmt.Sprintf("%s %s: %s", m.Kind, strings.TrimPrefix(m.Namespace+"/"+m.Name, "/"), m.Reason))
	}
	lines = append(lines, unchecked...)
	return sharednetv1.NewCondition(sharednetv1.WorkloadGuardedCondition, metav1.ConditionFalse, sharednetv1.ReasonWorkloadMisconfigured, strings.Join(lines, "; "))
}

// facts are the policy's values as read now. unread names each read that
// failed; networksUnread and portsUnread say which part it left short.
type facts struct {
	params         Params
	sharedNetworks map[string]*sharednetv1.SharedNetwork
	unread         []string
	networksUnread bool
	portsUnread    bool
}

// failed records a read that failed; a network not read leaves its ports unread too.
func (f *facts) failed(network bool, what string) {
	f.unread = append(f.unread, what)
	f.networksUnread = f.networksUnread || network
	f.portsUnread = true
}

// params are the shared subnets and networks of the cluster's attachments
// and the cluster project's ports on those networks (a Service may name one
// as its VIP port). Ports made since the last poll are caught by the audit.
func (r *Reconciler) params(ctx context.Context, cluster *clusterv1.Cluster, clusterSubnet string, attached []*sharednetv1.SharedNetworkAttachment) facts {
	f := facts{params: Params{ClusterSubnet: clusterSubnet}, sharedNetworks: map[string]*sharednetv1.SharedNetwork{}}
	var ports openstack.ProjectPorts
	if cloud, _, err := r.Credentials.ForCluster(ctx, cluster); err != nil {
		f.failed(false, fmt.Sprintf("the cluster project's ports on the shared networks (the cluster's OpenStack project cannot be opened: %v)", err))
	} else {
		ports = cloud
	}
	seen := map[string]bool{}
	for _, a := range attached {
		f.params.SharedSubnets = append(f.params.SharedSubnets, a.Spec.Subnet)
		if seen[a.Spec.SharedNetwork] {
			continue
		}
		seen[a.Spec.SharedNetwork] = true
		sn := &sharednetv1.SharedNetwork{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: a.Spec.SharedNetwork}, sn); err != nil {
			f.failed(true, fmt.Sprintf("SharedNetwork %s, so its network and the cluster project's ports on it (%v)", a.Spec.SharedNetwork, err))
			continue
		}
		f.sharedNetworks[sn.Name] = sn
		f.params.SharedNetworks = append(f.params.SharedNetworks, sn.Spec.NetworkID)
		if ports == nil {
			continue
		}
		ids, err := ports.PortIDsOnNetwork(ctx, sn.Spec.NetworkID)
		if err != nil {
			f.failed(false, fmt.Sprintf("the cluster project's ports on network %s of SharedNetwork %s (%v)", sn.Spec.NetworkID, sn.Name, err))
			continue
		}
		f.params.SharedPorts = append(f.params.SharedPorts, ids...)
	}
	return f
}

// policyParams are the values to compile: those read now, and for each part
// that could not be read also the installed ones (a union: the record does
// not say which port is on which network, and a value kept a little too long
// only makes the policy stricter), so a failed read never yields a policy
// with fewer values. With nothing recorded to keep (the first install), the
// values read are installed: the policy only refuses, so a policy that
// judges part of what it should still refuses more than none; the rest
// comes with the next poll that reads it.
//
// The installed values come from the record in the workload cluster, not
// from memory: it survives a restart or a new leader of the manager, and it
// is written after the policy, with what the policy was compiled with.
func (r *Reconciler) policyParams(ctx context.Context, wc client.Client, cluster *clusterv1.Cluster, f facts) (Params, error) {
	if len(f.unread) == 0 {
		return f.params, nil
	}
	ctrl.LoggerFrom(ctx).Info("cannot read every value of the guardrails' policy; the installed values are kept for them",
		"cluster", klog.KObj(cluster), "unread", f.unread)
	cm := &corev1.ConfigMap{}
	if err := wc.Get(ctx, client.ObjectKey{Namespace: ParamsNamespace, Name: ParamsName}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return f.params, nil
		}
		return Params{}, fmt.Errorf("reading ConfigMap %s/%s, the record of the guardrails' values, in the workload cluster of Cluster %s/%s: %w",
			ParamsNamespace, ParamsName, cluster.Namespace, cluster.Name, err)
	}
	installed := ParamsOf(cm)
	params := f.params
	if f.networksUnread {
		params.SharedNetworks = append(params.SharedNetworks, installed.SharedNetworks...)
	}
	if f.portsUnread {
		params.SharedPorts = append(params.SharedPorts, installed.SharedPorts...)
	}
	return params, nil
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
		annotations, _, err := unstructured.NestedStringMap(gw.Object, "spec", "infrastructure", "annotations")
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("cannot read a Gateway's spec.infrastructure.annotations; it is left out of the audit", "gateway", klog.KObj(&gw), "error", err.Error())
			continue
		}
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
func nodeIssues(ctx context.Context, wc client.Client, a *sharednetv1.SharedNetworkAttachment, clusterSubnet infrav1.Subnet) ([]sharednetv1.WorkloadObjectIssue, error) {
	clusterCIDR, err := netip.ParsePrefix(clusterSubnet.CIDR)
	if err != nil {
		return nil, fmt.Errorf("no Node's InternalIP can be checked: the cluster subnet %s has CIDR %q in the OpenStackCluster's status, which does not parse: %w", clusterSubnet.ID, clusterSubnet.CIDR, err)
	}
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

// observeVMIngress is the VM-side audit of the attachment's subnet, as the
// SharedNetwork's last resync read it (sharedNetworks, read by params): the
// guardrails copy it and never ask the VM project. read is false, and the
// last answer is kept, when there is none yet; why is logged.
func observeVMIngress(ctx context.Context, a *sharednetv1.SharedNetworkAttachment, sharedNetworks map[string]*sharednetv1.SharedNetwork) (status sharednetv1.VMIngressStatus, read bool) {
	sn, ok := sharedNetworks[a.Spec.SharedNetwork]
	if !ok {
		return status, false // not read: WorkloadGuarded says so
	}
	subnet, ok := sn.Status.Subnet(a.Spec.Subnet)
	if !ok || subnet.VMPorts == nil || subnet.AdmittingVMPorts == nil {
		ctrl.LoggerFrom(ctx).V(4).Info("no count of the VM project's ports on the subnet yet (see the SharedNetwork's status); keeping the last answer",
			"attachment", klog.KObj(a), "sharedNetwork", sn.Name, "subnet", a.Spec.Subnet)
		return status, false
	}
	return vmIngress(subnet), true
}

// vmIngress reports whether the VM project's ports on the shared subnet
// accept traffic from the nodes (the seed: allow the shared subnet's range
// in the security groups of the VMs the cluster should reach), in counts:
// no ID of the VM project.
func vmIngress(subnet sharednetv1.SubnetStatus) sharednetv1.VMIngressStatus {
	ports, admitting := *subnet.VMPorts, *subnet.AdmittingVMPorts
	status := sharednetv1.VMIngressStatus{VMPorts: ptr.To(ports), AdmittingVMPorts: ptr.To(admitting),
		AdmittingRules: ptr.To(ptr.Deref(subnet.AdmittingIngressRules, 0))}
	counted := fmt.Sprintf("%d of %d VM ports on the subnet accept traffic from the nodes", admitting, ports)
	switch {
	case ports == 0:
		status.Admission = sharednetv1.VMIngressNoVMPorts
		status.Message = "the VM project has no port on the subnet (besides Neutron's and load balancers'): no virtual machine there to accept traffic from the nodes yet"
		return status
	case admitting >= ports:
		status.Admission, status.Message = sharednetv1.VMIngressAdmitted, counted
		return status
	case admitting == 0:
		status.Admission = sharednetv1.VMIngressRefused
		status.Message = fmt.Sprintf("%s; add an ingress rule for %s to their security groups", counted, subnet.CIDR)
	default:
		status.Admission = sharednetv1.VMIngressPartial
		status.Message = fmt.Sprintf("%s; add an ingress rule for %s to the security groups of the others the cluster should reach", counted, subnet.CIDR)
	}
	ether := 4
	if subnet.IPVersion == 6 {
		ether = 6
	}
	status.Suggestion = fmt.Sprintf("openstack security group rule create --ingress --ethertype IPv%d --remote-ip %s <security group of the VMs the cluster should reach>", ether, subnet.CIDR)
	return status
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

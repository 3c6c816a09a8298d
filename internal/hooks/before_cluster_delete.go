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

package hooks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/ccm"
	"github.com/capo-sharednet/capo-sharednet/internal/credentials"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

const (
	// retryDeleteAfter is how soon CAPI asks again while load balancers go.
	retryDeleteAfter = 10
	// DefaultCleanupDeadline bounds how long a cluster's deletion waits for
	// its load balancers: a project that cannot be reached, or a cloud
	// without Octavia, must not hold a deletion forever.
	DefaultCleanupDeadline = 10 * time.Minute
	cloudTimeout           = 20 * time.Second
)

// BeforeClusterDelete deletes this cluster's load balancers (made by its
// CCM, internal/ccm) whose VIP is on a shared subnet, cascade, and holds the
// deletion until they are gone: their VIP ports would otherwise keep the
// network shared with a project that no longer has this cluster. Other
// clusters' load balancers on the subnet, and ones nobody can be attributed
// to, are never deleted. The shares are released by the attachments'
// finalizers once CAPO has deleted the nodes' ports.
//
// It acts only for a Cluster that the API server says is being deleted: a
// forged or replayed call deletes nothing. After DefaultCleanupDeadline it
// lets the deletion go on, and says on the attachments and in an Event what
// was left behind and the command to remove it. A cluster with no attachment
// is answered at once, without any OpenStack call.
func (h *Handlers) BeforeClusterDelete(ctx context.Context, req *runtimehooksv1.BeforeClusterDeleteRequest, resp *runtimehooksv1.BeforeClusterDeleteResponse) {
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	key := client.ObjectKey{Namespace: req.Cluster.Namespace, Name: req.Cluster.Name}
	attachments := &sharednetv1.SharedNetworkAttachmentList{}
	if err := h.Reader.List(ctx, attachments, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}); err != nil {
		fail(resp, fmt.Errorf("listing the attachments of cluster %s: %w", key, err))
		return
	}
	if len(attachments.Items) == 0 {
		return
	}
	// The API server, not the request (nor a cache that may lag), says
	// whether the cluster is being deleted.
	cluster := &clusterv1.Cluster{}
	if err := h.APIReader.Get(ctx, key, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return
		}
		fail(resp, fmt.Errorf("reading cluster %s: %w", key, err))
		return
	}
	if cluster.DeletionTimestamp.IsZero() {
		resp.SetMessage(fmt.Sprintf("cluster %s is not being deleted: nothing was deleted", key))
		return
	}
	deadline := cluster.DeletionTimestamp.Add(h.cleanupDeadline())
	pending, left, err := h.removeLoadBalancers(ctx, cluster, attachments.Items)
	if err == nil && len(pending) == 0 {
		return
	}
	if h.now().Before(deadline) {
		resp.SetRetryAfterSeconds(retryDeleteAfter)
		if err != nil {
			resp.SetMessage(fmt.Sprintf("cannot remove the cluster's load balancers on shared subnets yet (%v); retrying until %s, then the deletion goes on without them", err, deadline.UTC().Format(time.RFC3339)))
			return
		}
		resp.SetMessage("deleting load balancers on shared subnets: " + strings.Join(pending, ", "))
		return
	}
	h.leftBehind(ctx, cluster, attachments.Items, left, err)
}

// removeLoadBalancers asks Octavia, with the cluster's credential, to
// delete this cluster's load balancers on the attachments' subnets.
func (h *Handlers) removeLoadBalancers(ctx context.Context, cluster *clusterv1.Cluster, attachments []sharednetv1.SharedNetworkAttachment) (pending, left []string, err error) {
	// Inside the hook's own 30 s: a slow cloud is a retry, not a failed call.
	ctx, cancel := context.WithTimeout(ctx, cloudTimeout)
	defer cancel()
	// The cluster's credential is opened (its Secret read) once, whatever
	// the number of shared networks its cloud is compared with.
	ctx = credentials.WithMemo(ctx)
	var cloud openstack.ClusterCloud
	var subnets []string
	for _, a := range attachments {
		if slices.Contains(subnets, a.Spec.Subnet) {
			continue
		}
		// Octavia's URL comes from the cluster's catalog: used only on the
		// cloud of each shared network (a tenant's own Keystone names any URL).
		sn := &sharednetv1.SharedNetwork{}
		if err := h.Reader.Get(ctx, client.ObjectKey{Name: a.Spec.SharedNetwork}, sn); err != nil {
			return nil, nil, fmt.Errorf("reading SharedNetwork %s: %w", a.Spec.SharedNetwork, err)
		}
		if cloud, err = credentials.ClusterOnCloudOf(ctx, credentials.In(ctx, h.Credentials), cluster, sn); err != nil {
			return nil, nil, fmt.Errorf("its OpenStack project cannot be reached: %w", err)
		}
		subnets = append(subnets, a.Spec.Subnet)
	}
	return deleteOwnLoadBalancers(ctx, cloud, ccm.ClusterName(cluster.Namespace, cluster.Name), subnets)
}

// deleteOwnLoadBalancers deletes, cascade, the load balancers on subnets
// that the CCM made for the cluster named me; pending are those not gone
// yet, left their IDs. Other clusters' and nobody's are never deleted.
func deleteOwnLoadBalancers(ctx context.Context, octavia openstack.LoadBalancers, me string, subnets []string) (pending, left []string, err error) {
	for _, subnet := range subnets {
		lbs, err := octavia.OnSubnet(ctx, subnet)
		if err != nil {
			return pending, left, err
		}
		for _, lb := range lbs {
			if ccm.OwnerOf(me, lb.Name, lb.Tags) != ccm.ThisCluster {
				continue // another cluster's, shared with one, or nobody's: never deleted here
			}
			left = append(left, lb.ID)
			pending = append(pending, fmt.Sprintf("%s (%s)", lb.Name, lb.VIP))
			if lb.Status == "PENDING_DELETE" {
				continue
			}
			if err := octavia.DeleteCascade(ctx, lb.ID); err != nil && !openstack.IsBusy(err) {
				return pending, left, err
			}
		}
	}
	return pending, left, nil
}

// leftBehind tells the cluster owner what the deletion could not remove.
func (h *Handlers) leftBehind(ctx context.Context, cluster *clusterv1.Cluster, attachments []sharednetv1.SharedNetworkAttachment, left []string, cause error) {
	what := "its load balancers on shared subnets could not be listed"
	if len(left) > 0 {
		what = "load balancers " + strings.Join(left, ", ") + " were left behind"
	}
	command := "openstack loadbalancer list --vip-subnet-id <shared subnet>, then openstack loadbalancer delete --cascade <id> for each of this cluster's (named kube_service_" + ccm.ClusterName(cluster.Namespace, cluster.Name) + "_...)"
	if len(left) > 0 {
		command = "openstack loadbalancer delete --cascade " + strings.Join(left, " ")
	}
	message := fmt.Sprintf("the deletion went on after %s: %s", h.cleanupDeadline(), what)
	if cause != nil {
		message += fmt.Sprintf(" (%v)", cause)
	}
	message += "; with the cluster's project credential run: " + command
	if h.Recorder != nil {
		h.Recorder.Event(cluster, corev1.EventTypeWarning, sharednetv1.ReasonLeftBehind, message)
	}
	for i := range attachments {
		// This hook owns LoadBalancersRemoved only: CAPI's patch helper
		// leaves the controllers' conditions as they are.
		a := &attachments[i]
		helper, err := patch.NewHelper(a, h.Client)
		if err == nil {
			conditions.Set(a, sharednetv1.NewCondition(sharednetv1.LoadBalancersRemovedCondition, metav1.ConditionFalse, sharednetv1.ReasonLeftBehind, message))
			err = helper.Patch(ctx, a, patch.WithOwnedConditions{Conditions: []string{sharednetv1.LoadBalancersRemovedCondition}})
		}
		if err != nil {
			// The deletion goes on either way; the Event says the same.
			ctrl.LoggerFrom(ctx).Error(err, "recording what the deletion left behind", "attachment", a.Name)
		}
	}
}

func (h *Handlers) cleanupDeadline() time.Duration {
	if h.CleanupDeadline > 0 {
		return h.CleanupDeadline
	}
	return DefaultCleanupDeadline
}

func (h *Handlers) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

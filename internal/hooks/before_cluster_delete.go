package hooks

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// retryDeleteAfter is how soon CAPI asks again while load balancers go.
const retryDeleteAfter = 10

// BeforeClusterDelete deletes the cluster project's load balancers whose VIP
// is on a shared subnet (cascade) and holds the deletion until they are gone:
// their VIP ports would otherwise keep the network shared with a project that
// no longer has a cluster. The shares themselves are released by the
// attachments' finalizers once CAPO has deleted the nodes' ports. A cluster
// with no attachment is answered at once, without any OpenStack call.
func (h *Handlers) BeforeClusterDelete(ctx context.Context, req *runtimehooksv1.BeforeClusterDeleteRequest, resp *runtimehooksv1.BeforeClusterDeleteResponse) {
	key := client.ObjectKey{Namespace: req.Cluster.Namespace, Name: req.Cluster.Name}
	attachments := &sharednetv1.SharedNetworkAttachmentList{}
	if err := h.Reader.List(ctx, attachments, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}); err != nil {
		fail(resp, fmt.Errorf("listing the attachments of cluster %s: %w", key, err))
		return
	}
	if len(attachments.Items) == 0 {
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		return
	}
	cluster := &clusterv1.Cluster{}
	if err := h.Reader.Get(ctx, key, cluster); err != nil {
		fail(resp, fmt.Errorf("reading cluster %s: %w", key, err))
		return
	}
	session, _, err := h.Credentials.ForCluster(ctx, cluster)
	if err != nil {
		fail(resp, fmt.Errorf("cluster %s has load balancers to remove from its shared subnets but its project cannot be reached: %w", key, err))
		return
	}
	var pending []string
	for _, a := range attachments.Items {
		lbs, err := session.OnSubnet(ctx, a.Spec.Subnet)
		if err != nil {
			fail(resp, err)
			return
		}
		for _, lb := range lbs {
			if err := session.DeleteCascade(ctx, lb.ID); err != nil {
				fail(resp, err)
				return
			}
			pending = append(pending, fmt.Sprintf("%s (%s)", lb.Name, lb.VIP))
		}
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	if len(pending) > 0 {
		resp.SetRetryAfterSeconds(retryDeleteAfter)
		resp.SetMessage("deleting load balancers on shared subnets: " + strings.Join(pending, ", "))
	}
}

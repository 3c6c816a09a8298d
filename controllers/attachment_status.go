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
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// condition sets a condition of the attachment and, when its status or
// reason changed, says so in an Event on the Cluster and the attachment.
func (r *AttachmentReconciler) condition(a *sharednetv1.SharedNetworkAttachment, cluster *clusterv1.Cluster, kind string, status metav1.ConditionStatus, reason, message string) {
	// A copy: Set updates the condition in place.
	var old *metav1.Condition
	if c := conditions.Get(a, kind); c != nil {
		old = c.DeepCopy()
	}
	conditions.Set(a, sharednetv1.NewCondition(kind, status, reason, message))
	if status != metav1.ConditionTrue {
		a.Status.Message = message
	}
	if old == nil || old.Status != status || old.Reason != reason {
		eventType := corev1.EventTypeNormal
		if status == metav1.ConditionFalse && reason != sharednetv1.ReasonRollingOut && reason != sharednetv1.ReasonDetaching {
			eventType = corev1.EventTypeWarning
		}
		if cluster != nil {
			r.Recorder.Eventf(cluster, eventType, reason, "nodegroup %s: %s", a.Spec.MachineDeploymentTopology, message)
		}
		if a.UID != "" {
			r.Recorder.Event(a, eventType, reason, message)
		}
	}
}

// ownedConditions are the attachment's conditions this controller writes;
// the guardrails' (WorkloadGuarded) and the hooks' (LoadBalancersRemoved)
// are theirs.
var ownedConditions = []string{
	sharednetv1.AttachmentReadyCondition, sharednetv1.SharedCondition, sharednetv1.AttachedCondition, sharednetv1.GrantedCondition,
	sharednetv1.CloudFitsCondition, sharednetv1.PausedCondition, sharednetv1.DeletingCondition,
}

// patchAttachment writes what this controller found, with Paused and the
// Ready summary, through CAPI's patch helper: only the fields that changed
// are sent and only its own conditions are taken as authoritative, so the
// guardrails' findings written in between are kept.
// statusWriteTimeout bounds a status write past the reconcile's deadline.
const statusWriteTimeout = 30 * time.Second

func (r *AttachmentReconciler) patchAttachment(ctx context.Context, helper *patch.Helper, cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment) error {
	conditions.Set(a, pausedCondition(cluster, a))
	setReady(a)
	// What a reconcile found is written even when its deadline
	// (--reconcile-timeout) ended it: a slow cloud's reason is reported.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
	defer cancel()
	if err := helper.Patch(ctx, a, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithStatusObservedGeneration{}); err != nil {
		return fmt.Errorf("writing the status of SharedNetworkAttachment %s: %w", a.Name, err)
	}
	return nil
}

// setReady summarizes the attach into Ready with CAPI's util/conditions:
// False while any of Shared, Attached, Granted, CloudFits is False or
// Deleting is True, Unknown while one is not reported yet.
func setReady(a *sharednetv1.SharedNetworkAttachment) {
	err := conditions.SetSummaryCondition(a, a, sharednetv1.AttachmentReadyCondition,
		conditions.ForConditionTypes{sharednetv1.SharedCondition, sharednetv1.AttachedCondition, sharednetv1.GrantedCondition,
			sharednetv1.CloudFitsCondition, sharednetv1.DeletingCondition},
		// Granted and CloudFits are checked only once the grant is known
		// and the nodegroup is rolling out.
		conditions.IgnoreTypesIfMissing{sharednetv1.GrantedCondition, sharednetv1.CloudFitsCondition},
		conditions.CustomMergeStrategy{MergeStrategy: conditions.DefaultMergeStrategy(
			conditions.GetPriorityFunc(conditions.GetDefaultMergePriorityFunc(sharednetv1.DeletingCondition)),
			conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(sharednetv1.ReasonNotReady, sharednetv1.ReasonReadyUnknown, sharednetv1.ReasonReady)),
		)},
	)
	if err != nil { // only with a wrong list of types above
		conditions.Set(a, sharednetv1.NewCondition(sharednetv1.AttachmentReadyCondition, metav1.ConditionUnknown, sharednetv1.ReasonReadyUnknown, err.Error()))
	}
}

// clusterPaused: the Cluster's spec.paused or CAPI's paused annotation on it
// (clusterctl move sets both).
func clusterPaused(cluster *clusterv1.Cluster) bool {
	return cluster != nil && annotations.IsPaused(cluster, cluster)
}

// pausedCondition is CAPI's Paused condition for an attachment: True when
// the Cluster is paused or the attachment has CAPI's paused annotation.
// (CAPI's paused.EnsurePausedCondition does not honour the annotation on the
// Cluster, which this controller reconciles, so it is not used.)
func pausedCondition(cluster *clusterv1.Cluster, a *sharednetv1.SharedNetworkAttachment) metav1.Condition {
	var why []string
	if cluster != nil && ptr.Deref(cluster.Spec.Paused, false) {
		why = append(why, "Cluster spec.paused is set to true")
	}
	if cluster != nil && annotations.HasPaused(cluster) {
		why = append(why, "Cluster has the "+clusterv1.PausedAnnotation+" annotation")
	}
	if annotations.HasPaused(a) {
		why = append(why, "SharedNetworkAttachment has the "+clusterv1.PausedAnnotation+" annotation")
	}
	if len(why) == 0 {
		return sharednetv1.NewCondition(sharednetv1.PausedCondition, metav1.ConditionFalse, sharednetv1.ReasonNotPaused, "")
	}
	return sharednetv1.NewCondition(sharednetv1.PausedCondition, metav1.ConditionTrue, sharednetv1.ReasonPaused,
		strings.Join(why, ", ")+": nothing is shared, rolled out or unshared until it is resumed")
}

// recordPaused writes Paused (and Ready, which does not change with it) on
// an attachment that is left alone.
func (r *AttachmentReconciler) recordPaused(ctx context.Context, a *sharednetv1.SharedNetworkAttachment, paused metav1.Condition) error {
	if c := conditions.Get(a, sharednetv1.PausedCondition); c != nil && conditions.HasSameState(c, &paused) {
		return nil
	}
	helper, err := patch.NewHelper(a, r.Client)
	if err != nil {
		return err
	}
	conditions.Set(a, paused)
	if err := helper.Patch(ctx, a, patch.WithOwnedConditions{Conditions: []string{sharednetv1.PausedCondition}}); err != nil {
		return fmt.Errorf("writing the status of SharedNetworkAttachment %s: %w", a.Name, err)
	}
	return nil
}

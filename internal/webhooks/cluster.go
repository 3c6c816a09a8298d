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

// Package webhooks holds the admission webhook on Clusters that runs the
// preflight rules on every path that can make a nodegroup need what the
// cloud cannot give: a `sharedNetwork` value set (also at creation), changed
// or removed, an attached nodegroup's growth and a version change, so bad
// input is refused before anything changes.
package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// ClusterPath is where the Cluster admission webhook is served.
const ClusterPath = "/validate-sharednet-cluster"

// decisionBudget bounds one decision, every live lookup included, below the
// webhook's timeoutSeconds (10, config/webhook): the cluster owner gets
// "cannot verify …, nothing was changed" rather than the API server's
// timeout.
const decisionBudget = 8 * time.Second

// ClusterValidator refuses a Cluster create or update whose `sharedNetwork`
// values break a rule.
type ClusterValidator struct {
	Checker *preflight.Checker
	Decoder admission.Decoder
	// CAPIManagers are the users CAPI's managers run as (--capi-manager-user):
	// only they may set CAPI's ok-to-delete annotation on a Cluster that uses
	// a shared network; DefaultCAPIManager when empty.
	CAPIManagers []string
}

// NewClusterWebhook returns the webhook to register at ClusterPath.
func NewClusterWebhook(checker *preflight.Checker, scheme *runtime.Scheme, capiManagers ...string) *admission.Webhook {
	return &admission.Webhook{Handler: &ClusterValidator{Checker: checker, Decoder: admission.NewDecoder(scheme), CAPIManagers: capiManagers}}
}

// Handle implements admission.Handler.
func (v *ClusterValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	cluster := &clusterv1.Cluster{}
	if err := v.Decoder.DecodeRaw(req.Object, cluster); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	old := &clusterv1.Cluster{}
	if req.Operation == admissionv1.Update {
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if msg := v.keepsDeletionHook(req.UserInfo, old, cluster); msg != "" {
		return admission.Denied(msg)
	}
	ctx, cancel := context.WithTimeout(ctx, decisionBudget)
	defer cancel()
	if refusal := v.Checker.Admission(ctx, old, cluster); len(refusal) > 0 {
		return admission.Denied(refusal.Error())
	}
	return admission.Allowed("")
}

// DefaultCAPIManager is the user CAPI's manager runs as when clusterctl
// installs it (ServiceAccount capi-manager in capi-system).
const DefaultCAPIManager = "system:serviceaccount:capi-system:capi-manager"

// keepsDeletionHook refuses CAPI's ok-to-delete annotation from anyone but
// CAPI (or system:masters) on a Cluster that uses a shared network: CAPI
// skips BeforeClusterDelete for a Cluster that carries it, and with the hook
// go the deletion of the cluster's load balancers on the shared subnet and
// the unshare. CAPI sets it only once the hook has answered, on a Cluster
// being deleted. An annotation already there when the Cluster starts to use
// a shared network is refused too: nobody can say who set it.
func (v *ClusterValidator) keepsDeletionHook(user authenticationv1.UserInfo, old, cluster *clusterv1.Cluster) string {
	_, has := cluster.Annotations[runtimev1.OkToDeleteAnnotation]
	if !has || !usesSharedNetwork(cluster) {
		return ""
	}
	_, had := old.Annotations[runtimev1.OkToDeleteAnnotation]
	if had && usesSharedNetwork(old) {
		return "" // admitted with it before (CAPI set it during the deletion)
	}
	managers := v.CAPIManagers
	if len(managers) == 0 {
		managers = []string{DefaultCAPIManager}
	}
	if slices.Contains(managers, user.Username) || slices.Contains(user.Groups, "system:masters") {
		return ""
	}
	return fmt.Sprintf("metadata.annotations[%s] is set by CAPI once the BeforeClusterDelete hooks have answered; on Cluster %s, which uses a shared network, "+
		"it would skip the hook that deletes the cluster's load balancers on the shared subnet and stops sharing the network. Remove the annotation: "+
		"deleting the Cluster calls the hook, which does both", runtimev1.OkToDeleteAnnotation, cluster.Name)
}

// usesSharedNetwork says whether a nodegroup of c sets sharedNetwork (an
// unreadable value counts: it may).
func usesSharedNetwork(c *clusterv1.Cluster) bool {
	values, err := variables.Nodegroups(c)
	return err != nil || len(values) > 0
}

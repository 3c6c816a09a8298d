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
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
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
}

// NewClusterWebhook returns the webhook to register at ClusterPath.
func NewClusterWebhook(checker *preflight.Checker, scheme *runtime.Scheme) *admission.Webhook {
	return &admission.Webhook{Handler: &ClusterValidator{Checker: checker, Decoder: admission.NewDecoder(scheme)}}
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
	ctx, cancel := context.WithTimeout(ctx, decisionBudget)
	defer cancel()
	if refusal := v.Checker.Admission(ctx, old, cluster); len(refusal) > 0 {
		return admission.Denied(refusal.Error())
	}
	return admission.Allowed("")
}

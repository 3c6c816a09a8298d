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
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capo-sharednet/capo-sharednet/internal/attachments"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
	"github.com/capo-sharednet/capo-sharednet/internal/variables"
)

// ValidateTopology is the backstop of admission: it refuses a cluster-level
// `sharedNetwork` value, and re-checks the static rules for nodegroups that
// are not attached yet. A nodegroup already attached is never failed here
// because the cloud changed: wedging a running cluster's topology
// reconciliation would help nobody (the controller reports it instead).
func (h *Handlers) ValidateTopology(ctx context.Context, req *runtimehooksv1.ValidateTopologyRequest, resp *runtimehooksv1.ValidateTopologyResponse) {
	if v, err := variables.FromHookVariables(req.Variables); err != nil {
		fail(resp, err)
		return
	} else if v != nil {
		fail(resp, rules.Refusal(rules.Evaluate(rules.Facts{ClusterLevel: true})))
		return
	}
	b, err := clusterBuiltins(req.Variables)
	if err != nil {
		fail(resp, err)
		return
	}
	cluster := &clusterv1.Cluster{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Name}, cluster); err != nil {
		fail(resp, fmt.Errorf("reading Cluster %s/%s: %w", b.Namespace, b.Name, err))
		return
	}
	var refusal rules.Refusal
	var errs []error
	for _, item := range req.Items {
		if item == nil || !isMachineDeploymentInfraTemplate(item.HolderReference) {
			continue
		}
		d, err := h.judgeTopology(ctx, cluster, item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		refusal = append(refusal, d.Refusal...)
	}
	if err := errors.Join(errs...); err != nil {
		fail(resp, err)
		return
	}
	if err := refusal.Err(); err != nil {
		fail(resp, err)
		return
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

// judgeTopology asks the decision service about one MachineDeployment's
// template, unless it is attached already (then nothing is judged here).
func (h *Handlers) judgeTopology(ctx context.Context, cluster *clusterv1.Cluster, item *runtimehooksv1.ValidateTopologyRequestItem) (preflight.Decision, error) {
	value, err := variables.FromHookVariables(item.Variables)
	if err != nil {
		return preflight.Decision{}, err
	}
	if value == nil {
		return preflight.Decision{}, nil // no value of this nodegroup's own: nothing to judge
	}
	md, err := machineDeploymentBuiltins(item.Variables)
	if err != nil {
		// Fail closed: a value whose nodegroup cannot be told is not admitted unjudged.
		return preflight.Decision{}, fmt.Errorf("MachineDeployment %s sets sharedNetwork but its builtin variables cannot be read, so the value cannot be judged: %w",
			item.HolderReference.Name, err)
	}
	topology := md.TopologyName
	attached, err := h.attached(ctx, cluster, topology, item.HolderReference)
	if err != nil || attached {
		return preflight.Decision{}, err
	}
	d, err := h.preflight().Decide(ctx, preflight.Question{Ask: preflight.Topology, Cluster: cluster, Nodegroup: topology, Value: *value})
	if err != nil {
		return d, fmt.Errorf("MachineDeployment topology %q: %w", topology, err)
	}
	return d, nil
}

// attached says whether the nodegroup already runs with, or is entitled to,
// the shared port.
func (h *Handlers) attached(ctx context.Context, cluster *clusterv1.Cluster, topology string, holder runtimehooksv1.HolderReference) (bool, error) {
	carried, _, err := h.carriedPort(ctx, holder)
	if err != nil || carried != nil {
		return carried != nil, err
	}
	attachment, err := attachments.Get(ctx, h.Reader, cluster.Namespace, cluster.Name, topology)
	return attachment != nil && attachment.ShareEstablished(), err
}

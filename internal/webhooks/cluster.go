// Package webhooks holds the admission webhook on Clusters that runs the
// preflight rules on every path that can make a nodegroup need what the
// cloud cannot give: a `sharedNetwork` value set (also at creation), changed
// or removed, an attached nodegroup's growth and a version change, so bad
// input is refused before anything changes.
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
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
	if err := v.validate(ctx, old, cluster); err != nil {
		return admission.Denied(refusal(err))
	}
	return admission.Allowed("")
}

func (v *ClusterValidator) validate(ctx context.Context, old, cluster *clusterv1.Cluster) error {
	if !cluster.Spec.Topology.IsDefined() {
		return nil
	}
	var errs []error
	newLevel, err := variables.FromClusterVariables(cluster.Spec.Topology.Variables)
	if err != nil {
		return err
	}
	oldLevel, _ := variables.FromClusterVariables(old.Spec.Topology.Variables)
	if newLevel != nil && !reflect.DeepEqual(newLevel, oldLevel) {
		errs = append(errs, preflight.ClusterLevel(cluster))
	}

	now, err := variables.Nodegroups(cluster)
	if err != nil {
		return err
	}
	before, err := variables.Nodegroups(old)
	if err != nil {
		before = nil // an unreadable old value is replaced: check the new one only
	}
	for _, topology := range sortedKeys(before) {
		if value, ok := now[topology]; !ok || value != before[topology] {
			if err := v.Checker.Detach(ctx, old, topology); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, topology := range sortedKeys(now) {
		prev, had := before[topology]
		if had && prev == now[topology] {
			// An attached nodegroup that may take more addresses (replicas,
			// the autoscaler's max size, its failure domain) is checked for
			// room on the subnet: nodes without an address never join.
			grows, err := preflight.Grows(old, cluster, topology)
			if err != nil {
				errs = append(errs, err)
			} else if grows {
				if err := v.Checker.Grow(ctx, cluster, topology, now[topology]); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		if had && prev.Name != now[topology].Name {
			// One share per network: moving an attached nodegroup to another
			// network in one step would roll it with neither port working.
			errs = append(errs, &preflight.NodegroupError{Topology: topology, Err: &rules.Violation{Rule: "one-network", Field: "sharedNetwork.name",
				Message: fmt.Sprintf("the nodegroup is attached to SharedNetwork %q; a nodegroup uses one shared network: remove the variable (detach) first, then set it to %q", prev.Name, now[topology].Name)}})
			continue
		}
		if err := v.Checker.Attach(ctx, cluster, topology, now[topology], preflight.All); err != nil {
			errs = append(errs, err)
		}
	}
	// An upgrade or downgrade of an attached cluster must stay on a supported version.
	if len(now) > 0 && cluster.Spec.Topology.Version != old.Spec.Topology.Version {
		if v := rules.Version(cluster.Spec.Topology.Version); v != nil {
			errs = append(errs, fmt.Errorf("spec.topology.version: %w (nodegroups %s are attached to a shared network)", v, strings.Join(sortedKeys(now), ", ")))
		}
	}
	return errors.Join(errs...)
}

// refusal is the message a cluster owner reads: every problem, one per line.
func refusal(err error) string {
	var lines []string
	for _, e := range flatten(err) {
		lines = append(lines, "- "+e.Error())
	}
	return "sharedNetwork refused, nothing was changed:\n" + strings.Join(lines, "\n")
}

func flatten(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	var ng *preflight.NodegroupError
	if errors.As(err, &ng) {
		if joined, ok := ng.Err.(interface{ Unwrap() []error }); ok {
			var out []error
			for _, e := range joined.Unwrap() {
				out = append(out, &preflight.NodegroupError{Topology: ng.Topology, Err: e})
			}
			return out
		}
	}
	return []error{err}
}

func sortedKeys(m map[string]sharednetv1.SharedNetworkVariable) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

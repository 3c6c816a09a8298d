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

// Package guardrails makes the seed's Service and Gateway mistakes impossible
// in a workload cluster with an attached nodegroup: a ValidatingAdmissionPolicy,
// evaluated by the workload cluster's own API server, refuses a load balancer
// on a shared subnet that would be public or could not reach any node, and
// refuses editing the annotations the cloud controller manager reads only at
// creation. Alpha, behind the manager's feature gate
// (--feature-gates=WorkloadGuardrails=true, internal/feature).
package guardrails

import (
	"regexp"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The annotations the OpenStack cloud controller manager reads when it creates
// a Service's load balancer (and the Envoy Gateway addon copies from a Gateway).
const (
	InternalAnnotation     = "service.beta.kubernetes.io/openstack-internal-load-balancer"
	SubnetAnnotation       = "loadbalancer.openstack.org/subnet-id"
	MemberSubnetAnnotation = "loadbalancer.openstack.org/member-subnet-id"
	// NetworkAnnotation and PortAnnotation also place the VIP (on a network's
	// first subnet, or on a given port): on a shared network they need the
	// same two annotations as SubnetAnnotation.
	NetworkAnnotation = "loadbalancer.openstack.org/network-id"
	PortAnnotation    = "loadbalancer.openstack.org/port-id"
)

// Names of the objects installed in the workload cluster.
const (
	PolicyName = "capo-sharednet-shared-subnet-load-balancers"
	// ParamsName is the ConfigMap (in ParamsNamespace) recording, for people
	// and tools, the values the policy was compiled with (the policy does not
	// read it: see Objects).
	ParamsName      = "capo-sharednet-guardrails"
	ParamsNamespace = "kube-system"
	// ManagedByLabel says who owns these objects in the workload cluster.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "capo-sharednet"

	sharedSubnetsKey  = "sharedSubnets"
	sharedNetworksKey = "sharedNetworks"
	sharedPortsKey    = "sharedPorts"
	clusterSubnetKey  = "clusterSubnet"
)

// Params are what the policy checks against.
type Params struct {
	SharedSubnets []string
	// SharedNetworks are the networks of the shared subnets.
	SharedNetworks []string
	// SharedPorts are the cluster project's ports on the shared networks
	// (a Service may name one as its VIP port); refreshed by the controller.
	SharedPorts   []string
	ClusterSubnet string
}

// OnShared says whether annotations place a load balancer's VIP on a shared
// subnet, network or port (the same test as the policy's).
func (p Params) OnShared(annotations map[string]string) bool {
	for key, shared := range map[string][]string{SubnetAnnotation: p.SharedSubnets, NetworkAnnotation: p.SharedNetworks, PortAnnotation: p.SharedPorts} {
		if v, ok := annotations[key]; ok && slices.Contains(shared, v) {
			return true
		}
	}
	return false
}

// sortedIDs is items sorted, once each, keeping only OpenStack ID-like
// values: they are compiled into CEL (a port ID comes from the cluster
// project's Neutron, which the tenant's clouds.yaml names).
func sortedIDs(items []string) []string {
	var out []string
	for _, item := range items {
		if idLike.MatchString(item) {
			out = append(out, item)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

var idLike = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,254}$`)

// celList is a CEL list literal of the ID-like items.
func celList(items []string) string {
	quoted := make([]string, 0, len(items))
	for _, item := range sortedIDs(items) {
		quoted = append(quoted, celString(item))
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// celString is a CEL string literal of an ID-like value, ” for any other.
func celString(id string) string {
	if !idLike.MatchString(id) {
		return "''"
	}
	return "'" + id + "'"
}

func joinSorted(items []string) string {
	out := slices.Clone(items)
	sort.Strings(out)
	return strings.Join(slices.Compact(out), ",")
}

// Objects returns the policy, its binding and the record of its values for
// a workload cluster. The values are compiled into the policy, not read from
// the ConfigMap through a paramKind: kube-apiserver stops the informer of a
// built-in paramKind for good once no binding names it for a moment (the
// last attachment detached), and a binding made later resolves no
// parameters (kubernetes/kubernetes#130887, #133827), which with
// parameterNotFoundAction Allow silently admitted every public load balancer
// until the API server restarted.
func Objects(p Params) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, *corev1.ConfigMap) {
	labels := map[string]string{ManagedByLabel: ManagedBy}
	params := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ParamsName, Namespace: ParamsNamespace, Labels: labels},
		Data: map[string]string{sharedSubnetsKey: joinSorted(p.SharedSubnets), sharedNetworksKey: joinSorted(p.SharedNetworks),
			sharedPortsKey: joinSorted(p.SharedPorts), clusterSubnetKey: p.ClusterSubnet},
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
				}},
				{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"gateway.networking.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"gateways"}},
				}},
			}},
			Variables: []admissionregistrationv1.Variable{
				{Name: "annotations", Expression: annotationsOf("object")},
				{Name: "old", Expression: "oldObject == null ? {} : " + annotationsOf("oldObject")},
				{Name: "shared", Expression: celList(p.SharedSubnets)},
				{Name: "sharedNetworks", Expression: celList(p.SharedNetworks)},
				{Name: "sharedPorts", Expression: celList(p.SharedPorts)},
				{Name: "clusterSubnet", Expression: celString(p.ClusterSubnet)},
				{Name: "loadBalancer", Expression: "object.kind != 'Service' || (has(object.spec.type) && object.spec.type == 'LoadBalancer')"},
				{Name: "onShared", Expression: "variables.loadBalancer && " + placedOnShared("variables.annotations")},
				{Name: "wasOnShared", Expression: placedOnShared("variables.old")},
			},
			Validations: validations(),
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        PolicyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return policy, binding, params
}

// ParamsOf reads the values a policy was compiled with back from its record,
// the ConfigMap Objects returns with it.
func ParamsOf(record *corev1.ConfigMap) Params {
	split := func(key string) []string {
		var out []string
		for _, v := range strings.Split(record.Data[key], ",") {
			if v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	return Params{SharedSubnets: split(sharedSubnetsKey), SharedNetworks: split(sharedNetworksKey),
		SharedPorts: split(sharedPortsKey), ClusterSubnet: record.Data[clusterSubnetKey]}
}

// annotationsOf is a Service's metadata.annotations, or a Gateway's
// spec.infrastructure.annotations (what Envoy Gateway puts on its Service).
func annotationsOf(obj string) string {
	return obj + ".kind == 'Service' ? (has(" + obj + ".metadata.annotations) ? " + obj + ".metadata.annotations : {}) : " +
		"((has(" + obj + ".spec.infrastructure) && has(" + obj + ".spec.infrastructure.annotations)) ? " + obj + ".spec.infrastructure.annotations : {})"
}

// placedOnShared: the annotations place the VIP on a shared subnet, network or port.
func placedOnShared(annotations string) string {
	in := func(key, list string) string {
		return "('" + key + "' in " + annotations + " && " + annotations + "['" + key + "'] != '' && " + annotations + "['" + key + "'] in variables." + list + ")"
	}
	return "(" + in(SubnetAnnotation, "shared") + " || " + in(NetworkAnnotation, "sharedNetworks") + " || " + in(PortAnnotation, "sharedPorts") + ")"
}

func unchanged(key string) string {
	return "(('" + key + "' in variables.annotations) == ('" + key + "' in variables.old) && (!('" + key + "' in variables.annotations) || variables.annotations['" + key + "'] == variables.old['" + key + "']))"
}

// validations are the policy's three rules: internal, members on the
// cluster's own subnet, the annotations not edited.
func validations() []admissionregistrationv1.Validation {
	return []admissionregistrationv1.Validation{
		{
			Expression: "!variables.onShared || ('" + InternalAnnotation + "' in variables.annotations && variables.annotations['" + InternalAnnotation + "'] == 'true')",
			Message: "a load balancer on a shared subnet must be internal: set the annotation " + InternalAnnotation +
				`: "true" (without it the load balancer gets a public IP and is reachable from the internet)`,
			Reason: ptr.To(metav1.StatusReasonInvalid),
		},
		{
			Expression: "!variables.onShared || ('" + MemberSubnetAnnotation + "' in variables.annotations && variables.annotations['" + MemberSubnetAnnotation + "'] == variables.clusterSubnet)",
			MessageExpression: "'a load balancer on a shared subnet must reach the nodes on the cluster\\'s own subnet: set the annotation " + MemberSubnetAnnotation +
				": ' + variables.clusterSubnet + ' (without it the load balancer accepts connections but cannot reach any node, so every request fails)'",
			Reason: ptr.To(metav1.StatusReasonInvalid),
		},
		{
			Expression: "request.operation != 'UPDATE' || !(variables.onShared || variables.wasOnShared) || " +
				unchanged(InternalAnnotation) + " && " + unchanged(SubnetAnnotation) + " && " + unchanged(MemberSubnetAnnotation) +
				" && " + unchanged(NetworkAnnotation) + " && " + unchanged(PortAnnotation),
			Message: "the annotations " + InternalAnnotation + ", " + SubnetAnnotation + " (or " + NetworkAnnotation + ", " + PortAnnotation + ") and " + MemberSubnetAnnotation +
				" are read only when the load balancer is created: to change them, delete this object and create it again",
			Reason: ptr.To(metav1.StatusReasonInvalid),
		},
	}
}

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

package rules

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NotOffered is the refusal of a SharedNetwork that does not exist and of
// one that does not grant the namespace, word for word the same: a
// namespace learns nothing of the shared networks it may not use, not even
// their names (the administrator reads the namespaceSelector).
func NotOffered(sharedNetwork, namespace string) *Violation {
	return &Violation{
		Rule:  RuleGranted,
		Field: FieldName,
		Message: fmt.Sprintf("SharedNetwork %q does not exist or is not granted to namespace %q; ask the management-cluster administrator which shared networks your namespace may use",
			sharedNetwork, namespace),
	}
}

// Granted checks that the cluster's namespace may use SharedNetwork
// sharedNetwork and, when subnet is non-empty, that subnet is one of the
// network's allowed subnets.
//
// A nil selector grants no namespace; an empty selector ({}) grants every
// namespace. An invalid selector grants nothing. A namespace that is not
// granted reads NotOffered, as for a SharedNetwork that does not exist. An
// empty subnet is not checked here (OneSubnet chooses it).
func Granted(sharedNetwork string, selector *metav1.LabelSelector, namespace string, namespaceLabels map[string]string, allowedSubnets []string, subnet string) *Violation {
	if selector == nil {
		return NotOffered(sharedNetwork, namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return NotOffered(sharedNetwork, namespace)
	}
	set := labels.Set{}
	for k, v := range namespaceLabels {
		set[k] = v
	}
	// The API server sets the name label on every namespace; added when
	// missing so that selecting a namespace by name always works.
	if _, ok := set[corev1.LabelMetadataName]; !ok {
		set[corev1.LabelMetadataName] = namespace
	}
	if !sel.Matches(set) {
		return NotOffered(sharedNetwork, namespace)
	}
	if subnet != "" && !contains(allowedSubnets, subnet) {
		return &Violation{
			Rule:  RuleGranted,
			Field: FieldSubnet,
			Message: fmt.Sprintf("subnet %q is not allowed on SharedNetwork %q (allowed: %s); set sharedNetwork.subnet to an allowed subnet, or ask an administrator to add it to the SharedNetwork",
				subnet, sharedNetwork, list(allowedSubnets)),
		}
	}
	return nil
}

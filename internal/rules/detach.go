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
	"strings"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// Detach checks that no load balancer of the cluster's project is left on the
// shared subnet before the nodegroup is detached: while one exists, the
// network cannot be unshared or deleted.
func Detach(subnet string, lbs []sharednetv1.LoadBalancer) *Violation {
	if len(lbs) == 0 {
		return nil
	}
	items := make([]string, 0, len(lbs))
	for _, lb := range lbs {
		name := lb.Name
		if name == "" {
			name = lb.ID
		}
		s := fmt.Sprintf("%s (VIP %s", name, lb.VIP)
		if lb.Service != "" {
			s += ", Service " + lb.Service
		}
		items = append(items, s+")")
	}
	return &Violation{
		Rule:  RuleDetach,
		Field: "sharedNetwork",
		Message: fmt.Sprintf("shared subnet %s still has %d load balancer(s) of the cluster, and the network cannot be unshared while one exists: %s; delete these Services and Gateways first, then remove the variable again",
			subnet, len(lbs), strings.Join(items, "; ")),
	}
}

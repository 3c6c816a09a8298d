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

import "fmt"

// PolicyQuota is the VM project's quota of RBAC policies and its use;
// Limit -1 is unlimited.
type PolicyQuota struct {
	Used, Limit int
}

// ShareQuota checks that the VM project can make the share a nodegroup's
// attach needs: every cluster project a network is shared with takes one
// RBAC policy of the VM project (across all its networks; Neutron's default
// quota is 10), and Neutron would refuse the share long after admission
// said yes. An attach whose project already has a share of the network
// (newShare false) needs none.
func ShareQuota(network string, quota PolicyQuota, newShare bool) *Violation {
	if !newShare || quota.Limit < 0 || quota.Used < quota.Limit {
		return nil
	}
	return &Violation{Rule: RuleShareQuota, Field: FieldName, Message: fmt.Sprintf(
		"sharing SharedNetwork %s with this cluster's project needs one more RBAC policy, but its VM project uses %d of %d RBAC policies; "+
			"ask the cloud operator to raise quota rbac_policy of the VM project, or detach a project that no longer needs a network of it",
		network, quota.Used, quota.Limit)}
}

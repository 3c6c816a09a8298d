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

// Package rules holds the preflight rules for attaching a nodegroup (one
// MachineDeployment topology) to a shared network, and for detaching it again.
//
// Every rule is one small pure function: it gets the facts it needs as plain
// values (read by the caller from the Cluster, the SharedNetwork status, the
// ClusterClass variable and, where needed, OpenStack) and returns nil or a
// *Violation that names the rule, the values found and what to change. The
// rules do no I/O and use no Kubernetes client.
//
// The same functions are called by the validating admission webhook on
// Cluster (which refuses the change with the violation's message, prefixed by
// the MachineDeployment topology name) and by the ValidateTopology hook, so a
// change is judged the same way wherever it is checked. Following the
// project's principle "reject at admission; never wedge a running cluster",
// callers re-check only nodegroups that are not attached yet and report rules
// broken later by cloud changes as conditions, not as failures.
//
// The rules and the promises of the product they enforce:
//
//   - Granted:   the cluster's namespace may use the SharedNetwork and the subnet is allowed.
//   - OneSubnet: a nodegroup reaches one subnet of one network.
//   - Version:   Kubernetes v1.35.0 or later.
//   - Overlap:   the subnet does not overlap the cluster's node, pod or service ranges.
//   - Capacity:  room for one address per node at maximum size plus one per availability zone.
//   - MTU:       the shared network has the cluster network's MTU.
//   - Detach:    no load balancer is left on the shared subnet before detaching.
//
// Beware of the typed-nil trap: a nil *Violation stored in an error interface
// is not a nil error. Test the *Violation for nil before converting it.
package rules

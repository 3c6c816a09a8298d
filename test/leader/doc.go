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

// Package leader proves how the manager runs in a management cluster: two
// replicas with leader election on hand an attach in flight from one to the
// other without a second share or a second rollout, and --namespace limits
// what the manager reads. It runs CAPI's controllers on a real
// kube-apiserver (test/testenv) and an in-memory cloud (test/fakecloud): no
// OpenStack test bed, and no admission webhook (the attach is the
// controller's business; admission is proven in test/integration).
package leader

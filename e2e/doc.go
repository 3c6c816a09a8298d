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

// Package e2e is the end-to-end suite (ginkgo, label "local"): the whole
// story of a nodegroup on a shared network, on the local management plane of
// e2e/plane (real kube-apiserver, CAPI, CABPK, CAPO and this extension, the
// OpenStack test bed, a stand-in control plane and a node simulator).
//
// `go test ./e2e/...` runs it when CAPO_SHAREDNET_TESTBED_CLOUDS names the
// test bed's clouds.yaml (`make test` sets it) and skips it otherwise. It
// writes a timeline of its steps to _artifacts/e2e/timeline.txt.
package e2e

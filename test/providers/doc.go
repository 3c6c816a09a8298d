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

// Package providers finds the Cluster API providers this project runs with
// (CAPI core, CABPK, KCP, CAPO and ORC) in the Go module cache, at the
// versions of go.mod, and reads what they ship for an API server: CRDs with
// the labels their kustomizations add (among them the contract labels the
// topology controller resolves templates with) and admission webhook
// configurations. The test harness (test/testenv) and the local plane
// (e2e/plane) install these into real API servers, so both serve exactly the
// manifests of the code they run.
package providers

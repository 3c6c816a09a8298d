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

// Package kind is the end-to-end suite for a real cloud: a kind management
// cluster, `clusterctl init` with CAPI, CAPO (and ORC) and this extension, a
// workload cluster created from templates/ on the OpenStack cloud that
// config/e2e.yaml names, a nodegroup attached to a shared network of a second
// project, another one attached and detached, and the share removed after
// the cluster is deleted.
//
// It needs a Docker engine and an OpenStack cloud, so `go test ./...` only
// builds it: TestE2E skips unless -e2e.config is given. How to run it:
// docs/e2e.md.
package kind

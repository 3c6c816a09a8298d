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

// Package shipping tests what users install and developers run, exactly as
// they get it: the clusterctl release assets (rendered by clusterctl itself and
// applied to a real kube-apiserver with CAPI's and CAPO's CRDs and webhooks),
// the cluster templates, tilt-provider.yaml, the Dockerfile's build, the kind
// e2e suite's build, and the docs against the code (every refusal quoted in
// docs/troubleshooting.md, every granted verb explained in docs/rbac.md).
// docs/reference.md is generated and checked by hack/tools/reference-docs.
//
// The package has no code of its own: everything is in its tests.
package shipping

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

// Package scale measures the manager at management-cluster scale: the real
// manager binary runs against a real kube-apiserver (test/testenv) holding
// Clusters of 4 nodegroups (500 by default; CAPO_SHAREDNET_SCALE_CLUSTERS
// lists the sizes of the curve, make bench-scale), half of the nodegroups
// attached to one of 4 SharedNetworks, and its peak RSS and Go heap are
// compared with the same binary against the empty API server. No OpenStack
// is needed: every credential the manager could use names a closed port of
// 127.0.0.1, and the objects are written in their attached steady state, so
// the manager has nothing to share or roll out. TestAdmissionUnderABurst
// sends 200 Cluster updates at once through the kube-apiserver to the
// manager's webhook (in this process, deciding on an in-memory OpenStack)
// at 500 Clusters.
package scale

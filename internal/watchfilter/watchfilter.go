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

// Package watchfilter is CAPI's --watch-filter: with a value, the
// controllers reconcile only objects labelled
// cluster.x-k8s.io/watch-filter=<value>, so that several instances can
// divide one management cluster between them.
package watchfilter

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/cluster-api/util/labels"
)

// Matches says whether a controller with this watch-filter value reconciles
// o: every object when the value is empty, as CAPI's predicates do.
func Matches(o metav1.Object, value string) bool {
	return value == "" || labels.HasWatchLabel(o, value)
}

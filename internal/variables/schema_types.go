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

// Package variables takes the variable's schema from this file (controller-gen).
//
// +groupName=variables.sharednet.capo.io
// +versionName=v1alpha1
package variables

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// sharedNetworkVariableHolder exists only so controller-gen turns the Go type
// of the variable (markers, CEL and all) into an OpenAPI schema, written to
// zz_generated.schema.yaml; it is never served as a resource.
//
// +kubebuilder:object:root=true
type sharedNetworkVariableHolder struct { //nolint:unused // read by controller-gen, not by Go
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Value sharednetv1.SharedNetworkVariable `json:"value"`
}

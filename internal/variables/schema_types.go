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
type sharedNetworkVariableHolder struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Value sharednetv1.SharedNetworkVariable `json:"value"`
}

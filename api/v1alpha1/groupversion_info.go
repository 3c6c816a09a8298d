// Package v1alpha1 holds the capo-sharednet API: SharedNetwork (what an
// administrator offers), SharedNetworkAttachment (where one nodegroup stands)
// and the value of the ClusterClass variable `sharedNetwork`.
//
// +kubebuilder:object:generate=true
// +groupName=sharednet.capo.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group version of this API.
	GroupVersion = schema.GroupVersion{Group: "sharednet.capo.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this API with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

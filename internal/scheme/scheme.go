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

// Package scheme is the one scheme of the extension: every type it reads or
// writes. The manager, the fast tests and the test harnesses (which add the
// providers' other types on top) all start from New.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

// New returns a scheme with client-go's types, CAPI's core and kubeadm bootstrap v1beta2, CAPO's
// v1beta1 and v1alpha1 and this extension's v1alpha1.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(bootstrapv1.AddToScheme(s))
	utilruntime.Must(infrav1.AddToScheme(s))
	utilruntime.Must(infrav1alpha1.AddToScheme(s))
	utilruntime.Must(sharednetv1.AddToScheme(s))
	// The deletion hook's ExtensionConfig (controllers.NamespaceScope).
	utilruntime.Must(runtimev1.AddToScheme(s))
	return s
}

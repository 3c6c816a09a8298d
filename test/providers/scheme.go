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

package providers

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
)

// NewScheme is the extension's scheme (internal/scheme) with what the harnesses
// also install and drive: apiextensions v1 and the rest of CAPI's storage
// versions (addons, ipam, runtime, kubeadm bootstrap and control plane). Only
// storage versions: a client of it never asks an API server for a conversion.
func NewScheme() *runtime.Scheme {
	s := scheme.New()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(addonsv1.AddToScheme(s))
	utilruntime.Must(ipamv1.AddToScheme(s))
	utilruntime.Must(runtimev1.AddToScheme(s))
	utilruntime.Must(bootstrapv1.AddToScheme(s))
	utilruntime.Must(controlplanev1.AddToScheme(s))
	return s
}

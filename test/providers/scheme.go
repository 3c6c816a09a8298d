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

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

package testenv

import (
	"fmt"
	"os"
	"path/filepath"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// assetsDir returns the folder with kube-apiserver and etcd: KUBEBUILDER_ASSETS, else
// <repo root>/bin/k8s (built by hack/ensure-envtest-assets.sh).
func assetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := providers.RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "k8s")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("testenv: %s not found in %s (run hack/ensure-envtest-assets.sh or set KUBEBUILDER_ASSETS): %w", bin, dir, err)
		}
	}
	return dir, nil
}

// manifests holds everything read from the module cache.
type manifests struct {
	crds       []*apiextensionsv1.CustomResourceDefinition
	mutating   []*admissionv1.MutatingWebhookConfiguration
	validating []*admissionv1.ValidatingWebhookConfiguration
}

// loadManifests reads CAPI's, CABPK's, KCP's and CAPO's CRDs and admission webhook
// configurations at the versions of go.mod. Conversion webhooks are left out: only storage
// versions are ever served here.
func loadManifests() (*manifests, error) {
	root, err := providers.RepoRoot()
	if err != nil {
		return nil, err
	}
	out := &manifests{}
	for _, p := range []providers.Provider{providers.CAPI, providers.CABPK, providers.KCP, providers.CAPO} {
		modDir, err := providers.ModuleDir(root, p.Module)
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		m, err := providers.Load(modDir, p)
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		for _, crd := range m.CRDs {
			crd.Spec.Conversion = nil
		}
		out.crds = append(out.crds, m.CRDs...)
		out.mutating = append(out.mutating, m.Mutating...)
		out.validating = append(out.validating, m.Validating...)
	}
	return out, nil
}

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

package plane

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// provider is one manager of the plane: where its manifests live and which
// module version it is built from.
type provider struct {
	providers.Provider
	version string // module version, filled by resolveModules
	modDir  string // module source folder, filled by resolveModules
}

// load reads the provider's CRDs and admission webhook configurations.
func (p *provider) load() (*providers.Manifests, error) {
	return providers.Load(p.modDir, p.Provider)
}

// pointConversion sends the conversions of a provider's multi-version CRDs to
// that provider's manager, as its kustomization does through a Service.
func pointConversion(m *providers.Manifests, url string, caBundle []byte) {
	for _, crd := range m.CRDs {
		if !m.Conversion[crd.Spec.Names.Plural] || len(crd.Spec.Versions) < 2 {
			crd.Spec.Conversion = nil
			continue
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ConversionReviewVersions: []string{"v1", "v1beta1"},
				ClientConfig: &apiextensionsv1.WebhookClientConfig{
					URL:      ptr.To(url + "/convert"),
					CABundle: caBundle,
				},
			},
		}
	}
}

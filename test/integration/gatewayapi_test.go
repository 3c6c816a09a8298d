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

package integration

import (
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

var (
	gatewayAPIOnce sync.Once
	gatewayAPIErr  string
)

// installGatewayAPI installs the Gateway API's GatewayClass and Gateway CRDs
// (config/crd/standard of sigs.k8s.io/gateway-api) into the test's API
// server, once per test binary. It fails the test when the module cannot be
// downloaded: these tests are not optional.
func installGatewayAPI(t *testing.T) {
	t.Helper()
	gatewayAPIOnce.Do(func() {
		paths, err := providers.GatewayAPICRDs()
		if err != nil {
			gatewayAPIErr = err.Error()
			return
		}
		if _, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
			gatewayAPIErr = "installing the Gateway API CRDs: " + err.Error()
		}
	})
	if gatewayAPIErr != "" {
		t.Fatalf("the Gateway API CRDs are needed to test the Gateway guardrails: %s", gatewayAPIErr)
	}
}

// gateway is a Gateway of Envoy Gateway (providers.EnvoyGateway).
func gateway(namespace, name string, annotations map[string]string) *unstructured.Unstructured {
	return providers.EnvoyGateway(namespace, name, annotations)
}

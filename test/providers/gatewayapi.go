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
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// GatewayAPIVersion is the Gateway API release whose standard-channel CRDs
// the tests install in an API server (spec.infrastructure is standard since
// v1.2). It is fetched with DownloadModule at test time, outside this module,
// so go.mod never gains sigs.k8s.io/gateway-api (whose Go code would move
// k8s.io off 0.34).
const GatewayAPIVersion = "v1.4.1"

// GatewayAPICRDs downloads the Gateway API and returns its GatewayClass and
// Gateway CRD files.
func GatewayAPICRDs() ([]string, error) {
	dir, err := DownloadModule("sigs.k8s.io/gateway-api", GatewayAPIVersion)
	if err != nil {
		return nil, err
	}
	crds := filepath.Join(dir, "config", "crd", "standard")
	return []string{
		filepath.Join(crds, "gateway.networking.k8s.io_gatewayclasses.yaml"),
		filepath.Join(crds, "gateway.networking.k8s.io_gateways.yaml"),
	}, nil
}

// EnvoyGateway is a Gateway as the Envoy Gateway addon takes it: its
// infrastructure annotations (which Envoy Gateway copies onto the
// LoadBalancer Service it makes) are the given ones; nil leaves
// spec.infrastructure out.
func EnvoyGateway(namespace, name string, annotations map[string]string) *unstructured.Unstructured {
	spec := map[string]any{
		"gatewayClassName": "eg",
		"listeners":        []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}},
	}
	if annotations != nil {
		a := map[string]any{}
		for k, v := range annotations {
			a[k] = v
		}
		spec["infrastructure"] = map[string]any{"annotations": a}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "Gateway",
		"metadata":   map[string]any{"namespace": namespace, "name": name},
		"spec":       spec,
	}}
}

// DownloadModule runs `go mod download -json module@version` in an empty
// folder (no main module: nothing is written to this repository's go.mod or
// go.sum) and returns the module's folder in the module cache.
func DownloadModule(module, version string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp("", "gomod-download-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GO111MODULE=on")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	// With -json, go reports a download error in the JSON (Error) and exits 1.
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil || info.Error != "" || runErr != nil || info.Dir == "" {
		return "", &downloadError{module: module + "@" + version, run: runErr, report: info.Error, stderr: stderr.String()}
	}
	return info.Dir, nil
}

type downloadError struct {
	module, report, stderr string
	run                    error
}

func (e *downloadError) Error() string {
	msg := "go mod download -json " + e.module + " failed (is the Go module proxy reachable? GOPROXY=" + os.Getenv("GOPROXY") + ")"
	if e.run != nil {
		msg += ": " + e.run.Error()
	}
	if e.report != "" {
		msg += ": " + e.report
	}
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}

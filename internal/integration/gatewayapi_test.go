package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// gatewayAPIVersion is the Gateway API release whose standard-channel CRDs the
// tests install (spec.infrastructure is standard since v1.2). It is fetched
// with `go mod download` at test time, outside this module, so go.mod never
// gains sigs.k8s.io/gateway-api (whose Go code would move k8s.io off 0.34).
const gatewayAPIVersion = "v1.4.1"

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
		dir, err := downloadModule("sigs.k8s.io/gateway-api", gatewayAPIVersion)
		if err != nil {
			gatewayAPIErr = err.Error()
			return
		}
		crds := filepath.Join(dir, "config", "crd", "standard")
		_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
			Paths: []string{
				filepath.Join(crds, "gateway.networking.k8s.io_gatewayclasses.yaml"),
				filepath.Join(crds, "gateway.networking.k8s.io_gateways.yaml"),
			},
			ErrorIfPathMissing: true,
		})
		if err != nil {
			gatewayAPIErr = "installing the Gateway API CRDs from " + crds + ": " + err.Error()
		}
	})
	if gatewayAPIErr != "" {
		t.Fatalf("the Gateway API CRDs are needed to test the Gateway guardrails: %s", gatewayAPIErr)
	}
}

// downloadModule runs `go mod download -json module@version` in an empty
// folder (no main module: nothing is written to this repository's go.mod or
// go.sum) and returns the module's folder in the module cache.
func downloadModule(module, version string) (string, error) {
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

// gateway is an Envoy Gateway Gateway whose infrastructure annotations (which
// Envoy Gateway copies onto its LoadBalancer Service) are the given ones; nil
// leaves spec.infrastructure out.
func gateway(namespace, name string, annotations map[string]string) *unstructured.Unstructured {
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

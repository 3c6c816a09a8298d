package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	capiModule = "sigs.k8s.io/cluster-api"
	capoModule = "sigs.k8s.io/cluster-api-provider-openstack"
)

// providerManifests describes where one provider keeps its CRDs and admission webhook
// configurations inside its Go module.
type providerManifests struct {
	module string
	dir    string // provider folder inside the module ("" or e.g. "bootstrap/kubeadm")
	tag    string // suffix for the webhook configuration names, so that they do not collide
}

var providers = []providerManifests{
	{module: capiModule, dir: "", tag: "capi"},
	{module: capiModule, dir: "bootstrap/kubeadm", tag: "cabpk"},
	{module: capiModule, dir: "controlplane/kubeadm", tag: "kcp"},
	{module: capoModule, dir: "", tag: "capo"},
}

// repoRoot walks up from the working directory to the folder holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.mod found above the working directory")
		}
		dir = parent
	}
}

// assetsDir returns the folder with kube-apiserver and etcd: KUBEBUILDER_ASSETS, else
// <repo root>/bin/k8s (built by hack/ensure-envtest-assets.sh).
func assetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := repoRoot()
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

// moduleDir finds the source folder of a module dependency. It prefers the exact version
// linked into the running binary (so CRDs and webhook manifests match the compiled code),
// located in the module cache, and falls back to `go list -m`.
func moduleDir(module string) (string, error) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path != module {
				continue
			}
			m := dep
			if dep.Replace != nil {
				m = dep.Replace
			}
			var dir string
			if m.Version == "" { // local replace: a path relative to the main module
				dir = m.Path
				if !filepath.IsAbs(dir) {
					if root, err := repoRoot(); err == nil {
						dir = filepath.Join(root, dir)
					}
				}
			} else if cache := goModCache(); cache != "" {
				dir = filepath.Join(cache, escapeModulePath(m.Path)+"@"+m.Version)
			}
			if dir != "" {
				if _, err := os.Stat(dir); err == nil {
					return dir, nil
				}
			}
		}
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	if root, err := repoRoot(); err == nil {
		cmd.Dir = root
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("testenv: cannot locate module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("testenv: module %s is not downloaded", module)
	}
	return dir, nil
}

func goModCache() string {
	if c := os.Getenv("GOMODCACHE"); c != "" {
		return c
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// escapeModulePath applies the module cache's case encoding ("A" -> "!a").
func escapeModulePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			b.WriteRune(r + ('a' - 'A'))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// kustomizeLabels reads the labels kustomize would add to a provider's CRDs (both the
// `labels: [{pairs: ...}]` and the older `commonLabels` forms). Among them are the
// contract labels (cluster.x-k8s.io/<contract>: <api version>) that the topology
// controller needs to resolve referenced templates.
func kustomizeLabels(kustomization string) (map[string]string, error) {
	data, err := os.ReadFile(kustomization)
	if err != nil {
		return nil, err
	}
	var k struct {
		CommonLabels map[string]string `json:"commonLabels"`
		Labels       []struct {
			Pairs map[string]string `json:"pairs"`
		} `json:"labels"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("testenv: parsing %s: %w", kustomization, err)
	}
	labels := map[string]string{}
	for key, v := range k.CommonLabels {
		labels[key] = v
	}
	for _, l := range k.Labels {
		for key, v := range l.Pairs {
			labels[key] = v
		}
	}
	return labels, nil
}

// yamlDocuments splits a multi-document YAML file into JSON documents.
func yamlDocuments(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var docs [][]byte
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("testenv: parsing %s: %w", path, err)
		}
		if len(raw) == 0 {
			continue
		}
		doc, err := yaml.Marshal(raw)
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
}

// manifests holds everything read from the module cache.
type manifests struct {
	crds       []*apiextensionsv1.CustomResourceDefinition
	mutating   []*admissionv1.MutatingWebhookConfiguration
	validating []*admissionv1.ValidatingWebhookConfiguration
}

// loadManifests reads CAPI's, CABPK's, KCP's and CAPO's CRDs (with their kustomize labels
// added) and admission webhook configurations (renamed per provider).
func loadManifests() (*manifests, error) {
	out := &manifests{}
	for _, p := range providers {
		modDir, err := moduleDir(p.module)
		if err != nil {
			return nil, err
		}
		base := filepath.Join(modDir, filepath.FromSlash(p.dir), "config")

		labels, err := kustomizeLabels(filepath.Join(base, "crd", "kustomization.yaml"))
		if err != nil {
			return nil, err
		}
		crdFiles, err := filepath.Glob(filepath.Join(base, "crd", "bases", "*.yaml"))
		if err != nil {
			return nil, err
		}
		if len(crdFiles) == 0 {
			return nil, fmt.Errorf("testenv: no CRDs in %s", filepath.Join(base, "crd", "bases"))
		}
		for _, f := range crdFiles {
			docs, err := yamlDocuments(f)
			if err != nil {
				return nil, err
			}
			for _, doc := range docs {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := yaml.Unmarshal(doc, crd); err != nil {
					return nil, fmt.Errorf("testenv: decoding CRD in %s: %w", f, err)
				}
				if crd.Kind != "CustomResourceDefinition" {
					continue
				}
				if crd.Labels == nil {
					crd.Labels = map[string]string{}
				}
				for k, v := range labels {
					crd.Labels[k] = v
				}
				out.crds = append(out.crds, crd)
			}
		}

		hookFile := filepath.Join(base, "webhook", "manifests.yaml")
		docs, err := yamlDocuments(hookFile)
		if err != nil {
			return nil, err
		}
		for _, doc := range docs {
			var meta struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return nil, err
			}
			switch meta.Kind {
			case "MutatingWebhookConfiguration":
				c := &admissionv1.MutatingWebhookConfiguration{}
				if err := yaml.Unmarshal(doc, c); err != nil {
					return nil, fmt.Errorf("testenv: decoding %s: %w", hookFile, err)
				}
				c.Name = c.Name + "-" + p.tag
				out.mutating = append(out.mutating, c)
			case "ValidatingWebhookConfiguration":
				c := &admissionv1.ValidatingWebhookConfiguration{}
				if err := yaml.Unmarshal(doc, c); err != nil {
					return nil, fmt.Errorf("testenv: decoding %s: %w", hookFile, err)
				}
				c.Name = c.Name + "-" + p.tag
				out.validating = append(out.validating, c)
			}
		}
	}
	return out, nil
}

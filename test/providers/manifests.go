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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Manifests is what one provider contributes to an API server.
type Manifests struct {
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Conversion has the plurals of the CRDs whose conversion webhook the kustomization enables.
	Conversion map[string]bool
	Mutating   []*admissionv1.MutatingWebhookConfiguration
	Validating []*admissionv1.ValidatingWebhookConfiguration
}

// Load reads p's CRDs (the resources of its config/crd kustomization, with the labels it adds)
// and its admission webhook configurations (config/webhook/manifests.yaml, when it has one,
// renamed with p.Name) from the module source in modDir.
func Load(modDir string, p Provider) (*Manifests, error) {
	base := filepath.Join(modDir, filepath.FromSlash(p.Dir), "config")
	out := &Manifests{Conversion: map[string]bool{}}
	k, err := readKustomization(filepath.Join(base, "crd", "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	labels := k.labels()
	for _, res := range k.Resources {
		crds, err := ReadCRDs(filepath.Join(base, "crd", filepath.FromSlash(res)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		for _, crd := range crds {
			if crd.Labels == nil {
				crd.Labels = map[string]string{}
			}
			for key, v := range labels {
				crd.Labels[key] = v
			}
		}
		out.CRDs = append(out.CRDs, crds...)
	}
	// The kustomization enables the conversion webhook of a CRD with a patch named
	// webhook_in_<plural>.yaml.
	for _, patch := range k.Patches {
		if plural, ok := strings.CutPrefix(filepath.Base(patch.Path), "webhook_in_"); ok {
			out.Conversion[strings.TrimSuffix(plural, ".yaml")] = true
		}
	}

	hookFile := filepath.Join(base, "webhook", "manifests.yaml")
	if _, err := os.Stat(hookFile); errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	out.Mutating, out.Validating, err = WebhookConfigurations(hookFile, p.Name)
	return out, err
}

// ReadCRDs reads the CustomResourceDefinitions of a YAML file (other kinds are skipped).
func ReadCRDs(file string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := YAMLDocuments(file)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range docs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			return nil, fmt.Errorf("decoding CRD in %s: %w", file, err)
		}
		if crd.Kind == "CustomResourceDefinition" {
			out = append(out, crd)
		}
	}
	return out, nil
}

// WebhookConfigurations reads the admission webhook configurations of a YAML file and
// suffixes their names with tag.
func WebhookConfigurations(file, tag string) ([]*admissionv1.MutatingWebhookConfiguration, []*admissionv1.ValidatingWebhookConfiguration, error) {
	docs, err := YAMLDocuments(file)
	if err != nil {
		return nil, nil, err
	}
	var mutating []*admissionv1.MutatingWebhookConfiguration
	var validating []*admissionv1.ValidatingWebhookConfiguration
	for _, doc := range docs {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			c := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, c); err != nil {
				return nil, nil, fmt.Errorf("decoding %s: %w", file, err)
			}
			c.Name += "-" + tag
			mutating = append(mutating, c)
		case "ValidatingWebhookConfiguration":
			c := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, c); err != nil {
				return nil, nil, fmt.Errorf("decoding %s: %w", file, err)
			}
			c.Name += "-" + tag
			validating = append(validating, c)
		}
	}
	return mutating, validating, nil
}

type kustomization struct {
	CommonLabels map[string]string `json:"commonLabels"`
	Labels       []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Resources []string `json:"resources"`
	Patches   []struct {
		Path string `json:"path"`
	} `json:"patches"`
}

// labels are what kustomize adds, in both the `labels: [{pairs: ...}]` and the older
// `commonLabels` forms.
func (k *kustomization) labels() map[string]string {
	out := map[string]string{}
	for key, v := range k.CommonLabels {
		out[key] = v
	}
	for _, l := range k.Labels {
		for key, v := range l.Pairs {
			out[key] = v
		}
	}
	return out
}

func readKustomization(path string) (*kustomization, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k := &kustomization{}
	if err := yaml.Unmarshal(data, k); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return k, nil
}

// YAMLDocuments splits a multi-document YAML file into YAML documents.
func YAMLDocuments(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return SplitYAML(data, path)
}

// SplitYAML splits multi-document YAML into documents, skipping empty ones; what names the
// input in errors.
func SplitYAML(data []byte, what string) ([][]byte, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var docs [][]byte
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("parsing %s: %w", what, err)
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

// AttachmentPolicy reads config/policy/attachments.yaml under root: the
// ValidatingAdmissionPolicy that keeps SharedNetworkAttachments the
// extension's, and its binding, as the components ship them.
func AttachmentPolicy(root string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding, error) {
	path := filepath.Join(root, "config", "policy", "attachments.yaml")
	docs, err := YAMLDocuments(path)
	if err != nil {
		return nil, nil, err
	}
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("%s: want the policy and its binding, found %d documents", path, len(docs))
	}
	policy, binding := &admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict(docs[0], policy); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(docs[1], binding); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return policy, binding, nil
}

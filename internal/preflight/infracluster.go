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

package preflight

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"sigs.k8s.io/yaml"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// desiredInfraCluster is the OpenStackCluster spec the topology controller
// will create for a Cluster that has none yet: the ClusterClass's
// OpenStackClusterTemplate with the class's inline patches applied to the
// Cluster's variables (defaults from the class where the Cluster sets none),
// the way CAPI's inline patch engine does. So a `nodeCIDR` variable is
// checked at creation, not the template's default. External patches are not
// run here: the attachment controller checks the real OpenStackCluster again
// before it shares.
func desiredInfraCluster(cc *clusterv1.ClusterClass, tmpl *infrav1.OpenStackClusterTemplate, cluster *clusterv1.Cluster) (infrav1.OpenStackClusterSpec, error) {
	vars := map[string]any{}
	for _, v := range cc.Spec.Variables {
		if d := v.Schema.OpenAPIV3Schema.Default; d != nil {
			var value any
			if err := json.Unmarshal(d.Raw, &value); err == nil {
				vars[v.Name] = value
			}
		}
	}
	for _, v := range cluster.Spec.Topology.Variables {
		var value any
		if err := json.Unmarshal(v.Value.Raw, &value); err != nil {
			return infrav1.OpenStackClusterSpec{}, fmt.Errorf("spec.topology.variables[%s]: %w", v.Name, err)
		}
		vars[v.Name] = value
	}
	vars["builtin"] = map[string]any{"cluster": map[string]any{
		"name": cluster.Name, "namespace": cluster.Namespace,
		"topology": map[string]any{"version": cluster.Spec.Topology.Version, "class": cluster.Spec.Topology.ClassRef.Name},
	}}

	doc, err := json.Marshal(tmpl)
	if err != nil {
		return infrav1.OpenStackClusterSpec{}, err
	}
	for _, p := range cc.Spec.Patches {
		if p.EnabledIf != "" {
			enabled, err := render(p.EnabledIf, vars)
			if err != nil {
				return infrav1.OpenStackClusterSpec{}, fmt.Errorf("patch %q enabledIf: %w", p.Name, err)
			}
			if strings.TrimSpace(enabled) != "true" {
				continue
			}
		}
		for _, d := range p.Definitions {
			if d.Selector.Kind != "OpenStackClusterTemplate" || d.Selector.MatchResources.InfrastructureCluster == nil || !*d.Selector.MatchResources.InfrastructureCluster {
				continue
			}
			ops := make([]map[string]any, 0, len(d.JSONPatches))
			for _, jp := range d.JSONPatches {
				op := map[string]any{"op": jp.Op, "path": jp.Path}
				value, err := patchValue(jp, vars)
				if err != nil {
					return infrav1.OpenStackClusterSpec{}, fmt.Errorf("patch %q, %s %s: %w", p.Name, jp.Op, jp.Path, err)
				}
				if jp.Op != "remove" {
					op["value"] = value
				}
				ops = append(ops, op)
			}
			raw, err := json.Marshal(ops)
			if err != nil {
				return infrav1.OpenStackClusterSpec{}, err
			}
			patch, err := jsonpatch.DecodePatch(raw)
			if err != nil {
				return infrav1.OpenStackClusterSpec{}, fmt.Errorf("patch %q: %w", p.Name, err)
			}
			if doc, err = patch.Apply(doc); err != nil {
				return infrav1.OpenStackClusterSpec{}, fmt.Errorf("patch %q: %w", p.Name, err)
			}
		}
	}
	out := &infrav1.OpenStackClusterTemplate{}
	if err := json.Unmarshal(doc, out); err != nil {
		return infrav1.OpenStackClusterSpec{}, err
	}
	return out.Spec.Template.Spec, nil
}

// patchValue is a JSON patch's value: literal, a variable (dotted paths into
// object variables, as CAPI allows) or a rendered template (YAML).
func patchValue(jp clusterv1.JSONPatch, vars map[string]any) (any, error) {
	switch {
	case jp.Value != nil:
		var v any
		return v, json.Unmarshal(jp.Value.Raw, &v)
	case jp.ValueFrom != nil && jp.ValueFrom.Variable != "":
		var v any = vars
		for _, part := range strings.Split(jp.ValueFrom.Variable, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("variable %q is not set", jp.ValueFrom.Variable)
			}
			if v, ok = m[part]; !ok {
				return nil, fmt.Errorf("variable %q is not set", jp.ValueFrom.Variable)
			}
		}
		return v, nil
	case jp.ValueFrom != nil && jp.ValueFrom.Template != "":
		text, err := render(jp.ValueFrom.Template, vars)
		if err != nil {
			return nil, err
		}
		var v any
		return v, yaml.Unmarshal([]byte(text), &v)
	}
	return nil, nil
}

func render(text string, vars map[string]any) (string, error) {
	t, err := template.New("patch").Funcs(sprig.HermeticTxtFuncMap()).Parse(text)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := t.Execute(&out, vars); err != nil {
		return "", err
	}
	return out.String(), nil
}

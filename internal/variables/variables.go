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

// Package variables serves and reads the ClusterClass variable
// `sharedNetwork`: its schema comes from the Go type in api/v1alpha1 through
// controller-gen (zz_generated.schema.yaml), never from hand-written OpenAPI.
package variables

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
)

//go:generate ../../bin/tools/controller-gen crd:generateEmbeddedObjectMeta=false paths=. output:crd:stdout

// generatedSchema is controller-gen's CRD for sharedNetworkVariableHolder.
//
//go:embed zz_generated.schema.yaml
var generatedSchema []byte

var (
	schemaOnce sync.Once
	schema     clusterv1beta1.JSONSchemaProps
	schemaErr  error
)

// Schema is the OpenAPI schema (with CEL rules) of the `sharedNetwork`
// variable, taken from the `value` property of the generated CRD. It is in
// the v1beta1 shape because DiscoverVariables (runtime hooks v1alpha1) speaks it.
func Schema() (clusterv1beta1.JSONSchemaProps, error) {
	schemaOnce.Do(func() { schema, schemaErr = schemaFromCRD(generatedSchema) })
	return schema, schemaErr
}

func schemaFromCRD(crdYAML []byte) (clusterv1beta1.JSONSchemaProps, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &crd); err != nil {
		return clusterv1beta1.JSONSchemaProps{}, fmt.Errorf("reading the generated variable schema: %w", err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		return clusterv1beta1.JSONSchemaProps{}, fmt.Errorf("generated variable schema: want one version with a schema")
	}
	value, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["value"]
	if !ok {
		return clusterv1beta1.JSONSchemaProps{}, fmt.Errorf("generated variable schema has no property %q", "value")
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return clusterv1beta1.JSONSchemaProps{}, err
	}
	// Strict: a schema feature CAPI's variable schema cannot carry must fail
	// here (and in tests), not be dropped silently.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var out clusterv1beta1.JSONSchemaProps
	if err := dec.Decode(&out); err != nil {
		return clusterv1beta1.JSONSchemaProps{}, fmt.Errorf("variable schema does not fit a ClusterClass variable: %w", err)
	}
	return out, nil
}

// Definitions are the variables DiscoverVariables serves.
func Definitions() ([]clusterv1beta1.ClusterClassVariable, error) {
	s, err := Schema()
	if err != nil {
		return nil, err
	}
	return []clusterv1beta1.ClusterClassVariable{{
		Name:     sharednetv1.VariableName,
		Required: false,
		Schema:   clusterv1beta1.VariableSchema{OpenAPIV3Schema: s},
	}}, nil
}

// FromHookVariables returns the `sharedNetwork` value among a hook request's
// variables, or nil when it is not set.
func FromHookVariables(vars []runtimehooksv1.Variable) (*sharednetv1.SharedNetworkVariable, error) {
	for i := range vars {
		if vars[i].Name == sharednetv1.VariableName {
			return decode(vars[i].Value)
		}
	}
	return nil, nil
}

// FromClusterVariables returns the `sharedNetwork` value among a Cluster's
// topology variables (cluster level or one MachineDeployment's overrides), or
// nil when it is not set.
func FromClusterVariables(vars []clusterv1.ClusterVariable) (*sharednetv1.SharedNetworkVariable, error) {
	for i := range vars {
		if vars[i].Name == sharednetv1.VariableName {
			return decode(vars[i].Value)
		}
	}
	return nil, nil
}

// Nodegroups maps each MachineDeployment topology name of a Cluster to its
// `sharedNetwork` value, for the topologies that set one.
func Nodegroups(cluster *clusterv1.Cluster) (map[string]sharednetv1.SharedNetworkVariable, error) {
	out := map[string]sharednetv1.SharedNetworkVariable{}
	for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
		v, err := FromClusterVariables(md.Variables.Overrides)
		if err != nil {
			return nil, fmt.Errorf("MachineDeployment topology %s: %w", md.Name, err)
		}
		if v != nil {
			out[md.Name] = *v
		}
	}
	return out, nil
}

func decode(value apiextensionsv1.JSON) (*sharednetv1.SharedNetworkVariable, error) {
	dec := json.NewDecoder(bytes.NewReader(value.Raw))
	dec.DisallowUnknownFields()
	var v sharednetv1.SharedNetworkVariable
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("variable %s: %s is not {name, subnet}: %w", sharednetv1.VariableName, string(value.Raw), err)
	}
	return &v, nil
}

// SetOverride sets the `sharedNetwork` override of the MachineDeployment topology named
// topology to the JSON value, or removes it when value is empty; other variables are kept.
// Setting it is how a cluster owner attaches a nodegroup, removing it how they detach it.
func SetOverride(cluster *clusterv1.Cluster, topology string, value []byte) {
	for i := range cluster.Spec.Topology.Workers.MachineDeployments {
		md := &cluster.Spec.Topology.Workers.MachineDeployments[i]
		if md.Name != topology {
			continue
		}
		var kept []clusterv1.ClusterVariable
		for _, v := range md.Variables.Overrides {
			if v.Name != sharednetv1.VariableName {
				kept = append(kept, v)
			}
		}
		if len(value) > 0 {
			kept = append(kept, clusterv1.ClusterVariable{Name: sharednetv1.VariableName, Value: apiextensionsv1.JSON{Raw: value}})
		}
		md.Variables.Overrides = kept
	}
}

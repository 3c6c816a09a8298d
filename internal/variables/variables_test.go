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

package variables

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// validate checks a value the way the API server (and CAPI's variable
// validation, which uses the same libraries) does: OpenAPI, unknown fields, CEL.
func validate(t *testing.T, value string) field.ErrorList {
	t.Helper()
	served, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	// What DiscoverVariables serves goes over the wire as JSON.
	raw, _ := json.Marshal(served)
	var v1 apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal(raw, &v1); err != nil {
		t.Fatal(err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, &internal, nil); err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatalf("the served schema is not structural: %v", err)
	}
	var obj any
	if err := json.Unmarshal([]byte(value), &obj); err != nil {
		t.Fatal(err)
	}
	path := field.NewPath("sharedNetwork")
	var errs field.ErrorList
	if pruned := structuralpruning.PruneWithOptions(obj, structural, false, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(pruned) > 0 {
		errs = append(errs, field.Invalid(path, value, "unknown fields: "+strings.Join(pruned, ",")))
		return errs
	}
	validator, _, err := validation.NewSchemaValidator(&internal)
	if err != nil {
		t.Fatal(err)
	}
	errs = append(errs, validation.ValidateCustomResource(path, obj, validator)...)
	celErrs, _ := cel.NewValidator(structural, false, celconfig.PerCallLimit).Validate(context.Background(), path, structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

func TestSchemaAcceptsOneNetworkAndOneSubnet(t *testing.T) {
	for _, value := range []string{
		`{"name":"vm-net"}`,
		`{"name":"vm-net","subnet":"7c9e6679-7425-40de-944b-e07fc1f90ae7"}`,
		`{"name":"team-a.vm-net"}`,
	} {
		if errs := validate(t, value); len(errs) > 0 {
			t.Errorf("%s refused: %v", value, errs.ToAggregate())
		}
	}
}

func TestSchemaRefusesBadValuesWithTheFieldAndTheFix(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{`{}`, "name"},
		{`{"name":""}`, "name"},
		{`{"name":"VM_Net"}`, "must be the name of a SharedNetwork"},
		{`{"name":"vm-net","subnet":"7c9e6679-7425-40de-944b-e07fc1f90ae7,0c9e6679-7425-40de-944b-e07fc1f90ae7"}`, "subnet"},
		{`{"name":"vm-net","subnet":"not-a-uuid"}`, "use one nodegroup per subnet"},
		{`{"name":"vm-net","subnets":["7c9e6679-7425-40de-944b-e07fc1f90ae7","0c9e6679-7425-40de-944b-e07fc1f90ae7"]}`, "unknown fields"},
		{`{"name":"vm-net","network":"other"}`, "unknown fields"},
	} {
		errs := validate(t, tc.value)
		if len(errs) == 0 {
			t.Errorf("%s accepted, want refused", tc.value)
			continue
		}
		if msg := errs.ToAggregate().Error(); !strings.Contains(msg, tc.want) {
			t.Errorf("%s refused with %q, want it to mention %q", tc.value, msg, tc.want)
		}
	}
}

func TestDefinitionsServeTheVariableAsOptional(t *testing.T) {
	defs, err := Definitions()
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 1 || defs[0].Name != "sharedNetwork" || defs[0].Required {
		t.Fatalf("want one optional variable sharedNetwork, got %+v", defs)
	}
	if len(defs[0].Schema.OpenAPIV3Schema.XValidations) == 0 {
		t.Fatal("the CEL rules of the Go type were lost on the way to the served schema")
	}
}

func TestReadingValues(t *testing.T) {
	vars := []runtimehooksv1.Variable{{Name: "builtin", Value: apiextensionsv1.JSON{Raw: []byte(`{}`)}},
		{Name: "sharedNetwork", Value: apiextensionsv1.JSON{Raw: []byte(`{"name":"vm-net","subnet":"s"}`)}}}
	v, err := FromHookVariables(vars)
	if err != nil || v == nil || v.Name != "vm-net" || v.Subnet != "s" {
		t.Fatalf("got %+v, %v", v, err)
	}
	if v, err := FromHookVariables(vars[:1]); v != nil || err != nil {
		t.Fatalf("unset variable: got %+v, %v", v, err)
	}
	cluster := &clusterv1.Cluster{}
	cluster.Spec.Topology.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{
		{Name: "md-a", Variables: clusterv1.MachineDeploymentVariables{Overrides: []clusterv1.ClusterVariable{{Name: "sharedNetwork", Value: apiextensionsv1.JSON{Raw: []byte(`{"name":"vm-net"}`)}}}}},
		{Name: "md-b"},
	}
	got, err := Nodegroups(cluster)
	if err != nil || len(got) != 1 || got["md-a"].Name != "vm-net" {
		t.Fatalf("want only md-a attached, got %+v, %v", got, err)
	}
}

func TestSetOverrideAttachesAndDetachesOnlyThatNodegroup(t *testing.T) {
	cluster := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{Workers: clusterv1.WorkersTopology{
		MachineDeployments: []clusterv1.MachineDeploymentTopology{
			{Name: "md-a", Variables: clusterv1.MachineDeploymentVariables{Overrides: []clusterv1.ClusterVariable{
				{Name: "flavor", Value: apiextensionsv1.JSON{Raw: []byte(`"m1.large"`)}},
			}}},
			{Name: "md-b"},
		},
	}}}}

	SetOverride(cluster, "md-a", []byte(`{"name":"vm-net"}`))
	SetOverride(cluster, "md-a", []byte(`{"name":"vm-net-2"}`)) // replaces, never duplicates
	groups, err := Nodegroups(cluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups["md-a"].Name != "vm-net-2" {
		t.Fatalf("after attaching md-a: nodegroups = %+v, want only md-a on vm-net-2", groups)
	}
	mdA := cluster.Spec.Topology.Workers.MachineDeployments[0]
	if len(mdA.Variables.Overrides) != 2 || mdA.Variables.Overrides[0].Name != "flavor" {
		t.Fatalf("md-a overrides = %+v, want flavor kept and one sharedNetwork", mdA.Variables.Overrides)
	}

	SetOverride(cluster, "md-a", nil)
	if groups, _ := Nodegroups(cluster); len(groups) != 0 {
		t.Fatalf("after detaching: nodegroups = %+v, want none", groups)
	}
	if o := cluster.Spec.Topology.Workers.MachineDeployments[0].Variables.Overrides; len(o) != 1 || o[0].Name != "flavor" {
		t.Fatalf("after detaching md-a overrides = %+v, want only flavor", o)
	}
}

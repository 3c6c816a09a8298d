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

package sharedport

import (
	"bytes"
	"encoding/json"
	"testing"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
)

const (
	netID    = "2b1d0c5e-6f3a-4c1e-9d2b-0a1b2c3d4e5f"
	subnetID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
)

// The patch is the specification: these are the exact operations CAPI applies.
func TestInject(t *testing.T) {
	port := `{"network":{"id":"` + netID + `"},"description":"capo-sharednet: shared network vm-net, subnet ` + subnetID + `","nameSuffix":"shared","fixedIPs":[{"subnet":{"id":"` + subnetID + `"}}],"tags":["capo-sharednet"]}`
	for _, tc := range []struct {
		name, template, want string
	}{{
		name:     "no ports: CAPO's default cluster port is kept first, then the shared port",
		template: `{"kind":"OpenStackMachineTemplate","spec":{"template":{"spec":{"flavor":"m1.small"}}}}`,
		want:     `[{"op":"add","path":"/spec/template/spec/ports","value":[{},` + port + `]}]`,
	}, {
		name:     "empty ports list is the same as none",
		template: `{"spec":{"template":{"spec":{"ports":[]}}}}`,
		want:     `[{"op":"add","path":"/spec/template/spec/ports","value":[{},` + port + `]}]`,
	}, {
		name:     "existing ports stay where they are; the shared port is appended",
		template: `{"spec":{"template":{"spec":{"ports":[{"network":{"id":"cluster-net"}},{"nameSuffix":"storage"}]}}}}`,
		want:     `[{"op":"add","path":"/spec/template/spec/ports/-","value":` + port + `}]`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := Inject([]byte(tc.template), Port("vm-net", netID, subnetID))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(ops)
			if string(got) != tc.want {
				t.Errorf("patch\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestInjectRefusesWhatIsNotATemplate(t *testing.T) {
	if _, err := Inject([]byte(`[1,2]`), Port("vm-net", netID, subnetID)); err == nil {
		t.Fatal("a JSON array is not an OpenStackMachineTemplate, want an error")
	}
}

func TestPortIsDeterministic(t *testing.T) {
	a, _ := json.Marshal(Port("vm-net", netID, subnetID))
	b, _ := json.Marshal(Port("vm-net", netID, subnetID))
	if !bytes.Equal(a, b) {
		t.Fatalf("the same inputs gave two ports (a rollout on every reconcile):\n%s\n%s", a, b)
	}
}

func TestCarried(t *testing.T) {
	theirs := Port("vm-net", netID, subnetID)
	theirs.Tags = []string{"something-else"}
	ours := Port("vm-net", netID, subnetID)
	if Carried(nil) != nil {
		t.Error("no ports carry no shared port")
	}
	if got := Carried(append([]infrav1.PortOpts{{}, theirs}, ours)); got == nil || *got.NameSuffix != NameSuffix {
		t.Errorf("the tagged port is the shared one, got %+v", got)
	}
	if Carried([]infrav1.PortOpts{{}, theirs}) != nil {
		t.Error("a port without the extension's tag is not ours")
	}
}

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

package shipping

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// TestClusterctlFlavor generates a cluster the way docs/templates.md tells
// a user to, through clusterctl itself (built from go.mod's CAPI) and no
// management cluster: `clusterctl generate cluster demo --infrastructure
// openstack:<CAPO version> --flavor shared-network`, with the release's
// cluster-template-shared-network.yaml and clusterclass-shared-network.yaml
// in clusterctl's overrides folder for CAPO
// ($XDG_CONFIG_HOME/cluster-api/overrides/infrastructure-openstack/<version>/)
// and the variables in the user's clusterctl.yaml, including CAPO's own
// OPENSTACK_DNS_NAMESERVERS (one address). clusterctl reads the flavor's
// template from there and adds the ClusterClass it names from the same
// folder; the output is the ClusterClass and its templates, the identity
// Secret, the Cluster and the cloud controller manager's ClusterResourceSet,
// every placeholder substituted.
func TestClusterctlFlavor(t *testing.T) {
	testenv.SkipIfShort(t, "builds clusterctl and the release assets")
	bin := clusterctl(t)
	rel := release(t)
	capo := moduleVersion(t, "sigs.k8s.io/cluster-api-provider-openstack")
	home := t.TempDir()
	configDir := filepath.Join(home, ".config", "cluster-api") // $XDG_CONFIG_HOME/cluster-api

	overrides := filepath.Join(configDir, "overrides", "infrastructure-openstack", capo)
	if err := os.MkdirAll(overrides, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cluster-template-shared-network.yaml", "clusterclass-shared-network.yaml"} {
		if err := os.WriteFile(filepath.Join(overrides, f), mustRead(t, filepath.Join(rel, f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The user's clusterctl.yaml, where clusterctl looks for it. CAPO's
	// built-in URL names releases/latest, which clusterctl resolves over the
	// network even when the version is given and the files are overridden;
	// pinned to a version, the repository is only read for what the
	// overrides folder lacks.
	config := map[string]any{
		"providers": []map[string]string{{
			"name": "openstack", "type": "InfrastructureProvider",
			"url": "https://github.com/kubernetes-sigs/cluster-api-provider-openstack/releases/" + capo + "/infrastructure-components.yaml",
		}},
	}
	for k, v := range clusterVariables {
		switch k {
		case "KUBERNETES_VERSION", "CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT": // flags below
		default:
			config[k] = v
		}
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(configDir, "clusterctl.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}

	// No management cluster: no kubeconfig in the temporary HOME, none from
	// the environment. clusterctl then adds every ClusterClass the template
	// names (with one, it adds only those the namespace lacks).
	env := clusterctlEnv(t, home, "KUBECONFIG=")
	const ns = "team-a"
	out := string(run(t, home, env, bin, "generate", "cluster", "demo", "-n", ns,
		"--infrastructure", "openstack:"+capo, "--flavor", "shared-network",
		"--kubernetes-version", clusterVariables["KUBERNETES_VERSION"],
		"--control-plane-machine-count", clusterVariables["CONTROL_PLANE_MACHINE_COUNT"],
		"--worker-machine-count", clusterVariables["WORKER_MACHINE_COUNT"]))
	if strings.Contains(out, "${") {
		t.Errorf("the generated cluster still holds a placeholder:\n%s", out)
	}
	objs, err := utilyaml.ToUnstructured([]byte(out))
	if err != nil {
		t.Fatal(err)
	}

	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
		if o.GetNamespace() != ns {
			t.Errorf("%s %s is in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
		}
	}
	for _, want := range []string{"ClusterClass", "KubeadmControlPlaneTemplate", "OpenStackClusterTemplate", "OpenStackMachineTemplate",
		"KubeadmConfigTemplate", "Secret", "Cluster", "ClusterResourceSet"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no %s in the generated cluster (kinds %q)", want, kinds)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if slices.Index(kinds, "ClusterClass") > slices.Index(kinds, "Cluster") {
		t.Errorf("the ClusterClass comes after the Cluster (kinds %q)", kinds)
	}
	class := findKind(t, objs, "ClusterClass")
	cluster := findKind(t, objs, "Cluster")
	classRef, _, _ := unstructured.NestedString(cluster.Object, "spec", "topology", "classRef", "name")
	if class.GetName() != classRef || classRef != "shared-network" {
		t.Errorf("ClusterClass %s added, the Cluster uses %q", class.GetName(), classRef)
	}

	// The Cluster: clusterctl's flags and the clusterctl.yaml variables.
	topology, _, _ := unstructured.NestedMap(cluster.Object, "spec", "topology")
	if topology["version"] != clusterVariables["KUBERNETES_VERSION"] {
		t.Errorf("topology version %v", topology["version"])
	}
	variables, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "topology", "variables")
	got := map[string]string{}
	for _, v := range variables {
		raw, _ := json.Marshal(v.(map[string]any)["value"])
		got[v.(map[string]any)["name"].(string)] = string(raw)
	}
	for name, want := range map[string]string{
		"imageName":      `"` + clusterVariables["OPENSTACK_IMAGE_NAME"] + `"`,
		"nodeCIDR":       `"` + clusterVariables["OPENSTACK_NODE_CIDR"] + `"`,
		"dnsNameservers": `["` + clusterVariables["OPENSTACK_DNS_NAMESERVERS"] + `"]`, // CAPO's single address, as a list
		"identityRef":    `{"cloudName":"` + clusterVariables["OPENSTACK_CLOUD"] + `","name":"demo-cloud-config"}`,
	} {
		if got[name] != want {
			t.Errorf("Cluster variable %s = %s, want %s", name, got[name], want)
		}
	}

	// The cloud controller manager comes with it.
	checkCloudControllerManager(t, objs, clusterVariables)
}

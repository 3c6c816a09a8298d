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

package plane

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// The plane runs the CCM with what the template gives a user: the
// DaemonSet's arguments (the cluster name the extension attributes load
// balancers by) and the cloud.conf, their /etc/config paths pointed at the
// cluster's folder.
func TestTheCloudControllerManagerRunsAsTheTemplateConfiguresIt(t *testing.T) {
	root, err := providers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	clouds := []byte("clouds:\n  openstack:\n    auth:\n      auth_url: http://127.0.0.1:5000/v3\n")
	args, err := RenderCloudConfig(root, dir, CloudConfigVariables{
		ClusterName: "c1", Namespace: "team-a", CloudsYAML: clouds, Cloud: "openstack", NodeCIDR: "10.6.0.0/24",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--cluster-name=team-a.c1", "--cloud-config=" + filepath.Join(dir, "cloud.conf"), "--cloud-provider=openstack"} {
		if !slices.Contains(args, want) {
			t.Errorf("arguments %v lack %s", args, want)
		}
	}
	for _, a := range args {
		if strings.Contains(a, "/etc/config") {
			t.Errorf("argument %s still points at the container's mount", a)
		}
	}
	conf, err := os.ReadFile(filepath.Join(dir, "cloud.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"address-sort-order = 10.6.0.0/24", "clouds-file = " + filepath.Join(dir, "clouds.yaml"), "cloud = openstack"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("cloud.conf lacks %q:\n%s", want, conf)
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, "clouds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, clouds) {
		t.Errorf("clouds.yaml is %q, want the cluster's own %q", got, clouds)
	}
}

// The cluster template holds the CCM's ClusterResourceSet too: RenderCluster
// gives the plane the identity Secret and the Cluster only (the plane runs
// the CCM itself), with the Cluster labelled for that ClusterResourceSet.
func TestRenderClusterLeavesTheCloudControllerManagerToThePlane(t *testing.T) {
	root, err := providers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := &Plane{opts: Options{Root: root}}
	clouds := []byte("clouds:\n  " + ClusterCloud + ":\n    auth:\n      auth_url: http://127.0.0.1:5000/v3\n")
	sec, cluster, err := p.RenderCluster(ClusterVariables{
		Name: "c1", Namespace: "team-a", CloudsYAML: clouds, SharedNetwork: "vm-net",
		Subnet: "5c2f1a8e-0c1d-4e2f-8a3b-1234567890ab", Extra: map[string]string{"OPENSTACK_DNS_NAMESERVERS": "8.8.8.8"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Name != "c1-cloud-config" || sec.Type != "" {
		t.Errorf("identity Secret %s of type %q, want c1-cloud-config (not the ClusterResourceSet's)", sec.Name, sec.Type)
	}
	if cluster.Labels["sharednet.capo.io/cloud-config"] != "c1" {
		t.Errorf("Cluster labels %v: the CCM's ClusterResourceSet would not select it", cluster.Labels)
	}
	for _, v := range cluster.Spec.Topology.Variables {
		if v.Name == "dnsNameservers" && string(v.Value.Raw) != `["8.8.8.8"]` {
			t.Errorf("dnsNameservers %s, want [\"8.8.8.8\"] from CAPO's single-address OPENSTACK_DNS_NAMESERVERS", v.Value.Raw)
		}
	}
}

// A placeholder of the CCM's resources that RenderCloudConfig does not set is
// an error, not a marker handed to the CCM.
func TestTheCloudControllerManagerGetsNoPlaceholderOfTheCluster(t *testing.T) {
	raw := []byte(`apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: ${CLUSTER_NAME}
spec:
  topology:
    version: ${KUBERNETES_VERSION}
---
apiVersion: v1
kind: Secret
metadata:
  name: ${CLUSTER_NAME}-ccm
type: addons.cluster.x-k8s.io/resource-set
stringData:
  cloud-config.yaml: |
    image: ${OPENSTACK_IMAGE_NAME}
`)
	_, err := ccmResourceSet(raw, "test", map[string]string{"CLUSTER_NAME": "c1"})
	if err == nil || !strings.Contains(err.Error(), "placeholder OPENSTACK_IMAGE_NAME,") {
		t.Errorf("got %v, want an error naming OPENSTACK_IMAGE_NAME", err)
	}
	set, err := ccmResourceSet(raw, "test", map[string]string{"CLUSTER_NAME": "c1", "OPENSTACK_IMAGE_NAME": "img"})
	if err != nil || set.Name != "c1-ccm" || set.StringData["cloud-config.yaml"] != "image: img\n" {
		t.Errorf("got %+v, %v", set, err)
	}
}

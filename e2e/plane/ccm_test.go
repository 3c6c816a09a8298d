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
	if string(got) != string(clouds) {
		t.Errorf("clouds.yaml is %q, want the cluster's own %q", got, clouds)
	}
}

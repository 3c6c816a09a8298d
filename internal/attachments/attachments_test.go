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

package attachments

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
)

func TestGetIsOnlyThisNodegroupsAttachment(t *testing.T) {
	// Cluster "demo" nodegroup "md-a" and cluster "demo-md" nodegroup "a"
	// share the object name "demo-md-a"; it is the first pair's.
	a := &sharednetv1.SharedNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-md-a"},
		Spec: sharednetv1.SharedNetworkAttachmentSpec{ClusterName: "demo", MachineDeploymentTopology: "md-a", SharedNetwork: "vm"}}
	reader := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(a).Build()
	for _, tc := range []struct {
		namespace, cluster, topology string
		found                        bool
	}{
		{"team-a", "demo", "md-a", true},
		{"team-a", "demo-md", "a", false},
		{"team-b", "demo", "md-a", false},
		{"team-a", "demo", "md-b", false},
	} {
		got, err := Get(context.Background(), reader, tc.namespace, tc.cluster, tc.topology)
		if err != nil {
			t.Fatal(err)
		}
		if (got != nil) != tc.found {
			t.Errorf("Get(%s, %s, %s) found=%v, want %v", tc.namespace, tc.cluster, tc.topology, got != nil, tc.found)
		}
	}
}

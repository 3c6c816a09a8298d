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

package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
)

// TestATenantCannotSkipTheDeletionHook: on the real kube-apiserver, the
// owner of a namespace (who may do anything there) cannot set CAPI's
// ok-to-delete annotation on its attached Cluster, which would make CAPI
// skip BeforeClusterDelete and leave the cluster's load balancers on the
// shared subnet and the share behind; on a Cluster that uses no shared
// network it may.
func TestATenantCannotSkipTheDeletionHook(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createSharedNetworks(ctx, t)
	ns := grantedNamespace(ctx, g)
	c, _ := clusterOfTheExtension(ctx, t, ns, "okdelete", "c-okdelete")
	g.Expect(updateCluster(ctx, c, override("md-a", `{"name":"vm-net"}`))).To(Succeed())
	tenant := as(ctx, g, ns, "tenant-owner")

	annotate := func() error { // as kubectl annotate does
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+runtimev1.OkToDeleteAnnotation+`":""}}}`))
		return tenant.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}}, patch)
	}
	g.Expect(annotate()).To(MatchError(And(ContainSubstring("metadata.annotations[runtime.cluster.x-k8s.io/ok-to-delete] is set by CAPI"),
		ContainSubstring("on Cluster c-okdelete, which uses a shared network"), ContainSubstring("Remove the annotation"))))
	latest := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), latest)).To(Succeed())
	g.Expect(latest.Annotations).NotTo(HaveKey(runtimev1.OkToDeleteAnnotation), "the Cluster is as it was")

	// Detached (no load balancer of its own on the subnet), the Cluster is
	// not the extension's business any more.
	g.Expect(updateCluster(ctx, c, override("md-a", ""))).To(Succeed())
	g.Expect(annotate()).To(Succeed())
}

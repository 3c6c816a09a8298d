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

package credentials

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// countingClouds opens a distinct session per call and counts the calls,
// as reading the Secret each time does.
type countingClouds struct {
	opened int
	fail   error
}

type session struct {
	openstack.ClusterCloud
	n int
}

func (c *countingClouds) ForCluster(_ context.Context, cluster *clusterv1.Cluster) (openstack.ClusterCloud, *infrav1.OpenStackCluster, error) {
	c.opened++
	if c.fail != nil {
		return nil, nil, c.fail
	}
	return &session{n: c.opened}, &infrav1.OpenStackCluster{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Spec.InfrastructureRef.Name}}, nil
}

func (c *countingClouds) ForSharedNetwork(context.Context, *sharednetv1.SharedNetwork) (openstack.VMCloud, error) {
	return nil, errors.New("not used")
}

// Within one reconcile (a WithMemo context) each Cluster's credential is
// opened once, whoever asks; outside it, every ask opens it (a changed
// Secret is read again); a failure is never kept.
func TestACredentialIsOpenedOncePerReconcile(t *testing.T) {
	g := NewWithT(t)
	cluster := func(name string) *clusterv1.Cluster {
		return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{Name: name + "-osc"}}}
	}
	clouds := &countingClouds{}
	open := func(ctx context.Context, clouds Clouds, name string) error {
		_, _, err := In(ctx, clouds).ForCluster(ctx, cluster(name))
		return err
	}
	reconcile := WithMemo(context.Background())
	first, osc, err := In(reconcile, clouds).ForCluster(reconcile, cluster("demo"))
	g.Expect(err).NotTo(HaveOccurred())
	again, oscAgain, err := In(reconcile, clouds).ForCluster(reconcile, cluster("demo"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clouds.opened).To(Equal(1), "the load balancers, the MTU and the vouch of one reconcile open it once")
	g.Expect(again).To(BeIdenticalTo(first))
	g.Expect(oscAgain).To(Equal(osc))
	oscAgain.Name = "changed by a caller"
	_, oscThird, _ := In(reconcile, clouds).ForCluster(reconcile, cluster("demo"))
	g.Expect(oscThird.Name).To(Equal("demo-osc"), "each caller gets its own copy")

	g.Expect(open(reconcile, clouds, "other")).To(Succeed())
	g.Expect(clouds.opened).To(Equal(2), "another Cluster is opened on its own")

	next := WithMemo(context.Background())
	g.Expect(open(next, clouds, "demo")).To(Succeed())
	g.Expect(clouds.opened).To(Equal(3), "the next reconcile reads the Secret again")
	g.Expect(open(context.Background(), clouds, "demo")).To(Succeed())
	g.Expect(open(context.Background(), clouds, "demo")).To(Succeed())
	g.Expect(clouds.opened).To(Equal(5), "no memo outside a reconcile")

	failing := &countingClouds{fail: errors.New("Secret not found")}
	g.Expect(open(reconcile, failing, "demo")).NotTo(Succeed())
	g.Expect(open(reconcile, failing, "demo")).NotTo(Succeed())
	g.Expect(failing.opened).To(Equal(2), "a failure is tried again")
}

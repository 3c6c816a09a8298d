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

package testenv

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
)

// openStackClusterStandIn is a STAND-IN for CAPO's OpenStackCluster controller, which does not
// run in this environment. It reports every OpenStackCluster as provisioned (status.ready and
// status.initialization.provisioned), which is what CAPI's Cluster controller reads to set
// the Cluster's infrastructure provisioned. It touches no other status field, so a test can
// write e.g. status.network itself.
type openStackClusterStandIn struct {
	client client.Client
}

func (r *openStackClusterStandIn) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("testenv-openstackcluster-stand-in").
		For(&infrav1.OpenStackCluster{}).
		Complete(r)
}

func (r *openStackClusterStandIn) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	osc := &infrav1.OpenStackCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, osc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	//nolint:staticcheck // CAPO v0.14 still sets status.ready, which CAPI's v1beta1 contract reads
	if !osc.DeletionTimestamp.IsZero() || (osc.Status.Ready && osc.Status.Initialization != nil && osc.Status.Initialization.Provisioned) {
		return reconcile.Result{}, nil
	}
	desired := osc.DeepCopy()
	desired.Status.Ready = true //nolint:staticcheck // as CAPO v0.14 does
	desired.Status.Initialization = &infrav1.ClusterInitialization{Provisioned: true}
	return reconcile.Result{}, r.client.Status().Patch(ctx, desired, client.MergeFrom(osc))
}

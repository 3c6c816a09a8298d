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

// Package standins holds the STAND-INS for programs that cannot run on a
// machine without containers and booting servers, shared by the test harness
// (test/testenv) and the local plane (e2e/plane). Everything they write is
// marked with Reason so that nobody mistakes it for the real program's output.
package standins

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"
)

// Reason marks the conditions the stand-ins write.
const Reason = "StandIn"

// ControlPlane is a STAND-IN for the KubeadmControlPlane controller (in the
// local plane the real KCP manager runs for its webhooks only; in the test
// harness it does not run). A real control plane would boot servers running
// kube-apiserver; here the workload cluster is an API server of the harness. For each KubeadmControlPlane it:
//   - writes <cluster>-kubeconfig pointing at that API server and <cluster>-ca
//     (a CA generated as KCP generates it: CABPK puts its hash in the workers'
//     join configuration);
//   - reports the status KCP would once the control plane is up: initialized,
//     available, status.version = spec.version, every replica up to date.
//
// It creates no Machines, so CAPO creates no control-plane servers.
type ControlPlane struct {
	Client client.Client
	// Workload is where the cluster's kubeconfig points: the workload cluster's API server.
	Workload *rest.Config
	// Boot, when set, is how long the first control-plane server takes to
	// come up: a real KCP creates it only once the Cluster's infrastructure
	// is provisioned, and reports the control plane initialized (and, with
	// CAPI's MachineSet preflight checks, lets worker Machines be created)
	// only once it has booted. Zero reports it up at once.
	Boot time.Duration
}

// SetupWithManager registers the stand-in with mgr.
func (r *ControlPlane) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("stand-in-kubeadmcontrolplane").
		For(&controlplanev1.KubeadmControlPlane{}).
		Complete(r)
}

func (r *ControlPlane) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := r.Client.Get(ctx, req.NamespacedName, kcp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !kcp.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	clusterName := kcp.Labels[clusterv1.ClusterNameLabel]
	if clusterName == "" {
		return reconcile.Result{}, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: kcp.Namespace, Name: clusterName}, cluster); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.ensureSecrets(ctx, cluster, kcp); err != nil {
		return reconcile.Result{}, err
	}
	if r.Boot > 0 && !ptr.Deref(kcp.Status.Initialization.ControlPlaneInitialized, false) {
		provisioned := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition)
		if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) || provisioned == nil {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		if wait := time.Until(provisioned.LastTransitionTime.Add(r.Boot)); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}

	replicas := ptr.Deref(kcp.Spec.Replicas, 1)
	desired := kcp.DeepCopy()
	desired.Status.Version = kcp.Spec.Version
	desired.Status.Replicas = ptr.To(replicas)
	desired.Status.ReadyReplicas = ptr.To(replicas)
	desired.Status.AvailableReplicas = ptr.To(replicas)
	desired.Status.UpToDateReplicas = ptr.To(replicas)
	desired.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	desired.Status.ObservedGeneration = kcp.Generation
	for _, condition := range []string{controlplanev1.KubeadmControlPlaneAvailableCondition, controlplanev1.KubeadmControlPlaneInitializedCondition} {
		meta.SetStatusCondition(&desired.Status.Conditions, metav1.Condition{
			Type: condition, Status: metav1.ConditionTrue, Reason: Reason,
			Message: "reported by a control-plane stand-in", ObservedGeneration: kcp.Generation,
		})
	}
	if equality.Semantic.DeepEqual(kcp.Status, desired.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.Client.Status().Patch(ctx, desired, client.MergeFrom(kcp))
}

func (r *ControlPlane) ensureSecrets(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane) error {
	owner := metav1.OwnerReference{
		APIVersion: controlplanev1.GroupVersion.String(), Kind: "KubeadmControlPlane",
		Name: kcp.Name, UID: kcp.UID, Controller: ptr.To(true),
	}
	key := client.ObjectKeyFromObject(cluster)
	ca := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: secret.Name(cluster.Name, secret.ClusterCA)}, ca)
	if apierrors.IsNotFound(err) {
		certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
		if err := certs.Generate(); err != nil {
			return err
		}
		ca = certs.GetByPurpose(secret.ClusterCA).AsSecret(key, owner)
		if err := r.Client.Create(ctx, ca); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	} else if err != nil {
		return err
	}

	kc := &corev1.Secret{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: secret.Name(cluster.Name, secret.Kubeconfig)}, kc)
	if apierrors.IsNotFound(err) {
		kc = kubeconfig.GenerateSecretWithOwner(key, kubeconfig.FromEnvTestConfig(r.Workload, cluster), owner)
		if err := r.Client.Create(ctx, kc); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	return err
}

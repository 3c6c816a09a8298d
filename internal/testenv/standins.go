package testenv

import (
	"context"

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

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
)

// kcpStandIn is a STAND-IN for the KubeadmControlPlane controller, which does not run in this
// environment. It reports every KubeadmControlPlane as initialized, available and at its
// spec.version with all replicas up to date (the v1beta2 contract fields the topology
// controller reads before it creates MachineDeployments), and writes the Cluster's
// <cluster>-kubeconfig Secret pointing at the envtest API server, so CAPI's ClusterCache can
// connect to a "workload cluster".
type kcpStandIn struct {
	client client.Client
	config *rest.Config
}

func (r *kcpStandIn) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("testenv-kcp-stand-in").
		For(&controlplanev1.KubeadmControlPlane{}).
		Complete(r)
}

func (r *kcpStandIn) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := r.client.Get(ctx, req.NamespacedName, kcp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !kcp.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}

	if clusterName := kcp.Labels[clusterv1.ClusterNameLabel]; clusterName != "" {
		if err := r.ensureKubeconfig(ctx, kcp.Namespace, clusterName); err != nil {
			return reconcile.Result{}, err
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
	meta.SetStatusCondition(&desired.Status.Conditions, metav1.Condition{
		Type: controlplanev1.KubeadmControlPlaneAvailableCondition, Status: metav1.ConditionTrue,
		Reason: "TestEnvStandIn", ObservedGeneration: kcp.Generation,
	})
	if equality.Semantic.DeepEqual(kcp.Status, desired.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.client.Status().Patch(ctx, desired, client.MergeFrom(kcp))
}

func (r *kcpStandIn) ensureKubeconfig(ctx context.Context, namespace, clusterName string) error {
	cluster := &clusterv1.Cluster{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clusterName}, cluster); err != nil {
		return client.IgnoreNotFound(err)
	}
	secret := &corev1.Secret{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clusterName + "-kubeconfig"}, secret)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	secret = kubeconfig.GenerateSecret(cluster, kubeconfig.FromEnvTestConfig(r.config, cluster))
	if err := r.client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

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
	if !osc.DeletionTimestamp.IsZero() || (osc.Status.Ready && osc.Status.Initialization != nil && osc.Status.Initialization.Provisioned) {
		return reconcile.Result{}, nil
	}
	desired := osc.DeepCopy()
	desired.Status.Ready = true
	desired.Status.Initialization = &infrav1.ClusterInitialization{Provisioned: true}
	return reconcile.Result{}, r.client.Status().Patch(ctx, desired, client.MergeFrom(osc))
}

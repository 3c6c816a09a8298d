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
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

const (
	// KubernetesVersion is the topology version Cluster uses.
	KubernetesVersion = "v1.35.0"
	// WorkerClass is the (only) MachineDeployment class of ClusterClass.
	WorkerClass = "default-worker"
)

// ControlPlaneTemplateName is the KubeadmControlPlaneTemplate of ClusterClass(ns, name).
func ControlPlaneTemplateName(name string) string { return name + "-control-plane" }

// ControlPlaneMachineTemplateName is the control plane's OpenStackMachineTemplate of ClusterClass(ns, name).
func ControlPlaneMachineTemplateName(name string) string { return name + "-control-plane-machine" }

// InfraClusterTemplateName is the OpenStackClusterTemplate of ClusterClass(ns, name).
func InfraClusterTemplateName(name string) string { return name + "-openstackcluster" }

// WorkerMachineTemplateName is the workers' OpenStackMachineTemplate of ClusterClass(ns, name).
func WorkerMachineTemplateName(name string) string { return name + "-" + WorkerClass + "-machine" }

// WorkerBootstrapTemplateName is the workers' KubeadmConfigTemplate of ClusterClass(ns, name).
func WorkerBootstrapTemplateName(name string) string {
	return name + "-" + WorkerClass + "-bootstraptemplate"
}

// The templates, modelled on CAPO's templates/clusterclass-dev-test.yaml (v0.14.2), trimmed to
// what the webhooks require. NAMESPACE and NAME are replaced.
const classTemplates = `
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlaneTemplate
metadata:
  name: NAME-control-plane
  namespace: NAMESPACE
spec:
  template:
    spec:
      kubeadmConfigSpec:
        clusterConfiguration:
          controllerManager:
            extraArgs:
            - name: cloud-provider
              value: external
        initConfiguration:
          nodeRegistration:
            name: "{{ v1.local_hostname }}"
            kubeletExtraArgs:
            - name: cloud-provider
              value: external
            - name: provider-id
              value: "openstack:///{{ v1.instance_id }}"
        joinConfiguration:
          nodeRegistration:
            name: "{{ v1.local_hostname }}"
            kubeletExtraArgs:
            - name: cloud-provider
              value: external
            - name: provider-id
              value: "openstack:///{{ v1.instance_id }}"
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OpenStackClusterTemplate
metadata:
  name: NAME-openstackcluster
  namespace: NAMESPACE
spec:
  template:
    spec:
      identityRef:
        name: NAME-cloud-config
        cloudName: openstack
      disableExternalNetwork: true
      disableAPIServerFloatingIP: true
      apiServerLoadBalancer:
        enabled: false
      managedSubnets:
      - cidr: 10.6.0.0/24
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OpenStackMachineTemplate
metadata:
  name: NAME-control-plane-machine
  namespace: NAMESPACE
spec:
  template:
    spec:
      flavor: m1.medium
      image:
        filter:
          name: node-image
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OpenStackMachineTemplate
metadata:
  name: NAME-default-worker-machine
  namespace: NAMESPACE
spec:
  template:
    spec:
      flavor: m1.small
      image:
        filter:
          name: node-image
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata:
  name: NAME-default-worker-bootstraptemplate
  namespace: NAMESPACE
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          name: "{{ v1.local_hostname }}"
          kubeletExtraArgs:
          - name: cloud-provider
            value: external
          - name: provider-id
            value: "openstack:///{{ v1.instance_id }}"
`

// ClusterClass returns a CAPI v1beta2 ClusterClass called name with its templates (a
// KubeadmControlPlaneTemplate, an OpenStackClusterTemplate, OpenStackMachineTemplates for the
// control plane and the "default-worker" MachineDeployment class, and a KubeadmConfigTemplate),
// templates first, the ClusterClass last: create them in order. patches become
// spec.patches, e.g. an external patch:
//
//	clusterv1.ClusterClassPatch{Name: "sharednet", External: &clusterv1.ExternalPatchDefinition{
//		GeneratePatchesExtension: "generate-patches.capo-sharednet"}}
func ClusterClass(namespace, name string, patches ...clusterv1.ClusterClassPatch) []client.Object {
	objs := []client.Object{
		&controlplanev1.KubeadmControlPlaneTemplate{},
		&infrav1.OpenStackClusterTemplate{},
		&infrav1.OpenStackMachineTemplate{},
		&infrav1.OpenStackMachineTemplate{},
		&bootstrapv1.KubeadmConfigTemplate{},
	}
	docs := strings.Split(strings.NewReplacer("NAMESPACE", namespace, "NAME", name).Replace(classTemplates), "\n---\n")
	for i, obj := range objs {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), obj); err != nil {
			panic(fmt.Sprintf("testenv: template %d: %v", i, err))
		}
	}

	ref := func(apiVersion, kind, name string) clusterv1.ClusterClassTemplateReference {
		return clusterv1.ClusterClassTemplateReference{APIVersion: apiVersion, Kind: kind, Name: name}
	}
	const (
		cpAPI    = "controlplane.cluster.x-k8s.io/v1beta2"
		infraAPI = "infrastructure.cluster.x-k8s.io/v1beta1"
		bootAPI  = "bootstrap.cluster.x-k8s.io/v1beta2"
	)
	cc := &clusterv1.ClusterClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "ClusterClass"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{
				TemplateRef: ref(infraAPI, "OpenStackClusterTemplate", InfraClusterTemplateName(name)),
			},
			ControlPlane: clusterv1.ControlPlaneClass{
				TemplateRef: ref(cpAPI, "KubeadmControlPlaneTemplate", ControlPlaneTemplateName(name)),
				MachineInfrastructure: clusterv1.ControlPlaneClassMachineInfrastructureTemplate{
					TemplateRef: ref(infraAPI, "OpenStackMachineTemplate", ControlPlaneMachineTemplateName(name)),
				},
			},
			Workers: clusterv1.WorkersClass{MachineDeployments: []clusterv1.MachineDeploymentClass{{
				Class: WorkerClass,
				Bootstrap: clusterv1.MachineDeploymentClassBootstrapTemplate{
					TemplateRef: ref(bootAPI, "KubeadmConfigTemplate", WorkerBootstrapTemplateName(name)),
				},
				Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{
					TemplateRef: ref(infraAPI, "OpenStackMachineTemplate", WorkerMachineTemplateName(name)),
				},
			}}},
			Patches: patches,
		},
	}
	return append(objs, cc)
}

// Cluster returns a CAPI v1beta2 Cluster of ClusterClass class with topology version
// KubernetesVersion, one control-plane replica and one MachineDeployment (class
// "default-worker", 1 replica) per name in mds. Edit the result for variables or overrides.
func Cluster(namespace, name, class string, mds ...string) *clusterv1.Cluster {
	c := &clusterv1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{
			Topology: clusterv1.Topology{
				ClassRef:     clusterv1.ClusterClassRef{Name: class},
				Version:      KubernetesVersion,
				ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			},
		},
	}
	for _, md := range mds {
		c.Spec.Topology.Workers.MachineDeployments = append(c.Spec.Topology.Workers.MachineDeployments,
			clusterv1.MachineDeploymentTopology{Class: WorkerClass, Name: md, Replicas: ptr.To[int32](1)})
	}
	return c
}

// CreateObjects creates objs in order.
func (e *Environment) CreateObjects(ctx context.Context, objs ...client.Object) error {
	for _, o := range objs {
		if err := e.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// WaitForClusterClass waits until CAPI has reconciled the current generation of a ClusterClass
// (status.observedGeneration and VariablesReady=True), which the Cluster webhook requires
// before it admits a Cluster of that class.
func (e *Environment) WaitForClusterClass(ctx context.Context, namespace, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cc := &clusterv1.ClusterClass{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cc); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		cond := meta.FindStatusCondition(cc.Status.Conditions, clusterv1.ClusterClassVariablesReadyCondition)
		if cond != nil {
			last = cond.Message
		}
		return cc.Status.ObservedGeneration == cc.Generation && cond != nil && cond.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		return fmt.Errorf("ClusterClass %s/%s not reconciled (%s): %w", namespace, name, last, err)
	}
	return nil
}

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
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// The sample templates of templates/.
const (
	ClusterClassFile    = "templates/clusterclass-shared-network.yaml"
	ClusterTemplateFile = "templates/cluster-template-shared-network.yaml"
	// ClusterClassName is the ClusterClass the cluster template uses.
	ClusterClassName = "shared-network"
)

// Test bed facts (hack/openstack-testbed/seed.py).
const (
	TestbedImage  = "testbed-image"
	TestbedFlavor = "m1.tiny"
)

// ClusterClass returns the objects of templates/clusterclass-shared-network.yaml
// in namespace, templates first and the ClusterClass last, with the local
// cloud's adaptations of the OpenStackClusterTemplate (LocalCloudOverlay).
func (p *Plane) ClusterClass(namespace string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(filepath.Join(p.opts.Root, filepath.FromSlash(ClusterClassFile)))
	if err != nil {
		return nil, err
	}
	docs, err := providers.SplitYAML(raw, ClusterClassFile)
	if err != nil {
		return nil, err
	}
	var templates, classes []*unstructured.Unstructured
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", ClusterClassFile, err)
		}
		u.SetNamespace(namespace)
		if u.GetKind() == "OpenStackClusterTemplate" {
			if err := unstructured.SetNestedMap(u.Object, mergeMaps(nestedMap(u.Object, "spec", "template", "spec"), LocalCloudOverlay(p.WorkloadPort)), "spec", "template", "spec"); err != nil {
				return nil, err
			}
		}
		if u.GetKind() == "ClusterClass" {
			classes = append(classes, u)
		} else {
			templates = append(templates, u)
		}
	}
	return append(templates, classes...), nil
}

// LocalCloudOverlay is the one change the plane makes to the sample
// ClusterClass, to its OpenStackClusterTemplate: the test bed has no external
// network (so no router, no floating IP) and the workload cluster's API
// server is the plane's second kube-apiserver on 127.0.0.1:<port>, not a
// load balancer in front of control-plane servers.
func LocalCloudOverlay(workloadPort int) map[string]any {
	return map[string]any{
		"disableExternalNetwork":     true,
		"disableAPIServerFloatingIP": true,
		"apiServerLoadBalancer":      map[string]any{"enabled": false},
		"apiServerFixedIP":           "127.0.0.1",
		"apiServerPort":              int64(workloadPort),
	}
}

func nestedMap(obj map[string]any, fields ...string) map[string]any {
	m, _, _ := unstructured.NestedMap(obj, fields...)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

func mergeMaps(base, overlay map[string]any) map[string]any {
	for k, v := range overlay {
		base[k] = v
	}
	return base
}

// ClusterVariables are the clusterctl variables of the cluster template for
// the test bed: the cluster's own project is the test bed's cluster-project.
type ClusterVariables struct {
	Name, Namespace string
	// CloudsYAML is the test bed's clouds.yaml; only its cluster-project entry
	// goes into the cluster's identity Secret (as cloud "openstack").
	CloudsYAML []byte
	// KubernetesVersion defaults to v1.35.0.
	KubernetesVersion string
	// Workers is each nodegroup's replica count (1 when 0).
	Workers int
	// SharedNetwork and Subnet fill the template's md-a override.
	SharedNetwork, Subnet string
	// Extra are more variables (e.g. POD_CIDR).
	Extra map[string]string
}

// RenderCluster renders templates/cluster-template-shared-network.yaml with
// clusterctl's own variable processor (what `clusterctl generate cluster`
// does) and returns its identity Secret and Cluster. The template's
// ClusterResourceSet and its Secret (the cloud controller manager) are left
// out: the plane runs that CCM as a process (cloudControllerManagers).
func (p *Plane) RenderCluster(v ClusterVariables) (*corev1.Secret, *clusterv1.Cluster, error) {
	raw, err := os.ReadFile(filepath.Join(p.opts.Root, filepath.FromSlash(ClusterTemplateFile)))
	if err != nil {
		return nil, nil, err
	}
	clouds, err := OneCloud(v.CloudsYAML, ClusterCloud, "openstack")
	if err != nil {
		return nil, nil, err
	}
	if v.KubernetesVersion == "" {
		v.KubernetesVersion = "v1.35.0"
	}
	if v.Workers == 0 {
		v.Workers = 1
	}
	vars := map[string]string{
		"CLUSTER_NAME":                           v.Name,
		"NAMESPACE":                              v.Namespace,
		"OPENSTACK_CLOUD_YAML_B64":               base64.StdEncoding.EncodeToString(clouds),
		"KUBERNETES_VERSION":                     v.KubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT":            "1",
		"WORKER_MACHINE_COUNT":                   fmt.Sprint(v.Workers),
		"OPENSTACK_IMAGE_NAME":                   TestbedImage,
		"OPENSTACK_CONTROL_PLANE_MACHINE_FLAVOR": TestbedFlavor,
		"OPENSTACK_NODE_MACHINE_FLAVOR":          TestbedFlavor,
		"SHARED_NETWORK_NAME":                    v.SharedNetwork,
		"SHARED_NETWORK_SUBNET_ID":               v.Subnet,
	}
	for k, val := range v.Extra {
		vars[k] = val
	}

	docs, err := renderTemplate(raw, ClusterTemplateFile, vars)
	if err != nil {
		return nil, nil, err
	}
	var sec *corev1.Secret
	var cluster *clusterv1.Cluster
	for _, doc := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, nil, err
		}
		switch tm.Kind {
		case "Secret":
			s := &corev1.Secret{}
			if err = yaml.UnmarshalStrict(doc, s); err == nil && s.Type != addonsv1.ClusterResourceSetSecretType {
				sec = s
			}
		case "ClusterResourceSet":
			// With its Secret above: the cloud controller manager, which the
			// plane runs itself (cloudControllerManagers, RenderCloudConfig).
		case "Cluster":
			cluster = &clusterv1.Cluster{}
			err = yaml.UnmarshalStrict(doc, cluster)
		default:
			err = fmt.Errorf("unexpected %s in %s", tm.Kind, ClusterTemplateFile)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", ClusterTemplateFile, err)
		}
	}
	if sec == nil || cluster == nil {
		return nil, nil, fmt.Errorf("%s: want a Secret and a Cluster", ClusterTemplateFile)
	}
	return sec, cluster, nil
}

// Apply creates objects, leaving those that exist as they are.
func (p *Plane) Apply(ctx context.Context, objs ...client.Object) error {
	for _, o := range objs {
		if err := p.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s/%s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// WaitForClusterClass waits until CAPI has reconciled a ClusterClass
// (variables discovered from the extension): Clusters of it are admitted only then.
func (p *Plane) WaitForClusterClass(ctx context.Context, namespace, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cc := &clusterv1.ClusterClass{}
		if err := p.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cc); err != nil {
			return false, client.IgnoreNotFound(err)
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

// renderTemplate renders a file of templates/ with clusterctl's own variable
// processor (what `clusterctl generate` does; every variable must be set)
// and returns its YAML documents.
func renderTemplate(raw []byte, file string, vars map[string]string) ([][]byte, error) {
	out, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if val, ok := vars[name]; ok {
			return val, nil
		}
		return "", fmt.Errorf("variable %s not set", name)
	})
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", file, err)
	}
	return providers.SplitYAML(out, file)
}

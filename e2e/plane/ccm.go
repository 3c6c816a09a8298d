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
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/loopback"
	"github.com/capo-sharednet/capo-sharednet/test/providers"
)

// ccmBinary is cloud-provider-openstack's openstack-cloud-controller-manager,
// which hack/ensure-envtest-assets.sh builds into the assets folder with
// kube-apiserver and kube-controller-manager from one module (hack/tools/k8s):
// they share most of their packages, so one build list compiles them once.
const ccmBinary = "openstack-cloud-controller-manager"

// findCCM is the cloud controller manager in the assets folder.
func findCCM(assets string) (string, error) {
	out := filepath.Join(assets, ccmBinary)
	if _, err := os.Stat(out); err != nil {
		return "", fmt.Errorf("%s not found in %s (run hack/ensure-envtest-assets.sh): %w", ccmBinary, assets, err)
	}
	return out, nil
}

// NoCloudControllerManagerLabel on a Cluster keeps the plane from running a
// cloud controller manager for it: with one workload API server for all
// clusters, its CCM would make load balancers for another cluster's Services.
const NoCloudControllerManagerLabel = "e2e.sharednet.capo.io/no-cloud-controller-manager"

// cloudControllerManagers runs the real OpenStack cloud controller manager of
// each Cluster as a process of the plane, against the workload API server.
//
// In a real cluster the ClusterResourceSet of ClusterTemplateFile installs
// the cloud.conf Secret and a DaemonSet on the control-plane nodes; here the
// control plane is a stand-in, so the plane renders that same template with
// the cluster's variables (what `clusterctl generate cluster` gives the user)
// and runs the DaemonSet's container command with the rendered cloud.conf and
// the cluster's own clouds.yaml. It starts once the cluster's kubeconfig and
// network exist, and stops when the cluster's control plane is deleted, as a
// CCM on control-plane nodes would.
//
// Every cluster of the plane shares one workload API server, so each CCM
// sees every cluster's Nodes and Services: tests keep the Services of one
// cluster at a time (docs/e2e.md), or label a cluster that must not serve
// them NoCloudControllerManagerLabel.
type cloudControllerManagers struct {
	mgmt     client.Client
	root     string
	dir      string // <plane>/ccm: one folder per cluster
	logs     string // the plane's logs folder
	binary   string
	workload string // the workload API server's kubeconfig
	every    time.Duration

	mu      sync.Mutex
	running map[client.ObjectKey]*process
}

// Start implements manager.Runnable.
func (r *cloudControllerManagers) Start(ctx context.Context) error {
	defer r.stopAll()
	loop(ctx, r.every, "cloud-controller-managers", r.sync)
	return nil
}

func (r *cloudControllerManagers) sync(ctx context.Context) error {
	clusters := &clusterv1.ClusterList{}
	if err := r.mgmt.List(ctx, clusters); err != nil {
		return err
	}
	wanted := map[client.ObjectKey]bool{}
	var errs []error
	for i := range clusters.Items {
		c := &clusters.Items[i]
		key := client.ObjectKeyFromObject(c)
		run, err := r.wanted(ctx, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", key, err))
		}
		if !run {
			continue
		}
		wanted[key] = true
		if err := r.ensure(ctx, c); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", key, err))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, p := range r.running {
		if !wanted[key] {
			errs = append(errs, p.stop())
			delete(r.running, key)
		}
	}
	return errors.Join(errs...)
}

// wanted: a CCM runs from the cluster's first kubeconfig until its control
// plane is deleted.
func (r *cloudControllerManagers) wanted(ctx context.Context, c *clusterv1.Cluster) (bool, error) {
	if _, ok := c.Labels[NoCloudControllerManagerLabel]; ok || !c.Spec.ControlPlaneRef.IsDefined() {
		return false, nil
	}
	cp := &controlplanev1.KubeadmControlPlane{} // the plane's control plane (a stand-in)
	if err := r.mgmt.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}, cp); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !cp.DeletionTimestamp.IsZero() {
		return false, nil
	}
	err := r.mgmt.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-kubeconfig"}, &corev1.Secret{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (r *cloudControllerManagers) ensure(ctx context.Context, c *clusterv1.Cluster) error {
	key := client.ObjectKeyFromObject(c)
	r.mu.Lock()
	p := r.running[key]
	r.mu.Unlock()
	if p != nil {
		select {
		case <-p.exited: // restarted below, as the kubelet restarts a container
			r.mu.Lock()
			delete(r.running, key)
			r.mu.Unlock()
			return fmt.Errorf("the cloud controller manager exited (%v), restarting it; see %s", p.exitErr, p.log)
		default:
			return nil
		}
	}
	if c.Spec.InfrastructureRef.Name == "" {
		return nil // no OpenStackCluster yet
	}
	osc, identity, err := clusterIdentity(ctx, r.mgmt, c)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if osc.Status.Network == nil || len(osc.Status.Network.Subnets) == 0 {
		return nil // the cluster network is not made yet
	}
	p, err = r.start(CloudConfigVariables{
		ClusterName: c.Name, Namespace: c.Namespace,
		CloudsYAML: identity.Data[openstack.CloudsSecretKey], Cloud: osc.Spec.IdentityRef.CloudName,
		NodeCIDR: osc.Status.Network.Subnets[0].CIDR,
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.running[key] = p
	r.mu.Unlock()
	return p.waitReady(ctx, time.Minute)
}

// start runs a cloud controller manager configured for v against the
// workload API server.
func (r *cloudControllerManagers) start(v CloudConfigVariables) (*process, error) {
	dir := filepath.Join(r.dir, v.Namespace+"."+v.ClusterName)
	args, err := RenderCloudConfig(r.root, dir, v)
	if err != nil {
		return nil, err
	}
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	args = append(args,
		"--kubeconfig="+r.workload,
		// One process per cluster: no lease to share with the other
		// clusters' managers on the one workload API server.
		"--leader-elect=false",
		"--secure-port="+strconv.Itoa(port), "--cert-dir="+dir,
	)
	p := &process{
		name: "openstack-cloud-controller-manager " + v.Namespace + "/" + v.ClusterName, path: r.binary, args: args,
		log: filepath.Join(r.logs, "openstack-cloud-controller-manager-"+v.Namespace+"."+v.ClusterName+".log"), readyz: "https://" + addr(port) + "/healthz",
	}
	return p, p.start()
}

func (r *cloudControllerManagers) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, p := range r.running {
		_ = p.stop()
		delete(r.running, key)
	}
}

// CloudConfigVariables are the variables of ClusterTemplateFile that the
// cloud controller manager's resources (its ClusterResourceSet's Secret) use.
type CloudConfigVariables struct {
	ClusterName, Namespace string
	// CloudsYAML is the cluster's own clouds.yaml (its identityRef Secret);
	// Cloud the entry in it.
	CloudsYAML []byte
	Cloud      string
	// NodeCIDR is the cluster network's subnet (OPENSTACK_NODE_CIDR).
	NodeCIDR string
}

// RenderCloudConfig renders the cloud controller manager's part of
// ClusterTemplateFile (the Secret its ClusterResourceSet applies) with
// clusterctl's variable processor, writes the kube-system/cloud-config
// Secret's files into dir (where the DaemonSet mounts them at /etc/config)
// and returns the DaemonSet container's arguments, their /etc/config paths
// pointed at dir.
func RenderCloudConfig(root, dir string, v CloudConfigVariables) ([]string, error) {
	const file = ClusterTemplateFile
	raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	vars := map[string]string{
		"CLUSTER_NAME": v.ClusterName, "NAMESPACE": v.Namespace,
		"OPENSTACK_CLOUD_YAML_B64": base64.StdEncoding.EncodeToString(v.CloudsYAML),
		"OPENSTACK_CLOUD":          v.Cloud, "OPENSTACK_NODE_CIDR": v.NodeCIDR,
	}
	set, err := ccmResourceSet(raw, file, vars)
	if err != nil {
		return nil, err
	}
	// The resources the ClusterResourceSet applies to the workload cluster.
	var cloudConfig *corev1.Secret
	var daemonSet *appsv1.DaemonSet
	for _, k := range []string{"cloud-config.yaml", "cloud-controller-manager.yaml"} {
		inner, err := providers.SplitYAML([]byte(set.StringData[k]), file+" "+k)
		if err != nil {
			return nil, err
		}
		for _, doc := range inner {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return nil, fmt.Errorf("%s %s: %w", file, k, err)
			}
			switch tm.Kind {
			case "Secret":
				cloudConfig = &corev1.Secret{}
				err = yaml.UnmarshalStrict(doc, cloudConfig)
			case "DaemonSet":
				daemonSet = &appsv1.DaemonSet{}
				err = yaml.UnmarshalStrict(doc, daemonSet)
			}
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", file, k, err)
			}
		}
	}
	if cloudConfig == nil || daemonSet == nil || len(daemonSet.Spec.Template.Spec.Containers) != 1 {
		return nil, fmt.Errorf("%s: want the cloud-config Secret and the cloud controller manager's DaemonSet with one container", file)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	const mount = "/etc/config/"
	files := map[string][]byte{}
	for k, val := range cloudConfig.Data {
		files[k] = val
	}
	for k, val := range cloudConfig.StringData {
		files[k] = []byte(strings.ReplaceAll(val, mount, dir+"/"))
	}
	for k, val := range files {
		if err := os.WriteFile(filepath.Join(dir, k), val, 0o600); err != nil {
			return nil, err
		}
	}
	container := daemonSet.Spec.Template.Spec.Containers[0]
	var args []string
	for _, a := range append(container.Command, container.Args...)[1:] { // [0] is the program
		args = append(args, strings.ReplaceAll(a, mount, dir+"/"))
	}
	return args, nil
}

// notForTheCCM marks, in the rendered template, the value of a required
// placeholder the cloud controller manager's resources must not use (the
// Cluster's: Kubernetes version, image, shared network...).
const notForTheCCM = "not-a-cloud-controller-manager-variable-"

// ccmResourceSet renders the cluster template with clusterctl's variable
// processor and returns its Secret of type addons.cluster.x-k8s.io/resource-set
// (what the ClusterResourceSet applies to the workload cluster). vars must set
// every placeholder that Secret uses; the others keep their defaults, and the
// required ones that belong to the Cluster alone render as a marker that must
// not appear in the Secret.
func ccmResourceSet(raw []byte, file string, vars map[string]string) (*corev1.Secret, error) {
	processor := yamlprocessor.NewSimpleProcessor()
	defaults, err := processor.GetVariableMap(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	out, err := processor.Process(raw, func(name string) (string, error) {
		if val, ok := vars[name]; ok {
			return val, nil
		}
		if defaults[name] != nil {
			return "", fmt.Errorf("variable %s not set: its default applies", name)
		}
		return notForTheCCM + name, nil
	})
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", file, err)
	}
	docs, err := providers.SplitYAML(out, file)
	if err != nil {
		return nil, err
	}
	var set *corev1.Secret
	for _, doc := range docs {
		s := &corev1.Secret{}
		if err := yaml.Unmarshal(doc, s); err != nil || s.Kind != "Secret" || s.Type != addonsv1.ClusterResourceSetSecretType {
			continue
		}
		if set != nil {
			return nil, fmt.Errorf("%s: more than one Secret of type %s", file, addonsv1.ClusterResourceSetSecretType)
		}
		if i := bytes.Index(doc, []byte(notForTheCCM)); i >= 0 {
			name := string(doc[i+len(notForTheCCM):])
			if end := strings.IndexFunc(name, func(r rune) bool { return r != '_' && (r < 'A' || r > 'Z') && (r < '0' || r > '9') }); end >= 0 {
				name = name[:end]
			}
			return nil, fmt.Errorf("%s: the cloud controller manager's resources use the placeholder %s, which RenderCloudConfig does not set", file, name)
		}
		if err := yaml.UnmarshalStrict(doc, s); err != nil {
			return nil, fmt.Errorf("%s: Secret %s: %w", file, s.Name, err)
		}
		set = s
	}
	if set == nil {
		return nil, fmt.Errorf("%s: no Secret of type %s (the cloud controller manager's ClusterResourceSet)", file, addonsv1.ClusterResourceSetSecretType)
	}
	return set, nil
}

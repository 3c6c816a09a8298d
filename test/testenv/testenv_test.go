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
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/exp/runtime/catalog"
	"sigs.k8s.io/cluster-api/exp/runtime/server"

	"github.com/capo-sharednet/capo-sharednet/test/loopback"
)

var env *Environment

func TestMain(m *testing.M) {
	ExitIfShort()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	start := time.Now()
	var err error
	env, err = Start(ctx, Options{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting test environment: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("testenv started in %s\n", time.Since(start).Round(time.Millisecond))
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping test environment: %v\n", err)
	}
	os.Exit(code)
}

// eventually polls cond until it returns nil, failing the test with the last error on timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	var last error
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if last != nil {
		t.Fatalf("condition not met after %s: %v", timeout, last)
	}
}

// machineDeployments returns the Cluster's MachineDeployments by topology name.
func machineDeployments(ctx context.Context, ns, cluster string) (map[string]*clusterv1.MachineDeployment, error) {
	list := &clusterv1.MachineDeploymentList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return nil, err
	}
	out := map[string]*clusterv1.MachineDeployment{}
	for i := range list.Items {
		out[list.Items[i].Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]] = &list.Items[i]
	}
	return out, nil
}

// createClusterWithTopology creates the ClusterClass and a Cluster with md-a and md-b and
// waits until both MachineDeployments exist.
func createClusterWithTopology(t *testing.T, ctx context.Context, ns, name string, patches ...clusterv1.ClusterClassPatch) map[string]*clusterv1.MachineDeployment {
	t.Helper()
	if err := env.CreateObjects(ctx, ClusterClass(ns, name, patches...)...); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitForClusterClass(ctx, ns, name); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, Cluster(ns, name, name, "md-a", "md-b")); err != nil {
		t.Fatal(err)
	}
	var mds map[string]*clusterv1.MachineDeployment
	eventually(t, time.Minute, func() error {
		var err error
		if mds, err = machineDeployments(ctx, ns, name); err != nil {
			return err
		}
		if mds["md-a"] == nil || mds["md-b"] == nil {
			return fmt.Errorf("MachineDeployments: %v", slices.Collect(maps.Keys(mds)))
		}
		return nil
	})
	return mds
}

func TestTopologyCreatesMachineDeployments(t *testing.T) {
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "topology")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	createClusterWithTopology(t, ctx, ns, "c1")
	t.Logf("MachineDeployments created %s after the Cluster", time.Since(start).Round(time.Millisecond))

	eventually(t, time.Minute, func() error {
		list := &clusterv1.MachineSetList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		owners := map[string]bool{}
		for _, ms := range list.Items {
			owners[ms.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]] = true
		}
		if !owners["md-a"] || !owners["md-b"] {
			return fmt.Errorf("MachineSets for %v", owners)
		}
		return nil
	})

	eventually(t, time.Minute, func() error {
		c := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1"}, c); err != nil {
			return err
		}
		if c.Status.Initialization.InfrastructureProvisioned == nil || !*c.Status.Initialization.InfrastructureProvisioned ||
			c.Status.Initialization.ControlPlaneInitialized == nil || !*c.Status.Initialization.ControlPlaneInitialized {
			return fmt.Errorf("cluster initialization: %+v", c.Status.Initialization)
		}
		return nil
	})
}

// patchTag is the tag the test extension adds to md-a's OpenStackMachineTemplate.
const patchTag = "testenv-patched"

// startExtension serves a GeneratePatches handler that adds patchTag to the worker
// OpenStackMachineTemplate of MachineDeployment topology md-a only. Returns its URL.
func startExtension(t *testing.T, ctx context.Context) string {
	t.Helper()
	port := loopback.Port(t)

	cat := runtimecatalog.New()
	_ = runtimehooksv1.AddToCatalog(cat)
	srv, err := server.New(server.Options{Catalog: cat, Host: "127.0.0.1", Port: port, CertDir: env.CertDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.AddExtensionHandler(server.ExtensionHandler{
		Hook: runtimehooksv1.GeneratePatches, Name: "generate-patches", HandlerFunc: generatePatches,
	}); err != nil {
		t.Fatal(err)
	}
	srvCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Start(srvCtx); err != nil {
			t.Errorf("extension server: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return fmt.Sprintf("https://127.0.0.1:%d", port)
}

func generatePatches(_ context.Context, req *runtimehooksv1.GeneratePatchesRequest, resp *runtimehooksv1.GeneratePatchesResponse) {
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	for _, item := range req.Items {
		if item.HolderReference.Kind != "MachineDeployment" || item.HolderReference.FieldPath != "spec.template.spec.infrastructureRef" {
			continue
		}
		var builtin struct {
			MachineDeployment struct {
				TopologyName string `json:"topologyName"`
			} `json:"machineDeployment"`
		}
		for _, v := range item.Variables {
			if v.Name == runtimehooksv1.BuiltinsName {
				_ = json.Unmarshal(v.Value.Raw, &builtin)
			}
		}
		if builtin.MachineDeployment.TopologyName != "md-a" {
			continue
		}
		resp.Items = append(resp.Items, runtimehooksv1.GeneratePatchesResponseItem{
			UID:       item.UID,
			PatchType: runtimehooksv1.JSONPatchType,
			Patch:     []byte(`[{"op":"add","path":"/spec/template/spec/tags","value":["` + patchTag + `"]}]`),
		})
	}
}

func machineTemplateTags(ctx context.Context, md *clusterv1.MachineDeployment) ([]string, error) {
	tmpl := &infrav1.OpenStackMachineTemplate{}
	key := client.ObjectKey{Namespace: md.Namespace, Name: md.Spec.Template.Spec.InfrastructureRef.Name}
	if err := env.Client.Get(ctx, key, tmpl); err != nil {
		return nil, err
	}
	return tmpl.Spec.Template.Spec.Tags, nil
}

func TestExternalPatchOverHTTPS(t *testing.T) {
	ctx := context.Background()
	url := startExtension(t, ctx)

	ext := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "testext"},
		Spec: runtimev1.ExtensionConfigSpec{
			ClientConfig: runtimev1.ClientConfig{URL: url, CABundle: env.CAData},
		},
	}
	if err := env.Client.Create(ctx, ext); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ext) })
	eventually(t, 30*time.Second, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ext), ext); err != nil {
			return err
		}
		for _, h := range ext.Status.Handlers {
			if h.Name == "generate-patches.testext" {
				return nil
			}
		}
		return fmt.Errorf("handlers: %+v, conditions: %+v", ext.Status.Handlers, ext.Status.Conditions)
	})

	ns, err := env.CreateNamespace(ctx, "extpatch")
	if err != nil {
		t.Fatal(err)
	}
	patch := clusterv1.ClusterClassPatch{
		Name:     "testext",
		External: &clusterv1.ExternalPatchDefinition{GeneratePatchesExtension: "generate-patches.testext"},
	}
	mds := createClusterWithTopology(t, ctx, ns, "c2", patch)
	tagsA, err := machineTemplateTags(ctx, mds["md-a"])
	if err != nil {
		t.Fatal(err)
	}
	tagsB, err := machineTemplateTags(ctx, mds["md-b"])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tagsA, patchTag) {
		t.Errorf("md-a template tags = %v, want %q", tagsA, patchTag)
	}
	if slices.Contains(tagsB, patchTag) {
		t.Errorf("md-b template tags = %v, want no %q", tagsB, patchTag)
	}

	// Restart CAPI: the new manager's runtime client must discover the extension again, and a
	// new Cluster must still get the patch.
	start := time.Now()
	if err := env.StopCAPI(); err != nil {
		t.Fatal(err)
	}
	if err := env.StartCAPI(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("CAPI restarted in %s", time.Since(start).Round(time.Millisecond))
	if err := env.Client.Create(ctx, Cluster(ns, "c3", "c2", "md-a")); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		mds, err := machineDeployments(ctx, ns, "c3")
		if err != nil {
			return err
		}
		if mds["md-a"] == nil {
			return fmt.Errorf("no md-a yet")
		}
		tags, err := machineTemplateTags(ctx, mds["md-a"])
		if err != nil {
			return err
		}
		if !slices.Contains(tags, patchTag) {
			return fmt.Errorf("c3 md-a template tags = %v", tags)
		}
		return nil
	})
}

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

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/capo-sharednet/capo-sharednet/e2e/plane"
	"github.com/capo-sharednet/capo-sharednet/test/providers"
	"github.com/capo-sharednet/capo-sharednet/test/testbed"
	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

var (
	root string
	pl   *plane.Plane
	// clouds is the test bed's clouds.yaml (admin, vm-project, cluster-project).
	clouds []byte
	// admin, vm and clusterProject ask OpenStack as these identities.
	admin, vm, clusterProject *plane.Cloud
	tl                        = &timeline{}
)

func TestE2E(t *testing.T) {
	testenv.SkipIfShort(t, "runs the local plane on the OpenStack test bed")
	RegisterFailHandler(Fail)
	tl.start = time.Now()
	RunSpecs(t, "capo-sharednet e2e on the local plane")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	// Like testbed.CloudsYAML: skipped outside `make test` (the variable
	// unset), failed when it names a file that cannot be read.
	path := os.Getenv(testbed.CloudsEnv)
	if path == "" {
		Skip(testbed.CloudsEnv + " is not set: run `make test`, which starts the OpenStack test bed")
	}
	var err error
	clouds, err = plane.ReadClouds(path)
	Expect(err).NotTo(HaveOccurred(), "the OpenStack test bed's clouds.yaml")
	root, err = providers.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	for _, c := range []struct {
		into **plane.Cloud
		name string
	}{{&admin, plane.AdminCloud}, {&vm, plane.VMCloud}, {&clusterProject, plane.ClusterCloud}} {
		*c.into, err = plane.NewCloud(ctx, clouds, c.name)
		Expect(err).NotTo(HaveOccurred(), "the OpenStack test bed answers as %s", c.name)
	}

	done := tl.step("plane up (build what is missing; kube-apiservers, CAPI/CABPK/KCP/CAPO managers, extension, stand-ins)")
	dir := filepath.Join(root, "_artifacts", "e2e", "plane")
	Expect(os.RemoveAll(dir)).To(Succeed())
	// The guardrails are on: the suite checks the VM-side report they add.
	pl, err = plane.Start(ctx, plane.Options{Root: root, Dir: dir, Resync: 5 * time.Second, Progress: GinkgoWriter, ExtensionFeatureGates: "WorkloadGuardrails=true"})
	Expect(err).NotTo(HaveOccurred())
	done()
	fmt.Fprintf(GinkgoWriter, "plane logs: %s\n", pl.Logs())
}, NodeTimeout(25*time.Minute))

var _ = AfterSuite(func() {
	if pl != nil {
		done := tl.step("plane down")
		Expect(pl.Stop()).To(Succeed())
		done()
	}
	if len(tl.steps) > 0 && root != "" {
		path, err := tl.write(root)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("timeline ("+path+")", tl.String())
	}
})

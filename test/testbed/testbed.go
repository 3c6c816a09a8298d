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

// Package testbed is test support for code that talks to the real OpenStack
// test bed (hack/openstack-testbed, started by `make test`): its credentials,
// a transport that counts requests, and a fault injector.
package testbed

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// CloudsEnv names the clouds.yaml the test bed wrote; `make test` sets it.
const CloudsEnv = "CAPO_SHAREDNET_TESTBED_CLOUDS"

// Identities in the test bed's clouds.yaml.
const (
	Admin          = "admin"
	VMProject      = "vm-project"
	ClusterProject = "cluster-project"
	// OtherProject is a second tenant's project.
	OtherProject = "other-project"
)

// CloudsYAML returns the test bed's clouds.yaml. Outside `make test` (the
// variable unset) the test is skipped; when set, a missing file fails it.
func CloudsYAML(tb testing.TB) []byte {
	tb.Helper()
	if testing.Short() {
		tb.Skip("skipped in the fast tier (-short): needs the OpenStack test bed; make test runs it")
	}
	path := os.Getenv(CloudsEnv)
	if path == "" {
		tb.Skipf("%s is not set: run `make test`, which starts the OpenStack test bed", CloudsEnv)
	}
	raw, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		tb.Fatalf("the OpenStack test bed's clouds.yaml: %v", err)
	}
	return raw
}

// Credential is one identity of the test bed.
func Credential(tb testing.TB, cloud string) openstack.Credential {
	tb.Helper()
	cred, err := openstack.CredentialFromData(map[string][]byte{openstack.CloudsSecretKey: CloudsYAML(tb)}, "test bed clouds.yaml", cloud)
	if err != nil {
		tb.Fatal(err)
	}
	return cred
}

// Session authenticates as one identity of the test bed.
func Session(tb testing.TB, cloud string, opts openstack.Options) *openstack.Session {
	tb.Helper()
	s, err := openstack.NewSession(context.Background(), Credential(tb, cloud), opts)
	if err != nil {
		tb.Fatalf("authenticating as %s: %v", cloud, err)
	}
	return s
}

// Name makes a unique name for objects a test creates.
func Name(tb testing.TB, what string) string {
	tb.Helper()
	return fmt.Sprintf("%s-%s-%d", what, sanitize(tb.Name()), os.Getpid())
}

func sanitize(s string) string {
	out := []rune{}
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			out = append(out, r)
		} else {
			out = append(out, '-')
		}
	}
	if len(out) > 40 {
		out = out[len(out)-40:]
	}
	return string(out)
}

// LoadBalancerGone says whether a load balancer no longer exists (404 or
// DELETED), asked with a test's own Octavia client: only tests wait for
// Octavia's asynchronous deletion, so the product's LoadBalancers does not.
func LoadBalancerGone(ctx context.Context, octavia *gophercloud.ServiceClient, id string) (bool, error) {
	lb, err := loadbalancers.Get(ctx, octavia, id).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading load balancer %s: %w", id, err)
	}
	return lb.ProvisioningStatus == "DELETED", nil
}

// WaitLoadBalancersGone polls until every load balancer of ids is gone or
// ctx ends (Octavia deletes asynchronously).
func WaitLoadBalancersGone(ctx context.Context, octavia *gophercloud.ServiceClient, ids []string, every time.Duration) error {
	for _, id := range ids {
		for {
			gone, err := LoadBalancerGone(ctx, octavia, id)
			if err != nil {
				return err
			}
			if gone {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("load balancer %s still exists: %w", id, ctx.Err())
			case <-time.After(every):
			}
		}
	}
	return nil
}

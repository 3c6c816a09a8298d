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

package testbed

import (
	"context"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/utils/v2/openstack/clientconfig"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// Clients are plain gophercloud clients for a test's own set-up and
// checks (creating networks, ports, servers; asking as admin).
type Clients struct {
	Network      *gophercloud.ServiceClient
	LoadBalancer *gophercloud.ServiceClient
	Compute      *gophercloud.ServiceClient
	Image        *gophercloud.ServiceClient
	ProjectID    string
}

// NewClients authenticates as one identity of the test bed.
func NewClients(tb testing.TB, cloud string) Clients {
	tb.Helper()
	cred := Credential(tb, cloud)
	opts, err := clientconfig.AuthOptions(&clientconfig.ClientOpts{EnvPrefix: "NO_ENV_VARIABLES_", AuthInfo: cred.Cloud.AuthInfo, RegionName: cred.Cloud.RegionName})
	if err != nil {
		tb.Fatal(err)
	}
	provider, err := gcopenstack.AuthenticatedClient(context.Background(), *opts)
	if err != nil {
		tb.Fatalf("authenticating as %s: %v", cloud, err)
	}
	eo := gophercloud.EndpointOpts{Region: cred.Cloud.RegionName}
	network, err := gcopenstack.NewNetworkV2(provider, eo)
	if err != nil {
		tb.Fatal(err)
	}
	lb, err := gcopenstack.NewLoadBalancerV2(provider, eo)
	if err != nil {
		tb.Fatal(err)
	}
	compute, err := gcopenstack.NewComputeV2(provider, eo)
	if err != nil {
		tb.Fatal(err)
	}
	image, err := gcopenstack.NewImageV2(provider, eo)
	if err != nil {
		tb.Fatal(err)
	}
	s := Session(tb, cloud, openstack.Options{})
	return Clients{Network: network, LoadBalancer: lb, Compute: compute, Image: image, ProjectID: s.ProjectID()}
}

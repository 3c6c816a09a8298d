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
	"fmt"
	"os"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/utils/v2/openstack/clientconfig"
	"sigs.k8s.io/yaml"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// Identities of the OpenStack test bed's clouds.yaml (hack/openstack-testbed).
const (
	AdminCloud   = "admin"
	VMCloud      = "vm-project"
	ClusterCloud = "cluster-project"
)

// Cloud is a set of plain gophercloud clients for one project, for the
// plane's stand-ins and for tests that create and inspect OpenStack objects.
type Cloud struct {
	Name         string
	ProjectID    string
	Network      *gophercloud.ServiceClient
	Compute      *gophercloud.ServiceClient
	LoadBalancer *gophercloud.ServiceClient
}

// NewCloud authenticates with one cloud of a clouds.yaml, as CAPO does (no
// environment variables).
func NewCloud(ctx context.Context, cloudsYAML []byte, cloudName string) (*Cloud, error) {
	cred, err := openstack.CredentialFromData(map[string][]byte{openstack.CloudsSecretKey: cloudsYAML}, "clouds.yaml", cloudName)
	if err != nil {
		return nil, err
	}
	opts, err := clientconfig.AuthOptions(&clientconfig.ClientOpts{
		EnvPrefix: "NO_ENV_VARIABLES_", AuthInfo: cred.Cloud.AuthInfo, AuthType: cred.Cloud.AuthType, RegionName: cred.Cloud.RegionName,
	})
	if err != nil {
		return nil, err
	}
	opts.AllowReauth = true
	provider, err := gcopenstack.AuthenticatedClient(ctx, *opts)
	if err != nil {
		return nil, fmt.Errorf("authenticating as %s: %w", cloudName, err)
	}
	result, ok := provider.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return nil, fmt.Errorf("%s: unexpected authentication result %T", cloudName, provider.GetAuthResult())
	}
	project, err := result.ExtractProject()
	if err != nil || project == nil {
		return nil, fmt.Errorf("%s: the token is not scoped to a project: %v", cloudName, err)
	}
	eo := gophercloud.EndpointOpts{Region: cred.Cloud.RegionName}
	c := &Cloud{Name: cloudName, ProjectID: project.ID}
	if c.Network, err = gcopenstack.NewNetworkV2(provider, eo); err != nil {
		return nil, err
	}
	if c.Compute, err = gcopenstack.NewComputeV2(provider, eo); err != nil {
		return nil, err
	}
	if c.LoadBalancer, err = gcopenstack.NewLoadBalancerV2(provider, eo); err != nil {
		return nil, err
	}
	return c, nil
}

// ReadClouds reads a clouds.yaml file.
func ReadClouds(path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("no clouds.yaml: start the OpenStack test bed (hack/openstack-testbed/testbed.sh start) and pass its clouds.yaml")
	}
	return os.ReadFile(path)
}

// OneCloud returns a clouds.yaml holding only the entry `from`, renamed to
// `as`: what a cluster's identityRef Secret or a SharedNetwork's VM-project
// Secret should hold (one project's credential, not the test bed's admin).
func OneCloud(cloudsYAML []byte, from, as string) ([]byte, error) {
	var clouds struct {
		Clouds map[string]any `json:"clouds"`
	}
	if err := yaml.Unmarshal(cloudsYAML, &clouds); err != nil {
		return nil, err
	}
	entry, ok := clouds.Clouds[from]
	if !ok {
		return nil, fmt.Errorf("clouds.yaml has no cloud %q", from)
	}
	return yaml.Marshal(map[string]any{"clouds": map[string]any{as: entry}})
}

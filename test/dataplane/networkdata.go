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

package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// DefaultMySQLSocket is the test bed's database socket
// (hack/openstack-testbed/testbed.sh); TESTBED_MYSQL_SOCKET overrides it.
const DefaultMySQLSocket = "/var/lib/capo-sharednet-testbed/run/mysqld.sock"

// NetworkData is what Nova serves as openstack/latest/network_data.json
// (the metadata API and the config drive alike) for a server: Nova's own
// netutils.get_network_metadata over the network info it stores for it.
func NetworkData(ctx context.Context, serverID string) ([]byte, error) {
	socket := os.Getenv("TESTBED_MYSQL_SOCKET")
	if socket == "" {
		socket = DefaultMySQLSocket
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if strings.ContainsAny(serverID, `'"\`) {
		return nil, fmt.Errorf("server ID %q is not a UUID", serverID)
	}
	info, err := exec.CommandContext(ctx, "mariadb", "--no-defaults", "-S", socket, "-uroot", "-N", "--raw", "-e",
		fmt.Sprintf("SELECT network_info FROM nova.instance_info_caches WHERE instance_uuid='%s'", serverID)).Output()
	if err != nil {
		return nil, fmt.Errorf("reading server %s's network info from Nova's database: %w", serverID, err)
	}
	if len(bytes.TrimSpace(info)) == 0 {
		return nil, fmt.Errorf("nova has no network info for server %s", serverID)
	}
	render := exec.CommandContext(ctx, "/usr/bin/python3", "-c", `import json, sys
from nova.network import model
from nova.virt import netutils
print(json.dumps(netutils.get_network_metadata(model.NetworkInfo.hydrate(json.loads(sys.stdin.read())))))`)
	render.Stdin = bytes.NewReader(info)
	out, err := render.Output()
	if err != nil {
		return nil, fmt.Errorf("rendering network_data.json with Nova's netutils: %w", err)
	}
	return out, nil
}

// linkOrder is the MACs of network_data.json's links in its order, the
// order in which the guest's kernel names the NICs.
func linkOrder(networkData []byte) ([]string, error) {
	var nd struct {
		Links []struct {
			MAC string `json:"ethernet_mac_address"`
		} `json:"links"`
	}
	if err := json.Unmarshal(networkData, &nd); err != nil {
		return nil, fmt.Errorf("network_data.json: %w", err)
	}
	macs := make([]string, 0, len(nd.Links))
	for _, l := range nd.Links {
		macs = append(macs, strings.ToLower(l.MAC))
	}
	return macs, nil
}

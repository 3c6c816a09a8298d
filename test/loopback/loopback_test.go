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

package loopback

import (
	"net"
	"strconv"
	"testing"
)

// A harness binds the port it is given: it must be free and on loopback.
func TestAFreePortCanBeBoundOnLoopback(t *testing.T) {
	port := Port(t)
	if port <= 0 || port > 65535 {
		t.Fatalf("port %d is no TCP port", port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d of 127.0.0.1 could not be bound: %v", port, err)
	}
	_ = l.Close()
}

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

// Package loopback hands the test harnesses (the e2e plane, the integration,
// leader, scale and shipping suites) ports of 127.0.0.1: tests talk to
// loopback only.
package loopback

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
)

// FreePort is a TCP port of 127.0.0.1 that nothing listens on right now. The
// kernel picks it; another process can take it before the caller binds it,
// which a harness that starts a server on it sees as the server failing to
// start.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	addr, err := netip.ParseAddrPort(l.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("the listener's address %q: %w", l.Addr(), err)
	}
	return int(addr.Port()), nil
}

// Port is FreePort for a test, which it fails when the kernel gives none.
func Port(tb testing.TB) int {
	tb.Helper()
	port, err := FreePort()
	if err != nil {
		tb.Fatalf("a free port of 127.0.0.1: %v", err)
	}
	return port
}

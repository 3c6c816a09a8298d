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

// Package fakekeystone is a FAKE Keystone on 127.0.0.1 for tests: it issues
// a token for any password, scoped to the project it is told to claim, with
// a catalog whose network endpoint is itself (it answers version discovery,
// and the network API when the test gives it a Neutron). It stands for a
// Keystone a tenant runs themselves (or a proxy that rewrites the project),
// and for one that hangs.
package fakekeystone

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Keystone is a running fake.
type Keystone struct {
	*httptest.Server
	// Requests counts token requests.
	Requests atomic.Int32
	// InFlight counts the requests being answered (or held) now, Ended
	// those that ended.
	InFlight, Ended atomic.Int32
}

// Options say how it answers.
type Options struct {
	// Project is the project ID every token claims.
	Project string
	// Hang, when set, holds every request until it is closed.
	Hang chan struct{}
	// Stream answers a token request with a body that never ends (until the
	// client hangs up), as a hostile Keystone would.
	Stream bool
	// TokenLifetime is how long its tokens are valid; an hour when zero.
	TokenLifetime time.Duration
	// Neutron, when set, answers the network API's requests (under
	// /network/v2.0/, the prefix stripped): a Neutron of the test's own.
	Neutron http.Handler
}

// Start runs a fake Keystone until the test ends.
func Start(tb testing.TB, opts Options) *Keystone {
	tb.Helper()
	k := &Keystone{}
	k.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v3/auth/tokens" {
			k.Requests.Add(1)
		}
		k.InFlight.Add(1)
		defer func() {
			k.InFlight.Add(-1)
			k.Ended.Add(1)
		}()
		// Read the request whole: only then does the server notice a client
		// that gives up (and end the request's context).
		_, _ = io.Copy(io.Discard, r.Body)
		if opts.Hang != nil {
			select {
			case <-opts.Hang:
			case <-r.Context().Done():
				return
			}
		}
		if r.Method == http.MethodGet && r.URL.Path == "/network/" {
			// gophercloud discovers the network API's version.
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"versions": []any{map[string]any{
				"id": "v2.0", "status": "CURRENT", "links": []any{map[string]any{"rel": "self", "href": k.URL + "/network/v2.0/"}},
			}}})
			return
		}
		if opts.Neutron != nil && strings.HasPrefix(r.URL.Path, "/network/v2.0/") {
			http.StripPrefix("/network/v2.0", opts.Neutron).ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v3/auth/tokens" {
			http.NotFound(w, r)
			return
		}
		if opts.Stream {
			w.Header().Set("X-Subject-Token", "fake-token")
			w.WriteHeader(http.StatusCreated)
			chunk := make([]byte, 1<<20)
			for i := range chunk {
				chunk[i] = ' '
			}
			_, _ = w.Write([]byte(`{"token": `))
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		lifetime := opts.TokenLifetime
		if lifetime == 0 {
			lifetime = time.Hour
		}
		w.Header().Set("X-Subject-Token", fmt.Sprintf("fake-token-%d", k.Requests.Load()))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": map[string]any{
			"expires_at": time.Now().Add(lifetime).UTC().Format(time.RFC3339Nano),
			"project":    map[string]any{"id": opts.Project, "name": "claimed", "domain": map[string]any{"id": "default", "name": "Default"}},
			"user":       map[string]any{"id": "u", "name": "u", "domain": map[string]any{"id": "default", "name": "Default"}},
			"catalog": []any{map[string]any{"type": "network", "name": "neutron", "endpoints": []any{
				map[string]any{"interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": k.URL + "/network/"},
			}}},
		}})
	}))
	tb.Cleanup(func() {
		if opts.Hang != nil {
			select {
			case <-opts.Hang:
			default:
				close(opts.Hang)
			}
		}
		k.Close()
	})
	return k
}

// CloudsYAML is a clouds.yaml with one cloud, named cloud, authenticating here.
func (k *Keystone) CloudsYAML(cloud string) []byte {
	return fmt.Appendf(nil, `clouds:
  %s:
    auth:
      auth_url: %s/v3
      username: u
      password: p
      project_id: whatever
      user_domain_name: Default
    region_name: RegionOne
`, cloud, k.URL)
}

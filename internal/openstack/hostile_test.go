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

package openstack_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// cloud is a Keystone on 127.0.0.1 whose catalog names itself as Neutron,
// as a tenant may name in a clouds.yaml: its answers are the test's, and it
// counts the connections open to it.
type cloud struct {
	*httptest.Server
	// open is the number of connections open to it now; logins the token
	// requests it answered.
	open, logins atomic.Int32
	// token, when set, is the body of its answer to a login.
	token atomic.Pointer[[]byte]
}

type cloudOptions struct {
	// refuse answers every login 401 (the connection kept open).
	refuse bool
	// lifetime is its tokens' (an hour when zero).
	lifetime time.Duration
	// neutron answers the network API under /network/v2.0/ (prefix stripped).
	neutron http.Handler
}

func startCloud(t *testing.T, opts cloudOptions) *cloud {
	t.Helper()
	c := &cloud{}
	c.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v3/auth/tokens":
			c.login(w, opts)
		case r.URL.Path == "/network/":
			writeJSON(w, fmt.Sprintf(`{"versions":[{"id":"v2.0","status":"CURRENT","links":[{"rel":"self","href":"%s/network/v2.0/"}]}]}`, c.URL))
		case opts.neutron != nil && strings.HasPrefix(r.URL.Path, "/network/v2.0/"):
			http.StripPrefix("/network/v2.0", opts.neutron).ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	c.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			c.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			c.open.Add(-1)
		}
	}
	c.Start()
	t.Cleanup(c.Close)
	return c
}

func (c *cloud) login(w http.ResponseWriter, opts cloudOptions) {
	n := c.logins.Add(1)
	if opts.refuse {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":401,"title":"Unauthorized","message":"The request you have made requires authentication."}}`))
		return
	}
	body := []byte("{" + tokenMembers(c.URL, opts.lifetime) + "}")
	if custom := c.token.Load(); custom != nil {
		body = *custom
	}
	w.Header().Set("X-Subject-Token", fmt.Sprintf("token-%d", n))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

// tokenMembers is the token of a login to project p, valid for lifetime
// (an hour when zero), with a catalog naming self as Neutron, then more
// catalog entries.
func tokenMembers(self string, lifetime time.Duration, catalog ...string) string {
	if lifetime == 0 {
		lifetime = time.Hour
	}
	neutron := fmt.Sprintf(`{"type":"network","name":"neutron","endpoints":[{"interface":"public","region":"RegionOne","region_id":"RegionOne","url":"%s/network/"}]}`, self)
	return fmt.Sprintf(`"token":{"expires_at":%q,"project":{"id":"p","name":"p","domain":{"id":"default","name":"Default"}},"user":{"id":"u","name":"u","domain":{"id":"default","name":"Default"}},"catalog":[%s]}`,
		time.Now().Add(lifetime).UTC().Format(time.RFC3339), strings.Join(append([]string{neutron}, catalog...), ","))
}

func (c *cloud) credential(t *testing.T) openstack.Credential {
	t.Helper()
	yaml := fmt.Appendf(nil, "clouds:\n  tenant:\n    auth:\n      auth_url: %s/v3\n      username: u\n      password: p\n      project_id: p\n      user_domain_name: Default\n    region_name: RegionOne\n", c.URL)
	cred, err := openstack.CredentialFromData(map[string][]byte{openstack.CloudsSecretKey: yaml}, "tenant Secret", "tenant")
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

func writeJSON(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, body)
}

// packed is a JSON object: a string member that pads it to size bytes,
// then head, n times elem (comma-separated) and tail.
func packed(head, elem, tail string, n, size int) []byte {
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"pad":"`)
	b.WriteString(strings.Repeat("x", max(size-len(`{"pad":"",}`)-len(head)-n*(len(elem)+1)-len(tail), 0)))
	b.WriteString(`",`)
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteString(tail)
	b.WriteByte('}')
	return b.Bytes()
}

// jsonValues counts the values of a JSON text as the extension documents
// it: each '[' and ',' outside strings one, each '{' eight.
func jsonValues(b []byte) int {
	n, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped, inString = c == '\\', c != '"'
		case c == '"':
			inString = true
		case c == '{':
			n += 8
		case c == '[', c == ',':
			n++
		}
	}
	return n
}

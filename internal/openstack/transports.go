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

package openstack

import (
	"crypto/sha256"
	"crypto/tls"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The bounds on the connections of a transport: a session dropped in use
// (evicted while a caller holds it) lets its connections go within
// idleConnTimeout, and however many sessions of one cloud run at once, few
// connections wait idle for them.
const (
	idleConnTimeout     = 90 * time.Second
	maxIdleConnsPerHost = 4
	maxIdleConns        = 16
	// maxResponseHeaderBytes bounds an answer's headers (Go's default is
	// 10 MiB); a token in X-Subject-Token is a few hundred bytes.
	maxResponseHeaderBytes = 256 << 10
)

// transportKey is what a transport is shared by: the Keystone sessions
// authenticate at (scheme and host) and how they trust it. Sessions of
// another Keystone, or with another CA or verify setting, never share a
// connection.
type transportKey struct {
	keystone string
	insecure bool
	ca       [sha256.Size]byte
}

func transportKeyOf(identityEndpoint string, cred Credential, tlsConfig *tls.Config) transportKey {
	key := transportKey{keystone: identityEndpoint, insecure: tlsConfig.InsecureSkipVerify, ca: sha256.Sum256(cred.CACert)}
	if u, err := url.Parse(identityEndpoint); err == nil {
		key.keystone = strings.ToLower(u.Scheme + "://" + u.Host)
	}
	return key
}

// sharedTransport is a transport and the sessions that use it.
type sharedTransport struct {
	*http.Transport
	users int
}

// transports are the transports in use, one per key: a transport lives as
// long as a session uses it, so a failed, evicted or replaced session does
// not leave its connections open behind it.
var transports = struct {
	sync.Mutex
	byKey map[transportKey]*sharedTransport
}{byKey: map[transportKey]*sharedTransport{}}

// acquireTransport is the transport of key, made with tlsConfig when no
// session uses one, and the function that lets go of it (once, whatever
// the calls): the last session to let go closes its idle connections.
func acquireTransport(key transportKey, tlsConfig *tls.Config) (*http.Transport, func()) {
	transports.Lock()
	defer transports.Unlock()
	t, ok := transports.byKey[key]
	if !ok {
		t = &sharedTransport{Transport: newTransport(tlsConfig)}
		transports.byKey[key] = t
	}
	t.users++
	var once sync.Once
	return t.Transport, func() { once.Do(func() { releaseTransport(key, t) }) }
}

func releaseTransport(key transportKey, t *sharedTransport) {
	transports.Lock()
	defer transports.Unlock()
	if t.users--; t.users > 0 {
		return
	}
	delete(transports.byKey, key)
	// Connections in use close as their request ends (or, should the
	// dropped session be used again, after idleConnTimeout).
	t.CloseIdleConnections()
}

// newTransport speaks HTTP/1.1 as before (a session's requests are one at
// a time per connection, and the idle bounds count connections).
func newTransport(tlsConfig *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		TLSClientConfig:        tlsConfig,
		IdleConnTimeout:        idleConnTimeout,
		MaxIdleConnsPerHost:    maxIdleConnsPerHost,
		MaxIdleConns:           maxIdleConns,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
}

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
	"context"
	"sync"
	"time"
)

// Sessions keeps one authenticated Session per credential, so a resync does
// not pay for a new token each time. The id must name everything that
// identifies the credential (Secret UID, cloud name, region) and version its
// content (the Secret's resourceVersion): a new version replaces the session.
//
// No lock is held across an authentication shared by two keys: each key has
// its own, so a slow or hostile Keystone delays only the callers of that
// credential (they wait for one authentication, not one each), and every
// wait ends with its caller's context.
//
// The cache is bounded: a failed authentication is not kept (the next
// caller tries again), a session unused for IdleTimeout is dropped, at most
// MaxEntries are kept (the least recently used goes first), and a session
// whose token expires within minutes authenticates again before it is
// handed out. A session dropped for any of these reasons, or replaced by a
// new version, is closed: its connections do not outlive it.
type Sessions struct {
	Options Options
	// IdleTimeout drops a session nobody used for that long; DefaultIdleTimeout when zero.
	IdleTimeout time.Duration
	// MaxEntries bounds the sessions kept; DefaultMaxSessions when zero.
	MaxEntries int
	mu         sync.Mutex
	byKey      map[string]*entry
}

// The cache's default bounds: a management cluster's credentials (one per
// cluster and SharedNetwork) fit; one resync period of idleness is kept.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultMaxSessions = 4096
)

type entry struct {
	version string
	// ready holds one token: whoever takes it authenticates; the others wait
	// for it to come back, or for their context.
	ready    chan struct{}
	session  *Session
	lastUsed time.Time
}

// Get returns the Session of credential id at version, authenticating with
// cred when there is none yet, or when its token is about to expire.
func (c *Sessions) Get(ctx context.Context, id, version string, cred Credential) (*Session, error) {
	now := time.Now()
	c.mu.Lock()
	if c.byKey == nil {
		c.byKey = map[string]*entry{}
	}
	e, ok := c.byKey[id]
	if !ok || e.version != version {
		if ok {
			e.close()
		}
		e = &entry{version: version, ready: make(chan struct{}, 1)}
		e.ready <- struct{}{}
		c.byKey[id] = e
		c.evict(now, id)
	}
	e.lastUsed = now
	c.mu.Unlock()

	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { e.ready <- struct{}{} }()
	if e.session != nil && e.session.fresh(time.Now()) {
		return e.session, nil
	}
	s, err := NewSession(ctx, cred, c.Options)
	if err != nil {
		c.forget(id, e)
		return nil, err
	}
	c.keep(id, e, s)
	return s, nil
}

// keep makes s e's session, closing the one it replaces; s too when e was
// dropped meanwhile (its caller may still use it).
func (c *Sessions) keep(id string, e *entry, s *Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.close()
	e.session = s
	if c.byKey[id] != e {
		e.close()
	}
}

// Len is the number of credentials whose sessions are kept.
func (c *Sessions) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// forget drops e, unless another version replaced it meanwhile, and closes
// its session.
func (c *Sessions) forget(id string, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey[id] == e {
		delete(c.byKey, id)
	}
	e.close()
}

// close closes e's session, if any (again is harmless). Called with mu
// held: e.session is written with it held, by the caller holding e.ready.
func (e *entry) close() {
	if e.session != nil {
		e.session.Close()
	}
}

// evict drops idle entries and, above the bound, the least recently used
// ones, never keep (the one being added). Called with mu held; linear in
// the entries, which the bound keeps small, and only when one is added.
func (c *Sessions) evict(now time.Time, keep string) {
	idle := orDefault(c.IdleTimeout, DefaultIdleTimeout)
	for id, e := range c.byKey {
		if id != keep && now.Sub(e.lastUsed) > idle {
			delete(c.byKey, id)
			e.close()
		}
	}
	for limit := orDefault(c.MaxEntries, DefaultMaxSessions); len(c.byKey) > limit; {
		oldest := ""
		for id, e := range c.byKey {
			if id != keep && (oldest == "" || e.lastUsed.Before(c.byKey[oldest].lastUsed)) {
				oldest = id
			}
		}
		c.byKey[oldest].close()
		delete(c.byKey, oldest)
	}
}

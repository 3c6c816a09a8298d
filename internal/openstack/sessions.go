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
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"
)

// Sessions keeps one authenticated Session per credential, so a resync does
// not pay for a new token each time. The id must name everything that
// identifies the credential (Secret UID, cloud name, region) and version its
// content (the Secret's resourceVersion): a new version replaces the session.
//
// No lock is held across an authentication: each credential has at most one
// login in flight, which all its callers share (they wait for one login, not
// one each), and every wait ends with its caller's context. The login itself
// does not end with its first caller's context: it goes on, bounded by
// Options.AuthTimeout, for the callers still waiting and for the next ones.
// So a slow or hostile Keystone delays only the callers of its credential,
// and costs one login at a time.
//
// A failed login is remembered for a backoff (FailureBackoff, doubling per
// consecutive failure up to MaxFailureBackoff): until then Get returns the
// failure at once, without contacting the Keystone. A new version of the
// credential, or a successful login, forgets it.
//
// The cache is bounded: a session unused for IdleTimeout is dropped, at most
// MaxEntries credentials are kept (sessions and remembered failures alike;
// the least recently used goes first), and a session whose token expires
// within minutes authenticates again before it is handed out. A session
// dropped for any of these reasons, or replaced by a new version, is closed:
// its connections do not outlive it.
type Sessions struct {
	Options Options
	// IdleTimeout drops a session nobody used for that long; DefaultIdleTimeout when zero.
	IdleTimeout time.Duration
	// MaxEntries bounds the credentials kept; DefaultMaxSessions when zero.
	MaxEntries int
	// FailureBackoff is how long the first failed login of a credential is
	// remembered; DefaultFailureBackoff when zero. Each consecutive failure
	// doubles it, up to MaxFailureBackoff (DefaultMaxFailureBackoff when zero).
	FailureBackoff    time.Duration
	MaxFailureBackoff time.Duration
	mu                sync.Mutex
	byKey             map[string]*entry
}

// The cache's default bounds: a management cluster's credentials (one per
// cluster and SharedNetwork) fit; one resync period of idleness is kept.
//
// A failed login is not tried again for 5 s, then 10 s, 20 s... up to 5
// minutes: a Keystone that is down briefly (a restart, a failover) is
// tried again within seconds, and one that stays down, or hangs each login
// until AuthTimeout, costs at most one login per 5 minutes per credential
// (a resync period is longer: a credential that failed is tried again by
// its next reconcile after a few failures at most).
const (
	DefaultIdleTimeout       = 30 * time.Minute
	DefaultMaxSessions       = 4096
	DefaultFailureBackoff    = 5 * time.Second
	DefaultMaxFailureBackoff = 5 * time.Minute
)

type entry struct {
	version  string
	session  *Session
	lastUsed time.Time
	// flight is the login in progress, nil when none.
	flight *flight
	// failure is the last login's error, when it failed; failures counts
	// the consecutive ones.
	failure  error
	failedAt time.Time
	retryAt  time.Time
	failures int
}

// flight is one login, shared by the callers that wait for it.
type flight struct {
	done    chan struct{}
	session *Session
	err     error
}

// BackoffError is what Get returns while a credential's failed login is
// remembered: the Keystone is not contacted again before RetryAt.
type BackoffError struct {
	// Keystone is the host the login went to.
	Keystone string
	FailedAt time.Time
	RetryAt  time.Time
	Err      error
}

func (e *BackoffError) Error() string {
	return fmt.Sprintf("the last login to %s failed %s ago: %v; not retried before %s",
		e.Keystone, time.Since(e.FailedAt).Round(time.Millisecond), e.Err, e.RetryAt.UTC().Format(time.RFC3339))
}

func (e *BackoffError) Unwrap() error { return e.Err }

// Get returns the Session of credential id at version, authenticating with
// cred when there is none yet, or when its token is about to expire; or,
// while a failed login of that credential and version is remembered, a
// *BackoffError.
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
		e = &entry{version: version}
		c.byKey[id] = e
		c.evict(now, id)
	}
	e.lastUsed = now
	if e.session != nil && e.session.fresh(now) {
		s := e.session
		c.mu.Unlock()
		return s, nil
	}
	if e.failure != nil && now.Before(e.retryAt) {
		err := &BackoffError{Keystone: keystoneHost(cred), FailedAt: e.failedAt, RetryAt: e.retryAt, Err: e.failure}
		c.mu.Unlock()
		return nil, err
	}
	f := e.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		e.flight = f
		// The login is the credential's, not this caller's: it goes on
		// (bounded by AuthTimeout) when this caller gives up.
		go c.login(context.WithoutCancel(ctx), id, e, f, cred)
	}
	c.mu.Unlock()

	select {
	case <-f.done:
		return f.session, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// login authenticates for e and hands the outcome to f's waiters. A
// success replaces e's session (closing the one it replaces; the new one
// too when e was dropped meanwhile: its callers may still use it) and
// forgets any failure; a failure closes e's session and is remembered.
func (c *Sessions) login(ctx context.Context, id string, e *entry, f *flight, cred Credential) {
	s, err := NewSession(ctx, cred, c.Options)
	c.mu.Lock()
	defer c.mu.Unlock()
	e.flight = nil
	e.close()
	e.session = nil
	switch {
	case err == nil:
		e.session = s
		e.failure, e.failures = nil, 0
		if c.byKey[id] != e {
			e.close()
		}
	case errors.Is(err, context.Canceled):
		// Not the Keystone's doing (the login's context is no caller's,
		// but whoever cancels it is not the Keystone): not remembered.
	default:
		now := time.Now()
		backoff := orDefault(c.FailureBackoff, DefaultFailureBackoff)
		maxBackoff := orDefault(c.MaxFailureBackoff, DefaultMaxFailureBackoff)
		for range e.failures {
			if backoff >= maxBackoff {
				break
			}
			backoff *= 2
		}
		e.failure, e.failedAt, e.retryAt = err, now, now.Add(min(backoff, maxBackoff))
		e.failures++
	}
	f.session, f.err = s, err
	close(f.done)
}

// keystoneHost is the host of cred's Keystone, for errors.
func keystoneHost(cred Credential) string {
	if cred.Cloud.AuthInfo == nil {
		return "(no auth_url)"
	}
	if u, err := url.Parse(cred.Cloud.AuthInfo.AuthURL); err == nil && u.Host != "" {
		return u.Host
	}
	return cred.Cloud.AuthInfo.AuthURL
}

// Len is the number of credentials whose sessions are kept.
func (c *Sessions) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.byKey {
		if e.session != nil {
			n++
		}
	}
	return n
}

// close closes e's session, if any (again is harmless). Called with mu
// held, which guards e's fields.
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

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
type Sessions struct {
	Options Options
	mu      sync.Mutex
	byKey   map[string]*entry
}

type entry struct {
	version string
	// ready holds one token: whoever takes it authenticates; the others wait
	// for it to come back, or for their context.
	ready   chan struct{}
	session *Session
}

// Get returns the Session of credential id at version, authenticating with
// cred when there is none yet.
func (c *Sessions) Get(ctx context.Context, id, version string, cred Credential) (*Session, error) {
	c.mu.Lock()
	if c.byKey == nil {
		c.byKey = map[string]*entry{}
	}
	e, ok := c.byKey[id]
	if !ok || e.version != version {
		e = &entry{version: version, ready: make(chan struct{}, 1)}
		e.ready <- struct{}{}
		c.byKey[id] = e
	}
	c.mu.Unlock()

	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { e.ready <- struct{}{} }()
	if e.session != nil {
		return e.session, nil
	}
	s, err := NewSession(ctx, cred, c.Options)
	if err != nil {
		return nil, err
	}
	e.session = s
	return s, nil
}

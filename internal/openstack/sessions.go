package openstack

import (
	"context"
	"sync"
)

// Sessions keeps one authenticated Session per credential, so a resync does
// not pay for a new token each time; a new version of the credential (e.g.
// the Secret's resourceVersion) replaces it.
type Sessions struct {
	Options Options
	mu      sync.Mutex
	byID    map[string]versioned
}

type versioned struct {
	version string
	session *Session
}

// Get returns the Session of credential id at version, authenticating with
// cred when there is none yet or the version changed.
func (c *Sessions) Get(ctx context.Context, id, version string, cred Credential) (*Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.byID[id]; ok && v.version == version {
		return v.session, nil
	}
	s, err := NewSession(ctx, cred, c.Options)
	if err != nil {
		delete(c.byID, id)
		return nil, err
	}
	if c.byID == nil {
		c.byID = map[string]versioned{}
	}
	c.byID[id] = versioned{version: version, session: s}
	return s, nil
}

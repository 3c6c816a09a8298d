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
	"context"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// TestFailedLoginsLeaveNoConnectionOpen: a Keystone that refuses every
// login (401) and keeps the connection open, asked 1,000 times in a row,
// has no connection open afterwards, and the goroutines are as many as
// before.
func TestFailedLoginsLeaveNoConnectionOpen(t *testing.T) {
	g := NewWithT(t)
	c := startCloud(t, cloudOptions{refuse: true})
	cred := c.credential(t)
	sessions := &openstack.Sessions{}
	goroutines := runtime.NumGoroutine()
	for range 1000 {
		_, err := sessions.Get(context.Background(), "tenant", "1", cred)
		g.Expect(err).To(MatchError(ContainSubstring("401")))
	}
	g.Expect(c.logins.Load()).To(Equal(int32(1000)))
	g.Eventually(c.open.Load, 5*time.Second, 10*time.Millisecond).Should(BeZero(), "connections open to the Keystone")
	g.Eventually(runtime.NumGoroutine, 5*time.Second, 10*time.Millisecond).Should(BeNumerically("<=", goroutines+4))
}

// TestADroppedSessionClosesItsConnections: a session evicted from the
// cache, replaced by a new version of its credential, or renewed for its
// token's expiry, lets go of its connections: those of a cloud close once
// no session of it is kept.
func TestADroppedSessionClosesItsConnections(t *testing.T) {
	ctx := context.Background()
	t.Run("evicted", func(t *testing.T) {
		g := NewWithT(t)
		a, b := startCloud(t, cloudOptions{}), startCloud(t, cloudOptions{})
		sessions := &openstack.Sessions{MaxEntries: 1}
		_, err := sessions.Get(ctx, "a", "1", a.credential(t))
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(a.open.Load, 5*time.Second, 10*time.Millisecond).Should(Equal(int32(1)), "kept for the session's next request")
		_, err = sessions.Get(ctx, "b", "1", b.credential(t))
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(a.open.Load, 5*time.Second, 10*time.Millisecond).Should(BeZero(), "a was evicted")
		g.Eventually(b.open.Load, 5*time.Second, 10*time.Millisecond).Should(Equal(int32(1)))
	})
	t.Run("replaced or renewed", func(t *testing.T) {
		g := NewWithT(t)
		c, other := startCloud(t, cloudOptions{lifetime: time.Minute}), startCloud(t, cloudOptions{})
		sessions := &openstack.Sessions{MaxEntries: 1}
		for _, version := range []string{"1", "2", "2", "2"} {
			_, err := sessions.Get(ctx, "c", version, c.credential(t))
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(c.logins.Load()).To(Equal(int32(4)), "a new version, then tokens about to expire")
		g.Eventually(c.open.Load, 5*time.Second, 10*time.Millisecond).Should(Equal(int32(1)), "the replaced and renewed sessions' closed")
		_, err := sessions.Get(ctx, "other", "1", other.credential(t))
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(c.open.Load, 5*time.Second, 10*time.Millisecond).Should(BeZero(), "the last session of c was evicted, the others replaced")
	})
}

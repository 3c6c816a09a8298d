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
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
	"github.com/capo-sharednet/capo-sharednet/test/fakekeystone"
)

func credentialOf(t *testing.T, k *fakekeystone.Keystone) openstack.Credential {
	t.Helper()
	cred, err := openstack.CredentialFromData(map[string][]byte{openstack.CloudsSecretKey: k.CloudsYAML("tenant")}, "test", "tenant")
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// TestOneBlockedKeystoneDelaysNoOtherCredential: a tenant whose Keystone
// hangs holds up only the callers of that credential.
func TestOneBlockedKeystoneDelaysNoOtherCredential(t *testing.T) {
	g := NewWithT(t)
	hang := make(chan struct{})
	blocked := fakekeystone.Start(t, fakekeystone.Options{Project: "p-blocked", Hang: hang})
	healthy := fakekeystone.Start(t, fakekeystone.Options{Project: "p-healthy"})
	sessions := &openstack.Sessions{}

	blockedDone := make(chan error, 1)
	go func() {
		_, err := sessions.Get(context.Background(), "blocked", "1", credentialOf(t, blocked))
		blockedDone <- err
	}()
	g.Eventually(blocked.Requests.Load).Should(BeNumerically(">=", 1), "the blocked authentication has started")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := sessions.Get(ctx, "healthy", "1", credentialOf(t, healthy))
	g.Expect(err).NotTo(HaveOccurred(), "another credential is not held up by the blocked Keystone")
	g.Expect(s.ProjectID()).To(Equal("p-healthy"))
	g.Expect(blockedDone).NotTo(Receive(), "the blocked one is still waiting")

	// A second caller of the blocked credential gives up with its own context.
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	_, err = sessions.Get(short, "blocked", "1", credentialOf(t, blocked))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	close(hang)
	g.Eventually(blockedDone, 10*time.Second).Should(Receive())
}

// TestConcurrentCallersOfOneCredentialAuthenticateOnce: the session is
// cached per credential and version; a new version authenticates again.
func TestConcurrentCallersOfOneCredentialAuthenticateOnce(t *testing.T) {
	g := NewWithT(t)
	k := fakekeystone.Start(t, fakekeystone.Options{Project: "p"})
	sessions := &openstack.Sessions{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sessions.Get(context.Background(), "uid/tenant/", "1", credentialOf(t, k))
			g.Expect(err).NotTo(HaveOccurred())
		}()
	}
	wg.Wait()
	g.Expect(k.Requests.Load()).To(Equal(int32(1)))
	_, err := sessions.Get(context.Background(), "uid/tenant/", "2", credentialOf(t, k))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k.Requests.Load()).To(Equal(int32(2)), "a changed Secret authenticates again")
}

// TestAKeystoneThatStreamsForeverCostsBoundedMemory: an answer longer than
// the bound fails the authentication, and the heap does not grow with it.
func TestAKeystoneThatStreamsForeverCostsBoundedMemory(t *testing.T) {
	g := NewWithT(t)
	endless := fakekeystone.Start(t, fakekeystone.Options{Project: "p", Stream: true})
	sessions := &openstack.Sessions{}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := sessions.Get(context.Background(), "endless", "1", credentialOf(t, endless))
	g.Expect(err).To(MatchError(ContainSubstring("a token answer from " + strings.TrimPrefix(endless.URL, "http://") + " is longer than 2 MiB")))
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// What was read before the refusal (2 MiB, decoded at most a few times
	// over), not what was sent.
	g.Expect(after.TotalAlloc - before.TotalAlloc).To(BeNumerically("<", 64<<20))
	g.Expect(sessions.Len()).To(BeZero(), "a failed authentication is not kept")
}

// TestTheSessionCacheIsBounded: failed and idle sessions are dropped, at most
// MaxEntries are kept, and a token about to expire is renewed before use.
func TestTheSessionCacheIsBounded(t *testing.T) {
	t.Run("a failed authentication is tried again, not kept", func(t *testing.T) {
		g := NewWithT(t)
		hang := make(chan struct{})
		k := fakekeystone.Start(t, fakekeystone.Options{Project: "p", Hang: hang})
		sessions := &openstack.Sessions{Options: openstack.Options{AuthTimeout: 100 * time.Millisecond}}
		_, err := sessions.Get(context.Background(), "tarpit", "1", credentialOf(t, k))
		g.Expect(err).To(HaveOccurred(), "the authentication's own deadline ends the wait")
		g.Expect(sessions.Len()).To(BeZero())
		close(hang)
		s, err := sessions.Get(context.Background(), "tarpit", "1", credentialOf(t, k))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.ProjectID()).To(Equal("p"))
	})
	t.Run("idle and least recently used sessions go", func(t *testing.T) {
		g := NewWithT(t)
		k := fakekeystone.Start(t, fakekeystone.Options{Project: "p"})
		sessions := &openstack.Sessions{MaxEntries: 2}
		for _, id := range []string{"a", "b", "c"} {
			_, err := sessions.Get(context.Background(), id, "1", credentialOf(t, k))
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(sessions.Len()).To(Equal(2))
		_, _ = sessions.Get(context.Background(), "b", "1", credentialOf(t, k))
		g.Expect(k.Requests.Load()).To(Equal(int32(3)), "b was kept")
		_, _ = sessions.Get(context.Background(), "a", "1", credentialOf(t, k))
		g.Expect(k.Requests.Load()).To(Equal(int32(4)), "a, the least recently used, had gone")

		idle := &openstack.Sessions{IdleTimeout: time.Nanosecond}
		_, _ = idle.Get(context.Background(), "a", "1", credentialOf(t, k))
		time.Sleep(time.Millisecond)
		_, _ = idle.Get(context.Background(), "b", "1", credentialOf(t, k))
		g.Expect(idle.Len()).To(Equal(1), "a was idle")
	})
	t.Run("a token about to expire is renewed before it is used", func(t *testing.T) {
		g := NewWithT(t)
		short := fakekeystone.Start(t, fakekeystone.Options{Project: "p", TokenLifetime: time.Minute})
		sessions := &openstack.Sessions{}
		first, err := sessions.Get(context.Background(), "short", "1", credentialOf(t, short))
		g.Expect(err).NotTo(HaveOccurred())
		second, err := sessions.Get(context.Background(), "short", "1", credentialOf(t, short))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(short.Requests.Load()).To(Equal(int32(2)))
		g.Expect(second.Token()).NotTo(Equal(first.Token()), "a new token, not the one about to expire")

		long := fakekeystone.Start(t, fakekeystone.Options{Project: "p"})
		for range 2 {
			_, err := sessions.Get(context.Background(), "long", "1", credentialOf(t, long))
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(long.Requests.Load()).To(Equal(int32(1)), "a token valid for an hour is reused")
	})
}

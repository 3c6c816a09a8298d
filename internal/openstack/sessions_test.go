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
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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
	t.Run("a failed authentication is not kept, and is tried again after its backoff", func(t *testing.T) {
		g := NewWithT(t)
		hang := make(chan struct{})
		k := fakekeystone.Start(t, fakekeystone.Options{Project: "p", Hang: hang})
		sessions := &openstack.Sessions{Options: openstack.Options{AuthTimeout: 100 * time.Millisecond}, FailureBackoff: 50 * time.Millisecond}
		_, err := sessions.Get(context.Background(), "tarpit", "1", credentialOf(t, k))
		g.Expect(err).To(HaveOccurred(), "the authentication's own deadline ends the wait")
		g.Expect(sessions.Len()).To(BeZero())
		close(hang)
		g.Eventually(func() error {
			_, err := sessions.Get(context.Background(), "tarpit", "1", credentialOf(t, k))
			return err
		}).Should(Succeed())
		g.Expect(k.Requests.Load()).To(Equal(int32(2)), "one login failed, the next one after the backoff succeeded")
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

// hostileKeystone stands before a fake Keystone: while status is set it
// answers every login with it, while hang is set it holds every request
// until its client gives up, and otherwise it passes requests on.
type hostileKeystone struct {
	*httptest.Server
	logins atomic.Int32
	status atomic.Int32
	hang   atomic.Bool
	behind *fakekeystone.Keystone
}

func startHostileKeystone(t *testing.T, opts fakekeystone.Options) *hostileKeystone {
	t.Helper()
	h := &hostileKeystone{behind: fakekeystone.Start(t, opts)}
	target, err := url.Parse(h.behind.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v3/auth/tokens" {
			h.logins.Add(1)
		}
		if h.hang.Load() {
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		if status := h.status.Load(); status != 0 {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(status))
			_, _ = io.WriteString(w, `{"error": {"message": "no"}}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hostileKeystone) credential(t *testing.T) openstack.Credential {
	t.Helper()
	clouds := strings.ReplaceAll(string(h.behind.CloudsYAML("tenant")), h.behind.URL, h.URL)
	cred, err := openstack.CredentialFromData(map[string][]byte{openstack.CloudsSecretKey: []byte(clouds)}, "test", "tenant")
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// TestCallersOfAHungKeystoneShareOneLogin: however many callers want a
// credential whose Keystone hangs, it sees one login at a time; each caller
// gives up with its own context, and the login goes on for the others.
func TestCallersOfAHungKeystoneShareOneLogin(t *testing.T) {
	g := NewWithT(t)
	hang := make(chan struct{})
	k := fakekeystone.Start(t, fakekeystone.Options{Project: "p", Hang: hang})
	sessions := &openstack.Sessions{}
	cred := credentialOf(t, k)

	type result struct {
		err  error
		late time.Duration
	}
	results := make(chan result, 19)
	for i := range 19 {
		go func() {
			wait := time.Duration(100+20*i) * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			start := time.Now()
			_, err := sessions.Get(ctx, "hung", "1", cred)
			results <- result{err: err, late: time.Since(start) - wait}
		}()
	}
	patient := make(chan error, 1)
	go func() {
		_, err := sessions.Get(context.Background(), "hung", "1", cred)
		patient <- err
	}()
	for range 19 {
		var r result
		g.Eventually(results, 5*time.Second).Should(Receive(&r))
		g.Expect(r.err).To(MatchError(context.DeadlineExceeded))
		g.Expect(r.late).To(BeNumerically("<", 500*time.Millisecond), "each caller returns when its own context ends")
	}
	g.Expect(k.Requests.Load()).To(Equal(int32(1)), "one login for all twenty callers")
	g.Expect(patient).NotTo(Receive(), "the login goes on for the caller still waiting")
	close(hang)
	g.Eventually(patient, 10*time.Second).Should(Receive(BeNil()))
	g.Expect(k.Requests.Load()).To(Equal(int32(1)))
	g.Expect(sessions.Len()).To(Equal(1))
}

// TestAFailedLoginIsRememberedForItsBackoff: a Keystone that refuses or
// fails logins sees one per backoff, not one per caller; the callers meanwhile
// learn at once why and until when; a new version of the credential logs in
// at once.
func TestAFailedLoginIsRememberedForItsBackoff(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			g := NewWithT(t)
			k := startHostileKeystone(t, fakekeystone.Options{Project: "p"})
			k.status.Store(int32(status))
			sessions := &openstack.Sessions{FailureBackoff: 300 * time.Millisecond}
			_, err := sessions.Get(context.Background(), "refused", "1", k.credential(t))
			g.Expect(err).To(HaveOccurred())
			g.Expect(k.logins.Load()).To(Equal(int32(1)))

			var backoff *openstack.BackoffError
			for range 5 {
				_, err = sessions.Get(context.Background(), "refused", "1", k.credential(t))
				g.Expect(errors.As(err, &backoff)).To(BeTrue(), "%v", err)
			}
			g.Expect(k.logins.Load()).To(Equal(int32(1)), "no login within the backoff")
			host := strings.TrimPrefix(k.URL, "http://")
			g.Expect(err.Error()).To(MatchRegexp(`^the last login to ` + host + ` failed \S+ ago: test: authentication refused or failed: .*; not retried before \S+$`))
			g.Expect(backoff.RetryAt.Sub(backoff.FailedAt)).To(Equal(300 * time.Millisecond))

			time.Sleep(time.Until(backoff.RetryAt))
			_, err = sessions.Get(context.Background(), "refused", "1", k.credential(t))
			g.Expect(errors.As(err, &backoff)).To(BeFalse(), "after the backoff, a new login: %v", err)
			g.Expect(k.logins.Load()).To(Equal(int32(2)))
			_, err = sessions.Get(context.Background(), "refused", "1", k.credential(t))
			g.Expect(errors.As(err, &backoff)).To(BeTrue())
			g.Expect(backoff.RetryAt.Sub(backoff.FailedAt)).To(Equal(600*time.Millisecond), "the backoff doubles")
			g.Expect(k.logins.Load()).To(Equal(int32(2)))

			k.status.Store(0)
			s, err := sessions.Get(context.Background(), "refused", "2", k.credential(t))
			g.Expect(err).NotTo(HaveOccurred(), "a changed Secret logs in at once")
			g.Expect(s.ProjectID()).To(Equal("p"))
			g.Expect(k.logins.Load()).To(Equal(int32(3)))
		})
	}
	t.Run("hung until the authentication timeout", func(t *testing.T) {
		g := NewWithT(t)
		k := startHostileKeystone(t, fakekeystone.Options{Project: "p"})
		k.hang.Store(true)
		sessions := &openstack.Sessions{Options: openstack.Options{AuthTimeout: 100 * time.Millisecond}}
		_, err := sessions.Get(context.Background(), "tarpit", "1", k.credential(t))
		g.Expect(err).To(MatchError(context.DeadlineExceeded))
		start := time.Now()
		_, err = sessions.Get(context.Background(), "tarpit", "1", k.credential(t))
		var backoff *openstack.BackoffError
		g.Expect(errors.As(err, &backoff)).To(BeTrue(), "%v", err)
		g.Expect(time.Since(start)).To(BeNumerically("<", 50*time.Millisecond), "at once, not after another timeout")
		g.Expect(backoff.RetryAt.Sub(backoff.FailedAt)).To(Equal(openstack.DefaultFailureBackoff))
		g.Expect(k.logins.Load()).To(Equal(int32(1)))
	})
	t.Run("bounded like the sessions", func(t *testing.T) {
		g := NewWithT(t)
		k := startHostileKeystone(t, fakekeystone.Options{Project: "p"})
		k.status.Store(http.StatusUnauthorized)
		sessions := &openstack.Sessions{MaxEntries: 2}
		for _, id := range []string{"a", "b", "c"} {
			_, err := sessions.Get(context.Background(), id, "1", k.credential(t))
			g.Expect(err).To(HaveOccurred())
		}
		g.Expect(k.logins.Load()).To(Equal(int32(3)))
		_, err := sessions.Get(context.Background(), "a", "1", k.credential(t))
		var backoff *openstack.BackoffError
		g.Expect(errors.As(err, &backoff)).To(BeFalse(), "a's failure, the least recently used, was dropped: %v", err)
		g.Expect(k.logins.Load()).To(Equal(int32(4)))
		_, err = sessions.Get(context.Background(), "c", "1", k.credential(t))
		g.Expect(errors.As(err, &backoff)).To(BeTrue(), "c's failure was kept")
		g.Expect(k.logins.Load()).To(Equal(int32(4)))
	})
}

// TestASuccessfulLoginClearsTheBackoff: after a success, the next failure
// waits the first backoff again, not the doubled one.
func TestASuccessfulLoginClearsTheBackoff(t *testing.T) {
	g := NewWithT(t)
	// A token of a minute is renewed at each Get: each Get logs in.
	k := startHostileKeystone(t, fakekeystone.Options{Project: "p", TokenLifetime: time.Minute})
	sessions := &openstack.Sessions{FailureBackoff: 50 * time.Millisecond}
	get := func() error {
		_, err := sessions.Get(context.Background(), "flaky", "1", k.credential(t))
		return err
	}
	var backoff *openstack.BackoffError
	k.status.Store(http.StatusInternalServerError)
	for i := range 3 {
		g.Expect(get()).To(HaveOccurred())
		g.Expect(errors.As(get(), &backoff)).To(BeTrue())
		g.Expect(backoff.RetryAt.Sub(backoff.FailedAt)).To(Equal(50 * time.Millisecond << i))
		time.Sleep(time.Until(backoff.RetryAt))
	}
	k.status.Store(0)
	g.Expect(get()).To(Succeed())
	g.Expect(get()).To(Succeed(), "no failure is remembered after a success")
	logins := k.logins.Load()
	k.status.Store(http.StatusInternalServerError)
	g.Expect(get()).To(HaveOccurred())
	g.Expect(errors.As(get(), &backoff)).To(BeTrue())
	g.Expect(backoff.RetryAt.Sub(backoff.FailedAt)).To(Equal(50*time.Millisecond), "the backoff starts over")
	g.Expect(k.logins.Load()).To(Equal(logins + 1))
}

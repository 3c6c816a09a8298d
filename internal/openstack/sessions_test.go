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

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
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capo-sharednet/capo-sharednet/internal/openstack"
)

// What the extension reads of an answer, per kind: bytes, and JSON values
// (jsonValues), the costlier to decode however short they are.
const (
	tokenBytes, tokenValues = 2 << 20, 32 << 10
	listBytes, listValues   = 8 << 20, 256 << 10
	otherBytes, otherValues = 1 << 20, 16 << 10
	// heapBound is what the largest answer of any kind may cost.
	heapBound = 64 << 20
)

// shape is a hostile answer: head, many times elem, then tail. Each elem
// counts values.
type shape struct {
	name, head, elem, tail string
	values                 int
}

// hostileAnswer is an answer and the refusal it meets ("" when read).
type hostileAnswer struct {
	name, refusal string
	body          []byte
}

// hostileAnswers are, for a kind of bounds bytes and values, each shape at
// the bound (bytes and values both) and at four times its values, and an
// answer four times too long.
func hostileAnswers(shapes []shape, bytes, values int) []hostileAnswer {
	var out []hostileAnswer
	for _, s := range shapes {
		out = append(out,
			hostileAnswer{name: s.name + ", at the bound", body: packed(s.head, s.elem, s.tail, (values-1024)/s.values, bytes)},
			hostileAnswer{name: s.name + ", four times the bound", body: packed(s.head, s.elem, s.tail, 4*values/s.values, bytes),
				refusal: fmt.Sprintf("holds more than %d JSON values", values)})
	}
	return append(out, hostileAnswer{name: "four times as long", body: packed(shapes[0].head, "", shapes[0].tail, 0, 4*bytes),
		refusal: fmt.Sprintf("is longer than %d MiB", bytes>>20)})
}

// allocated is what call allocates in all, garbage included: more than the
// heap can grow by while it runs.
func allocated(call func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	call()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// expectRead says the answer was read within its bounds, or refused for
// passing them; either way at a bounded cost.
func expectRead(g Gomega, a hostileAnswer, bytes, values int, err error, cost uint64) {
	g.Expect(cost).To(BeNumerically("<", heapBound), "%s (%d bytes) cost %d MiB", a.name, len(a.body), cost>>20)
	if a.refusal == "" {
		g.Expect(len(a.body)).To(BeNumerically("<=", bytes))
		g.Expect(jsonValues(a.body)).To(BeNumerically("<=", values))
		g.Expect(err).NotTo(HaveOccurred(), "an answer at the bound is read")
	} else {
		g.Expect(err).To(MatchError(ContainSubstring(a.refusal)))
	}
}

// TestAHostileAnswerCostsBoundedHeap: an answer packed with the values
// that cost most to decode (empty objects, which gophercloud or the
// extension decode into maps or structs; empty strings in a list), up to
// the bounds of its kind, costs less than heapBound in all; one beyond
// them is refused, at no more cost, with an error that names the bound.
func TestAHostileAnswerCostsBoundedHeap(t *testing.T) {
	ctx := context.Background()
	t.Run("a token answer", func(t *testing.T) {
		c := startCloud(t, cloudOptions{})
		members := tokenMembers(c.URL, 0)
		withCatalog := members[:len(members)-len("]}")]
		for _, a := range hostileAnswers([]shape{
			{name: "a catalog entry of empty endpoints", head: withCatalog + `,{"type":"network","endpoints":[`, elem: `{}`, tail: `]}]}`, values: 9},
			{name: "a list of empty strings", head: members + `,"x":[`, elem: `""`, tail: `]`, values: 1},
		}, tokenBytes, tokenValues) {
			t.Run(a.name, func(t *testing.T) {
				c.token.Store(&a.body)
				var err error
				cost := allocated(func() { _, err = openstack.NewSession(ctx, c.credential(t), openstack.Options{}) })
				expectRead(NewWithT(t), a, tokenBytes, tokenValues, err, cost)
			})
		}
	})
	t.Run("a list", func(t *testing.T) {
		var answer atomic.Pointer[[]byte]
		c := startCloud(t, cloudOptions{neutron: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(*answer.Load())
		})})
		s, err := openstack.NewSession(ctx, c.credential(t), openstack.Options{})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		for _, a := range hostileAnswers([]shape{
			{name: "empty ports", head: `"ports":[`, elem: `{}`, tail: `]`, values: 9},
			{name: "a port of empty security groups", head: `"ports":[{"security_groups":[`, elem: `""`, tail: `]}]`, values: 1},
		}, listBytes, listValues) {
			t.Run(a.name, func(t *testing.T) {
				answer.Store(&a.body)
				var err error
				cost := allocated(func() { _, err = s.PortsOnSubnets(ctx, "net", []string{"s"}) })
				expectRead(NewWithT(t), a, listBytes, listValues, err, cost)
			})
		}
	})
	t.Run("any other answer", func(t *testing.T) {
		var answer atomic.Pointer[[]byte]
		c := startCloud(t, cloudOptions{neutron: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(*answer.Load())
		})})
		s, err := openstack.NewSession(ctx, c.credential(t), openstack.Options{})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		for _, a := range hostileAnswers([]shape{
			{name: "a network of empty objects", head: `"network":{"id":"n","x":[`, elem: `{}`, tail: `]}`, values: 9},
			{name: "a network of empty subnets", head: `"network":{"id":"n","subnets":[`, elem: `""`, tail: `]}`, values: 1},
		}, otherBytes, otherValues) {
			t.Run(a.name, func(t *testing.T) {
				answer.Store(&a.body)
				var err error
				cost := allocated(func() { _, err = s.Network(ctx, "n") })
				expectRead(NewWithT(t), a, otherBytes, otherValues, err, cost)
			})
		}
	})
}

// TestAListWhoseNextLinksNeverEndStopsAtThePageLimit: a Neutron whose
// every page links to another is asked for 64 pages, then refused.
func TestAListWhoseNextLinksNeverEndStopsAtThePageLimit(t *testing.T) {
	g := NewWithT(t)
	var pages atomic.Int32
	c := startCloud(t, cloudOptions{neutron: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := pages.Add(1)
		writeJSON(w, fmt.Sprintf(`{"ports":[{"id":"port-%d"}],"ports_links":[{"rel":"next","href":"http://%s/network/v2.0/ports?marker=port-%d"}]}`, n, r.Host, n))
	})})
	// Without a page limit, the call's own deadline would end it.
	s, err := openstack.NewSession(context.Background(), c.credential(t), openstack.Options{CallTimeout: 2 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.PortIDsOnNetwork(context.Background(), "net")
	g.Expect(err).To(MatchError(ContainSubstring("goes on for more than 64 pages")))
	g.Expect(pages.Load()).To(Equal(int32(64)))
}

// TestASessionKeepsOnlyTheTokenOfItsLogin: of a login's answer (a catalog
// of 800 services here, within the bound), a session keeps the token and
// the few endpoints it uses, not the decoded catalog; nor after Neutron's
// 401 made it log in again.
func TestASessionKeepsOnlyTheTokenOfItsLogin(t *testing.T) {
	g := NewWithT(t)
	var unauthorized atomic.Bool
	c := startCloud(t, cloudOptions{neutron: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if unauthorized.CompareAndSwap(true, false) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		writeJSON(w, `{"network":{"id":"n","name":"n","mtu":1500}}`)
	})})
	var catalog []string
	for i := range 800 {
		catalog = append(catalog, fmt.Sprintf(`{"type":"service-%d","name":"s%d","endpoints":[{"interface":"public","region":"RegionOne","url":"https://s%d.example/v1/"},{"interface":"internal","region":"RegionOne","url":"https://s%d.internal/v1/"}]}`, i, i, i, i))
	}
	body := []byte("{" + tokenMembers(c.URL, 0, catalog...) + "}")
	g.Expect(jsonValues(body)).To(BeNumerically("<=", tokenValues))
	c.token.Store(&body)
	heap := func() int64 {
		runtime.GC()
		runtime.GC() // sync.Pools keep what they held for one
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}

	// A first session fills what the process keeps once (JSON field
	// caches, metric series).
	first, err := openstack.NewSession(context.Background(), c.credential(t), openstack.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = first.Network(context.Background(), "n")
	g.Expect(err).NotTo(HaveOccurred())

	before := heap()
	s, err := openstack.NewSession(context.Background(), c.credential(t), openstack.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	kept := heap() - before
	t.Logf("a session keeps %d KiB of a %d KiB answer", kept>>10, len(body)>>10)
	g.Expect(kept).To(BeNumerically("<", 256<<10))

	unauthorized.Store(true)
	n, err := s.Network(context.Background(), "n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.MTU).To(Equal(1500))
	g.Expect(c.logins.Load()).To(Equal(int32(3)), "Neutron's 401 made it log in again")
	g.Expect(heap()-before).To(BeNumerically("<", 256<<10), "after logging in again")
	runtime.KeepAlive(first)
	runtime.KeepAlive(s)
}

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
	"fmt"
	"io"
	"net/http"
	"strings"
)

// What an answer may cost. Its bytes are not enough: decoded, a JSON value
// costs up to a few KiB however short it is ("{}," is three bytes, a port
// struct and gophercloud's generic map for it hundreds), so the values are
// counted too. The bounds are per kind of answer, each well above what a
// real cloud answers, and such that the largest answer of each kind costs
// under 40 MiB of heap in all, where 8 MiB of empty objects cost GiB
// (TestAHostileAnswerCostsBoundedHeap).
type answerLimit struct {
	// kind names the answer in errors.
	kind string
	// bytes bounds its body; values the JSON values in it (see jsonMeter).
	bytes, values int64
}

var (
	// tokenAnswer is Keystone's answer to a login (or to a token's
	// validation): a token and its catalog, a few KiB to a few hundred KiB
	// for a catalog of hundreds of endpoints.
	tokenAnswer = answerLimit{kind: "a token answer", bytes: 2 << 20, values: 32 << 10}
	// listAnswer is every page of one list together (listAll): a VM
	// project's largest, thousands of ports, is a few MiB, a port some 80
	// values (as jsonMeter counts them): about 3,000 ports.
	listAnswer = answerLimit{kind: "a list (its pages together)", bytes: DefaultMaxResponseBytes, values: 256 << 10}
	// otherAnswer is any other answer: one object, a version document, an
	// error.
	otherAnswer = answerLimit{kind: "an answer", bytes: 1 << 20, values: 16 << 10}
)

// spent is what the answers charged to one account have cost so far.
type spent struct{ bytes, values int64 }

type listAccountKey struct{}

// withListAccount returns ctx in which every answer read is charged to one
// account of a list: its pages together, whatever their number, cost at
// most listAnswer. A list reads its pages one after another.
func withListAccount(ctx context.Context) context.Context {
	return context.WithValue(ctx, listAccountKey{}, &spent{})
}

// boundedTransport fails any answer that costs more than its kind allows:
// the reader (gophercloud decodes whole bodies) gets an error at the first
// byte or value too many instead of a body a hostile endpoint streams
// forever, or packs with values.
type boundedTransport struct {
	next http.RoundTripper
	// maxBytes caps the bytes of every kind (Options.MaxResponseBytes).
	maxBytes int64
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	limit, account := t.accountOf(req)
	body := &boundedBody{ReadCloser: resp.Body, limit: limit, spent: account, host: req.URL.Host}
	if resp.ContentLength > limit.bytes-account.bytes {
		_ = resp.Body.Close()
		return nil, body.tooLong()
	}
	resp.Body = body
	return resp, nil
}

// accountOf is the limit an answer to req is held to and the account it is
// charged to: a token answer (a login, also one within a list's
// reauthentication) and any other answer on its own, a list's pages on the
// list's.
func (t *boundedTransport) accountOf(req *http.Request) (answerLimit, *spent) {
	limit := otherAnswer
	account := &spent{}
	switch list, ok := req.Context().Value(listAccountKey{}).(*spent); {
	case strings.HasSuffix(strings.TrimSuffix(req.URL.Path, "/"), "/auth/tokens"):
		limit = tokenAnswer
	case ok:
		limit, account = listAnswer, list
	}
	limit.bytes = min(limit.bytes, t.maxBytes)
	return limit, account
}

type boundedBody struct {
	io.ReadCloser
	limit answerLimit
	spent *spent
	meter jsonMeter
	host  string
	err   error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	// One byte more than allowed tells a body at the limit from a longer one.
	if left := b.limit.bytes - b.spent.bytes; int64(len(p)) > left+1 {
		p = p[:max(left+1, 0)]
	}
	n, err := b.ReadCloser.Read(p)
	b.spent.bytes += int64(n)
	b.spent.values += b.meter.count(p[:n])
	switch {
	case b.spent.bytes > b.limit.bytes:
		b.err = b.tooLong()
	case b.spent.values > b.limit.values:
		b.err = &tooLargeError{kind: b.limit.kind, host: b.host, what: fmt.Sprintf("holds more than %d JSON values", b.limit.values)}
	default:
		return n, err
	}
	// None of what was read: a decoder would decode what it was given
	// before it looked at the error.
	return 0, b.err
}

func (b *boundedBody) tooLong() error {
	return &tooLargeError{kind: b.limit.kind, host: b.host, what: fmt.Sprintf("is longer than %s", inMiB(b.limit.bytes))}
}

// jsonMeter counts the values of a JSON text as it streams by, allocating
// nothing: every value but the outermost opens a container or follows one's
// opening or a comma, so counting the '[', '{' and ',' outside strings
// counts every value (and no more than twice). An object counts
// objectValues: decoded, it is a struct or a map, the costliest of values.
type jsonMeter struct {
	inString, escaped bool
}

const objectValues = 8

func (m *jsonMeter) count(p []byte) int64 {
	var n int64
	for _, c := range p {
		switch {
		case m.escaped:
			m.escaped = false
		case m.inString:
			m.escaped = c == '\\'
			m.inString = c != '"'
		case c == '"':
			m.inString = true
		case c == '{':
			n += objectValues
		case c == '[', c == ',':
			n++
		}
	}
	return n
}

type tooLargeError struct {
	kind, host, what string
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%s from %s %s, more than the extension reads; refused", e.kind, e.host, e.what)
}

// inMiB says n in MiB, or KiB below one.
func inMiB(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

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
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gophercloud/gophercloud/v2"
)

var (
	unavailable = gophercloud.ErrUnexpectedResponseCode{Method: http.MethodGet, Actual: http.StatusServiceUnavailable, Body: []byte("busy")}
	notFound    = gophercloud.ErrUnexpectedResponseCode{Method: http.MethodGet, Actual: http.StatusNotFound}
)

// failing answers err every time and counts the calls.
func failing(err error, calls *int) func(context.Context) error {
	return func(context.Context) error {
		*calls++
		return err
	}
}

func TestOnlyTransientErrorsAreRetriedAtMostAttemptsTimes(t *testing.T) {
	p := retryPolicy{attempts: 3, backoff: time.Millisecond}
	for name, tc := range map[string]struct {
		err   error
		calls int
	}{
		"success":                  {nil, 1},
		"503":                      {unavailable, 3},
		"404":                      {notFound, 1},
		"a timeout":                {&net.OpError{Op: "read", Err: errors.New("i/o timeout")}, 3},
		"EOF":                      {fmt.Errorf("reading: %w", io.EOF), 3},
		"unexpected EOF":           {io.ErrUnexpectedEOF, 3},
		"a reset connection":       {fmt.Errorf("read: %w", syscall.ECONNRESET), 3},
		"a refused connection":     {fmt.Errorf("dial: %w", syscall.ECONNREFUSED), 3},
		"a malformed answer":       {errors.New("invalid character '<'"), 1},
		"a conflict is no 5xx":     {gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusConflict}, 1},
		"501 is not transient":     {gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusNotImplemented}, 1},
		"504 after a gateway":      {gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusGatewayTimeout}, 3},
		"502 from a load balancer": {gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusBadGateway}, 3},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			calls := 0
			err := p.do(context.Background(), failing(tc.err, &calls))
			g.Expect(calls).To(Equal(tc.calls))
			if tc.err == nil {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(tc.err), "the last answer is returned as it is")
			}
		})
	}
}

func TestARetrySucceedsOnceTheCloudRecovers(t *testing.T) {
	g := NewWithT(t)
	calls := 0
	err := retryPolicy{attempts: 4, backoff: time.Millisecond}.do(context.Background(), func(context.Context) error {
		calls++
		if calls < 3 {
			return unavailable
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(calls).To(Equal(3))
}

// The waits double from backoff up to maxWait, each stretched by up to
// retryJitter of itself and never shortened: callers failed by one outage
// spread out, and the whole call waits no longer than the sum of the bounds.
func TestTheWaitsGrowWithJitterUpToTheCap(t *testing.T) {
	g := NewWithT(t)
	p := retryPolicy{attempts: 8, backoff: 100 * time.Millisecond, maxWait: 500 * time.Millisecond}
	const ms = time.Millisecond
	base := []time.Duration{100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms, 500 * ms, 500 * ms}
	jittered := false
	for range 20 {
		waits := p.waits()
		for i, b := range base {
			w := waits.Step()
			g.Expect(w).To(BeNumerically(">=", b), "wait %d", i)
			g.Expect(w).To(BeNumerically("<=", time.Duration(float64(b)*(1+retryJitter))), "wait %d", i)
			jittered = jittered || w != b
		}
	}
	g.Expect(jittered).To(BeTrue(), "the waits are not all exactly the base")

	d := defaultRetry.waits()
	var total time.Duration
	for range defaultRetry.attempts - 1 {
		total += d.Step()
	}
	g.Expect(total).To(BeNumerically(">=", 1400*time.Millisecond))
	g.Expect(total).To(BeNumerically("<=", time.Duration(1400*(1+retryJitter))*time.Millisecond),
		"the default policy waits 200+400+800 ms, jittered, between its four attempts")
}

func TestTheCallWaitsBetweenAttempts(t *testing.T) {
	g := NewWithT(t)
	calls := 0
	start := time.Now()
	err := retryPolicy{attempts: 3, backoff: 20 * time.Millisecond}.do(context.Background(), failing(unavailable, &calls))
	g.Expect(err).To(MatchError(unavailable))
	g.Expect(calls).To(Equal(3))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 60*time.Millisecond), "20 ms then 40 ms")
}

func TestAContextEndedBetweenAttemptsSaysTheLastAnswer(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := retryPolicy{attempts: 4, backoff: time.Hour}.do(ctx, func(context.Context) error {
		calls++
		cancel()
		return unavailable
	})
	g.Expect(calls).To(Equal(1))
	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(err.Error()).To(ContainSubstring("(last answer: " + unavailable.Error() + ")"))
}

func TestTheBudgetBoundsTheWholeCall(t *testing.T) {
	g := NewWithT(t)
	calls := 0
	start := time.Now()
	err := retryPolicy{attempts: 4, backoff: time.Hour, budget: 50 * time.Millisecond}.do(context.Background(), failing(unavailable, &calls))
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
	g.Expect(calls).To(Equal(1))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(err.Error()).To(ContainSubstring("last answer: "))
}

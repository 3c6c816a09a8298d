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
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"k8s.io/apimachinery/pkg/util/wait"
)

// retryPolicy retries reads and deletes by ID — calls that are safe to repeat
// — on answers that say "try again": 5xx, a timeout, a reset connection.
type retryPolicy struct {
	attempts int
	// backoff is the first wait, doubled after each attempt up to maxWait,
	// each wait stretched by up to retryJitter of itself so that callers
	// failed by the same outage do not come back in step.
	backoff, maxWait time.Duration
	// budget bounds the call with all its attempts (none when zero).
	budget time.Duration
}

const retryJitter = 0.2

var defaultRetry = retryPolicy{attempts: 4, backoff: 200 * time.Millisecond, maxWait: 2 * time.Second}

// waits are the pauses between attempts.
func (p retryPolicy) waits() *wait.Backoff {
	return &wait.Backoff{Duration: p.backoff, Factor: 2, Jitter: retryJitter, Steps: p.attempts, Cap: p.maxWait}
}

// transient says whether err is worth trying again.
func transient(err error) bool {
	if err == nil {
		return false
	}
	for _, code := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		if gophercloud.ResponseCodeIs(err, code) {
			return true
		}
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// do runs call until it succeeds, fails for good, or attempts run out.
func (p retryPolicy) do(ctx context.Context, call func(context.Context) error) error {
	if p.budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.budget)
		defer cancel()
	}
	waits := p.waits()
	for attempt := 1; ; attempt++ {
		err := call(ctx)
		if err == nil || !transient(err) || attempt >= p.attempts {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last answer: %v)", ctx.Err(), err)
		case <-time.After(waits.Step()):
		}
	}
}

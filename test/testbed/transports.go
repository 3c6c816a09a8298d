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

package testbed

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Counter counts the requests that go through it, by method and path.
type Counter struct {
	Next http.RoundTripper
	mu   sync.Mutex
	seen []string
}

// RoundTrip implements http.RoundTripper.
func (c *Counter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.seen = append(c.seen, req.Method+" "+req.URL.RequestURI())
	c.mu.Unlock()
	return c.Next.RoundTrip(req)
}

// Reset forgets what was counted and returns it.
func (c *Counter) Reset() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := c.seen
	c.seen = nil
	return seen
}

// Fault is what the FaultInjector does to one request.
type Fault int

// The faults a real Neutron cannot be asked to produce on demand.
const (
	Pass Fault = iota
	// ServerError answers 503 without asking Neutron.
	ServerError
	// LostAnswer sends the request to Neutron and then drops its answer (a
	// reset connection after the server acted).
	LostAnswer
	// Reset drops the connection before Neutron sees the request.
	Reset
	// Timeout waits past the client's timeout without answering.
	Timeout
)

// FaultInjector is a fake, named as such: an HTTP transport in front of the
// real Neutron that injects, per request to Neutron (port 9696), the next
// fault of Plan; once the plan is used up every request passes.
type FaultInjector struct {
	Next http.RoundTripper
	// Plan is consumed one fault per Neutron request.
	Plan []Fault
	// Hold is how long a Timeout fault waits (longer than the client timeout).
	Hold time.Duration
	mu   sync.Mutex
	// Injected counts the faults injected.
	Injected int
}

// RoundTrip implements http.RoundTripper.
func (f *FaultInjector) RoundTrip(req *http.Request) (*http.Response, error) {
	fault := Pass
	if strings.HasSuffix(req.URL.Host, ":9696") {
		f.mu.Lock()
		if len(f.Plan) > 0 {
			fault, f.Plan = f.Plan[0], f.Plan[1:]
			if fault != Pass {
				f.Injected++
			}
		}
		f.mu.Unlock()
	}
	switch fault {
	case ServerError:
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Header: http.Header{},
			Body: io.NopCloser(strings.NewReader(`{"NeutronError": {"message": "injected fault"}}`)), Request: req}, nil
	case LostAnswer:
		resp, err := f.Next.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return nil, syscall.ECONNRESET
	case Reset:
		return nil, syscall.ECONNRESET
	case Timeout:
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(f.Hold):
			return nil, errors.New("injected timeout")
		}
	}
	return f.Next.RoundTrip(req)
}

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

// Package faultproxy is a TEST HARNESS: a proxy on 127.0.0.1 in front of
// real OpenStack services (Keystone, Neutron, Octavia) that injects faults
// into the requests of one client (matched by its User-Agent) while every
// other client (CAPO, the CCM) goes through untouched.
//
// A clouds.yaml whose auth_url is the proxy's Keystone (Clouds) routes a
// client through it: the proxy rewrites the endpoints of the catalog
// Keystone hands out to its own listeners, so the Neutron and Octavia calls
// that follow come through it too.
//
// Faults: an answer of 503 without asking the service, a reset connection,
// a stall (then the service is asked), and a lost answer (the service acted,
// the client never hears it: the case that a retry must not act twice on).
// A rule can also run a function once the service has answered and before
// the client hears it (the e2e kills the extension there).
package faultproxy

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"
)

// Fault is what a rule does to a matching request.
type Fault int

const (
	// Pass asks the service (a rule with only Then).
	Pass Fault = iota
	// Unavailable answers 503 without asking the service.
	Unavailable
	// Reset closes the connection without an answer, without asking the service.
	Reset
	// Stall waits Rule.Stall (or until the client gives up), then asks the service.
	Stall
	// LoseAnswer asks the service, then closes the connection without its answer.
	LoseAnswer
)

func (f Fault) String() string {
	return [...]string{"pass", "503", "reset", "stall", "answer lost"}[f]
}

// Rule injects Fault into the requests it matches.
type Rule struct {
	// Service is the catalog's service type ("identity", "network",
	// "load-balancer"); empty matches all.
	Service string
	// Method and PathPrefix narrow the match; empty matches all.
	Method, PathPrefix string
	// Agent is a substring of the User-Agent; empty matches all clients.
	Agent string
	Fault Fault
	// Stall is how long Stall holds a request (30 s when zero).
	Stall time.Duration
	// Times is how many requests the rule takes; zero is until removed.
	Times int
	// Then runs after the service answered with a status below 300, before
	// the client hears it; the rule then takes only such requests, and its
	// Fault is Pass or LoseAnswer.
	Then func(Exchange)
}

// Exchange is one request as the proxy saw it.
type Exchange struct {
	Service, Method, Path, Agent string
	// Status is the service's answer; zero when it was not asked or did not answer.
	Status int
	// Fault is what a rule did ("" when none matched).
	Fault string
}

// Proxy fronts a set of services, one listener each.
type Proxy struct {
	mu       sync.Mutex
	rules    []*rule
	log      []Exchange
	services map[string]*service // by service type
	// rewrite maps each upstream base URL to the proxy's listener for it.
	rewrite   []string
	transport *http.Transport
}

type rule struct {
	Rule
	taken int
}

type service struct {
	kind     string
	upstream *url.URL
	server   *http.Server
	listener net.Listener
}

// Start listens on 127.0.0.1 for each upstream (service type to base URL,
// e.g. "network": "http://127.0.0.1:9696").
func Start(upstreams map[string]string) (*Proxy, error) {
	p := &Proxy{services: map[string]*service{}, transport: &http.Transport{DisableCompression: true, ResponseHeaderTimeout: 2 * time.Minute}}
	for kind, raw := range upstreams {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			p.Close()
			return nil, fmt.Errorf("upstream %s %q is not a URL", kind, raw)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.Close()
			return nil, err
		}
		s := &service{kind: kind, upstream: u, listener: l}
		s.server = &http.Server{Handler: p.handler(s), ReadHeaderTimeout: 10 * time.Second}
		p.services[kind] = s
		p.rewrite = append(p.rewrite, u.Scheme+"://"+u.Host, "http://"+l.Addr().String())
		go func() { _ = s.server.Serve(l) }()
	}
	return p, nil
}

// URL is the proxy's base URL for a service type.
func (p *Proxy) URL(kind string) string {
	return "http://" + p.services[kind].listener.Addr().String()
}

// Close stops every listener.
func (p *Proxy) Close() {
	for _, s := range p.services {
		_ = s.server.Close()
	}
}

// Clouds returns cloudsYAML with every auth_url pointed at the proxy's
// Keystone.
func (p *Proxy) Clouds(cloudsYAML []byte) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(cloudsYAML, &doc); err != nil {
		return nil, err
	}
	clouds, _ := doc["clouds"].(map[string]any)
	for name, c := range clouds {
		auth, _ := c.(map[string]any)["auth"].(map[string]any)
		raw, _ := auth["auth_url"].(string)
		if raw == "" {
			return nil, fmt.Errorf("cloud %s has no auth.auth_url", name)
		}
		auth["auth_url"] = p.rewriter().Replace(raw)
	}
	return yaml.Marshal(doc)
}

// Inject adds a rule; the function returned removes it.
func (p *Proxy) Inject(r Rule) (remove func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	added := &rule{Rule: r}
	p.rules = append(p.rules, added)
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for i, r := range p.rules {
			if r == added {
				p.rules = append(p.rules[:i], p.rules[i+1:]...)
				return
			}
		}
	}
}

// Exchanges returns the requests seen so far that match keep (all when nil).
func (p *Proxy) Exchanges(keep func(Exchange) bool) []Exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Exchange
	for _, e := range p.log {
		if keep == nil || keep(e) {
			out = append(out, e)
		}
	}
	return out
}

func (p *Proxy) rewriter() *strings.Replacer { return strings.NewReplacer(p.rewrite...) }

// match takes the first rule for r; rules with Then are taken once the
// service answered (take).
func (p *Proxy) match(kind string, r *http.Request) *rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ru := range p.rules {
		if (ru.Service == "" || ru.Service == kind) && (ru.Method == "" || ru.Method == r.Method) &&
			strings.HasPrefix(r.URL.Path, ru.PathPrefix) && strings.Contains(r.UserAgent(), ru.Agent) &&
			(ru.Times == 0 || ru.taken < ru.Times) {
			if ru.Then == nil {
				ru.taken++
			}
			return ru
		}
	}
	return nil
}

func (p *Proxy) record(e Exchange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, e)
}

func (p *Proxy) handler(s *service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := Exchange{Service: s.kind, Method: r.Method, Path: r.URL.Path, Agent: r.UserAgent()}
		ru := p.match(s.kind, r)
		fault := Pass
		if ru != nil && ru.Then == nil {
			fault = ru.Fault
			e.Fault = fault.String()
		}
		switch fault {
		case Unavailable:
			p.record(e)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"message": "injected by faultproxy"}`)
			return
		case Reset:
			p.record(e)
			reset(w)
			return
		case Stall:
			select {
			case <-time.After(cmp.Or(ru.Stall, 30*time.Second)):
			case <-r.Context().Done():
				e.Fault += ", client gave up"
				p.record(e)
				return
			}
		}
		resp, err := p.forward(s, r)
		if err != nil {
			e.Fault += fmt.Sprintf(" (service: %v)", err)
			p.record(e)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		e.Status = resp.status
		// A rule with Then acts on a success only: the service acted.
		if ru != nil && ru.Then != nil && resp.status < 300 && p.take(ru) {
			fault = ru.Fault
			e.Fault = fault.String()
			ru.Then(e)
		}
		p.record(e)
		if fault == LoseAnswer {
			reset(w)
			return
		}
		for k, v := range resp.header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.status)
		_, _ = w.Write(resp.body)
	})
}

// take counts a Then rule's request, if it still has one to take.
func (p *Proxy) take(ru *rule) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ru.Times != 0 && ru.taken >= ru.Times {
		return false
	}
	ru.taken++
	return true
}

// answer is a service's answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// forward asks the service and reads its whole answer; Keystone's answers
// have the upstreams' URLs in them (catalog, version links) replaced by the
// proxy's.
func (p *Proxy) forward(s *service, r *http.Request) (answer, error) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = s.upstream.Scheme, s.upstream.Host, s.upstream.Host
	out.Header.Del("Accept-Encoding")
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	a := answer{status: resp.StatusCode, header: resp.Header}
	if a.body, err = io.ReadAll(resp.Body); err != nil {
		return answer{}, err
	}
	if s.kind == "identity" {
		a.body = []byte(p.rewriter().Replace(string(a.body)))
		if loc := a.header.Get("Location"); loc != "" {
			a.header.Set("Location", p.rewriter().Replace(loc))
		}
	}
	return a, nil
}

// reset closes the client's connection with an RST, no answer.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

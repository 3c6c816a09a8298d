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
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// requests counts every HTTP request a Session sends, on the transport
// itself, so nothing the extension asks of OpenStack escapes it (token
// requests and version discovery included). Its labels are bounded: the
// service is the catalog type of the endpoint the URL falls under, never a
// URL, project or resource ID.
var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "capo_sharednet_openstack_requests_total",
	Help: "HTTP requests the extension sent to OpenStack, by service (catalog type: identity, network, load-balancer; other), method and HTTP status code (error when no answer came).",
}, []string{"service", "method", "code"})

func init() {
	metrics.Registry.MustRegister(requests)
}

// The values of the service label: the catalog types below, else ServiceOther.
const (
	ServiceIdentity     = "identity"
	ServiceNetwork      = "network"
	ServiceLoadBalancer = "load-balancer"
	ServiceCompute      = "compute"
	ServiceOther        = "other"
)

// services are the catalog types that name their own series; any other is
// counted as ServiceOther (a catalog may hold any type: the label stays
// bounded).
var services = map[string]bool{ServiceIdentity: true, ServiceNetwork: true, ServiceLoadBalancer: true, ServiceCompute: true}

// endpoint is a URL prefix and the service it belongs to.
type endpoint struct {
	prefix  string
	service string
}

// countingTransport counts each request it sends by service, method and
// answer. The endpoints are known once the token's catalog is read, after
// the first request: they are swapped in whole.
type countingTransport struct {
	next      http.RoundTripper
	endpoints atomic.Pointer[[]endpoint]
}

func newCountingTransport(next http.RoundTripper) *countingTransport {
	return &countingTransport{next: next}
}

// add records the service of each base URL; a longer prefix wins, so a
// service under another's path is told apart.
func (t *countingTransport) add(urls map[string]string) {
	var out []endpoint
	if old := t.endpoints.Load(); old != nil {
		out = append(out, *old...)
	}
	t.endpoints.Store(withEndpoints(out, urls))
}

// set records the service of each base URL, and forgets the others.
func (t *countingTransport) set(urls map[string]string) {
	t.endpoints.Store(withEndpoints(nil, urls))
}

func withEndpoints(out []endpoint, urls map[string]string) *[]endpoint {
	for base, service := range urls {
		if !services[service] {
			service = ServiceOther
		}
		if p := normalize(base); p != "" {
			out = append(out, endpoint{prefix: p, service: service})
		}
	}
	return &out
}

// addCatalog records the endpoints of a token's catalog of the services a
// session uses (until it keeps those it chose: set).
func (t *countingTransport) addCatalog(catalog *tokens.ServiceCatalog) {
	urls := map[string]string{}
	for _, entry := range catalog.Entries {
		if entry.Type != ServiceNetwork && entry.Type != ServiceLoadBalancer {
			continue
		}
		for _, e := range entry.Endpoints {
			urls[e.URL] = entry.Type
		}
	}
	t.add(urls)
}

// service is the service of the endpoint u falls under, ServiceOther when none.
func (t *countingTransport) service(u *url.URL) string {
	list := t.endpoints.Load()
	if list == nil || u == nil {
		return ServiceOther
	}
	target := normalize(u.Scheme + "://" + u.Host + u.EscapedPath())
	best, service := -1, ServiceOther
	for _, e := range *list {
		if (target == e.prefix || strings.HasPrefix(target, e.prefix+"/")) && len(e.prefix) > best {
			best, service = len(e.prefix), e.service
		}
	}
	return service
}

// normalize lower-cases scheme and host and drops a trailing slash.
func normalize(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + strings.TrimSuffix(u.EscapedPath(), "/")
}

// RoundTrip implements http.RoundTripper.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = statusCode(resp.StatusCode)
	}
	requests.WithLabelValues(t.service(req.URL), method(req.Method), code).Inc()
	return resp, err
}

// statusCode is the code when HTTP defines it, else its class ("4xx"), so a
// server answering odd codes cannot make series without bound.
func statusCode(code int) string {
	if http.StatusText(code) != "" {
		return strconv.Itoa(code)
	}
	if code >= 100 && code < 600 {
		return strconv.Itoa(code/100) + "xx"
	}
	return "other"
}

// method bounds the method label to the ones an OpenStack client sends.
func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return m
	}
	return "other"
}

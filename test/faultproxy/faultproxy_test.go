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

package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// upstreams are a Keystone whose catalog names the Neutron, and a Neutron
// that counts the requests it acted on.
func upstreams(t *testing.T) (p *Proxy, neutronURL string, acted *atomic.Int32) {
	t.Helper()
	acted = &atomic.Int32{}
	neutron := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acted.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"rbac_policy": {}}`)
	}))
	t.Cleanup(neutron.Close)
	keystone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Subject-Token", "t")
		_, _ = io.WriteString(w, `{"token": {"catalog": [{"type": "network", "endpoints": [{"url": "`+neutron.URL+`"}]}]}}`)
	}))
	t.Cleanup(keystone.Close)
	p, err := Start(map[string]string{"identity": keystone.URL, "network": neutron.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, neutron.URL, acted
}

func call(t *testing.T, method, url, agent string) (int, string, error) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("User-Agent", agent)
	// A new connection each time: Go's transport replays a GET whose reused
	// connection was reset, which would hide the fault here.
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

func TestTheCatalogLeadsThroughTheProxy(t *testing.T) {
	p, neutronURL, _ := upstreams(t)
	_, body, err := call(t, http.MethodPost, p.URL("identity")+"/v3/auth/tokens", "capo-sharednet/dev")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(body, neutronURL) || !strings.Contains(body, p.URL("network")) {
		t.Errorf("catalog %s: want Neutron at the proxy's %s, not %s", body, p.URL("network"), neutronURL)
	}
	clouds, err := p.Clouds([]byte("clouds:\n  vm:\n    auth:\n      auth_url: " + p.services["identity"].upstream.String() + "/v3\n      username: u\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(clouds), "auth_url: "+p.URL("identity")+"/v3") || !strings.Contains(string(clouds), "username: u") {
		t.Errorf("clouds.yaml %s: want the proxy's Keystone, the rest kept", clouds)
	}
}

func TestFaultsHitOnlyTheClientTheyName(t *testing.T) {
	p, _, acted := upstreams(t)
	remove := p.Inject(Rule{Service: "network", Agent: "capo-sharednet/", Fault: Unavailable})
	if code, _, _ := call(t, http.MethodGet, p.URL("network")+"/v2.0/networks", "capo-sharednet/dev"); code != http.StatusServiceUnavailable {
		t.Errorf("the extension's request: %d, want 503", code)
	}
	if code, _, _ := call(t, http.MethodGet, p.URL("network")+"/v2.0/networks", "cluster-api-provider-openstack/v0.13"); code != http.StatusCreated {
		t.Errorf("CAPO's request: %d, want the service's answer", code)
	}
	if acted.Load() != 1 {
		t.Errorf("Neutron was asked %d times, want once (CAPO's)", acted.Load())
	}
	remove()

	p.Inject(Rule{Service: "network", Fault: Reset, Times: 1})
	if _, _, err := call(t, http.MethodGet, p.URL("network")+"/v2.0/networks", "x"); err == nil {
		t.Error("reset: want a connection error")
	}
	if code, _, _ := call(t, http.MethodGet, p.URL("network")+"/v2.0/networks", "x"); code != http.StatusCreated {
		t.Errorf("after the rule's one time: %d, want the service's answer", code)
	}
	if acted.Load() != 2 {
		t.Errorf("Neutron was asked %d times, want 2 (the reset one never reached it)", acted.Load())
	}
}

func TestALostAnswerIsActedOnAndThenRunsBeforeTheClientHearsIt(t *testing.T) {
	p, _, acted := upstreams(t)
	var then []Exchange
	p.Inject(Rule{Service: "network", Method: http.MethodPost, PathPrefix: "/v2.0/rbac-policies", Fault: LoseAnswer, Times: 1,
		Then: func(e Exchange) { then = append(then, e) }})
	if _, _, err := call(t, http.MethodGet, p.URL("network")+"/v2.0/rbac-policies", "x"); err != nil {
		t.Errorf("a GET is not matched: %v", err)
	}
	if _, _, err := call(t, http.MethodPost, p.URL("network")+"/v2.0/rbac-policies", "x"); err == nil {
		t.Error("the answer was lost: want a connection error")
	}
	if _, _, err := call(t, http.MethodPost, p.URL("network")+"/v2.0/rbac-policies", "x"); err != nil {
		t.Errorf("the retry: %v, want the service's answer", err)
	}
	if acted.Load() != 3 || len(then) != 1 || then[0].Status != http.StatusCreated {
		t.Errorf("Neutron acted %d times (want 3), Then ran for %v (want once, on the 201)", acted.Load(), then)
	}
	lost := p.Exchanges(func(e Exchange) bool { return e.Fault == LoseAnswer.String() })
	if len(lost) != 1 || lost[0].Method != http.MethodPost {
		t.Errorf("exchanges with a lost answer: %v, want the first POST", lost)
	}
}

func TestAStallEndsWhenTheClientGivesUp(t *testing.T) {
	p, _, acted := upstreams(t)
	p.Inject(Rule{Service: "network", Fault: Stall, Stall: time.Hour})
	client := &http.Client{Timeout: 200 * time.Millisecond}
	resp, err := client.Get(p.URL("network") + "/v2.0/networks")
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("want the client's timeout")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(p.Exchanges(nil)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.Exchanges(nil); len(got) != 1 || !strings.Contains(got[0].Fault, "client gave up") || acted.Load() != 0 {
		t.Errorf("exchanges %v, Neutron asked %d times: want one stalled request the client gave up on, Neutron never asked", got, acted.Load())
	}
}

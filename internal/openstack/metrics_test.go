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
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capo-sharednet/capo-sharednet/test/fakekeystone"
)

// TestEveryOpenStackRequestIsCountedByServiceMethodAndCode: the session's
// transport counts the token request (identity), the network API's version
// discovery and a Neutron call (network: the fake Keystone's catalog puts
// Neutron under its own URL, at /network/, which the longer prefix tells
// apart from Keystone's) and the answers' codes, in the registry /metrics
// serves; the labels carry no URL, project or ID.
func TestEveryOpenStackRequestIsCountedByServiceMethodAndCode(t *testing.T) {
	g := NewWithT(t)
	k := fakekeystone.Start(t, fakekeystone.Options{Project: "p"})
	cred, err := CredentialFromData(map[string][]byte{CloudsSecretKey: k.CloudsYAML("tenant")}, "test", "tenant")
	g.Expect(err).NotTo(HaveOccurred())
	series := [][3]string{{"identity", "POST", "201"}, {"network", "GET", "200"}, {"network", "GET", "404"}, {"identity", "GET", "404"}}
	read := func() map[[3]string]float64 {
		out := map[[3]string]float64{}
		for _, s := range series {
			out[s] = testutil.ToFloat64(requests.WithLabelValues(s[0], s[1], s[2]))
		}
		return out
	}
	before := read()
	delta := func() []float64 {
		now := read()
		out := make([]float64, len(series))
		for i, s := range series {
			out[i] = now[s] - before[s]
		}
		return out
	}
	total := testutil.CollectAndCount(requests)

	s, err := NewSession(context.Background(), cred, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	// The token, then gophercloud's discovery of the network API's version.
	g.Expect(delta()).To(Equal([]float64{1, 1, 0, 0}))

	_, err = s.Network(context.Background(), "n-1")
	g.Expect(err).To(HaveOccurred(), "the fake Neutron knows no network")
	_, err = s.ProjectOfToken(context.Background(), "t")
	g.Expect(err).To(HaveOccurred(), "the fake Keystone validates no token")
	g.Expect(delta()).To(Equal([]float64{1, 1, 1, 1}))
	g.Expect(testutil.CollectAndCount(requests)).To(Equal(total), "no other series")
}

// TestTheRequestLabelsAreBounded: a URL under no endpoint of the catalog is
// "other", an odd status code its class, an odd method "other".
func TestTheRequestLabelsAreBounded(t *testing.T) {
	g := NewWithT(t)
	c := newCountingTransport(nil)
	c.add(map[string]string{"https://Keystone.example:5000/": ServiceIdentity, "https://neutron.example:9696": ServiceNetwork, "https://glance.example/": "image"})
	for raw, want := range map[string]string{
		"https://keystone.example:5000/v3/auth/tokens": ServiceIdentity,
		"https://neutron.example:9696/v2.0/ports":      ServiceNetwork,
		"https://neutron.example:96960/v2.0/ports":     ServiceOther,
		"https://glance.example/v2/images":             ServiceOther, // a type without its own series
		"https://elsewhere.example/":                   ServiceOther,
	} {
		u, err := url.Parse(raw)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.service(u)).To(Equal(want), raw)
	}
	g.Expect([]string{statusCode(200), statusCode(409), statusCode(599), statusCode(1000)}).To(Equal([]string{"200", "409", "5xx", "other"}))
	g.Expect([]string{method("GET"), method("DELETE"), method("PROPFIND")}).To(Equal([]string{"GET", "DELETE", "other"}))
}

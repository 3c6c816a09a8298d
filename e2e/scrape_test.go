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

package e2e

import (
	"reflect"
	"strings"
	"testing"
)

// The scrape lookups on a sample /metrics, without the plane (runs with
// go test -short).

const before = `# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="sharednetwork",result="success"} 4
controller_runtime_reconcile_total{controller="sharednetworkattachment",result="error"} 1
controller_runtime_reconcile_total{controller="sharednetworkattachment",result="success"} 7
# TYPE controller_runtime_active_workers gauge
controller_runtime_active_workers{controller="sharednetwork"} 0
controller_runtime_active_workers{controller="sharednetworkattachment"} 1
# TYPE capo_sharednet_openstack_requests_total counter
capo_sharednet_openstack_requests_total{code="200",method="GET",service="network"} 10
# TYPE controller_runtime_webhook_latency_seconds histogram
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-sharednet-cluster",le="0.1"} 1
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-sharednet-cluster",le="1"} 2
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-sharednet-cluster",le="+Inf"} 2
controller_runtime_webhook_latency_seconds_sum{webhook="/validate-sharednet-cluster"} 0.75
controller_runtime_webhook_latency_seconds_count{webhook="/validate-sharednet-cluster"} 2
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_sum 0.5
go_gc_duration_seconds_count 30
`

const after = `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="sharednetwork",result="success"} 4
controller_runtime_reconcile_total{controller="sharednetworkattachment",result="error"} 1
controller_runtime_reconcile_total{controller="sharednetworkattachment",result="success"} 9
# TYPE controller_runtime_active_workers gauge
controller_runtime_active_workers{controller="sharednetwork"} 0
controller_runtime_active_workers{controller="sharednetworkattachment"} 0
# TYPE capo_sharednet_openstack_requests_total counter
capo_sharednet_openstack_requests_total{code="200",method="GET",service="network"} 12
capo_sharednet_openstack_requests_total{code="201",method="POST",service="network"} 1
# TYPE controller_runtime_reconcile_time_seconds histogram
controller_runtime_reconcile_time_seconds_bucket{controller="sharednetworkattachment",le="+Inf"} 2
controller_runtime_reconcile_time_seconds_sum{controller="sharednetworkattachment"} 0.5
controller_runtime_reconcile_time_seconds_count{controller="sharednetworkattachment"} 2
# TYPE controller_runtime_webhook_latency_seconds histogram
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-sharednet-cluster",le="0.1"} 1
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-sharednet-cluster",le="1"} 2
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-sharednet-cluster",le="+Inf"} 5
controller_runtime_webhook_latency_seconds_sum{webhook="/validate-sharednet-cluster"} 30.75
controller_runtime_webhook_latency_seconds_count{webhook="/validate-sharednet-cluster"} 5
`

func TestScrapeLookups(t *testing.T) {
	b, err := parseScrape(strings.NewReader(before))
	if err != nil {
		t.Fatal(err)
	}
	a, err := parseScrape(strings.NewReader(after))
	if err != nil {
		t.Fatal(err)
	}
	webhook := `webhook="/validate-sharednet-cluster"`
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"sum of a counter", b.sum(reconciles), 12.0},
		{"sum over a label, not its prefix", b.sum(reconciles, `controller="sharednetwork"`), 4.0},
		{"sum over two labels", b.sum(reconciles, `controller="sharednetworkattachment"`, `result="success"`), 7.0},
		{"sum over a label no series has", b.sum(reconciles, `controller="workloadguardrails"`), 0.0},
		{"reconcilesOf", a.reconcilesOf("sharednetworkattachment") - b.reconcilesOf("sharednetworkattachment"), 2.0},
		{"busy", []bool{b.busy("sharednetwork"), b.busy("sharednetworkattachment"), a.busy("sharednetworkattachment")}, []bool{false, true, false}},
		{"a histogram's _count", a.sum("controller_runtime_webhook_latency_seconds_count", webhook), 5.0},
		{"a histogram's _sum", a.sum("controller_runtime_webhook_latency_seconds_sum", webhook), 30.75},
		{"a histogram's _bucket", b.sum("controller_runtime_webhook_latency_seconds_bucket", webhook, `le="1"`), 2.0},
		{"a histogram's name alone", b.sum("controller_runtime_webhook_latency_seconds"), 0.0},
		{"a summary's quantile", b.sum("go_gc_duration_seconds", `quantile="0.5"`), 0.001},
		{"a summary's _count", b.sum("go_gc_duration_seconds_count"), 30.0},
		{"an absent metric", b.sum("nothing_total"), 0.0},
		{"since", a.since(b, openStackRequests), []string{
			`{code="200",method="GET",service="network"} +2`,
			`{code="201",method="POST",service="network"} +1`,
		}},
		{"since, nothing moved", a.since(a, openStackRequests), []string(nil)},
		{"costs", a.costs(b), `reconcile sharednetworkattachment: 2, 0.50s; webhook /validate-sharednet-cluster: 3 calls, 30.00s; ` +
			`OpenStack requests 3 [{code="200",method="GET",service="network"} +2 {code="201",method="POST",service="network"} +1]`},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

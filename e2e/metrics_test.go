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
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// scrape is one read of the extension's /metrics: each series
// (`name{labels}` as served) to its value.
type scrape map[string]float64

// scrapeExtension reads the extension's /metrics (plain HTTP on 127.0.0.1:
// the plane runs it with --insecure-diagnostics).
func scrapeExtension(ctx context.Context) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pl.ExtensionMetricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", pl.ExtensionMetricsURL, resp.Status)
	}
	out := scrape{}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, lines.Err()
}

// sum adds the series of metric name whose labels contain every matcher
// (e.g. `controller="sharednetwork"`).
func (s scrape) sum(name string, matchers ...string) float64 {
	total := 0.0
	for series, v := range s {
		metric, labels, _ := strings.Cut(series, "{")
		if metric != name {
			continue
		}
		ok := true
		for _, m := range matchers {
			ok = ok && strings.Contains(labels, m)
		}
		if ok {
			total += v
		}
	}
	return total
}

// since lists the series of metric name that moved from before to s, with
// their increase, sorted.
func (s scrape) since(before scrape, name string) []string {
	var out []string
	for series, v := range s {
		if metric, _, _ := strings.Cut(series, "{"); metric == name && v != before[series] {
			out = append(out, fmt.Sprintf("%s +%g", strings.TrimPrefix(series, name), v-before[series]))
		}
	}
	sort.Strings(out)
	return out
}

const (
	openStackRequests = "capo_sharednet_openstack_requests_total"
	reconciles        = "controller_runtime_reconcile_total"
	activeWorkers     = "controller_runtime_active_workers"
)

// busy says whether a controller has a reconcile in flight: its OpenStack
// requests may already count while its reconcile does not yet.
func (s scrape) busy(controller string) bool {
	return s.sum(activeWorkers, `controller="`+controller+`"`) > 0
}

// reconcilesOf counts a controller's reconciles.
func (s scrape) reconcilesOf(controller string) float64 {
	return s.sum(reconciles, `controller="`+controller+`"`)
}

// costs says what the extension spent between before and s: time in its
// admission webhooks and runtime hooks (controller-runtime's webhook latency,
// by path), in its reconciles (by controller), and its OpenStack requests.
func (s scrape) costs(before scrape) string {
	var parts []string
	delta := func(series string) float64 { return s[series] - before[series] }
	var keys []string
	for series := range s {
		keys = append(keys, series)
	}
	sort.Strings(keys)
	for _, series := range keys {
		metric, labels, _ := strings.Cut(series, "{")
		switch metric {
		case "controller_runtime_webhook_latency_seconds_sum":
			count := strings.Replace(series, "_sum{", "_count{", 1)
			if n := delta(count); n > 0 {
				parts = append(parts, fmt.Sprintf("webhook %s: %g calls, %.2fs", strings.TrimSuffix(strings.TrimPrefix(labels, `webhook="`), `"}`), n, delta(series)))
			}
		case "controller_runtime_reconcile_time_seconds_sum":
			count := strings.Replace(series, "_sum{", "_count{", 1)
			if n := delta(count); n > 0 {
				parts = append(parts, fmt.Sprintf("reconcile %s: %g, %.2fs", strings.TrimSuffix(strings.TrimPrefix(labels, `controller="`), `"}`), n, delta(series)))
			}
		}
	}
	parts = append(parts, fmt.Sprintf("OpenStack requests %g %v", s.sum(openStackRequests)-before.sum(openStackRequests), s.since(before, openStackRequests)))
	return strings.Join(parts, "; ")
}

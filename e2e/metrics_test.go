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
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape is one read of the extension's /metrics: its metric families by
// name, as expfmt parses the Prometheus text format.
type scrape map[string]*dto.MetricFamily

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
	return parseScrape(resp.Body)
}

// parseScrape reads a /metrics answer in the Prometheus text format.
func parseScrape(r io.Reader) (scrape, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return families, nil
}

// sample is one series of a scrape: its labels and value.
type sample struct {
	labels []*dto.LabelPair
	value  float64
}

// samples are the series /metrics serves under name: a counter's, gauge's or
// untyped metric's (a summary's quantiles, with quantile), a histogram's or
// summary's name_count and name_sum, a histogram's name_bucket (with le).
func (s scrape) samples(name string) []sample {
	var out []sample
	with := func(labels []*dto.LabelPair, label string, value float64) []*dto.LabelPair {
		v := strconv.FormatFloat(value, 'g', -1, 64)
		if math.IsInf(value, +1) {
			v = "+Inf"
		}
		return append(slices.Clip(labels), &dto.LabelPair{Name: &label, Value: &v})
	}
	for _, m := range s[name].GetMetric() {
		switch {
		case m.Counter != nil:
			out = append(out, sample{m.GetLabel(), m.GetCounter().GetValue()})
		case m.Gauge != nil:
			out = append(out, sample{m.GetLabel(), m.GetGauge().GetValue()})
		case m.Untyped != nil:
			out = append(out, sample{m.GetLabel(), m.GetUntyped().GetValue()})
		case m.Summary != nil:
			for _, q := range m.GetSummary().GetQuantile() {
				out = append(out, sample{with(m.GetLabel(), model.QuantileLabel, q.GetQuantile()), q.GetValue()})
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		family, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		for _, m := range s[family].GetMetric() {
			h, q := m.GetHistogram(), m.GetSummary()
			switch {
			case suffix == "_count" && h != nil:
				out = append(out, sample{m.GetLabel(), float64(h.GetSampleCount())})
			case suffix == "_count" && q != nil:
				out = append(out, sample{m.GetLabel(), float64(q.GetSampleCount())})
			case suffix == "_sum" && h != nil:
				out = append(out, sample{m.GetLabel(), h.GetSampleSum()})
			case suffix == "_sum" && q != nil:
				out = append(out, sample{m.GetLabel(), q.GetSampleSum()})
			case suffix == "_bucket" && h != nil:
				for _, b := range h.GetBucket() {
					out = append(out, sample{with(m.GetLabel(), model.BucketLabel, b.GetUpperBound()), float64(b.GetCumulativeCount())})
				}
			}
		}
	}
	return out
}

// key is the sample's labels as /metrics writes them: `{a="x",b="y"}`, or
// "" without any.
func (x sample) key() string {
	if len(x.labels) == 0 {
		return ""
	}
	escape := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	pairs := make([]string, 0, len(x.labels))
	for _, l := range x.labels {
		pairs = append(pairs, l.GetName()+`="`+escape.Replace(l.GetValue())+`"`)
	}
	return "{" + strings.Join(pairs, ",") + "}"
}

// label is the value of the sample's label name.
func (x sample) label(name string) string {
	for _, l := range x.labels {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// matches says whether the sample has every matcher's label, each
// `name="value"` as /metrics writes it (e.g. `controller="sharednetwork"`).
func (x sample) matches(matchers []string) bool {
	for _, m := range matchers {
		name, quoted, _ := strings.Cut(m, "=")
		value, err := strconv.Unquote(quoted)
		if err != nil {
			panic(fmt.Sprintf("label matcher %s is not name=\"value\"", m))
		}
		if !slices.ContainsFunc(x.labels, func(l *dto.LabelPair) bool { return l.GetName() == name && l.GetValue() == value }) {
			return false
		}
	}
	return true
}

// sum adds the series of metric name whose labels contain every matcher
// (e.g. `controller="sharednetwork"`).
func (s scrape) sum(name string, matchers ...string) float64 {
	total := 0.0
	for _, x := range s.samples(name) {
		if x.matches(matchers) {
			total += x.value
		}
	}
	return total
}

// change is a series of metric name in s and its increase since before.
type change struct {
	sample
	increase float64
}

// changes are the series of metric name in s with their increase since
// before (a series before lacks counts from 0), sorted by their labels.
func (s scrape) changes(before scrape, name string) []change {
	was := map[string]float64{}
	for _, x := range before.samples(name) {
		was[x.key()] = x.value
	}
	var out []change
	for _, x := range s.samples(name) {
		out = append(out, change{x, x.value - was[x.key()]})
	}
	slices.SortFunc(out, func(a, b change) int { return strings.Compare(a.key(), b.key()) })
	return out
}

// since lists the series of metric name that moved from before to s, with
// their increase, sorted.
func (s scrape) since(before scrape, name string) []string {
	var out []string
	for _, c := range s.changes(before, name) {
		if c.increase != 0 {
			out = append(out, fmt.Sprintf("%s +%g", c.key(), c.increase))
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
// reconciles (by controller), in its admission webhooks and runtime hooks
// (controller-runtime's webhook latency, by path), and its OpenStack
// requests.
func (s scrape) costs(before scrape) string {
	var parts []string
	for _, h := range []struct{ histogram, label, format string }{
		{"controller_runtime_reconcile_time_seconds", "controller", "reconcile %s: %g, %.2fs"},
		{"controller_runtime_webhook_latency_seconds", "webhook", "webhook %s: %g calls, %.2fs"},
	} {
		took := map[string]float64{}
		for _, c := range s.changes(before, h.histogram+"_sum") {
			took[c.key()] = c.increase
		}
		for _, c := range s.changes(before, h.histogram+"_count") {
			if c.increase > 0 {
				parts = append(parts, fmt.Sprintf(h.format, c.label(h.label), c.increase, took[c.key()]))
			}
		}
	}
	parts = append(parts, fmt.Sprintf("OpenStack requests %g %v", s.sum(openStackRequests)-before.sum(openStackRequests), s.since(before, openStackRequests)))
	return strings.Join(parts, "; ")
}

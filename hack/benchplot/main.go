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

// Command benchplot turns one make bench-scale run into the curve of
// docs/performance.md: the table (peak RSS, live heap, the admission
// decision against the 1-Cluster one, OpenStack requests of a first look,
// for each size) between its scale-curve markers, and the SVG plot of peak
// RSS and the admission ratio against the number of Clusters.
//
//	go run ./hack/benchplot -memory _artifacts/scale/memory.json -bench _artifacts/bench/curve.txt \
//	    -svg docs/performance-scale.svg -doc docs/performance.md
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// memory is what test/scale writes in memory.json (the fields read here).
type memory struct {
	Nodegroups   int     `json:"nodegroupsPerCluster"`
	WriteSeconds float64 `json:"writeSeconds"`
	Baseline     run     `json:"baseline"`
	Points       []struct {
		Clusters      int    `json:"clusters"`
		Objects       int    `json:"objects"`
		Loaded        run    `json:"loaded"`
		PeakRSSBudget uint64 `json:"peakRSSBudgetBytes"`
	} `json:"points"`
	Slope float64 `json:"slopeMiBPerCluster"`
}

type run struct {
	PeakRSS           uint64         `json:"peakRSSBytes"`
	HeapInuse         uint64         `json:"heapInuseBytes"`
	Rewritten         map[string]int `json:"rewritten"`
	OpenStackRequests int            `json:"openStackRequests"`
	Settled           int64          `json:"settledNanoseconds"`
}

// row is one size of the curve.
type row struct {
	clusters, objects   int
	peakRSS, heap       float64 // MiB
	budget              float64 // MiB
	admission           float64 // x the 1-Cluster decision; 0 when not measured
	rewritten, requests int
	settled             float64 // seconds until every object was reconciled once
}

const (
	beginMarker = "<!-- scale-curve:begin (hack/benchplot writes this part) -->"
	endMarker   = "<!-- scale-curve:end -->"
)

func main() {
	memoryPath := flag.String("memory", "_artifacts/scale/memory.json", "test/scale's memory.json")
	benchPath := flag.String("bench", "_artifacts/bench/curve.txt", "go test -bench output with BenchmarkClusterAdmissionCurve and BenchmarkGeneratePatches")
	svgPath := flag.String("svg", "docs/performance-scale.svg", "the plot to write")
	docPath := flag.String("doc", "docs/performance.md", "the document whose scale-curve part is rewritten")
	command := flag.String("command", "make bench-scale", "the command the figures come from, named in the document")
	date := flag.String("date", "", "the date of the run, named in the document")
	flag.Parse()
	if err := plot(*memoryPath, *benchPath, *svgPath, *docPath, *command, *date); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func plot(memoryPath, benchPath, svgPath, docPath, command, date string) error {
	raw, err := os.ReadFile(memoryPath)
	if err != nil {
		return err
	}
	var m memory
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s: %w", memoryPath, err)
	}
	if len(m.Points) == 0 {
		return fmt.Errorf("%s has no points: run test/scale with CAPO_SHAREDNET_SCALE_CLUSTERS", memoryPath)
	}
	bench, err := os.ReadFile(benchPath)
	if err != nil {
		return err
	}
	admission, patches := parseBench(bench)
	rows := make([]row, 0, len(m.Points))
	for _, p := range m.Points {
		rewritten := 0
		for _, n := range p.Loaded.Rewritten {
			rewritten += n
		}
		rows = append(rows, row{clusters: p.Clusters, objects: p.Objects, peakRSS: mib(p.Loaded.PeakRSS), heap: mib(p.Loaded.HeapInuse),
			budget: mib(p.PeakRSSBudget), admission: admission[p.Clusters], rewritten: rewritten, requests: p.Loaded.OpenStackRequests,
			settled: float64(p.Loaded.Settled) / 1e9})
	}
	if err := os.WriteFile(svgPath, svg(rows, mib(m.Baseline.PeakRSS)), 0o644); err != nil {
		return err
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	part := table(rows, m, patches, command, date, svgPath, docPath)
	out, err := replaceBetween(doc, part)
	if err != nil {
		return fmt.Errorf("%s: %w", docPath, err)
	}
	return os.WriteFile(docPath, out, 0o644)
}

var (
	curveLine   = regexp.MustCompile(`^BenchmarkClusterAdmissionCurve/clusters=(\d+)\S*\s.*?\s([0-9.]+) x-1-cluster`)
	patchesLine = regexp.MustCompile(`^BenchmarkGeneratePatches/nodegroups=1000/handler\S*\s.*?\s([0-9.]+) x-baseline`)
)

// parseBench reads the admission ratio by size and GeneratePatches' ratio
// at 1,000 nodegroups (0 when absent): the median of the runs (-count), the
// benchmarks being noisy on shared cores.
func parseBench(out []byte) (map[int]float64, float64) {
	runs := map[int][]float64{}
	var patches []float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if g := curveLine.FindStringSubmatch(sc.Text()); g != nil {
			n, _ := strconv.Atoi(g[1])
			v, _ := strconv.ParseFloat(g[2], 64)
			runs[n] = append(runs[n], v)
		}
		if g := patchesLine.FindStringSubmatch(sc.Text()); g != nil {
			v, _ := strconv.ParseFloat(g[1], 64)
			patches = append(patches, v)
		}
	}
	admission := map[int]float64{}
	for n, vs := range runs {
		admission[n] = median(vs)
	}
	return admission, median(patches)
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	sort.Float64s(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func table(rows []row, m memory, patches float64, command, date, svgPath, docPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", beginMarker)
	fmt.Fprintf(&b, "Figures of one `%s` run", command)
	if date != "" {
		fmt.Fprintf(&b, " (%s)", date)
	}
	fmt.Fprintf(&b, " on this machine: Clusters of %d nodegroups, half of them attached; the baseline is the manager on an empty API server (peak RSS %.0f MiB); objects written in %.0f s.\n\n",
		m.Nodegroups, mib(m.Baseline.PeakRSS), m.WriteSeconds)
	b.WriteString("The admission ratio and GeneratePatches' are the medians of the benchmark's runs (`-count`).\n\n")
	fmt.Fprintf(&b, "![peak RSS and the admission ratio against the number of Clusters](%s)\n\n", relative(docPath, svgPath))
	b.WriteString("| Clusters | objects | peak RSS | live heap | peak RSS budget | admission vs 1 Cluster | objects rewritten in steady state | every object reconciled once after | OpenStack requests of a first look at every attachment |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		admission := "not measured"
		if r.admission > 0 {
			admission = fmt.Sprintf("%.2fx", r.admission)
		}
		fmt.Fprintf(&b, "| %d | %d | %.0f MiB | %.0f MiB | %.0f MiB | %s | %d | %.0f s | %d |\n", r.clusters, r.objects, r.peakRSS, r.heap, r.budget, admission, r.rewritten, r.settled, r.requests)
	}
	b.WriteString("\n")
	if m.Slope > 0 {
		fmt.Fprintf(&b, "Slope: **%.3f MiB of peak RSS per Cluster** (%d to %d Clusters).", m.Slope, rows[0].clusters, rows[len(rows)-1].clusters)
	}
	if patches > 0 {
		fmt.Fprintf(&b, " GeneratePatches at 1,000 nodegroups: %.2fx a bare JSON round trip of the request (it does not depend on the number of Clusters).", patches)
	}
	fmt.Fprintf(&b, "\n%s", endMarker)
	return b.String()
}

func relative(docPath, svgPath string) string {
	dir := docPath[:strings.LastIndex(docPath, "/")+1]
	return strings.TrimPrefix(svgPath, dir)
}

func replaceBetween(doc []byte, part string) ([]byte, error) {
	s := string(doc)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		return nil, errors.New("no scale-curve markers (" + beginMarker + " ... " + endMarker + ")")
	}
	return []byte(s[:i] + part + s[j+len(endMarker):]), nil
}

// svg plots peak RSS (left axis, MiB, with its budget and the baseline)
// and the admission ratio (right axis) against the number of Clusters.
func svg(rows []row, baseline float64) []byte {
	const (
		width, height          = 720.0, 400.0
		left, right, top, foot = 70.0, 70.0, 40.0, 50.0
	)
	sort.Slice(rows, func(i, j int) bool { return rows[i].clusters < rows[j].clusters })
	maxX := float64(rows[len(rows)-1].clusters)
	maxMiB := baseline
	for _, r := range rows {
		maxMiB = math.Max(maxMiB, math.Max(r.peakRSS, r.budget))
	}
	maxMiB = math.Ceil(maxMiB/64) * 64
	maxRatio := 1.5
	for _, r := range rows {
		maxRatio = math.Max(maxRatio, math.Ceil(r.admission*4)/4)
	}
	x := func(c float64) float64 { return left + c/maxX*(width-left-right) }
	yMiB := func(v float64) float64 { return height - foot - v/maxMiB*(height-top-foot) }
	yRatio := func(v float64) float64 { return height - foot - v/maxRatio*(height-top-foot) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14">capo-sharednet manager: peak RSS and admission cost against the number of Clusters (4 nodegroups each)</text>`+"\n", left)
	// Axes and grid.
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, height-foot, width-right, height-foot)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, height-foot)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", width-right, top, width-right, height-foot)
	for v := 0.0; v <= maxMiB; v += 64 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.0f</text>`+"\n",
			left, yMiB(v), width-right, yMiB(v), left-6, yMiB(v)+4, v)
	}
	for v := 0.0; v <= maxRatio+1e-9; v += 0.25 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#c0392b">%.2fx</text>`+"\n", width-right+6, yRatio(v)+4, v)
	}
	for _, r := range rows {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(float64(r.clusters)), height-foot+18, r.clusters)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">Clusters</text>`+"\n", (left+width-right)/2, height-12)
	fmt.Fprintf(&b, `<text x="16" y="%.1f" transform="rotate(-90 16 %.1f)" text-anchor="middle" fill="#2c3e50">peak RSS (MiB)</text>`+"\n", (top+height-foot)/2, (top+height-foot)/2)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" transform="rotate(90 %.1f %.1f)" text-anchor="middle" fill="#c0392b">admission, x the 1-Cluster decision</text>`+"\n",
		width-14, (top+height-foot)/2, width-14, (top+height-foot)/2)
	// The baseline, the budget of the largest size, and the two series.
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#7f8c8d" stroke-dasharray="2,4"/><text x="%.1f" y="%.1f" fill="#7f8c8d">baseline %.0f MiB</text>`+"\n",
		left, yMiB(baseline), width-right, yMiB(baseline), left+6, yMiB(baseline)-4, baseline)
	budget := rows[len(rows)-1].budget
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#2c3e50" stroke-dasharray="6,4"/><text x="%.1f" y="%.1f" fill="#2c3e50">budget %.0f MiB</text>`+"\n",
		left, yMiB(budget), width-right, yMiB(budget), left+6, yMiB(budget)-4, budget)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c0392b" stroke-dasharray="6,4"/><text x="%.1f" y="%.1f" fill="#c0392b" text-anchor="end">admission target 1.2x</text>`+"\n",
		left, yRatio(1.2), width-right, yRatio(1.2), width-right-6, yRatio(1.2)-4)
	series := func(color string, y func(row) (float64, bool), label func(row) string) {
		var pts []string
		for _, r := range rows {
			if v, ok := y(r); ok {
				px := x(float64(r.clusters))
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, v))
				lx, anchor := px+6, "start"
				if px > width-right-60 { // the last point: its label inside the plot
					lx, anchor = px-6, "end"
				}
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/><text x="%.1f" y="%.1f" fill="%s" text-anchor="%s">%s</text>`+"\n",
					px, v, color, lx, v-6, color, anchor, label(r))
			}
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color)
	}
	series("#2c3e50", func(r row) (float64, bool) { return yMiB(r.peakRSS), true }, func(r row) string { return fmt.Sprintf("%.0f MiB", r.peakRSS) })
	series("#c0392b", func(r row) (float64, bool) { return yRatio(r.admission), r.admission > 0 }, func(r row) string { return fmt.Sprintf("%.2fx", r.admission) })
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

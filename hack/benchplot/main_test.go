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

package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const benchOutput = `goos: linux
BenchmarkClusterAdmissionCurve/clusters=100-2         	      50	    412345 ns/op	    390000 ns/op-1-cluster	    412345 ns/op-at-scale	         3.000 openstack-calls/op	         1.06 x-1-cluster	   12345 B/op	     123 allocs/op
BenchmarkClusterAdmissionCurve/clusters=2000-2        	      50	    512345 ns/op	    400000 ns/op-1-cluster	    480000 ns/op-at-scale	         3.000 openstack-calls/op	         1.17 x-1-cluster	   12345 B/op	     123 allocs/op
BenchmarkClusterAdmissionCurve/clusters=2000-2        	      50	    512345 ns/op	    400000 ns/op-1-cluster	    480000 ns/op-at-scale	         3.000 openstack-calls/op	         1.90 x-1-cluster	   12345 B/op	     123 allocs/op
BenchmarkClusterAdmissionCurve/clusters=2000-2        	      50	    512345 ns/op	    400000 ns/op-1-cluster	    480000 ns/op-at-scale	         3.000 openstack-calls/op	         1.10 x-1-cluster	   12345 B/op	     123 allocs/op
BenchmarkGeneratePatches/nodegroups=1000/handler-2    	     100	  12345678 ns/op	  10000000 baseline-ns/op	         1.21 x-baseline
`

const memoryJSON = `{"nodegroupsPerCluster":4,"writeSeconds":600,"baseline":{"peakRSSBytes":62914560,"heapInuseBytes":10485760},
"points":[{"clusters":100,"objects":2100,"peakRSSBudgetBytes":268435456,"loaded":{"peakRSSBytes":83886080,"heapInuseBytes":20971520,"openStackRequests":400,"settledNanoseconds":18200000000}},
{"clusters":2000,"objects":41000,"peakRSSBudgetBytes":402653184,"loaded":{"peakRSSBytes":377487360,"heapInuseBytes":188743680,"rewritten":{"Cluster":1},"openStackRequests":8000,"settledNanoseconds":400000000000}}],
"slopeMiBPerCluster":0.1578}`

// One run's figures become the table between the markers (the rest of the
// document kept) and an SVG that parses, with both series; a size measured
// several times (-count) shows its median.
func TestOneRunBecomesTheTableAndThePlot(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	memoryPath, benchPath := write("memory.json", memoryJSON), write("curve.txt", benchOutput)
	docPath := write("performance.md", "# Title\n\nbefore\n"+beginMarker+"\nold figures\n"+endMarker+"\nafter\n")
	svgPath := filepath.Join(dir, "performance-scale.svg")
	if err := plot(memoryPath, benchPath, svgPath, docPath, "make bench-scale", "2026-12-07"); err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile(docPath)
	for _, want := range []string{
		"before\n" + beginMarker, endMarker + "\nafter\n",
		"| 100 | 2100 | 80 MiB | 20 MiB | 256 MiB | 1.06x | 0 | 18 s | 400 |",
		"| 2000 | 41000 | 360 MiB | 180 MiB | 384 MiB | 1.17x | 1 | 400 s | 8000 |",
		"0.158 MiB of peak RSS per Cluster", "1.21x a bare JSON round trip", "](performance-scale.svg)", "(2026-12-07)",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the document lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "old figures") {
		t.Errorf("the old figures stayed:\n%s", doc)
	}
	raw, _ := os.ReadFile(svgPath)
	var parsed struct {
		XMLName   xml.Name `xml:"svg"`
		Polylines []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
	}
	if err := xml.Unmarshal(raw, &parsed); err != nil {
		t.Fatalf("the SVG does not parse: %v\n%s", err, raw)
	}
	if len(parsed.Polylines) != 2 || len(strings.Fields(parsed.Polylines[0].Points)) != 2 || len(strings.Fields(parsed.Polylines[1].Points)) != 2 {
		t.Errorf("want two series of two points, got %+v", parsed.Polylines)
	}
}

func TestADocumentWithoutMarkersIsRefused(t *testing.T) {
	if _, err := replaceBetween([]byte("# no markers\n"), "x"); err == nil {
		t.Fatal("no error for a document without the scale-curve markers")
	}
}

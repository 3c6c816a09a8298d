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

package classpatches

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

var selector = clusterv1.PatchSelector{APIVersion: infrav1.SchemeGroupVersion.String(), Kind: "OpenStackClusterTemplate",
	MatchResources: clusterv1.PatchSelectorMatch{InfrastructureCluster: ptr.To(true)}}

func raw(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

// patch is a ClusterClass patch with one JSON patch on the OpenStackClusterTemplate.
func patch(name, enabledIf string, jp clusterv1.JSONPatch) clusterv1.ClusterClassPatch {
	return clusterv1.ClusterClassPatch{Name: name, EnabledIf: enabledIf,
		Definitions: []clusterv1.PatchDefinition{{Selector: selector, JSONPatches: []clusterv1.JSONPatch{jp}}}}
}

func templated(path, text string) clusterv1.JSONPatch {
	return clusterv1.JSONPatch{Op: "add", Path: path, ValueFrom: &clusterv1.JSONPatchValue{Template: text}}
}

// class is a ClusterClass with the nodeCIDR variable (default 10.6.0.0/24)
// and an object variable net, and the given patches; the template's subnet
// is 10.255.0.0/24.
func class(patches ...clusterv1.ClusterClassPatch) (*clusterv1.ClusterClass, *infrav1.OpenStackClusterTemplate) {
	tmpl := &infrav1.OpenStackClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "class-openstackcluster"},
		Spec: infrav1.OpenStackClusterTemplateSpec{Template: infrav1.OpenStackClusterTemplateResource{Spec: infrav1.OpenStackClusterSpec{
			ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "10.255.0.0/24"}}}}}}
	cc := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "class"}, Spec: clusterv1.ClusterClassSpec{
		Variables: []clusterv1.ClusterClassVariable{
			{Name: "nodeCIDR", Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "string", Default: raw(`"10.6.0.0/24"`)}}},
			{Name: "net", Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "object"}}},
		},
		Patches: patches,
	}}
	return cc, tmpl
}

func cluster(vars map[string]string) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"}, Spec: clusterv1.ClusterSpec{
		Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.33.0"}}}
	for name, value := range vars {
		c.Spec.Topology.Variables = append(c.Spec.Topology.Variables, clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: []byte(value)}})
	}
	return c
}

func TestDesiredInfraClusterAppliesTheClassPatches(t *testing.T) {
	cidrFrom := func(text string) clusterv1.ClusterClassPatch {
		return patch("nodeSubnet", "", clusterv1.JSONPatch{Op: "replace", Path: "/spec/template/spec/managedSubnets",
			ValueFrom: &clusterv1.JSONPatchValue{Template: text}})
	}
	for _, tc := range []struct {
		name    string
		patches []clusterv1.ClusterClassPatch
		vars    map[string]string
		want    infrav1.OpenStackClusterSpec
	}{{
		name:    "a literal value",
		patches: []clusterv1.ClusterClassPatch{patch("mtu", "", clusterv1.JSONPatch{Op: "add", Path: "/spec/template/spec/networkMTU", Value: raw(`1400`)})},
		want:    infrav1.OpenStackClusterSpec{ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "10.255.0.0/24"}}, NetworkMTU: ptr.To(1400)},
	}, {
		name: "valueFrom.variable with a dotted path into an object variable",
		patches: []clusterv1.ClusterClassPatch{patch("mtu", "", clusterv1.JSONPatch{Op: "add", Path: "/spec/template/spec/networkMTU",
			ValueFrom: &clusterv1.JSONPatchValue{Variable: "net.mtu"}})},
		vars: map[string]string{"net": `{"mtu": 1450}`},
		want: infrav1.OpenStackClusterSpec{ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "10.255.0.0/24"}}, NetworkMTU: ptr.To(1450)},
	}, {
		name:    "a template rendered as YAML, with the Cluster's variable",
		patches: []clusterv1.ClusterClassPatch{cidrFrom("- cidr: {{ .nodeCIDR | quote }}\n  dnsNameservers: [{{ range $i := until 2 }}{{ if $i }}, {{ end }}\"10.0.0.{{ add1 $i }}\"{{ end }}]")},
		vars:    map[string]string{"nodeCIDR": `"172.16.5.0/24"`},
		want:    infrav1.OpenStackClusterSpec{ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "172.16.5.0/24", DNSNameservers: []string{"10.0.0.1", "10.0.0.2"}}}},
	}, {
		name:    "the class's default when the Cluster sets none",
		patches: []clusterv1.ClusterClassPatch{cidrFrom("- cidr: {{ .nodeCIDR }}")},
		want:    infrav1.OpenStackClusterSpec{ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "10.6.0.0/24"}}},
	}, {
		name: "builtin.cluster, in a {{define}}d template",
		patches: []clusterv1.ClusterClassPatch{patch("name", "", templated("/spec/template/spec/disableAPIServerFloatingIP",
			`{{ define "mine" }}{{ eq .builtin.cluster.name "demo" }}{{ end }}{{ template "mine" . }}`))},
		want: infrav1.OpenStackClusterSpec{ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "10.255.0.0/24"}}, DisableAPIServerFloatingIP: ptr.To(true)},
	}, {
		name:    "enabledIf false skips the patch",
		patches: []clusterv1.ClusterClassPatch{patch("mtu", `{{ if .net }}true{{ end }}`, clusterv1.JSONPatch{Op: "add", Path: "/spec/template/spec/networkMTU", Value: raw(`1400`)})},
		want:    infrav1.OpenStackClusterSpec{ManagedSubnets: []infrav1.SubnetSpec{{CIDR: "10.255.0.0/24"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cc, tmpl := class(tc.patches...)
			got, err := DesiredInfraCluster(context.Background(), cc, tmpl, cluster(tc.vars))
			if err != nil {
				t.Fatalf("DesiredInfraCluster: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("spec = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The instrumented templates print what text/template and sprig print.
func TestInstrumentationKeepsWhatTemplatesRender(t *testing.T) {
	vars := map[string]any{"s": "a b", "n": float64(3), "l": []any{"x", "y"}, "m": map[string]any{"k": "v"}}
	for _, text := range []string{
		`{{ .s }} {{ .missing }} {{ .n }} {{ .l }} {{ .m }} {{ .m.k }} {{ . | len }}`,
		`{{ range $i, $v := .l }}{{ $i }}={{ $v }};{{ else }}none{{ end }}{{ range .missing }}x{{ else }}none{{ end }}`,
		`{{ range $k, $v := .m }}{{ $k }}{{ $v }}{{ end }}{{ range 3 }}{{ . }}{{ end }}{{ range $i := until 5 }}{{ if eq $i 3 }}{{ break }}{{ end }}{{ $i }}{{ end }}`,
		`{{ with .m }}{{ .k }}{{ else }}no{{ end }}{{ if .missing }}a{{ else if .s }}b{{ end }}`,
		`{{ define "d" }}[{{ . }}]{{ end }}{{ template "d" .s }}{{ block "b" .n }}<{{ . }}>{{ end }}`,
		`{{ $x := .s }}{{ $x = upper $x }}{{ $x }} {{ printf "%05.1f|%[1]v" .n }} {{ print .l 1 }} {{ html "<a>" }} {{ js "'" }} {{ urlquery "a b" }}`,
		`{{ toJson . }} {{ toPrettyJson .m }} {{ .l | join "," }} {{ seq 3 }} {{ untilStep 0 10 3 }} {{ "a" | repeat 3 }} {{ indent 2 "a\nb" }}`,
		`{{ regexReplaceAll "(b)" .s "${1}$1" }} {{ replace " " "-" .s }} {{ uniq (list 1 1 2) }} {{ without .l "x" }} {{ trimAll "a" "aba" }} {{ wrapWith 1 "|" "ab cd" }}`,
		`{{ splitn "," 100 "a,b,c" }} {{ splitn "" 2 "éa" }} {{ regexFindAll "[0-9]+" "a1b22c333" -1 }} {{ regexFindAll "" "ab" 1 }} {{ mustRegexSplit "," "a,b,c" 2 }} {{ regexSplit "" "abc" -1 }}`,
	} {
		plain, err := template.New("patch").Funcs(sprig.HermeticTxtFuncMap()).Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		var want strings.Builder
		if err := plain.Execute(&want, vars); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		got, err := newEvaluation(context.Background()).render(text, vars)
		if err != nil || got != want.String() {
			t.Errorf("%s:\n got %q, %v\nwant %q", text, got, err, want.String())
		}
	}
}

// A bound stops the template on the caller's goroutine: once
// DesiredInfraCluster returns, nothing of it is left running.
func TestBoundsStopTemplates(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name, text string
		ctx        context.Context
		want       string
	}{
		{name: "10^10 iterations: until 100000 is refused before the first", text: `{{range $i := until 100000}}{{range $j := until 100000}}{{end}}{{end}}`,
			want: "until would build 100000 elements; the bound is 10000"},
		{name: "10^12 iterations of until 10000: stopped by the tick", text: `{{range $i := until 10000}}{{range $j := until 10000}}{{range $k := until 10000}}{{end}}{{end}}{{end}}`,
			want: "the template ran past 100000 iterations"},
		{name: "ranging over an integer", text: `{{range 10000000000}}{{end}}`, want: "the template ran past 100000 iterations"},
		{name: "a cancelled context, at the first tick", ctx: cancelled, text: `{{range $i := until 100000}}{{range $j := until 100000}}{{end}}{{end}}`,
			want: "context canceled after 0 iterations"},
		{name: "until 10000000000", text: `{{until 10000000000}}`, want: "until would build 10000000000 elements; the bound is 10000"},
		{name: "untilStep near the largest int, whose loop overflows", text: `{{untilStep 9223372036854775800 9223372036854775807 100}}`, want: "untilStep would build over 2^53 elements; the bound is 10000"},
		{name: "seq", text: `{{seq 1 1000000000}}`, want: "seq would build 1000000000 elements; the bound is 10000"},
		{name: `repeat 1000000000 "x"`, text: `{{repeat 1000000000 "x"}}`, want: "repeat would build up to 1000000000 bytes; the bound is 1048576"},
		{name: "indent", text: `{{indent 1000000000 "x"}}`, want: "indent would build up to 1000000002 bytes; the bound is 1048576"},
		{name: "replace around every rune", text: `{{replace "" (repeat 2000 "y") (repeat 2000 "x")}}`, want: "replace would build up to 4004000 bytes; the bound is 1048576"},
		{name: "printf printing an argument again per verb", text: `{{printf (repeat 2000 "%[1]s") (repeat 1000 "x")}}`, want: "printf would build up to 10492000 bytes; the bound is 1048576"},
		{name: "uniq comparing every pair", text: `{{uniq (until 10000)}}`, want: "uniq would take 50000000 steps; the bound is 4194304"},
		{name: "output over the size bound", text: `{{range until 2000}}{{repeat 1000 "x"}}{{end}}`, want: "the template wrote more than 1048576 bytes"},
		{name: "a string doubled in a loop", text: `{{$s := "x"}}{{range until 40}}{{$s = cat $s $s}}{{end}}`, want: "are over 1048576 bytes"},
		{name: "values kept in variables", text: `{{range until 100}}{{$_ := repeat 1000000 "x"}}{{end}}`, want: "template functions and decoded values took more than 8388608 bytes"},
		{name: "a map that contains itself, which fmt would print until the stack overflows", text: `{{$d := dict}}{{$_ := set $d "a" $d}}{{$d}}`,
			want: "set built a value over 1048576 bytes"},
		{name: "a self-recursive define", text: `{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}`, want: "{{template}} calls nested deeper than 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			before := runtime.NumGoroutine()
			cc, tmpl := class(patch("x", "", templated("/spec/template/spec/managedSubnets", tc.text)))
			_, err := DesiredInfraCluster(ctx, cc, tmpl, cluster(nil))
			if !errors.Is(err, ErrBounded) {
				t.Fatalf("err = %v, want ErrBounded", err)
			}
			prefix := `patch "x" valueFrom.template (add /spec/template/spec/managedSubnets): stopped: `
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tc.want) ||
				!strings.HasSuffix(msg, "(ClusterClass templates are evaluated with bounds in admission)") {
				t.Errorf("err = %q, want %q…%q…", msg, prefix, tc.want)
			}
			nothingLeftRunning(t, before)
		})
	}
}

func nothingLeftRunning(t *testing.T, before int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the evaluation, %d before", n, before)
	}
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "text/template") {
		t.Errorf("a goroutine still runs a template:\n%s", stacks)
	}
}

func TestErrorsNameThePatchAndTellBoundsApart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		patch   clusterv1.ClusterClassPatch
		want    string
		bounded bool
	}{
		{name: "a bound in enabledIf", patch: patch("big", `{{range 10000000000}}{{end}}`, templated("/spec/template/spec/networkMTU", "1")),
			want: `patch "big" enabledIf: stopped: the template ran past 100000 iterations`, bounded: true},
		{name: "a template that fails on its own", patch: patch("failing", "", templated("/spec/template/spec/networkMTU", `{{fail "no MTU"}}`)),
			want: `patch "failing" valueFrom.template (add /spec/template/spec/networkMTU): template: patch:1:2: executing "patch" at <fail "no MTU">: error calling fail: no MTU`},
		{name: "a template that calls a hook itself", patch: patch("sly", "", templated("/spec/template/spec/networkMTU", `{{classpatchesLeave}}`)),
			want: `function "classpatchesLeave" not defined`},
		{name: "a key generated in admission", patch: patch("keys", "", templated("/spec/template/spec/networkMTU", `{{genPrivateKey "rsa"}}`)),
			want: `function "genPrivateKey" not defined`},
		{name: "a variable that is not set", patch: patch("unset", "", clusterv1.JSONPatch{Op: "add", Path: "/spec/template/spec/networkMTU", ValueFrom: &clusterv1.JSONPatchValue{Variable: "net.mtu"}}),
			want: `patch "unset" valueFrom.variable (add /spec/template/spec/networkMTU): variable "net.mtu" is not set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, tmpl := class(tc.patch)
			_, err := DesiredInfraCluster(context.Background(), cc, tmpl, cluster(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrBounded) != tc.bounded {
				t.Errorf("err = %v (bounded: %t), want %q (bounded: %t)", err, errors.Is(err, ErrBounded), tc.want, tc.bounded)
			}
		})
	}
}

func TestTheDeadlineIsTheCallersContext(t *testing.T) {
	// A cause of its own, so that MaxEvaluationTime cannot pass for it.
	callerDeadline := errors.New("the admission request's deadline")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, callerDeadline)
	defer cancel()
	// 10,000 uniq of 2,000 items are more than 50 ms of work: the deadline
	// stops them, whichever of the tick and the call sees it first.
	cc, tmpl := class(patch("x", "", templated("/spec/template/spec/networkMTU",
		`{{range until 10000}}{{$_ := uniq (until 2000)}}{{end}}`)))
	_, err := DesiredInfraCluster(ctx, cc, tmpl, cluster(nil))
	if !errors.Is(err, ErrBounded) || !errors.Is(err, callerDeadline) || !strings.Contains(err.Error(), "stopped: the admission request's deadline after ") {
		t.Fatalf("err = %v, want ErrBounded by the caller's deadline", err)
	}
}

func TestDecodingAndPatchingAreBounded(t *testing.T) {
	zeros := func(n int) string { return "[" + strings.Repeat("0,", n) + "0]" }
	// 10 levels of 10 aliases: 10^10 values from 300 bytes.
	bomb := "a0: &a0 [x,x,x,x,x,x,x,x,x,x]\n"
	for i := 1; i < 10; i++ {
		bomb += fmt.Sprintf("a%d: &a%d [%s]\n", i, i, strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9)+fmt.Sprintf("*a%d", i-1))
	}
	mtu := func(jp clusterv1.JSONPatch) clusterv1.JSONPatch {
		jp.Path = "/spec/template/spec/networkMTU"
		return jp
	}
	same := func(n int, jp clusterv1.JSONPatch) clusterv1.ClusterClassPatch {
		p := patch("many", "", jp)
		p.Definitions[0].JSONPatches = slices.Repeat(p.Definitions[0].JSONPatches, n)
		return p
	}
	otherKind := patch("other", `{{range 10000000000}}{{end}}`, templated("/spec/template/spec/x", "1"))
	otherKind.Definitions[0].Selector.Kind = "KubeadmControlPlaneTemplate"
	for _, tc := range []struct {
		name    string
		patch   clusterv1.ClusterClassPatch
		vars    map[string]string
		want    string
		bounded bool
	}{
		{name: "a YAML alias bomb", patch: patch("x", "", templated("/spec/template/spec/tags", bomb)),
			want: `patch "x" valueFrom.template (add /spec/template/spec/tags): stopped: the template's YAML has an alias (*name)`, bounded: true},
		{name: "YAML of 2 bytes a value", patch: patch("x", "", templated("/spec/template/spec/tags", `{{repeat 100000 "0,"}}0`)),
			want: `stopped: the template's YAML may decode to 200001 values, more than 10000`, bounded: true},
		{name: "a Cluster variable of 2 bytes a value", patch: patch("x", "", templated("/spec/template/spec/tags", "[]")),
			vars: map[string]string{"net": zeros(100000)},
			want: `spec.topology.variables[net]: stopped: the value may decode to 200003 values, more than 10000`, bounded: true},
		{name: "a literal value of 2 bytes a value", patch: patch("x", "", clusterv1.JSONPatch{Op: "add", Path: "/spec/template/spec/tags", Value: raw(zeros(100000))}),
			want: `patch "x" value (add /spec/template/spec/tags): stopped: the value may decode to 200003 values`, bounded: true},
		{name: "decoded values count with what functions build", patch: patch("x", "", templated("/spec/template/spec/tags", "[]")),
			vars: map[string]string{"net": `"` + strings.Repeat("x", 5<<20) + `"`, "nodeCIDR": `"` + strings.Repeat("x", 5<<20) + `"`},
			want: `stopped: template functions and decoded values took more than 8388608 bytes`, bounded: true},
		{name: "a variable every operation repeats", patch: same(20, mtu(clusterv1.JSONPatch{Op: "add", ValueFrom: &clusterv1.JSONPatchValue{Variable: "net"}})),
			vars: map[string]string{"net": `"` + strings.Repeat("x", 100_000) + `"`},
			want: `stopped: with patch "many" (add /spec/template/spec/networkMTU), the OpenStackClusterTemplate may be over 1572864 bytes of JSON`, bounded: true},
		{name: "more operations than the bound", patch: same(1001, mtu(clusterv1.JSONPatch{Op: "add", Value: raw("1")})),
			want: `stopped: the class's patches have more than 1000 operations on the OpenStackClusterTemplate`, bounded: true},
		{name: "an op CAPI does not have, which repeats the document", patch: patch("x", "", clusterv1.JSONPatch{Op: "copy", Path: "/spec/template/spec/x"}),
			want: `patch "x" (copy /spec/template/spec/x): CAPI allows the ops add, replace and remove, and paths of at most 512 bytes`},
		{name: "a template over CAPI's bound", patch: patch("x", "", templated("/spec/template/spec/tags", strings.Repeat("{{.}}", 2049))),
			want: `stopped: the template is 10245 bytes, more than 10240`, bounded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, tmpl := class(tc.patch)
			_, err := DesiredInfraCluster(context.Background(), cc, tmpl, cluster(tc.vars))
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrBounded) != tc.bounded {
				t.Errorf("err = %.300v (bounded: %t), want %q (bounded: %t)", err, errors.Is(err, ErrBounded), tc.want, tc.bounded)
			}
		})
	}
	t.Run("a patch with nothing for the OpenStackClusterTemplate is not rendered", func(t *testing.T) {
		cc, tmpl := class(otherKind)
		if _, err := DesiredInfraCluster(context.Background(), cc, tmpl, cluster(nil)); err != nil {
			t.Errorf("err = %v", err)
		}
	})
}

func TestAtMostMaxConcurrentEvaluationsRun(t *testing.T) {
	for range MaxConcurrentEvaluations { // as evaluations under way would
		running <- struct{}{}
	}
	defer func() {
		for len(running) > 0 {
			<-running
		}
	}()
	cc, tmpl := class(patch("mtu", "", clusterv1.JSONPatch{Op: "add", Path: "/spec/template/spec/networkMTU", Value: raw(`1400`)}))

	callerDeadline := errors.New("the admission request's deadline")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, callerDeadline)
	defer cancel()
	_, err := DesiredInfraCluster(ctx, cc, tmpl, cluster(nil))
	if !errors.Is(err, ErrBounded) || !errors.Is(err, callerDeadline) ||
		!strings.Contains(err.Error(), "stopped: the admission request's deadline while waiting: 2 evaluations were running, the most at once") {
		t.Errorf("with the caller's deadline: err = %v", err)
	}

	defer func(wait time.Duration) { queueWait = wait }(queueWait)
	queueWait = 50 * time.Millisecond
	start := time.Now()
	_, err = DesiredInfraCluster(context.Background(), cc, tmpl, cluster(nil))
	if !errors.Is(err, ErrBounded) || !strings.Contains(err.Error(), "stopped: 2 evaluations were running, the most at once, and none ended within 50ms") {
		t.Errorf("without a deadline: err = %v", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond || waited > time.Second {
		t.Errorf("waited %s, want 50ms", waited)
	}

	queueWait = 2 * time.Second
	time.AfterFunc(20*time.Millisecond, func() { <-running })
	if spec, err := DesiredInfraCluster(context.Background(), cc, tmpl, cluster(nil)); err != nil || *spec.NetworkMTU != 1400 {
		t.Errorf("once one ended: %v, %v", spec.NetworkMTU, err)
	}
}

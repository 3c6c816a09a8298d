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
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// Each function that can build or compute more than its arguments is
// refused, before it runs, with its worst argument (the largest one a
// template can pass); the error names the function, the cost and the bound.
func TestEachAmplifyingFunctionIsRefusedBeforeItRuns(t *testing.T) {
	const mib = `(repeat 1000000 "x")` // about MaxValueBytes
	for _, tc := range []struct{ text, want string }{
		// Lists cut from a text: an empty separator cuts between every rune.
		{`{{split "" ` + mib + `}}`, "split would build 1000000 elements; the bound is 10000"},
		{`{{splitList "" ` + mib + `}}`, "splitList would build 1000000 elements; the bound is 10000"},
		{`{{splitn "" 2000000 ` + mib + `}}`, "splitn would build 1000000 elements; the bound is 10000"},
		{`{{splitList "," (repeat 10000 ",")}}`, "splitList would build 10001 elements; the bound is 10000"},
		{`{{regexSplit "" ` + mib + ` -1}}`, "regexSplit would build more than 10000 elements; the bound is 10000: pass a count"},
		{`{{mustRegexSplit "y*" ` + mib + ` -1}}`, "mustRegexSplit would build more than 10000 elements"},
		{`{{regexFindAll "" ` + mib + ` -1}}`, "regexFindAll would build more than 10000 elements"},
		{`{{mustRegexFindAll "x" ` + mib + ` 20000}}`, "mustRegexFindAll would build more than 10000 elements"},
		{`{{chunk 1 (concat (until 10000) (until 10000))}}`, "chunk would build 20000 elements; the bound is 10000"},
		{`{{mustChunk 1 (concat (until 10000) (until 10000))}}`, "mustChunk would build 20000 elements"},
		// Regular expressions: a long text, or a short one that compiles big.
		{`{{regexMatch (repeat 1025 "a") "a"}}`, "regexMatch would take an expression of 1025 bytes; the bound is 1024"},
		{`{{regexFind (repeat 7 "\\pL") "a"}}`, "regexFind would compile to about 10521 instructions and class ranges; the bound is 10000"},
		{`{{mustRegexMatch "(?:\\pL){1000}" "a"}}`, "mustRegexMatch would compile to about 1321320 instructions and class ranges; the bound is 10000"},
		{`{{regexReplaceAll "[a-z]{1000}" (repeat 5000 "x") ""}}`, "regexReplaceAll would take 20024004 steps; the bound is 4194304"},
		// Decoding: 2 bytes of text a value.
		{`{{fromJson (print "[" (repeat 300000 "0,") "0]")}}`, "fromJson would decode up to 600003 values; the bound is 10000"},
		{`{{mustFromJson (print "[" (repeat 300000 "{},") "0]")}}`, "mustFromJson would decode up to 1200003 values"},
		// Escapes: one byte becomes several.
		{`{{toJson (repeat 200000 "\x00")}}`, "toJson would build up to 1200192 bytes; the bound is 1048576"},
		{`{{toRawJson (repeat 200000 "\x00")}}`, "toRawJson would build up to 1200192 bytes"},
		{`{{toPrettyJson (repeat 200000 "\x00")}}`, "toPrettyJson would build up to 1600256 bytes"},
		{`{{js (repeat 200000 "<")}}`, "js would build up to 1200288 bytes"},
		{`{{html (repeat 250000 "&")}}`, "html would build up to 1250240 bytes"},
		{`{{quote (repeat 300000 "\xff")}}`, "quote would build up to 1200192 bytes"},
		{`{{upper (repeat 400000 "\xff")}}`, "upper would build up to 1200048 bytes"},
		{`{{urlquery (repeat 400000 "\xff")}}`, "urlquery would build up to 1200144 bytes"},
		{`{{b64enc (repeat 600000 "x")}}`, "b64enc would build up to 1200032 bytes"},
		{`{{printf "% #x" (repeat 300000 "\x00")}}`, "printf would build up to 1500244 bytes"},
		// Exact decimals grow with every operand.
		{`{{divf 1` + strings.Repeat(" 1e-300", 100) + `}}`, "divf would take 101 operands; the bound is 100"},
		{`{{addf` + strings.Repeat(" 1e-300", 101) + `}}`, "addf would take 101 operands"},
		// A constraint's ranges are rewritten over the whole text, one by one.
		{`{{semverCompare (repeat 300 "1 - 2 ") "1.0.0"}}`, "semverCompare would parse 1805 bytes; the bound is 1024"},
		{`{{semver (repeat 1025 "1")}}`, "semver would parse 1025 bytes"},
	} {
		t.Run(tc.text[:min(len(tc.text), 60)], func(t *testing.T) {
			_, err := newEvaluation(context.Background()).render(tc.text, nil)
			if !errors.Is(err, ErrBounded) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// The bounds are exact: at a bound, a function runs and returns what
// sprig's does; one past it, it is refused.
func TestBoundsAreExact(t *testing.T) {
	for _, tc := range []struct{ at, past, want string }{
		{`{{splitList "," (repeat 9999 ",") | len}}`, `{{splitList "," (repeat 10000 ",") | len}}`, "splitList would build 10001 elements; the bound is 10000"},
		{`{{split "" (repeat 10000 "é") | len}}`, `{{split "" (repeat 10001 "é") | len}}`, "split would build 10001 elements"},
		{`{{regexFindAll "x" (repeat 10000 "x") -1 | len}}`, `{{regexFindAll "x" (repeat 10001 "x") -1 | len}}`, "regexFindAll would build more than 10000 elements"},
		{`{{mustRegexSplit "," (repeat 9999 ",") -1 | len}}`, `{{mustRegexSplit "," (repeat 10000 ",") -1 | len}}`, "mustRegexSplit would build more than 10000 elements"},
		{`{{chunk 1 (until 10000) | len}}`, `{{chunk 1 (concat (until 10000) (list 1)) | len}}`, "chunk would build 10001 elements"},
		{`{{fromJson (print "[" (repeat 4998 "0,") "0]") | len}}`, `{{fromJson (print "[" (repeat 4999 "0,") "0]") | len}}`, "fromJson would decode up to 10001 values"},
		{`{{regexMatch (repeat 1024 "a") "a"}}`, `{{regexMatch (repeat 1025 "a") "a"}}`, "regexMatch would take an expression of 1025 bytes"},
		{`{{regexMatch (repeat 6 "\\pL") "a"}}`, `{{regexMatch (repeat 7 "\\pL") "a"}}`, "regexMatch would compile to about 10521 instructions"},
		{`{{toJson (repeat 174730 "\x00") | len}}`, `{{toJson (repeat 174731 "\x00") | len}}`, "toJson would build up to 1048578 bytes"},
		{`{{divf 1` + strings.Repeat(" 1e-3", 99) + `}}`, `{{divf 1` + strings.Repeat(" 1e-3", 100) + `}}`, "divf would take 101 operands"},
		{`{{semver (print "1.2.3+" (repeat 1018 "a"))}}`, `{{semver (print "1.2.3+" (repeat 1019 "a"))}}`, "semver would parse 1025 bytes"},
	} {
		if got, want := render(t, tc.at), sprigRender(t, tc.at); got != want {
			t.Errorf("%.80s = %.80q, sprig's %.80q", tc.at, got, want)
		}
		if _, err := newEvaluation(context.Background()).render(tc.past, nil); !errors.Is(err, ErrBounded) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.80s: err = %v, want %q", tc.past, err, tc.want)
		}
	}
}

func render(t *testing.T, text string) string {
	t.Helper()
	out, err := newEvaluation(context.Background()).render(text, nil)
	if err != nil {
		t.Errorf("%.80s: %v", text, err)
	}
	return out
}

func sprigRender(t *testing.T, text string) string {
	t.Helper()
	var out strings.Builder
	if err := template.Must(template.New("patch").Funcs(sprig.HermeticTxtFuncMap()).Parse(text)).Execute(&out, nil); err != nil {
		t.Errorf("%.80s with sprig: %v", text, err)
	}
	return out.String()
}

// splitn asks strings.SplitN for the pieces there are, not for N: SplitN
// allocates N strings up front (16 MB for N = 1,000,000).
func TestSplitnAllocatesThePiecesThereAre(t *testing.T) {
	e := newEvaluation(context.Background())
	text := strings.Repeat("x", 1_000_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := e.render(`{{splitn "," 1000000 .text | len}}`, map[string]any{"text": text})
	runtime.ReadMemStats(&after)
	if err != nil || got != "1" {
		t.Fatalf("got %q, %v", got, err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("splitn allocated %d bytes for one piece", n)
	}
}

// linear are the functions not prechecked, which build at most about what
// their arguments measure and take time linear in them.
var linear = []string{
	// Text in, at most as much text out (case, trimming, paths, hashes).
	"abbrev", "abbrevboth", "trunc", "trim", "trimSuffix", "trimPrefix", "nospace", "initials", "substr", "wrap", "plural",
	"contains", "hasPrefix", "hasSuffix", "squote", "cat", "toString", "print", "println", "sha1sum", "sha256sum", "sha512sum", "adler32sum",
	"base", "dir", "clean", "ext", "isAbs", "osBase", "osClean", "osDir", "osExt", "osIsAbs", "b64dec", "b32dec", "urlParse", "urlJoin",
	"toStrings", "sortAlpha", "hello", "fail",
	// Numbers.
	"atoi", "int64", "int", "float64", "toDecimal", "add1", "add", "sub", "div", "mod", "mul", "randInt", "add1f",
	"biggest", "max", "min", "maxf", "minf", "ceil", "floor", "round",
	// Lists and dicts: their elements, once (a shared one is measured each time).
	"list", "tuple", "dict", "get", "set", "unset", "hasKey", "pluck", "keys", "pick", "omit", "merge", "mergeOverwrite",
	"mustMerge", "mustMergeOverwrite", "values", "append", "push", "mustAppend", "mustPush", "prepend", "mustPrepend",
	"first", "mustFirst", "rest", "mustRest", "last", "mustLast", "initial", "mustInitial", "reverse", "mustReverse",
	"has", "mustHas", "slice", "mustSlice", "concat", "dig", "compact", "mustCompact", "deepCopy", "mustDeepCopy",
	"default", "empty", "coalesce", "all", "any", "ternary",
	"typeOf", "typeIs", "typeIsLike", "kindOf", "kindIs", "deepEqual",
	// Dates and durations: fixed sizes.
	"ago", "duration", "durationRound", "toDate", "mustToDate", "unixEpoch", "must_date_modify", "mustDateModify",
}

// Every function a template may call is prechecked or linear; a new
// sprig's new function fails here until it is looked at.
func TestEveryFunctionIsPrecheckedOrLinear(t *testing.T) {
	for name := range templateFuncs {
		if _, ok := prechecks[name]; !ok && !slices.Contains(linear, name) {
			t.Errorf("%s is neither prechecked nor linear", name)
		}
	}
	// The linear ones that make text, on the inputs that make escapes grow.
	for _, name := range linear {
		f := reflect.ValueOf(templateFuncs[name])
		if f.Type().NumOut() == 0 || f.Type().Out(0).Kind() != reflect.String {
			continue
		}
		for _, in := range []string{"\xff", "\x00", "<&\"'", "aB1 ", "ǅ", "ⱥ", "\u2028", "\n", "\\"} {
			in = strings.Repeat(in, 1000)
			if out := callWith(f, in); len(out) > 2*len(in)+16 {
				t.Errorf("%s builds %d bytes from %d", name, len(out), len(in))
			}
		}
	}
}

// callWith calls f with text as its last argument and small other ones;
// "" when f does not take them.
func callWith(f reflect.Value, text string) (out string) {
	defer func() { _ = recover() }()
	ft := f.Type()
	args := make([]reflect.Value, ft.NumIn())
	for i := range args {
		at := ft.In(i)
		if ft.IsVariadic() && i == len(args)-1 {
			args[i] = reflect.ValueOf([]any{text})
			return f.CallSlice(args)[0].String()
		}
		switch {
		case i == len(args)-1 && (at.Kind() == reflect.String || at.Kind() == reflect.Interface):
			args[i] = reflect.ValueOf(text)
		case at.Kind() == reflect.String:
			args[i] = reflect.ValueOf("a")
		case at.Kind() == reflect.Int:
			args[i] = reflect.ValueOf(3)
		default:
			return ""
		}
	}
	return f.Call(args)[0].String()
}

// regexSize counts an instruction per node and rune or class bound, its
// operand again for each repetition.
func TestRegexSize(t *testing.T) {
	for _, tc := range []struct {
		expr     string
		min, max float64
	}{
		{`abc`, 4, 4},
		{`a{1000}`, 3003, 3003},
		{`[a-z]{10}`, 44, 44},
		{`\pL\pL`, 2 * 1000, 2 * unicodeClass},      // parsed: L's ranges
		{`(?:\pL){1000}`, 1000 * 1000, math.Inf(1)}, // parsed, then repeated
		{strings.Repeat(`\pL`, 7), 7 * unicodeClass, 7*unicodeClass + 21}, // not parsed
	} {
		if got := regexSize(tc.expr); got < tc.min || got > tc.max {
			t.Errorf("regexSize(%s) = %v, want %v to %v", tc.expr, got, tc.min, tc.max)
		}
	}
}

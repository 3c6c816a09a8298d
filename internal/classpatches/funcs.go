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
	"fmt"
	"math"
	"reflect"
	"regexp/syntax"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/Masterminds/sprig/v3"
)

// templateFuncs are sprig's hermetic functions, as CAPI offers them, but
// the cryptographic ones (key and certificate generation, scrypt, bcrypt:
// seconds of CPU or tens of MB in one call nothing can interrupt, and no
// use in an OpenStackCluster's network), and the builtins that format their
// arguments, so that the guard sees those too (a FuncMap entry takes
// precedence over a builtin). A class that calls a crypto function cannot
// be evaluated here: its node subnet is checked before the share.
// The functions that list what a regular expression finds stop at
// MaxListLen+1 matches, and splitn asks for no more pieces than there are:
// both allocate their whole list in one call.
var templateFuncs = func() template.FuncMap {
	fm := sprig.HermeticTxtFuncMap()
	for _, name := range []string{"bcrypt", "htpasswd", "genPrivateKey", "derivePassword", "buildCustomCert", "genCA", "genCAWithKey",
		"genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey", "encryptAES", "decryptAES"} {
		delete(fm, name)
	}
	fm["print"], fm["printf"], fm["println"] = fmt.Sprint, fmt.Sprintf, fmt.Sprintln
	fm["html"], fm["js"], fm["urlquery"] = template.HTMLEscaper, template.JSEscaper, template.URLQueryEscaper
	for _, name := range []string{"regexFindAll", "regexSplit"} {
		fm[name] = capped(name, mayFail(fm[name].(func(string, string, int) []string)))
	}
	for _, name := range []string{"mustRegexFindAll", "mustRegexSplit"} {
		fm[name] = capped(name, fm[name].(func(string, string, int) ([]string, error)))
	}
	fm["splitn"] = fewestPieces(fm["splitn"].(func(string, int, string) map[string]string))
	return fm
}()

type matcher = func(regex, s string, n int) ([]string, error)

func mayFail(fn func(regex, s string, n int) []string) matcher {
	return func(regex, s string, n int) ([]string, error) { return fn(regex, s, n), nil }
}

// capped asks fn for at most MaxListLen+1 matches (n < 0 is all of them),
// so that it cannot build more, and refuses a list over MaxListLen: how
// many an expression matches is only known by running it, and an empty
// one matches at every byte.
func capped(name string, fn matcher) matcher {
	return func(regex, s string, n int) ([]string, error) {
		limit := n
		if n < 0 || n > MaxListLen {
			limit = MaxListLen + 1
		}
		out, err := fn(regex, s, limit)
		if len(out) > MaxListLen {
			return nil, bounded("%s would build more than %d elements; the bound is %d: pass a count (its last argument) of at most that", name, MaxListLen, MaxListLen)
		}
		return out, err
	}
}

// fewestPieces is splitn asking strings.SplitN for no more pieces than
// SEP cuts TEXT into: SplitN allocates N of them up front.
func fewestPieces(splitn func(sep string, n int, orig string) map[string]string) func(string, int, string) map[string]string {
	return func(sep string, n int, orig string) map[string]string {
		if n > 0 {
			n = min(n, strings.Count(orig, sep)+1)
		}
		return splitn(sep, n, orig)
	}
}

// guard wraps fn so that a call first checks the deadline, the size of its
// arguments and, for the functions in prechecks, what it would build or
// compute; then it measures what the call built. So every value a template
// holds is measured: fmt builds the whole text of a value before the writer
// can refuse it, and recurses without end (a fatal stack overflow) into a
// map that contains itself, which `set $d "k" $d` makes.
func (e *evaluation) guard(name string, fn any) any {
	f := reflect.ValueOf(fn)
	return reflect.MakeFunc(f.Type(), func(args []reflect.Value) []reflect.Value {
		if err := e.before(name, args); err != nil {
			panic(err) // text/template turns a call's panic into its error
		}
		var out []reflect.Value
		if f.Type().IsVariadic() {
			out = f.CallSlice(args)
		} else {
			out = f.Call(args)
		}
		if err := e.after(name, out); err != nil {
			panic(err)
		}
		return out
	}).Interface()
}

func (e *evaluation) before(name string, args []reflect.Value) error {
	if e.ctx.Err() != nil {
		return e.trip(e.deadline())
	}
	if size, _ := measure(MaxValueBytes, args...); size > MaxValueBytes {
		return e.trip(bounded("the arguments of %s are over %d bytes", name, MaxValueBytes))
	}
	for _, c := range prechecks[name] {
		if cost := c.cost(args); cost > c.limit {
			return e.trip(bounded("%s would %s; the bound is %.0f", name, fmt.Sprintf(c.what, amount(cost)), c.limit))
		}
	}
	return nil
}

// amount is a cost for an error: past maxExact, sprig's own arithmetic
// overflows.
func amount(cost float64) string {
	if cost > maxExact {
		return "over 2^53"
	}
	return strconv.FormatFloat(math.Ceil(cost), 'f', -1, 64)
}

// after measures what a call built and charges it to the evaluation; a
// bound error a capped function returns stops the evaluation too.
func (e *evaluation) after(name string, out []reflect.Value) error {
	if len(out) == 2 {
		if err, ok := out[1].Interface().(*boundError); ok {
			return e.trip(err)
		}
	}
	size, _ := measure(MaxValueBytes, out[0])
	if size > MaxValueBytes {
		return e.trip(bounded("%s built a value over %d bytes", name, MaxValueBytes))
	}
	return e.charge(size)
}

// charge counts size bytes against MaxAllocatedBytes: what template
// functions build and what the evaluation decodes.
func (e *evaluation) charge(size int) error {
	if e.allocated += size; e.allocated > MaxAllocatedBytes {
		return e.trip(bounded("template functions and decoded values took more than %d bytes", MaxAllocatedBytes))
	}
	return nil
}

// measure is the size of vals and how deep they nest, counting a shared or
// cyclic part each time it is reached, as fmt and encoding/json expand it;
// it stops counting past limit, so it costs at most limit/nodeBytes steps.
func measure(limit int, vals ...reflect.Value) (size, depth int) {
	type item struct {
		v     reflect.Value
		depth int
	}
	stack := make([]item, 0, len(vals))
	for _, v := range vals {
		stack = append(stack, item{v, 1})
	}
	room := func() bool { return size+len(stack)*nodeBytes <= limit }
	for len(stack) > 0 && size <= limit {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		size, depth = size+nodeBytes, max(depth, it.depth)
		v, d := it.v, it.depth+1
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if !v.IsNil() {
				stack = append(stack, item{v.Elem(), it.depth})
			}
		case reflect.String:
			size += v.Len()
		case reflect.Slice, reflect.Array:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				size += v.Len()
				continue
			}
			for i := 0; i < v.Len() && room(); i++ {
				stack = append(stack, item{v.Index(i), d})
			}
		case reflect.Map:
			for r := v.MapRange(); room() && r.Next(); {
				stack = append(stack, item{r.Key(), d}, item{r.Value(), d})
			}
		case reflect.Struct:
			for i := 0; i < v.NumField() && room(); i++ {
				stack = append(stack, item{v.Field(i), d})
			}
		}
	}
	return size, depth
}

// A precheck refuses a call, before it runs, whose cost (a size or a count
// of steps) its arguments put over limit: such a call allocates or spins
// in one go, where no tick can stop it.
type precheck struct {
	limit float64
	what  string // for the error, "<function> would <what>", the cost in %s
	cost  func(args []reflect.Value) float64
}

func elements(cost func([]reflect.Value) float64) precheck {
	return precheck{MaxListLen, "build %s elements", cost}
}

func bytesOut(cost func([]reflect.Value) float64) precheck {
	return precheck{MaxValueBytes, "build up to %s bytes", cost}
}

func steps(cost func([]reflect.Value) float64) precheck {
	return precheck{MaxCallWork, "take %s steps", cost}
}

// escaping is a function whose output takes up to factor bytes for each
// byte of its arguments: \xff becomes "\ufffd" (toJson: 6), "&#34;"
// (html: 5), `\xff` (quote: 4), U+FFFD (upper: 3).
func escaping(factor float64) precheck {
	return bytesOut(func(a []reflect.Value) float64 {
		size, _ := measure(MaxValueBytes, a...)
		return factor * float64(size)
	})
}

// prechecks are the functions (sprig v3.3.0's and fmt's) whose cost is not
// bounded by the size of their arguments: a number, a width, a separator
// repeated per element, a product of two inputs, or an escape that makes
// one byte several. Arguments are indexed as the functions declare them.
// Every other function builds at most about the size of its arguments
// (TestEveryFunctionIsPrecheckedOrLinear).
var prechecks = func() map[string][]precheck {
	p := map[string][]precheck{
		"until":            {elements(func(a []reflect.Value) float64 { return span(0, a[0].Int(), sign(a[0].Int())) })},
		"untilStep":        {elements(func(a []reflect.Value) float64 { return span(a[0].Int(), a[1].Int(), a[2].Int()) })},
		"seq":              {elements(seqLen)},
		"split":            {elements(func(a []reflect.Value) float64 { return pieces(a[0].String(), -1, a[1].String()) })},
		"splitList":        {elements(func(a []reflect.Value) float64 { return pieces(a[0].String(), -1, a[1].String()) })},
		"splitn":           {elements(func(a []reflect.Value) float64 { return pieces(a[0].String(), a[1].Int(), a[2].String()) })},
		"chunk":            {elements(chunks)},
		"mustChunk":        {elements(chunks)},
		"fromJson":         {decoded},
		"mustFromJson":     {decoded},
		"repeat":           {bytesOut(func(a []reflect.Value) float64 { return float64(a[0].Int()) * float64(a[1].Len()) })},
		"indent":           {bytesOut(indented)},
		"nindent":          {bytesOut(indented)},
		"wrapWith":         {bytesOut(wrapped)},
		"replace":          {bytesOut(replaced)},
		"join":             {bytesOut(joined)},
		"printf":           {bytesOut(printed)},
		"toPrettyJson":     {bytesOut(prettyJSON)},
		"mustToPrettyJson": {bytesOut(prettyJSON)},
		"uniq":             {steps(func(a []reflect.Value) float64 { return length(a[0]) * length(a[0]) / 2 })},
		"mustUniq":         {steps(func(a []reflect.Value) float64 { return length(a[0]) * length(a[0]) / 2 })},
		"without":          {steps(func(a []reflect.Value) float64 { return length(a[0]) * length(a[1]) })},
		"mustWithout":      {steps(func(a []reflect.Value) float64 { return length(a[0]) * length(a[1]) })},
		"trimAll":          {steps(func(a []reflect.Value) float64 { return float64(a[0].Len()) * float64(a[1].Len()) })},
		"trimall":          {steps(func(a []reflect.Value) float64 { return float64(a[0].Len()) * float64(a[1].Len()) })},
		// Exact decimals: each operand can add 330 digits that every later
		// one works through (3,000 divisions allocate over 1 GiB).
		"addf": {operands}, "subf": {operands}, "mulf": {operands}, "divf": {operands},
		// A constraint's ranges are rewritten one by one over the whole text.
		"semver":        {versionText},
		"semverCompare": {versionText},
	}
	for factor, names := range map[float64][]string{
		6: {"toJson", "mustToJson", "toRawJson", "mustToRawJson", "js"},
		5: {"html"},
		4: {"quote"},
		3: {"upper", "lower", "title", "untitle", "swapcase", "camelcase", "snakecase", "kebabcase", "shuffle", "urlquery"},
		2: {"b64enc", "b32enc", "regexQuoteMeta"},
	} {
		for _, name := range names {
			p[name] = []precheck{escaping(factor)}
		}
	}
	// Go's regexp is linear in the text, times the size of the program;
	// the program and its matcher take about 100 bytes an instruction.
	for _, name := range []string{"regexMatch", "regexFind", "regexFindAll", "regexSplit",
		"regexReplaceAll", "regexReplaceAllLiteral"} {
		checks := []precheck{regexText, regexProgram, steps(regexWork)}
		if strings.HasPrefix(name, "regexReplace") {
			checks = append(checks, bytesOut(regexReplaced))
		}
		p[name] = checks
		p["must"+strings.ToUpper(name[:1])+name[1:]] = checks
	}
	return p
}()

var (
	decoded = precheck{MaxDecodedNodes, "decode up to %s values",
		func(a []reflect.Value) float64 { return float64(nodes(a[0].String())) }}
	operands = precheck{MaxOperands, "take %s operands",
		func(a []reflect.Value) float64 { return float64(len(a)-1) + length(a[len(a)-1]) }}
	versionText = precheck{MaxVersionBytes, "parse %s bytes", func(a []reflect.Value) float64 {
		size := 0
		for _, v := range a {
			size += v.Len()
		}
		return float64(size)
	}}
	regexText    = precheck{MaxRegexBytes, "take an expression of %s bytes", func(a []reflect.Value) float64 { return float64(a[0].Len()) }}
	regexProgram = precheck{MaxRegexSize, "compile to about %s instructions and class ranges",
		func(a []reflect.Value) float64 { return regexSize(a[0].String()) }}
)

// pieces is how many substrings strings.SplitN(text, sep, n) returns (an
// empty sep cuts between runes).
func pieces(sep string, n int64, text string) float64 {
	c := float64(strings.Count(text, sep) + 1)
	if sep == "" {
		c = float64(utf8.RuneCountInString(text))
	}
	if n >= 0 {
		c = min(c, float64(n))
	}
	return c
}

// chunks: chunk SIZE LIST makes a list per SIZE elements.
func chunks(a []reflect.Value) float64 {
	return math.Ceil(length(a[1]) / float64(max(a[0].Int(), 1)))
}

// unicodeClass is about the class ranges regexp/syntax builds for \pX or
// \PX (L has 650 ranges): 12 KB each to parse, from 3 bytes of text.
const unicodeClass = 1_500

// regexSize is about how many instructions and class ranges regexp
// compiles expr to: an instruction per rune and operator, a{n} n times
// its operand. Many \p classes are refused before they are parsed.
func regexSize(expr string) float64 {
	classes := strings.Count(expr, `\p`) + strings.Count(expr, `\P`)
	if size := float64(len(expr) + unicodeClass*classes); size > MaxRegexSize {
		return size
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0 // the function reports the error
	}
	return programSize(re)
}

func programSize(re *syntax.Regexp) float64 {
	n := 1 + float64(len(re.Rune))
	for _, sub := range re.Sub {
		n += programSize(sub)
	}
	if re.Op == syntax.OpRepeat {
		n *= float64(max(re.Min+1, re.Max))
	}
	return n
}

func sign(n int64) int64 {
	if n < 0 {
		return -1
	}
	return 1
}

// maxExact is the largest int a float64 holds exactly; past it sprig's
// untilStep loop can also overflow and never end.
const maxExact = 1 << 53

// span is how many elements untilStep(start, stop, step) builds.
func span(start, stop, step int64) float64 {
	if max(start, stop, step) > maxExact || min(start, stop, step) < -maxExact {
		return math.Inf(1)
	}
	d := float64(stop - start)
	if step == 0 || d*float64(step) <= 0 {
		return 0
	}
	return math.Ceil(d / float64(step))
}

// seqLen is how many numbers seq prints: seq END, seq START END or
// seq START STEP END, END included.
func seqLen(a []reflect.Value) float64 {
	p := a[0]
	start, step := int64(1), int64(1)
	var stop int64
	switch p.Len() {
	case 1:
		stop = p.Index(0).Int()
	case 2:
		start, stop = p.Index(0).Int(), p.Index(1).Int()
	case 3:
		start, step, stop = p.Index(0).Int(), p.Index(1).Int(), p.Index(2).Int()
	default:
		return 0
	}
	if max(start, stop, step) > maxExact || min(start, stop, step) < -maxExact {
		return math.Inf(1)
	}
	if step == 0 {
		return 0
	}
	return math.Abs(float64(stop-start))/math.Abs(float64(step)) + 1
}

// indented: (n)indent SPACES TEXT pads every line of TEXT.
func indented(a []reflect.Value) float64 {
	lines := strings.Count(a[1].String(), "\n") + 1
	return float64(a[1].Len()+1) + float64(a[0].Int())*float64(lines)
}

// wrapped: wrapWith LENGTH SEP TEXT puts SEP every LENGTH bytes at worst.
func wrapped(a []reflect.Value) float64 {
	n, text := max(a[0].Int(), 1), float64(a[2].Len())
	return text + (text/float64(n)+1)*float64(max(a[1].Len(), 1))
}

// replaced: replace OLD NEW TEXT (an empty OLD matches between every rune).
func replaced(a []reflect.Value) float64 {
	return float64(a[2].Len()) + float64(strings.Count(a[2].String(), a[0].String()))*float64(a[1].Len())
}

// joined: join SEP LIST puts SEP between every element.
func joined(a []reflect.Value) float64 {
	size, _ := measure(MaxValueBytes, a[1])
	return float64(size) + length(a[1])*float64(a[0].Len())
}

// printed: every verb of printf FORMAT ARGS can print any argument again
// (%[1]s), escaped in up to 5 bytes a byte ("% #x"), and pad it to its
// width; fmt caps a width, a precision or a `*` at 1e6.
func printed(a []reflect.Value) float64 {
	format := a[0].String()
	widths, n := 0.0, 0.0
	for i := 0; i <= len(format); i++ {
		if i < len(format) && format[i] >= '0' && format[i] <= '9' {
			n = min(n*10+float64(format[i]-'0'), 1e7)
			continue
		}
		widths, n = widths+n, 0
	}
	widths += 1e6 * float64(strings.Count(format, "*"))
	args, _ := measure(MaxValueBytes, a[1])
	return float64(len(format)) + widths + float64(strings.Count(format, "%"))*5*float64(args)
}

// prettyJSON: toPrettyJson indents each line by two spaces per level, and
// escapes a byte in up to 6 ("\ufffd").
func prettyJSON(a []reflect.Value) float64 {
	size, depth := measure(MaxValueBytes, a[0])
	return float64(size) * float64(6+2*depth)
}

// regexWork: regexp matches in time linear in the text times the size of
// the program.
func regexWork(a []reflect.Value) float64 {
	return float64(a[1].Len()+1) * regexSize(a[0].String())
}

// regexReplaced: the expression can match at every position, and each `$`
// in the replacement can expand to the whole text.
func regexReplaced(a []reflect.Value) float64 {
	text, repl := float64(a[1].Len()), a[2].String()
	return text + (text+1)*(float64(len(repl))+float64(strings.Count(repl, "$"))*text)
}

// length is the number of elements of a list, map or string, through the
// interface a function takes it as.
func length(v reflect.Value) float64 {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		return float64(v.Len())
	}
	return 0
}

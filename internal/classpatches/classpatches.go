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

// Package classpatches runs a ClusterClass's inline patches the way CAPI's
// topology controller does, but with bounds: the templates are written by
// tenants and run inside the admission webhook, and Go cannot kill a
// template that loops or allocates without end.
package classpatches

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/Masterminds/sprig/v3"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"sigs.k8s.io/yaml"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

const (
	// MaxEvaluationTime caps an evaluation even when the caller's context
	// has no deadline: a real ClusterClass evaluates in milliseconds, and the
	// admission request waiting for it has at most 10 s by default.
	MaxEvaluationTime = 2 * time.Second

	// MaxIterations is how many {{range}} iterations and template calls one
	// evaluation may run, over all its templates. A patch iterates over
	// variables (tens of items); 100,000 is far above that and, at about
	// 3 µs an iteration on a busy 2-core node, well under a second of CPU.
	MaxIterations = 100_000

	// MaxTemplateDepth bounds {{template}} nesting: a patch has no use for
	// recursion, and text/template's own limit (100,000) is reached only
	// after hundreds of MB of stack.
	MaxTemplateDepth = 100

	// MaxOutputBytes bounds what one template renders: the value lands in an
	// object that the API server stores in at most 1.5 MiB.
	MaxOutputBytes = 1 << 20

	// MaxValueBytes bounds any value a template function takes or returns
	// (a string counts its bytes, every element nodeBytes more): nothing
	// larger fits in the object either.
	MaxValueBytes = 1 << 20

	// MaxAllocatedBytes bounds what template functions build over one
	// evaluation, garbage included, so that values kept in many variables
	// cannot add up to more than the extension's memory.
	MaxAllocatedBytes = 64 << 20

	// MaxListLen bounds the lists until, untilStep and seq build from a
	// number: 10,000 covers any count of subnets, pools or addresses.
	MaxListLen = 10_000

	// MaxCallWork bounds one call whose cost is the product of its inputs
	// (uniq, without, trimAll, regular expressions): nothing interrupts a
	// running call, and 4M steps is well under a tenth of a second.
	MaxCallWork = 1 << 22

	// nodeBytes is what Go spends on an element besides a string's bytes
	// (a slice or interface header, a number).
	nodeBytes = 16
)

// ErrBounded matches (errors.Is) the errors of evaluations a bound stopped,
// as opposed to templates that failed on their own.
var ErrBounded = errors.New("ClusterClass patch evaluation stopped by a bound")

// boundError says which bound stopped the evaluation.
type boundError struct {
	what  string
	cause error // the context's error when the deadline stopped it
}

func (e *boundError) Error() string {
	return "stopped: " + e.what + " (ClusterClass templates are evaluated with bounds in admission)"
}

func (e *boundError) Is(target error) bool { return target == ErrBounded }

func (e *boundError) Unwrap() error { return e.cause }

func bounded(format string, args ...any) *boundError {
	return &boundError{what: fmt.Sprintf(format, args...)}
}

// DesiredInfraCluster is the OpenStackCluster spec the topology controller
// will create for a Cluster that has none yet: the ClusterClass's
// OpenStackClusterTemplate with the class's inline patches applied to the
// Cluster's variables (defaults from the class where the Cluster sets none),
// the way CAPI's inline patch engine does. So a `nodeCIDR` variable is
// checked at creation, not the template's default. External patches are not
// run here: the attachment controller checks the real OpenStackCluster again
// before it shares.
//
// The templates run with bounds (time, iterations, output and value sizes):
// an error matching ErrBounded means a bound stopped them, not that the
// class is wrong.
func DesiredInfraCluster(ctx context.Context, cc *clusterv1.ClusterClass, tmpl *infrav1.OpenStackClusterTemplate, cluster *clusterv1.Cluster) (infrav1.OpenStackClusterSpec, error) {
	ctx, cancel := context.WithTimeout(ctx, MaxEvaluationTime)
	defer cancel()
	vars, err := variables(cc, cluster)
	if err != nil {
		return infrav1.OpenStackClusterSpec{}, err
	}
	doc, err := json.Marshal(tmpl)
	if err != nil {
		return infrav1.OpenStackClusterSpec{}, err
	}
	e := newEvaluation(ctx)
	for _, p := range cc.Spec.Patches {
		if doc, err = e.applyPatch(doc, p, vars); err != nil {
			return infrav1.OpenStackClusterSpec{}, err
		}
	}
	out := &infrav1.OpenStackClusterTemplate{}
	if err := json.Unmarshal(doc, out); err != nil {
		return infrav1.OpenStackClusterSpec{}, err
	}
	return out.Spec.Template.Spec, nil
}

// variables are the class's defaults, the Cluster's values over them, and
// builtin.cluster.
func variables(cc *clusterv1.ClusterClass, cluster *clusterv1.Cluster) (map[string]any, error) {
	vars := map[string]any{}
	for _, v := range cc.Spec.Variables {
		if d := v.Schema.OpenAPIV3Schema.Default; d != nil {
			var value any
			if err := json.Unmarshal(d.Raw, &value); err == nil {
				vars[v.Name] = value
			}
		}
	}
	for _, v := range cluster.Spec.Topology.Variables {
		var value any
		if err := json.Unmarshal(v.Value.Raw, &value); err != nil {
			return nil, fmt.Errorf("spec.topology.variables[%s]: %w", v.Name, err)
		}
		vars[v.Name] = value
	}
	vars["builtin"] = map[string]any{"cluster": map[string]any{
		"name": cluster.Name, "namespace": cluster.Namespace,
		"topology": map[string]any{"version": cluster.Spec.Topology.Version, "class": cluster.Spec.Topology.ClassRef.Name},
	}}
	return vars, nil
}

// applyPatch applies p's definitions for the OpenStackClusterTemplate to
// doc, if p's enabledIf renders "true".
func (e *evaluation) applyPatch(doc []byte, p clusterv1.ClusterClassPatch, vars map[string]any) ([]byte, error) {
	if p.EnabledIf != "" {
		enabled, err := e.render(p.EnabledIf, vars)
		if err != nil {
			return nil, fmt.Errorf("patch %q enabledIf: %w", p.Name, err)
		}
		if strings.TrimSpace(enabled) != "true" {
			return doc, nil
		}
	}
	for _, d := range p.Definitions {
		if d.Selector.Kind != "OpenStackClusterTemplate" || d.Selector.MatchResources.InfrastructureCluster == nil || !*d.Selector.MatchResources.InfrastructureCluster {
			continue
		}
		raw, err := e.jsonPatch(p.Name, d.JSONPatches, vars)
		if err != nil {
			return nil, err
		}
		patch, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			return nil, fmt.Errorf("patch %q: %w", p.Name, err)
		}
		if doc, err = patch.Apply(doc); err != nil {
			return nil, fmt.Errorf("patch %q: %w", p.Name, err)
		}
	}
	return doc, nil
}

// jsonPatch is the RFC 6902 document of a definition's patches, values
// resolved.
func (e *evaluation) jsonPatch(name string, jps []clusterv1.JSONPatch, vars map[string]any) ([]byte, error) {
	ops := make([]map[string]any, 0, len(jps))
	for _, jp := range jps {
		op := map[string]any{"op": jp.Op, "path": jp.Path}
		value, err := e.patchValue(jp, vars)
		if err != nil {
			return nil, fmt.Errorf("patch %q %s (%s %s): %w", name, valueField(jp), jp.Op, jp.Path, err)
		}
		if jp.Op != "remove" {
			op["value"] = value
		}
		ops = append(ops, op)
	}
	return json.Marshal(ops)
}

func valueField(jp clusterv1.JSONPatch) string {
	switch {
	case jp.Value != nil:
		return "value"
	case jp.ValueFrom != nil && jp.ValueFrom.Variable != "":
		return "valueFrom.variable"
	case jp.ValueFrom != nil && jp.ValueFrom.Template != "":
		return "valueFrom.template"
	}
	return "value"
}

// patchValue is a JSON patch's value: literal, a variable (dotted paths into
// object variables, as CAPI allows) or a rendered template (YAML).
func (e *evaluation) patchValue(jp clusterv1.JSONPatch, vars map[string]any) (any, error) {
	switch {
	case jp.Value != nil:
		var v any
		return v, json.Unmarshal(jp.Value.Raw, &v)
	case jp.ValueFrom != nil && jp.ValueFrom.Variable != "":
		var v any = vars
		for _, part := range strings.Split(jp.ValueFrom.Variable, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("variable %q is not set", jp.ValueFrom.Variable)
			}
			if v, ok = m[part]; !ok {
				return nil, fmt.Errorf("variable %q is not set", jp.ValueFrom.Variable)
			}
		}
		return v, nil
	case jp.ValueFrom != nil && jp.ValueFrom.Template != "":
		text, err := e.render(jp.ValueFrom.Template, vars)
		if err != nil {
			return nil, err
		}
		var v any
		return v, yaml.Unmarshal([]byte(text), &v)
	}
	return nil, nil
}

// evaluation is the budget one DesiredInfraCluster call spends over all the
// templates it renders. It runs on the caller's goroutine only: a bound
// stops the template there, so nothing is left running.
type evaluation struct {
	ctx        context.Context
	funcs      template.FuncMap // what templates may call, guarded
	hooks      template.FuncMap // what instrument inserts; unknown at parse time
	iterations int
	depth      int
	allocated  int
	stop       error // the first bound that tripped
}

func newEvaluation(ctx context.Context) *evaluation {
	e := &evaluation{ctx: ctx, funcs: template.FuncMap{}}
	for name, fn := range templateFuncs {
		e.funcs[name] = e.guard(name, fn)
	}
	e.hooks = template.FuncMap{hookTick: e.tick, hookEnter: e.enter, hookLeave: e.leave}
	return e
}

// trip records the first bound that stopped the evaluation: text/template
// wraps or replaces the errors it gets, so this is what render reports.
func (e *evaluation) trip(err error) error {
	if e.stop == nil {
		e.stop = err
	}
	return e.stop
}

func (e *evaluation) render(text string, vars map[string]any) (string, error) {
	if e.stop != nil {
		return "", e.stop
	}
	// Parse without the hooks, so that a template cannot call them.
	t, err := template.New("patch").Funcs(e.funcs).Parse(text)
	if err != nil {
		return "", err
	}
	t.Funcs(e.hooks)
	for _, d := range t.Templates() {
		instrument(d.Tree)
	}
	out := &limitedWriter{limit: MaxOutputBytes}
	switch err = t.Execute(out, vars); {
	case e.stop != nil:
		return "", e.stop
	case out.full:
		return "", e.trip(bounded("the template wrote more than %d bytes", MaxOutputBytes))
	case err != nil:
		return "", err
	}
	return out.String(), nil
}

// limitedWriter fails once more than limit bytes are written: the write
// error stops Execute.
type limitedWriter struct {
	strings.Builder
	limit int
	full  bool
}

var errFull = errors.New("output bound reached")

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > w.limit {
		w.full = true
		return 0, errFull
	}
	return w.Builder.Write(p)
}

// The hooks instrument inserts. They are added after parsing, so a template
// that names one (to leave a frame it never entered) fails to parse.
const (
	hookTick  = "classpatchesTick"
	hookEnter = "classpatchesEnter"
	hookLeave = "classpatchesLeave"
)

// instrument makes a parsed template stoppable, since text/template has no
// context: a tick starts every {{range}} body, and enter and leave frame
// every template, so that each {{template}} call ticks and nests.
func instrument(tree *parse.Tree) {
	if tree == nil || tree.Root == nil {
		return
	}
	root := tree.Root
	instrumentList(root)
	root.Nodes = append([]parse.Node{hookAction(hookEnter, root.Pos)}, root.Nodes...)
	root.Nodes = append(root.Nodes, hookAction(hookLeave, root.Pos))
}

func instrumentList(list *parse.ListNode) {
	if list == nil {
		return
	}
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.IfNode:
			instrumentList(n.List)
			instrumentList(n.ElseList)
		case *parse.WithNode:
			instrumentList(n.List)
			instrumentList(n.ElseList)
		case *parse.RangeNode:
			instrumentList(n.List)
			instrumentList(n.ElseList) // runs once: no tick
			if n.List != nil {
				n.List.Nodes = append([]parse.Node{hookAction(hookTick, n.Pos)}, n.List.Nodes...)
			}
		}
	}
}

func hookAction(name string, pos parse.Pos) *parse.ActionNode {
	call := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos,
		Args: []parse.Node{&parse.IdentifierNode{NodeType: parse.NodeIdentifier, Pos: pos, Ident: name}}}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos,
		Pipe: &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{call}}}
}

// tick spends one iteration; a function that returns an error stops Execute.
func (e *evaluation) tick() (string, error) {
	if e.ctx.Err() != nil {
		return "", e.trip(e.deadline())
	}
	if e.iterations >= MaxIterations {
		return "", e.trip(bounded("the template ran past %d iterations", MaxIterations))
	}
	e.iterations++
	return "", nil
}

func (e *evaluation) deadline() error {
	cause := context.Cause(e.ctx)
	return &boundError{what: fmt.Sprintf("%v after %d iterations", cause, e.iterations), cause: cause}
}

func (e *evaluation) enter() (string, error) {
	if e.depth >= MaxTemplateDepth {
		return "", e.trip(bounded("{{template}} calls nested deeper than %d", MaxTemplateDepth))
	}
	e.depth++
	return e.tick()
}

func (e *evaluation) leave() string {
	e.depth--
	return ""
}

// templateFuncs are sprig's hermetic functions, as CAPI offers them, but
// the cryptographic ones (key and certificate generation, scrypt, bcrypt:
// seconds of CPU or tens of MB in one call nothing can interrupt, and no
// use in an OpenStackCluster's network), and the builtins that format their
// arguments, so that the guard sees those too (a FuncMap entry takes
// precedence over a builtin). A class that calls a crypto function cannot
// be evaluated here: its node subnet is checked before the share.
var templateFuncs = func() template.FuncMap {
	fm := sprig.HermeticTxtFuncMap()
	for _, name := range []string{"bcrypt", "htpasswd", "genPrivateKey", "derivePassword", "buildCustomCert", "genCA", "genCAWithKey",
		"genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey", "encryptAES", "decryptAES"} {
		delete(fm, name)
	}
	fm["print"], fm["printf"], fm["println"] = fmt.Sprint, fmt.Sprintf, fmt.Sprintln
	fm["html"], fm["js"], fm["urlquery"] = template.HTMLEscaper, template.JSEscaper, template.URLQueryEscaper
	return fm
}()

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
		if err := e.after(name, out[0]); err != nil {
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
		if c.cost(args) > c.limit {
			return e.trip(bounded("%s would %s", name, c.what))
		}
	}
	return nil
}

func (e *evaluation) after(name string, result reflect.Value) error {
	size, _ := measure(MaxValueBytes, result)
	if size > MaxValueBytes {
		return e.trip(bounded("%s built a value over %d bytes", name, MaxValueBytes))
	}
	if e.allocated += size; e.allocated > MaxAllocatedBytes {
		return e.trip(bounded("template functions built more than %d bytes", MaxAllocatedBytes))
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
	what  string // for the error: "<function> would <what>"
	cost  func(args []reflect.Value) float64
}

func elements(cost func([]reflect.Value) float64) precheck {
	return precheck{MaxListLen, fmt.Sprintf("build more than %d elements", MaxListLen), cost}
}

func bytesOut(cost func([]reflect.Value) float64) precheck {
	return precheck{MaxValueBytes, fmt.Sprintf("build more than %d bytes", MaxValueBytes), cost}
}

func steps(cost func([]reflect.Value) float64) precheck {
	return precheck{MaxCallWork, fmt.Sprintf("take more than %d steps", MaxCallWork), cost}
}

// prechecks are the functions (sprig v3.3.0's and fmt's) whose cost is not
// bounded by the size of their arguments: a number, a width, a separator
// repeated per element, or a product of two inputs. Arguments are indexed
// as the functions declare them.
var prechecks = map[string][]precheck{
	"until":            {elements(func(a []reflect.Value) float64 { return span(0, a[0].Int(), sign(a[0].Int())) })},
	"untilStep":        {elements(func(a []reflect.Value) float64 { return span(a[0].Int(), a[1].Int(), a[2].Int()) })},
	"seq":              {elements(seqLen)},
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
	// Go's regexp is linear in the text, times the size of the expression.
	"regexMatch":                 {steps(regexWork)},
	"mustRegexMatch":             {steps(regexWork)},
	"regexFind":                  {steps(regexWork)},
	"mustRegexFind":              {steps(regexWork)},
	"regexFindAll":               {steps(regexWork)},
	"mustRegexFindAll":           {steps(regexWork)},
	"regexSplit":                 {steps(regexWork)},
	"mustRegexSplit":             {steps(regexWork)},
	"regexReplaceAll":            {steps(regexWork), bytesOut(regexReplaced)},
	"mustRegexReplaceAll":        {steps(regexWork), bytesOut(regexReplaced)},
	"regexReplaceAllLiteral":     {steps(regexWork), bytesOut(regexReplaced)},
	"mustRegexReplaceAllLiteral": {steps(regexWork), bytesOut(regexReplaced)},
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
// (%[1]s) and pad it to its width; fmt caps a width or a `*` at 1e6.
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
	return float64(len(format)) + widths + float64(strings.Count(format, "%"))*float64(args)
}

// prettyJSON: toPrettyJson indents each line by two spaces per level.
func prettyJSON(a []reflect.Value) float64 {
	size, depth := measure(MaxValueBytes, a[0])
	return float64(size) * float64(1+2*depth)
}

// regexWork: regexp matches in time linear in the text times the size of
// the expression.
func regexWork(a []reflect.Value) float64 {
	return float64(a[0].Len()) * float64(a[1].Len()+1)
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

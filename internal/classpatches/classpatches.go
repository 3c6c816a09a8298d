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
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

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

	// MaxAllocatedBytes bounds what template functions build and what is
	// decoded over one evaluation, garbage included, so that values kept in
	// many variables cannot add up: a patch builds kilobytes, and the
	// MaxConcurrentEvaluations evaluations, holding this much each, stay in
	// tens of MiB of heap with the GC's slack (the extension requests 128 Mi).
	MaxAllocatedBytes = 8 << 20

	// MaxConcurrentEvaluations is how many evaluations run at once; another
	// waits for one to end, at most MaxEvaluationTime (what one can take)
	// and as long as its context allows. Each holds up to MaxAllocatedBytes
	// and a core: the extension runs on nodes of a few cores.
	MaxConcurrentEvaluations = 2

	// MaxListLen bounds the lists functions build from a number or cut from
	// a text (until, untilStep, seq, split, regexFindAll, chunk): 10,000
	// covers any count of subnets, pools or addresses.
	MaxListLen = 10_000

	// MaxCallWork bounds one call whose cost is the product of its inputs
	// (uniq, without, trimAll, regular expressions): nothing interrupts a
	// running call, and 4M steps is well under a tenth of a second.
	MaxCallWork = 1 << 22

	// MaxTemplateBytes bounds a template's text, as CAPI's CRD does
	// (valueFrom.template; enabledIf has 256): text/template's parse tree
	// takes up to 80 times the text (4 MiB for 64 KiB of {{.}}).
	MaxTemplateBytes = 10_240

	// MaxDecodedNodes bounds the values of one decoded JSON or YAML text (a
	// variable, a literal value, a rendered template, fromJson): YAML takes
	// up to 400 bytes to decode a value from 2 bytes of text, and a patch
	// value has tens of them.
	MaxDecodedNodes = 10_000

	// MaxRegexBytes bounds a regular expression's text: a patch's
	// expression is a line, and parsing takes up to 4 KB a byte (\pL).
	MaxRegexBytes = 1 << 10

	// MaxRegexSize bounds what an expression compiles to (instructions and
	// class ranges, a{n} n times): regexp takes about 100 bytes for each,
	// and \pL alone has 1,300 ranges.
	MaxRegexSize = 10_000

	// MaxOperands bounds addf, subf, mulf and divf, whose exact decimals
	// grow with every operand: a sum or product in a patch has a few.
	MaxOperands = 100

	// MaxVersionBytes bounds the texts of semver and semverCompare: parsing
	// a constraint takes 100 times its text, and time quadratic in it.
	MaxVersionBytes = 1 << 10

	// MaxPatchOperations bounds the JSON patch operations one evaluation
	// applies: a class has tens.
	MaxPatchOperations = 1_000

	// MaxDocumentBytes bounds the patched OpenStackClusterTemplate as JSON,
	// so what each patch may add: the API server stores at most 1.5 MiB.
	MaxDocumentBytes = 3 << 19

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
// The templates run with bounds (time, iterations, what template functions
// build, what is decoded, the patched document), at most
// MaxConcurrentEvaluations at once: an error matching ErrBounded means a
// bound stopped them, not that the class is wrong.
func DesiredInfraCluster(ctx context.Context, cc *clusterv1.ClusterClass, tmpl *infrav1.OpenStackClusterTemplate, cluster *clusterv1.Cluster) (infrav1.OpenStackClusterSpec, error) {
	done, err := start(ctx)
	if err != nil {
		return infrav1.OpenStackClusterSpec{}, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, MaxEvaluationTime)
	defer cancel()
	e := newEvaluation(ctx)
	vars, err := e.variables(cc, cluster)
	if err != nil {
		return infrav1.OpenStackClusterSpec{}, err
	}
	doc, err := json.Marshal(tmpl)
	if err != nil {
		return infrav1.OpenStackClusterSpec{}, err
	}
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

// running holds a token for each evaluation under way.
var running = make(chan struct{}, MaxConcurrentEvaluations)

// queueWait is how long an evaluation waits for another to end: as long
// as one can run. A variable for the tests.
var queueWait = MaxEvaluationTime

// start takes one of the MaxConcurrentEvaluations places, waiting at most
// queueWait and as long as ctx allows; done gives it back. A free place is
// taken even when ctx is done: the evaluation then stops at its first step.
func start(ctx context.Context) (done func(), err error) {
	done = func() { <-running }
	select {
	case running <- struct{}{}:
		return done, nil
	default:
	}
	timer := time.NewTimer(queueWait)
	defer timer.Stop()
	select {
	case running <- struct{}{}:
		return done, nil
	case <-ctx.Done():
		cause := context.Cause(ctx)
		return nil, &boundError{cause: cause,
			what: fmt.Sprintf("%v while waiting: %d evaluations were running, the most at once", cause, MaxConcurrentEvaluations)}
	case <-timer.C:
		return nil, bounded("%d evaluations were running, the most at once, and none ended within %s", MaxConcurrentEvaluations, queueWait)
	}
}

// variables are the class's defaults, the Cluster's values over them, and
// builtin.cluster.
func (e *evaluation) variables(cc *clusterv1.ClusterClass, cluster *clusterv1.Cluster) (map[string]any, error) {
	vars := map[string]any{}
	for _, v := range cc.Spec.Variables {
		if d := v.Schema.OpenAPIV3Schema.Default; d != nil {
			value, err := e.decodeJSON(d.Raw)
			if errors.Is(err, ErrBounded) {
				return nil, fmt.Errorf("spec.variables[%s] default: %w", v.Name, err)
			}
			if err == nil {
				vars[v.Name] = value
			}
		}
	}
	for _, v := range cluster.Spec.Topology.Variables {
		value, err := e.decodeJSON(v.Value.Raw)
		if err != nil {
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
// doc, if p's enabledIf renders "true"; a patch with none is not rendered.
func (e *evaluation) applyPatch(doc []byte, p clusterv1.ClusterClassPatch, vars map[string]any) ([]byte, error) {
	var defs []clusterv1.PatchDefinition
	for _, d := range p.Definitions {
		if d.Selector.Kind == "OpenStackClusterTemplate" && d.Selector.MatchResources.InfrastructureCluster != nil && *d.Selector.MatchResources.InfrastructureCluster {
			defs = append(defs, d)
		}
	}
	if len(defs) == 0 {
		return doc, nil
	}
	if p.EnabledIf != "" {
		enabled, err := e.render(p.EnabledIf, vars)
		if err != nil {
			return nil, fmt.Errorf("patch %q enabledIf: %w", p.Name, err)
		}
		if strings.TrimSpace(enabled) != "true" {
			return doc, nil
		}
	}
	for _, d := range defs {
		raw, err := e.jsonPatch(p.Name, d.JSONPatches, vars, MaxDocumentBytes-len(doc))
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

// maxPathBytes is CAPI's bound on a JSON patch's path: json-patch splits a
// path at every "/".
const maxPathBytes = 512

// jsonPatch is the RFC 6902 document of a definition's patches, values
// resolved, in at most room bytes: add and replace grow the document by
// their value at most, and a variable can be the value of every operation.
// Only CAPI's ops: a copy would repeat what the document holds.
func (e *evaluation) jsonPatch(name string, jps []clusterv1.JSONPatch, vars map[string]any, room int) ([]byte, error) {
	if e.operations += len(jps); e.operations > MaxPatchOperations {
		return nil, e.trip(bounded("the class's patches have more than %d operations on the OpenStackClusterTemplate", MaxPatchOperations))
	}
	ops := make([]map[string]any, 0, len(jps))
	for _, jp := range jps {
		if (jp.Op != "add" && jp.Op != "replace" && jp.Op != "remove") || len(jp.Path) > maxPathBytes {
			return nil, fmt.Errorf("patch %q (%.20s %.100s): CAPI allows the ops add, replace and remove, and paths of at most %d bytes", name, jp.Op, jp.Path, maxPathBytes)
		}
		op := map[string]any{"op": jp.Op, "path": jp.Path}
		value, err := e.patchValue(jp, vars)
		if err != nil {
			return nil, fmt.Errorf("patch %q %s (%s %s): %w", name, valueField(jp), jp.Op, jp.Path, err)
		}
		if jp.Op != "remove" {
			op["value"] = value
		}
		if room -= opBytes + len(jp.Path) + jsonBound(value); room < 0 {
			return nil, e.trip(bounded("with patch %q (%s %s), the OpenStackClusterTemplate may be over %d bytes of JSON", name, jp.Op, jp.Path, MaxDocumentBytes))
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
		return e.decodeJSON(jp.Value.Raw)
	case jp.ValueFrom != nil && jp.ValueFrom.Variable != "":
		var v any = vars
		for part, rest, more := "", jp.ValueFrom.Variable, true; more; {
			part, rest, more = strings.Cut(rest, ".")
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
		return e.decodeYAML(text)
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
	allocated  int   // bytes built by template functions and decoded
	operations int   // JSON patch operations
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
	if len(text) > MaxTemplateBytes {
		return "", e.trip(bounded("the template is %d bytes, more than %d", len(text), MaxTemplateBytes))
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

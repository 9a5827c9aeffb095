package fork

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/internal/valuepath"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// Class says how a variant compares with its base, the fork's changes taken
// as intended: a prompt change that shows in the request it patched is not a
// regression, the model answering otherwise is. [Variant.Class] holds it.
type Class string

// The classes of a variant.
const (
	// ClassUnchanged: the variant behaved as the base did (a difference
	// that a user matcher accepts is not one).
	ClassUnchanged Class = "unchanged"
	// ClassIntended: the runs differ only where an intended change applies
	// (the requests a prompt change patched, the fields [CodeFields] names,
	// a substituted result, a forced decision or parameter); everything the
	// agent did is the same.
	ClassIntended Class = "intended"
	// ClassChanged: the behavior changed. [diff.Result.BehaviorChange] of
	// [Variant.Diff] is where it first did.
	ClassChanged Class = "changed"
	// ClassRepaired: the base run failed and the variant completed.
	ClassRepaired Class = "repaired"
)

// codeFields marks fields of the calls of a target as code, not behavior.
type codeFields struct {
	target string
	fields []string
}

// CodeFields marks fields of the input of the calls of target (a node, a
// model label or model, a tool, or [All]) as code, not behavior: a request
// that differs from the recorded one only in them differs because the code
// changed (an edited prompt, a renamed tool description), so the variant is
// [ClassIntended] where the call's answer and everything after it are the
// same. The call still runs (its answer may differ), unlike under a user
// matcher, which serves the recorded answer.
//
// Fields are paths into the call's input, as the run diff prints them
// without the leading "input.": "system", "messages[0].content",
// "tools[*].description" ("*" for every element or member). CodeFields
// changes nothing about the run: it only says what a difference means,
// for [Variant.Class] and the diff's marks.
//
//	fork.CodeFields(fork.All, "system", "messages[0].content")
func CodeFields(target string, fields ...string) Change {
	return codeFields{target: target, fields: slices.Clone(fields)}
}

func (c codeFields) applyRun(cfg *config)  { addChange(cfg, c) }
func (c codeFields) applyEach(cfg *config) { addChange(cfg, c) }

// Describe is "code fields system, messages[0].content of '*'".
func (c codeFields) Describe() string {
	return fmt.Sprintf("code fields %s of '%s'", strings.Join(c.fields, ", "), c.target)
}

// Wire is {"kind":"code_fields","target":…,"fields":[…]}.
func (c codeFields) Wire() trace.Value {
	fs := make([]trace.Value, len(c.fields))
	for i, f := range c.fields {
		fs[i] = trace.StringValue(f)
	}
	arr, _ := trace.ArrayValue(fs...)
	return obj("kind", trace.StringValue("code_fields"), "target", trace.StringValue(c.target), "fields", arr)
}

func parseCodeFields(f *wireFields) Change {
	c := codeFields{target: f.str("target", false)}
	fs := f.get("fields")
	if fs.Kind() != trace.Array {
		f.fail("%q must be an array of paths", "fields")
		return c
	}
	for _, e := range fs.Elems() {
		s, ok := e.Str()
		if !ok {
			f.fail("%q must be an array of paths", "fields")
		}
		c.fields = append(c.fields, s)
	}
	return c
}

func (c codeFields) bind(ix *index, _ Resolved, fresh bool) (*bound, error) {
	switch {
	case c.target == "":
		return nil, changeErrf(c.Describe(), "the target is empty: name a node, a model, a tool, or fork.All")
	case len(c.fields) == 0:
		return nil, changeErrf(c.Describe(), "no field is named: give paths such as \"system\" or \"messages[0].content\"")
	case !fresh && c.target != All && len(ix.nodes[c.target]) == 0 && len(ix.calls[callKey(replay.KindLLM, c.target)]) == 0 && len(ix.calls[callKey(replay.KindTool, c.target)]) == 0:
		return nil, changeErrf(c.Describe(), "no node, model or tool '%s' in the base run. Nodes that ran: %s; models called: %s. If the changed tail reaches it for the first time, wrap the change in fork.NewInTail.",
			c.target, nameList(ix.nodeOrder), nameList(ix.modelNames()))
	}
	b := &bound{change: c, kind: ckCode, desc: c.Describe(), label: c.target}
	for _, f := range c.fields {
		p, err := valuepath.Parse(f)
		if err != nil {
			return nil, changeErrf(c.Describe(), "%v", err)
		}
		b.paths = append(b.paths, p)
	}
	return b, nil
}

// classify marks the variant's diff with what explains each difference and
// sets its class. changes are the variant's bound changes; the code fields
// among them count as applied where they explain a difference.
func (p *forkPlan) classify(v *Variant, changes []*bound, ms []replay.Matcher) {
	if v.Diff == nil {
		return
	}
	v.Diff.Mark(func(s *diff.Step) (string, string) {
		if why := p.ix.intended(s, changes, ms); why != "" {
			return "", why
		}
		return p.ix.matched(s, ms), ""
	})
	v.Class = classOf(v.Base, v.Trace, v.Diff)
	v.ix, v.bound, v.matchers = p.ix, changes, ms
}

// matched names the user matchers through which a differing call step's
// input matches its base step's, when the input is all that differs; "".
func (ix *index) matched(s *diff.Step, ms []replay.Matcher) string {
	if len(ms) == 0 || s.Kind != diff.Changed || s.Base == nil || s.Variant == nil || s.Base.Type != s.Variant.Type ||
		s.Base.Label != s.Variant.Label || (s.Base.Type != trace.StepLLM && s.Base.Type != trace.StepTool) {
		return ""
	}
	for _, c := range s.Changes {
		if topField(c.Path) != "input" {
			return ""
		}
	}
	cs, ok := ix.site(s.Base.EventID)
	if !ok {
		return ""
	}
	by, _ := cs.same(ms, s.Base.Payload.Get("input"), s.Variant.Payload.Get("input"))
	return by
}

// same reports whether live matches recorded for the call at cs through
// the matchers ms.
func (cs callSite) same(ms []replay.Matcher, recorded, live trace.Value) (string, bool) {
	kind := replay.KindTool
	if cs.kind == "llm" {
		kind = replay.KindLLM
	}
	return replay.Matched(ms, kind, cs.label, cs.provider, cs.model, recorded, live)
}

// BehaviorChange returns where the variant first behaved otherwise than its
// base ([diff.Result.BehaviorChange] of its Diff), with the step's field
// changes that its intended changes do not account for first: for a model
// call whose request a prompt change patched and whose answer then changed,
// the answer. It is nil when the variant behaved as its base did, but for
// where its changes apply.
func (v *Variant) BehaviorChange() *diff.Divergence {
	if v.Diff == nil {
		return nil
	}
	dv := v.Diff.BehaviorChange()
	if dv == nil || len(dv.Changes) == 0 || v.ix == nil || dv.Kind != diff.Changed ||
		dv.Base.Type != dv.Variant.Type || dv.Base.Label != dv.Variant.Label || (dv.Base.Type != trace.StepLLM && dv.Base.Type != trace.StepTool) {
		return dv
	}
	cs, ok := v.ix.site(dv.Base.EventID)
	if !ok {
		return dv
	}
	_, ok = explainInput(cs, v.bound, v.matchers, dv.Base.Payload.Get("input"), dv.Variant.Payload.Get("input"), dv.Variant.Label)
	if _, matched := cs.same(v.matchers, dv.Base.Payload.Get("input"), dv.Variant.Payload.Get("input")); !ok && !matched {
		return dv
	}
	out := *dv
	out.Changes = make([]diff.Change, 0, len(dv.Changes))
	for _, c := range dv.Changes {
		if topField(c.Path) != "input" {
			out.Changes = append(out.Changes, c)
		}
	}
	for _, c := range dv.Changes {
		if topField(c.Path) == "input" {
			out.Changes = append(out.Changes, c)
		}
	}
	return &out
}

// classOf is the class of variant against base, whose diff d is marked.
func classOf(base, variant *trace.Trace, d *diff.Result) Class {
	switch {
	case base.Status == trace.RunFailed && variant.Status == trace.RunCompleted:
		return ClassRepaired
	case d.BehaviorChange() != nil:
		return ClassChanged
	case d.Intended > 0:
		return ClassIntended
	}
	return ClassUnchanged
}

// callSite is what a change's target is matched against for a base call.
type callSite struct {
	kind                         string // "tool" or "llm"
	node, label, provider, model string
	occ                          int
}

// site is the call site of the base event with the given id.
func (ix *index) site(id string) (callSite, bool) {
	i, ok := ix.ids.Lookup(id)
	if !ok {
		return callSite{}, false
	}
	ev := &ix.tr.Events[i]
	cs := callSite{node: ix.innermostNode(int(i)), occ: int(ix.occ[i])}
	switch ev.Type {
	case trace.LLMRequest:
		cs.kind, cs.provider, cs.model, cs.label = "llm", ev.Provider, ev.Model, trace.LLMLabel(ev.Provider, ev.Model)
	case trace.ToolCall:
		cs.kind, cs.label = "tool", ev.Name
	default:
		return callSite{}, false
	}
	return cs, true
}

// codeMatches reports whether a code-fields change b applies to a call at cs.
func (b *bound) codeMatches(cs callSite) bool {
	return b.label == All || b.label == cs.label || cs.node != "" && b.label == cs.node || cs.kind == "llm" && b.label == cs.model
}

// intended explains a differing step by the changes: the descriptions of
// the changes that account for every difference of the step, or "" when
// some difference is a change of behavior.
func (ix *index) intended(s *diff.Step, changes []*bound, ms []replay.Matcher) string {
	if s.Kind != diff.Changed || s.Base == nil || s.Variant == nil || s.Base.Type != s.Variant.Type {
		return ""
	}
	fields := map[string]bool{}
	for _, c := range s.Changes {
		fields[topField(c.Path)] = true
	}
	bp, vp := s.Base.Payload, s.Variant.Payload
	var why []*bound
	explain := func(bs ...*bound) {
		for _, b := range bs {
			if !slices.Contains(why, b) {
				why = append(why, b)
			}
		}
	}
	switch s.Base.Type {
	case trace.StepLLM, trace.StepTool:
		cs, ok := ix.site(s.Base.EventID)
		if !ok {
			return ""
		}
		if s.Base.Label != s.Variant.Label || fields["input"] {
			bs, ok := explainInput(cs, changes, ms, bp.Get("input"), vp.Get("input"), s.Variant.Label)
			if !ok {
				return ""
			}
			explain(bs...)
		}
		if fields["output"] || fields["status"] {
			kind := ckToolResult
			if cs.kind == "llm" {
				kind = ckLLMResponse
			}
			b := substitution(changes, kind, cs, vp.Get("output"))
			if b == nil {
				return ""
			}
			explain(b)
		}
		for f := range fields {
			if f != "input" && f != "output" && f != "status" {
				return ""
			}
		}
	case trace.StepParam, trace.StepDecision:
		want := ckParam
		if s.Base.Type == trace.StepDecision {
			want = ckDecision
			if k, _ := vp.Get("kind").Str(); k == string(trace.KindApproval) {
				want = ckHuman
			}
		}
		var hit *bound
		for _, b := range changes {
			if b.kind == want && (b.name == s.Base.Label || want == ckHuman && b.name == "") && sanitized(b.value) == vp.Get("value") {
				hit = b
				break
			}
		}
		for f := range fields {
			if f != "value" || hit == nil {
				return ""
			}
		}
		explain(hit)
	default:
		return ""
	}
	if len(why) == 0 {
		return ""
	}
	descs := make([]string, len(why))
	for i, b := range why {
		descs[i] = b.desc
		if b.kind == ckCode {
			b.hit(s.Variant.Step) // code fields act only here
		}
	}
	return strings.Join(descs, "; ")
}

// explainInput explains the difference between a base call's input and the
// variant's (whose label is label): the request changes applied to the
// base's input give the variant's, once the code fields of the call are
// left out of both, up to what the user matchers ms accept. It returns the
// changes that account for it.
func explainInput(cs callSite, changes []*bound, ms []replay.Matcher, base, variant trace.Value, label string) ([]*bound, bool) {
	patched, model, acted := base, cs.model, []*bound(nil)
	if cs.kind == "llm" {
		patched, model, acted = requestPatch(changes, cs.node, cs.label, cs.provider, cs.model, base)
	}
	if cs.kind == "llm" && trace.LLMLabel(cs.provider, model) != label || cs.kind == "tool" && label != cs.label {
		return nil, false // another model than any change asks for
	}
	var used []*bound
	for _, b := range acted {
		if b.kind == ckModel || patched != base {
			used = append(used, b)
		}
	}
	if _, ok := cs.same(ms, sanitized(patched), variant); ok {
		return used, len(used) > 0
	}
	dropped, droppedV := patched, variant
	var codes []*bound
	for _, b := range changes {
		if b.kind != ckCode || !b.codeMatches(cs) {
			continue
		}
		before, beforeV := dropped, droppedV
		for _, p := range b.paths {
			dropped, droppedV = p.Drop(dropped), p.Drop(droppedV)
		}
		if dropped != before || droppedV != beforeV {
			codes = append(codes, b)
		}
	}
	if len(codes) == 0 {
		return nil, false
	}
	if _, ok := cs.same(ms, sanitized(dropped), sanitized(droppedV)); !ok {
		return nil, false
	}
	return append(used, codes...), true
}

// substitution is the output change of kind among changes that targets the
// call at cs and whose value is output: the change that explains it.
func substitution(changes []*bound, kind ckind, cs callSite, output trace.Value) *bound {
	for _, b := range changes {
		if b.kind != kind || b.label != cs.label && !(kind == ckLLMResponse && b.label == cs.model) || b.occ != 0 && b.occ != cs.occ {
			continue
		}
		if sanitized(b.value) == output {
			return b
		}
	}
	return nil
}

// topField is the payload member a diff path starts with: "input" for
// "input.messages[0].content".
func topField(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

// sanitized is v as a behavior step holds it: redacted, null for absent.
func sanitized(v trace.Value) trace.Value {
	if v.IsAbsent() {
		return trace.NullValue
	}
	r, _ := trace.RedactValue(v)
	return r
}

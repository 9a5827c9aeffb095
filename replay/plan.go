package replay

import (
	"github.com/stepfork/stepfork/trace"
)

// Recorded is one dependency call of the base run as a replay session sees
// it: the call event and what answered it. A Director reads it and must not
// change it.
type Recorded struct {
	// Position is the 1-based number of the call among the base run's
	// dependency calls (tool_call and llm_request events, in file order).
	Position int
	Kind     CallKind
	// Label is the tool name, or provider/model for a model call.
	Label string
	// Call is the tool_call or llm_request event.
	Call *trace.Event
	// Result is the tool_result or llm_response event; nil when the call
	// failed without one (a failed model call) or has no captured result.
	Result *trace.Event
	// Failure is the error event describing a recorded failure, if any.
	Failure *trace.Event
	// Status is the status of the result: ok, error, or skipped when no
	// result was captured.
	Status trace.Status
	// Output is the recorded output (the result's output; null for a failed
	// model call).
	Output trace.Value
	// ErrorType and Message describe a recorded failure (Status error).
	ErrorType, Message string
	// Missing reports that no result was captured for the call.
	Missing bool
}

// rec is a recorded call with the session's bookkeeping.
type rec struct {
	Recorded
	event    int    // index of Call in the base events
	fp       string // hash of the recorded input (computed when needed)
	consumed bool   // matched by a call of this run
	skipped  bool   // nested under a served call: its body never ran
}

// markerRec is a recorded runtime marker.
type markerRec struct {
	ev       *trace.Event
	m        trace.Marker
	consumed bool
}

// plan is the index a replay session serves from: the recorded calls in
// order, the markers by key and name, and the parent/child links needed to
// skip what was nested under a served call. Built once per session in time
// linear in the trace.
type plan struct {
	base     *trace.Trace
	calls    []rec
	callAt   map[int]int // base event index → index in calls
	markers  []markerRec
	markerAt map[int]int      // base event index → index in markers
	queues   map[string][]int // marker key + "\x00" + name → indexes in markers, in order
	next     map[string]int   // next position to look at in each queue
	children [][]int          // base event index → indexes of its children
	cursor   int              // calls before cursor are all consumed or skipped
	left     int              // calls neither consumed nor skipped
	rootID   string
	index    map[string]int // event id → index of its first event with that id
	paths    []string       // scope path of each event (see scopePath), computed on demand
	pathDone []bool
	reasons  map[[2]string]string // (event id, path) → reason of the base's redaction entries
}

// entry is the redactions.json entry for a path redacted in a base event
// (reason sensitive_key when the base lists none).
func (p *plan) entry(eventID, path string) trace.RedactionEntry {
	if p.reasons == nil {
		p.reasons = make(map[[2]string]string, len(p.base.Redactions))
		for _, e := range p.base.Redactions {
			p.reasons[[2]string{e.EventID, e.Path}] = e.Reason
		}
	}
	reason := p.reasons[[2]string{eventID, path}]
	if reason == "" {
		reason = trace.ReasonSensitiveKey
	}
	return trace.RedactionEntry{EventID: eventID, Path: path, Reason: reason, Replacement: trace.Redacted}
}

func queueKey(key, name string) string { return key + "\x00" + name }

// newPlan builds the expected call list of stepfork-format.md §5.3. Nesting is
// handled when a call is served (its descendants are skipped), which gives the
// same list as stepfork's static pruning for frozen and hybrid replays and
// keeps every call in live ones.
func newPlan(base *trace.Trace) *plan {
	evs := base.Events
	p := &plan{
		base:     base,
		callAt:   map[int]int{},
		markerAt: map[int]int{},
		queues:   map[string][]int{},
		next:     map[string]int{},
		children: make([][]int, len(evs)),
	}
	index := make(map[string]int, len(evs))
	p.index = index
	for i := range evs {
		if _, dup := index[evs[i].ID]; !dup {
			index[evs[i].ID] = i
		}
	}
	for i := range evs {
		if j, ok := index[evs[i].ParentID]; ok && evs[i].ParentID != "" && j < i {
			p.children[j] = append(p.children[j], i)
		}
	}
	paired := make([]bool, len(evs))
	for i := range evs {
		ev := &evs[i]
		switch {
		case ev.Type == trace.RunStart && p.rootID == "":
			p.rootID = ev.ID
		case ev.Type == trace.ToolCall:
			r := rec{event: i}
			r.Kind, r.Label, r.Call = KindTool, ev.Name, ev
			res := p.firstChild(i, trace.ToolResult)
			if res < 0 {
				res = legacyResult(evs, i, paired)
			}
			if res >= 0 {
				paired[res] = true
				r.Result = &evs[res]
				r.Status, r.Output = r.Result.Status, r.Result.Output
				if r.Status == trace.StatusError {
					if e := p.firstChild(res, trace.ErrorEvent); e >= 0 {
						r.Failure = &evs[e]
						r.ErrorType, r.Message = evs[e].ErrorType, evs[e].Message
					} else {
						r.ErrorType, _ = r.Output.Get("error_type").Str()
						r.Message, _ = r.Output.Get("message").Str()
					}
				}
			} else {
				r.Missing, r.Status = true, trace.StatusSkipped
			}
			p.addCall(r)
		case ev.Type == trace.LLMRequest:
			r := rec{event: i}
			r.Kind, r.Label, r.Call = KindLLM, trace.LLMLabel(ev.Provider, ev.Model), ev
			if res := p.firstChild(i, trace.LLMResponse); res >= 0 {
				r.Result = &evs[res]
				r.Status, r.Output = r.Result.Status, r.Result.Output
			} else if e := p.firstChild(i, trace.ErrorEvent); e >= 0 {
				r.Failure = &evs[e]
				r.Status, r.Output = trace.StatusError, trace.NullValue
				r.ErrorType, r.Message = evs[e].ErrorType, evs[e].Message
			} else {
				r.Missing, r.Status = true, trace.StatusSkipped
			}
			p.addCall(r)
		case ev.IsMarker():
			m, _ := ev.Marker()
			if m.Key == trace.MarkerNode && m.Phase != trace.PhaseEnter {
				continue
			}
			p.markerAt[i] = len(p.markers)
			k := queueKey(m.Key, m.Name)
			p.queues[k] = append(p.queues[k], len(p.markers))
			p.markers = append(p.markers, markerRec{ev: ev, m: m})
		}
	}
	p.left = len(p.calls)
	return p
}

func (p *plan) addCall(r rec) {
	r.Position = len(p.calls) + 1
	p.callAt[r.event] = len(p.calls)
	p.calls = append(p.calls, r)
}

// firstChild is the index of the first child of event i with type t, or -1.
func (p *plan) firstChild(i int, t trace.EventType) int {
	for _, c := range p.children[i] {
		if p.base.Events[c].Type == t {
			return c
		}
	}
	return -1
}

// legacyResult is stepfork's forward scan for a tool_result without a parent
// link: the first later unpaired result of the same name, unless another call
// of that name comes first.
func legacyResult(evs []trace.Event, call int, paired []bool) int {
	name := evs[call].Name
	for j := call + 1; j < len(evs); j++ {
		ev := &evs[j]
		if ev.Name != name {
			continue
		}
		if ev.Type == trace.ToolCall {
			return -1
		}
		if ev.Type == trace.ToolResult && !paired[j] {
			return j
		}
	}
	return -1
}

// at returns the first call at or after the cursor that is neither consumed
// nor skipped, moving the cursor over the others; nil when none is left.
func (p *plan) at() *rec {
	for p.cursor < len(p.calls) {
		r := &p.calls[p.cursor]
		if !r.consumed && !r.skipped {
			return r
		}
		p.cursor++
	}
	return nil
}

// consume marks r matched.
func (p *plan) consume(r *rec) {
	if !r.consumed && !r.skipped {
		r.consumed = true
		p.left--
	}
}

// skipNested marks every call and marker nested under r's call as skipped:
// r was served, so its body (and whatever it called) does not run.
func (p *plan) skipNested(r *rec) {
	stack := append([]int(nil), p.children[r.event]...)
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c, ok := p.callAt[i]; ok {
			cr := &p.calls[c]
			if !cr.consumed && !cr.skipped {
				cr.skipped = true
				p.left--
			}
		}
		if m, ok := p.markerAt[i]; ok {
			p.markers[m].consumed = true
		}
		stack = append(stack, p.children[i]...)
	}
}

// fingerprint is the hash of r's recorded input, computed once.
func (r *rec) fingerprint() string {
	if r.fp == "" {
		r.fp = trace.Hash(inputOf(r.Call))
	}
	return r.fp
}

// inputOf is the input of a call event, null when absent (hashed like any
// value: no "<none>").
func inputOf(ev *trace.Event) trace.Value {
	if ev.Input.IsAbsent() {
		return trace.NullValue
	}
	return ev.Input
}

// match finds the earliest pending call with the given identity and input
// fingerprint; when scoped, only calls made in a scope with the given path
// qualify.
func (p *plan) match(kind CallKind, name, provider, model, fp, path string, scoped bool) *rec {
	for i := p.cursor; i < len(p.calls); i++ {
		r := &p.calls[i]
		if r.consumed || r.skipped || r.Kind != kind {
			continue
		}
		ev := r.Call
		if kind == KindTool && ev.Name != name || kind == KindLLM && (ev.Model != model || ev.Provider != provider) {
			continue
		}
		if scoped && p.scopeOf(r.event) != path {
			continue
		}
		if r.fingerprint() == fp {
			return r
		}
	}
	return nil
}

// scopeOf is the path of the scope event i was recorded in: the labels of
// its enclosing events from the run down ("/node:worker/tool:fetch"), "" at
// top level. Paths, not ids, identify scopes across runs, so calls made in
// two nodes of the same name are told apart only by their order.
func (p *plan) scopeOf(i int) string {
	j, ok := p.index[p.base.Events[i].ParentID]
	if !ok || j >= i || p.base.Events[i].ParentID == "" {
		return ""
	}
	return p.pathOf(j)
}

// pathOf is the scope path inside event i.
func (p *plan) pathOf(i int) string {
	if p.paths == nil {
		p.paths, p.pathDone = make([]string, len(p.base.Events)), make([]bool, len(p.base.Events))
	}
	if p.pathDone[i] {
		return p.paths[i]
	}
	ev := &p.base.Events[i]
	var path string
	if ev.Type != trace.RunStart {
		path = p.scopeOf(i) + "/" + scopeLabel(ev)
	}
	p.paths[i], p.pathDone[i] = path, true
	return path
}

// scopeLabel names an event as a scope: "node:<name>", "tool:<name>",
// "llm:<provider/model>".
func scopeLabel(ev *trace.Event) string {
	switch {
	case ev.Type == trace.ToolCall:
		return "tool:" + ev.Name
	case ev.Type == trace.LLMRequest:
		return "llm:" + trace.LLMLabel(ev.Provider, ev.Model)
	case ev.IsMarker():
		m, _ := ev.Marker()
		return "node:" + m.Name
	}
	return string(ev.Type) + ":" + ev.Label()
}

// nextMarker returns the next unconsumed recorded marker with the key and
// name, or nil.
func (p *plan) nextMarker(key, name string) *markerRec {
	k := queueKey(key, name)
	q := p.queues[k]
	for n := p.next[k]; n < len(q); n++ {
		if m := &p.markers[q[n]]; !m.consumed {
			p.next[k] = n
			return m
		}
	}
	p.next[k] = len(q)
	return nil
}

// pending lists the calls neither consumed nor skipped, in order.
func (p *plan) pending() []*rec {
	var out []*rec
	for i := p.cursor; i < len(p.calls); i++ {
		if r := &p.calls[i]; !r.consumed && !r.skipped {
			out = append(out, r)
		}
	}
	return out
}

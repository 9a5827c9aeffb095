package view

import (
	"strings"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/trace"
)

// An item is one line of a run's timeline: a node (a block holding the
// items recorded inside it), a call with its result, a state write,
// a decision, an error, the run's start or end. Calls made concurrently
// under one parent are one group item whose members are shown side by side.
//
// Items are flattened in display order for the page's script (rows) and
// nested for the static markup (Kids, Members).
type item struct {
	Row     int      `json:"i"`           // position in the flattened rows
	Depth   int      `json:"d"`           // nesting depth (0 at top level)
	Kind    string   `json:"k"`           // node, tool, llm, state, decision, approval, param, marker, error, start, run, event, group
	Name    string   `json:"n"`           // tool name, model label, node, key, error type, …
	Status  string   `json:"s,omitempty"` // ok, error, skipped, blocked, running
	Step    int      `json:"st"`          // the step of the item's first event
	EndStep int      `json:"es"`          // the step of its last event
	IDs     []string `json:"ids"`         // the event ids: call, result, error (node: enter, exit)
	Steps   []int    `json:"sts"`         // their steps
	DurMS   *int64   `json:"ms,omitempty"`
	Tokens  int64    `json:"tk,omitempty"`
	Cost    float64  `json:"-"`
	// CostText is Cost as shown (usd.Format), for the script; "" for none.
	CostText string `json:"c,omitempty"`
	Error    string `json:"e,omitempty"` // the error message of a failed call, node or run
	Group    int    `json:"g,omitempty"` // the concurrency group (1-based) of a side-by-side member
	Lane     int    `json:"l,omitempty"` // its position in the group
	Side     string `json:"x,omitempty"` // fork: prefix (served from the recording) or tail (ran live)
	Note     string `json:"nt,omitempty"`
	Preview  string `json:"pv,omitempty"` // a short rendering of the value of a state write, decision or parameter
	// Input and Output are the payloads shown when the item is selected;
	// they live in the page's payload table, not in the rows.
	Input  trace.Value `json:"-"`
	Output trace.Value `json:"-"`
	// PreviewV is the value Preview shows, set from it once redacted.
	PreviewV trace.Value `json:"-"`

	Kids    []*item `json:"-"` // a node's items
	Members []*item `json:"-"` // a group's calls

	firstIndex int // the index of its first event
}

// failed reports whether the item is marked as an error.
func (it *item) failed() bool {
	return it.Status == "error" || it.Status == "blocked" || it.Kind == "error" ||
		(it.Kind == "run" && it.Status == string(trace.RunFailed))
}

// timeline is the structure of one run.
type timeline struct {
	Top  []*item // top-level items in order
	Rows []*item // every item flattened in display order (groups before members)
}

// buildTimeline reads the structure of a run from its events: results,
// responses and failures go with the call they answer, the items recorded
// inside a node (the events whose parent is its enter marker) are its
// children, and calls under one parent whose lifetimes overlap (a call
// starts before the previous one's result) form a group.
//
// A result is the call's first tool_result or llm_response child, else its
// first error child; in bundles without parent links, the first later
// unanswered result of the same name, as trace's diff pairs them.
func buildTimeline(tr *trace.Trace) *timeline {
	evs := tr.Events
	byID := make(map[string]int, len(evs))
	for i := range evs {
		byID[evs[i].ID] = i
	}
	// Markers decoded once.
	marks := make([]*trace.Marker, len(evs))
	for i := range evs {
		if evs[i].IsMarker() {
			if m, ok := evs[i].Marker(); ok {
				marks[i] = &m
			}
		}
	}
	marker := func(i int) (trace.Marker, bool) {
		if m := marks[i]; m != nil {
			return *m, true
		}
		return trace.Marker{}, false
	}
	link := func(i int) int {
		if p, ok := byID[evs[i].ParentID]; ok && p < i {
			return p
		}
		return -1
	}
	// The parent an event is shown under: the nearest node or call it was
	// recorded in (through the result it may hang from); the run's start is
	// not a container, what hangs from it is at the top.
	parents := make([]int32, len(evs))
	for i := range evs {
		p := link(i)
		for p >= 0 {
			ev := &evs[p]
			if ev.Type == trace.ToolCall || ev.Type == trace.LLMRequest {
				break
			}
			if m, ok := marker(p); ok && m.Key == trace.MarkerNode && m.Phase == trace.PhaseEnter {
				break
			}
			if ev.Type == trace.ToolResult || ev.Type == trace.LLMResponse || ev.Type == trace.ErrorEvent {
				p = link(p)
				continue
			}
			p = -1
		}
		parents[i] = int32(p)
	}
	parent := func(i int) int { return int(parents[i]) }
	// Children of each event, in order.
	firstKid := make([]int32, len(evs))
	nextSib := make([]int32, len(evs))
	lastKid := make([]int32, len(evs))
	for i := range evs {
		firstKid[i], nextSib[i], lastKid[i] = -1, -1, -1
	}
	for i := range evs {
		if p := parent(i); p >= 0 {
			if lastKid[p] < 0 {
				firstKid[p] = int32(i)
			} else {
				nextSib[lastKid[p]] = int32(i)
			}
			lastKid[p] = int32(i)
		}
	}
	kids := func(i int, yield func(int) bool) {
		for k := firstKid[i]; k >= 0; k = nextSib[k] {
			if !yield(int(k)) {
				return
			}
		}
	}
	used := make([]bool, len(evs))
	// Which event answers which call, and which marker closes which node:
	// trace's call model, the one rule every consumer uses.
	callAt := make([]int32, len(evs))
	exitOf := make([]int32, len(evs))
	for i := range evs {
		callAt[i], exitOf[i] = -1, -1
	}
	calls := tr.Calls()
	for k := range calls {
		callAt[calls[k].Event] = int32(k)
	}
	for _, n := range tr.Nodes() {
		if n.Enter >= 0 && n.Exit >= 0 {
			exitOf[n.Enter] = int32(n.Exit)
		}
	}

	type span struct {
		it   *item
		last int
	}
	var build func(container int, depth int) []span
	leaf := func(i int, depth int) (*item, int) {
		ev := &evs[i]
		it := &item{Depth: depth, Step: ev.Step, EndStep: ev.Step, IDs: []string{ev.ID}, Steps: []int{ev.Step}, Status: string(ev.Status), firstIndex: i}
		last := i
		add := func(j int) {
			if j < 0 || used[j] {
				return
			}
			used[j] = true
			it.IDs = append(it.IDs, evs[j].ID)
			it.Steps = append(it.Steps, evs[j].Step)
			it.EndStep = max(it.EndStep, evs[j].Step)
			last = max(last, j)
		}
		switch ev.Type {
		case trace.ToolCall, trace.LLMRequest:
			it.Kind, it.Name, it.Input = "tool", ev.Name, ev.Input
			if ev.Type == trace.LLMRequest {
				it.Kind, it.Name = "llm", trace.LLMLabel(ev.Provider, ev.Model)
			}
			if k := callAt[i]; k >= 0 {
				c := &calls[k]
				it.Name, it.Status, it.Output = c.Label, string(c.Status), c.Output
				if c.Result >= 0 {
					r := &evs[c.Result]
					it.DurMS = r.DurationMS
					if r.Type == trace.LLMResponse {
						it.Tokens = r.Tokens()
						if r.CostUSD != nil {
							it.Cost = *r.CostUSD
						}
					}
					add(c.Result)
					if r.Status == trace.StatusSkipped && r.Output.Get("error_type").Canonical() == `"Blocked"` {
						it.Status = "blocked"
						it.Error, _ = r.Output.Get("message").Str()
					}
				}
				if c.Failure >= 0 {
					add(c.Failure)
					if c.Result < 0 {
						it.Output = evs[c.Failure].Details
					}
				}
				if c.Status == trace.StatusError {
					it.Error = c.ErrorType + ": " + c.Message
				}
				if c.Missing() {
					it.Note = "no result recorded"
				}
			}
			if ev.DurationMS != nil && it.DurMS == nil {
				it.DurMS = ev.DurationMS
			}
		case trace.StateChange:
			m, ok := marker(i)
			switch {
			case !ok:
				it.Kind, it.Name, it.Input, it.Output = "state", ev.Key, ev.Before, ev.After
			case m.Key == trace.MarkerDecision:
				it.Kind, it.Name, it.Output = m.Kind, m.Name, m.Value
				if m.Forced {
					it.Note = "forced by the fork"
				}
				if m.Error != "" {
					it.Status, it.Error = "error", m.ErrorType+": "+m.Error
				}
			case m.Key == trace.MarkerParam:
				it.Kind, it.Name, it.Output = "param", m.Name, m.Value
				if m.Forced {
					it.Note = "forced by the fork"
				}
			default: // @now, @id, @effect, a stray @node exit
				it.Kind, it.Name, it.Output = "marker", strings.TrimPrefix(m.Key, "@"), m.Value
				if m.Name != "" {
					it.Name += " " + m.Name
				}
				if m.Error != "" {
					it.Status, it.Error = "error", m.ErrorType+": "+m.Error
				}
				if m.Forced {
					it.Note = "forced by the fork"
				}
			}
		case trace.ErrorEvent:
			it.Kind, it.Name, it.Output, it.Status = "error", ev.ErrorType, ev.Details, "error"
			it.Error = ev.ErrorType + ": " + ev.Message
		case trace.RunStart:
			it.Kind, it.Name, it.Input = "start", "run_start", ev.Input
		case trace.RunEnd:
			it.Kind, it.Name, it.Output, it.Status = "run", string(ev.RunStatus), ev.Output, string(ev.RunStatus)
			if ev.RunStatus == trace.RunFailed && tr.Failure != nil {
				it.Error = tr.Failure.Type + ": " + tr.Failure.Message
			}
		default: // an unanswered result or response
			it.Kind, it.Name, it.Output = "event", string(ev.Type)+" "+ev.Label(), ev.Output
			it.Note = "answers no call"
		}
		switch it.Kind {
		case "state", "decision", "approval", "param", "marker":
			if it.Status == string(trace.StatusOK) {
				it.Status = ""
			}
			it.PreviewV = it.Output
		case "start":
			it.Status = ""
			it.PreviewV = it.Input
		case "run":
			it.PreviewV = it.Output
		}
		// What the call's body recorded (nested calls) is shown after it,
		// one level deeper.
		if ev.Type == trace.ToolCall || ev.Type == trace.LLMRequest {
			for _, s := range build(i, depth+1) {
				it.Kids = append(it.Kids, s.it)
				last = max(last, s.last)
			}
		}
		return it, last
	}
	build = func(container int, depth int) []span {
		var out []span
		each := func(i int) bool {
			if used[i] {
				return true
			}
			ev := &evs[i]
			if m, ok := marker(i); ok && m.Key == trace.MarkerNode && m.Phase == trace.PhaseEnter {
				used[i] = true
				it := &item{Kind: "node", Name: m.Name, Depth: depth, Step: ev.Step, EndStep: ev.Step,
					IDs: []string{ev.ID}, Steps: []int{ev.Step}, Status: string(trace.RunRunning), firstIndex: i}
				last := i
				exit := int(exitOf[i])
				if exit >= 0 {
					used[exit] = true
				}
				for _, s := range build(i, depth+1) {
					it.Kids = append(it.Kids, s.it)
					last = max(last, s.last)
				}
				if exit >= 0 {
					x, _ := marker(exit)
					it.IDs = append(it.IDs, evs[exit].ID)
					it.Steps = append(it.Steps, evs[exit].Step)
					it.EndStep = evs[exit].Step
					it.Status = x.Status
					if x.Error != "" {
						it.Error = x.Error
					}
					last = max(last, exit)
					if ms := evs[exit].Timestamp.Sub(ev.Timestamp).Milliseconds(); ms >= 0 {
						it.DurMS = &ms
					}
				}
				for _, k := range it.Kids {
					it.Tokens += k.Tokens + groupSum(k, func(m *item) int64 { return m.Tokens })
					it.Cost = usd.Sum(it.Cost, k.Cost, groupSumF(k))
				}
				out = append(out, span{it, last})
				return true
			}
			used[i] = true
			it, last := leaf(i, depth)
			out = append(out, span{it, last})
			return true
		}
		if container < 0 {
			for i := range evs {
				if parent(i) < 0 {
					each(i)
				}
			}
		} else {
			kids(container, each)
		}
		return groupConcurrent(out, func(s span) (*item, int) { return s.it, s.last }, func(it *item, last int) span { return span{it, last} })
	}
	tl := &timeline{}
	for _, s := range build(-1, 0) {
		tl.Top = append(tl.Top, s.it)
	}
	groups := 0
	var flatten func(its []*item)
	flatten = func(its []*item) {
		for _, it := range its {
			if it.Kind == "group" {
				groups++
				it.Group = groups
				for _, m := range it.Members {
					m.Group = groups
				}
			}
			it.Row = len(tl.Rows)
			tl.Rows = append(tl.Rows, it)
			flatten(it.Members)
			flatten(it.Kids)
		}
	}
	flatten(tl.Top)
	return tl
}

// groupConcurrent joins consecutive calls whose lifetimes overlap into one
// group item: a call that starts before the previous call's last event.
func groupConcurrent[S any](in []S, get func(S) (*item, int), mk func(*item, int) S) []S {
	var out []S
	for i := 0; i < len(in); {
		it, last := get(in[i])
		j := i + 1
		if it.Kind == "tool" || it.Kind == "llm" {
			for j < len(in) {
				nx, nlast := get(in[j])
				if (nx.Kind != "tool" && nx.Kind != "llm") || stepIndexAfter(nx, last) {
					break
				}
				last = max(last, nlast)
				j++
			}
		}
		if j == i+1 {
			out = append(out, in[i])
			i++
			continue
		}
		g := &item{Kind: "group", Depth: it.Depth, Step: it.Step, Name: "concurrent calls", Status: "ok"}
		for k := i; k < j; k++ {
			m, _ := get(in[k])
			m.Lane = k - i + 1
			g.Members = append(g.Members, m)
			g.EndStep = max(g.EndStep, m.EndStep)
			if m.failed() {
				g.Status = "error"
			}
		}
		out = append(out, mk(g, last))
		i = j
	}
	return out
}

// stepIndexAfter reports whether item nx starts after event index last:
// events are in step order, so its first step tells.
func stepIndexAfter(nx *item, last int) bool { return nx.firstIndex > last }

func groupSum(it *item, f func(*item) int64) int64 {
	var n int64
	for _, m := range it.Members {
		n += f(m)
	}
	return n
}

func groupSumF(it *item) float64 {
	var c float64
	for _, m := range it.Members {
		c = usd.Sum(c, m.Cost)
	}
	return c
}

// preview is a value cut to a short line.
func preview(v trace.Value) string {
	if v.IsAbsent() {
		return ""
	}
	return clip.Head(v.Canonical(), 80)
}

package fork

import (
	"cmp"
	"slices"
	"sync"

	"github.com/stepfork/stepfork/internal/sharedstart"
	"github.com/stepfork/stepfork/internal/tracecache"
	"github.com/stepfork/stepfork/internal/traceindex"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// index is what counterfactual execution needs to know about a base run:
// parent links, the call and node enclosing every event, occurrences, node
// executions, first writes, and suffix sums of the tail's calls and cost. It
// is built in one pass over the events (plus one backward pass), once per
// trace (indexOf), and never modified afterwards but for what it prepares
// once on first use, so forks and the variants of sweeps share it, read-only,
// without locks. tr is the cache's shallow copy of the caller's trace: what
// a fork hands back to the caller names the caller's own (forkPlan.base).
type index struct {
	tr  *trace.Trace
	ids *traceindex.Index // by id, and parents (shared with the replay plan)

	parent []int32 // index of the parent event, -1 for none (ids.Parents: shared, read-only)
	call   []int32 // innermost enclosing tool_call / llm_request (not the event itself), -1
	node   []int32 // innermost enclosing @node enter marker (not the event itself), -1
	end    []int32 // last index of the event's subtree
	occ    []int32 // occurrence of calls, node enters, decisions, parameters (1-based), 0 otherwise
	enter  []bool  // the event is an @node enter marker

	nodes      map[string][]int32 // node name → enter markers, in order
	nodeOrder  []string           // node names in order of first execution
	enters     []int32            // every @node enter marker, in order
	answers    map[int32]int32    // result without a parent link → the call it answers (trace.Trace.Calls)
	calls      map[string][]int32 // callKey(kind, label) and callKey(llm, model) → call events
	callOrder  map[replay.CallKind][]string
	decisions  map[string][]int32 // decision and approval markers by name
	params     map[string][]int32
	firstWrite map[string]int32 // plain state key → first state_change writing it
	keyOrder   []string
	firstRead  map[string]int32 // state key → first @read marker of it (replay.Read)
	readOrder  []string

	// groups are the spans of the concurrent groups (indexGroups).
	groups []groupSpan

	// suffix sums: calls and cost from event i to the end (length n+1).
	sufTools, sufModels []int32
	sufCost             []float64
	sufTokens           []int64

	// plan is the replay plan of tr (pairings, expected calls, input
	// fingerprints, marker queues, payload hashes), prepared on first use
	// and shared read-only by every variant run from this index.
	planOnce sync.Once
	plan     *replay.Prepared
	planErr  error

	// diffBase is the base side of diff.Runs (the base's behavior steps,
	// summary and final state), prepared on first use and shared read-only
	// by every variant diffed against this index.
	diffOnce sync.Once
	diffBase *diff.Prepared
}

// indexes are the indexes of the base runs forked so far: a base forked
// again, by Run, Each, Estimate or Points, is not indexed, planned or
// prepared for diffing again.
var indexes tracecache.Cache[index]

// indexOf is the index of tr, built once per trace (see package
// tracecache for when a changed trace is indexed again).
func indexOf(tr *trace.Trace) *index { return indexes.Get(tr, newIndex) }

// prepared is the replay plan of the base run, computed once per index.
func (ix *index) prepared() (*replay.Prepared, error) {
	ix.planOnce.Do(func() { ix.plan = replay.Prepare(ix.tr) })
	return ix.plan, ix.planErr
}

// diffVariant compares a variant with the base run: diff.Runs(ix.tr,
// variant), against the base side prepared once per index. The base's
// events are the index's (unchanged, as tracecache has them): the steps of
// a served prefix are taken from the base rather than extracted again.
func (ix *index) diffVariant(variant *trace.Trace) *diff.Result {
	ix.diffOnce.Do(func() { ix.diffBase = diff.Prepare(ix.tr) })
	return sharedstart.Diff[*diff.Prepared, trace.Event, *trace.Trace, *diff.Result](ix.diffBase, ix.tr.Events, variant)
}

func callKey(kind replay.CallKind, label string) string { return string(kind) + "\x00" + label }

// newIndex indexes tr. Parents precede their children in a stepfork trace
// (events are appended in order), so one forward pass finds every event's
// enclosing call and node.
func newIndex(tr *trace.Trace) *index {
	evs := tr.Events
	n := len(evs)
	ix := &index{
		tr:         tr,
		ids:        traceindex.Of(tr),
		call:       make([]int32, n),
		node:       make([]int32, n),
		end:        make([]int32, n),
		occ:        make([]int32, n),
		enter:      make([]bool, n),
		nodes:      map[string][]int32{},
		calls:      map[string][]int32{},
		callOrder:  map[replay.CallKind][]string{},
		decisions:  map[string][]int32{},
		params:     map[string][]int32{},
		firstWrite: map[string]int32{},
		firstRead:  map[string]int32{},
		sufTools:   make([]int32, n+1),
		sufModels:  make([]int32, n+1),
		sufCost:    make([]float64, n+1),
		sufTokens:  make([]int64, n+1),
	}
	ix.parent = ix.ids.Parents()
	counts := map[string]int32{}
	var (
		lastKind           replay.CallKind
		lastLabel, lastKey string
	)
	for i := range evs {
		ev := &evs[i]
		ix.call[i], ix.node[i], ix.end[i] = -1, -1, int32(i)
		if j := ix.parent[i]; j >= 0 {
			pe := &evs[j]
			switch {
			case pe.Type == trace.ToolCall || pe.Type == trace.LLMRequest:
				ix.call[i] = j
			default:
				ix.call[i] = ix.call[j]
			}
			if ix.enter[j] {
				ix.node[i] = j
			} else {
				ix.node[i] = ix.node[j]
			}
		}
		switch ev.Type {
		case trace.ToolCall, trace.LLMRequest:
			kind, label := callIdentity(ev)
			if kind != lastKind || label != lastLabel { // runs of the same call share one key
				lastKind, lastLabel, lastKey = kind, label, callKey(kind, label)
			}
			k := lastKey
			counts[k]++
			ix.occ[i] = counts[k]
			if len(ix.calls[k]) == 0 {
				ix.callOrder[kind] = append(ix.callOrder[kind], label)
			}
			ix.calls[k] = append(ix.calls[k], int32(i))
			if kind == replay.KindLLM && ev.Provider != "" {
				mk := callKey(kind, ev.Model)
				ix.calls[mk] = append(ix.calls[mk], int32(i))
			}
		case trace.StateChange:
			m, ok := ev.Marker()
			if !ok {
				if _, seen := ix.firstWrite[ev.Key]; !seen {
					ix.firstWrite[ev.Key] = int32(i)
					ix.keyOrder = append(ix.keyOrder, ev.Key)
				}
				break
			}
			switch m.Key {
			case trace.MarkerNode:
				if m.Phase == trace.PhaseEnter {
					ix.enter[i] = true
					execs := ix.nodes[m.Name]
					if len(execs) == 0 {
						ix.nodeOrder = append(ix.nodeOrder, m.Name)
					}
					execs = append(execs, int32(i))
					ix.nodes[m.Name] = execs
					ix.enters = append(ix.enters, int32(i))
					ix.occ[i] = int32(len(execs))
				}
			case trace.MarkerDecision:
				ix.decisions[m.Name] = append(ix.decisions[m.Name], int32(i))
				ix.occ[i] = int32(len(ix.decisions[m.Name]))
			case trace.MarkerParam:
				ix.params[m.Name] = append(ix.params[m.Name], int32(i))
				ix.occ[i] = int32(len(ix.params[m.Name]))
			case trace.MarkerRead:
				if _, seen := ix.firstRead[m.Name]; !seen {
					ix.firstRead[m.Name] = int32(i)
					ix.readOrder = append(ix.readOrder, m.Name)
				}
			}
		}
	}
	for _, nd := range tr.Nodes() {
		if nd.Enter >= 0 && nd.Exit >= 0 {
			ix.occ[nd.Exit] = ix.occ[nd.Enter]
		}
	}
	for _, c := range tr.Calls() {
		if c.Result >= 0 && ix.call[c.Result] != int32(c.Event) {
			if ix.answers == nil {
				ix.answers = map[int32]int32{}
			}
			ix.answers[int32(c.Result)] = int32(c.Event)
		}
	}
	for i := n - 1; i >= 0; i-- {
		if p := ix.parent[i]; p >= 0 && ix.end[i] > ix.end[p] {
			ix.end[p] = ix.end[i]
		}
		ev := &evs[i]
		ix.sufTools[i], ix.sufModels[i] = ix.sufTools[i+1], ix.sufModels[i+1]
		ix.sufCost[i], ix.sufTokens[i] = ix.sufCost[i+1], ix.sufTokens[i+1]
		switch ev.Type {
		case trace.ToolCall:
			ix.sufTools[i]++
		case trace.LLMRequest:
			ix.sufModels[i]++
		case trace.LLMResponse:
			if ev.CostUSD != nil {
				ix.sufCost[i] += *ev.CostUSD
			}
			ix.sufTokens[i] += ev.Tokens()
		}
	}
	ix.indexGroups()
	return ix
}

// exitOf returns the exit marker of the node entered at e
// (trace.Trace.Nodes, in the order of their first markers), and false when
// that node never exited.
func (ix *index) exitOf(e int32) (int32, bool) {
	nodes := ix.tr.Nodes()
	i, found := slices.BinarySearchFunc(nodes, int(e), func(nd trace.Node, e int) int {
		first := nd.Enter
		if first < 0 {
			first = nd.Exit
		}
		return cmp.Compare(first, e)
	})
	if !found || nodes[i].Enter != int(e) || nodes[i].Exit < 0 {
		return -1, false
	}
	return int32(nodes[i].Exit), true
}

// groupSpan is the stretch of events a part of a scope's concurrent group
// covers: from its first member (an operation made on a concurrent
// goroutine, trace.LanesFile) to the end of its last member's subtree. A
// join (trace.JoinsFile) ends a part: the operation the scope's own
// goroutine made once everything before it was over is no member of
// either part, and a fork may start there.
type groupSpan struct{ first, last int32 }

// indexGroups finds the spans of the concurrent groups: a fork inside one
// would split calls whose order is an accident of scheduling.
func (ix *index) indexGroups() {
	lanes := ix.tr.EventLanes()
	if lanes == nil {
		return
	}
	type part struct{ scope, part int32 }
	spans := map[part]*groupSpan{} // a part of a scope's group (parent event, part) → its span
	var order []part
	for i := range ix.tr.Events {
		if lanes[i].Number < 1 {
			continue
		}
		sc := part{ix.parent[i], int32(lanes[i].Part)}
		g, ok := spans[sc]
		if !ok {
			g = &groupSpan{first: int32(i), last: int32(i)}
			spans[sc] = g
			order = append(order, sc)
		}
		g.last = max(g.last, ix.end[i])
	}
	for _, sc := range order {
		g := spans[sc]
		if g.last > g.first {
			ix.groups = append(ix.groups, *g)
		}
	}
}

// splitsGroup returns the span of the outermost concurrent group a fork at
// position p would split (p after its first event and within it), and
// false when p splits none.
func (ix *index) splitsGroup(p int) (groupSpan, bool) {
	var out groupSpan
	found := false
	for _, g := range ix.groups {
		if int(g.first) < p && p <= int(g.last) && (!found || g.first < out.first) {
			out, found = g, true
		}
	}
	return out, found
}

// groupBoundary refuses a position inside a concurrent group, naming the
// points before and after it.
func (ix *index) groupBoundary(p int) error {
	g, ok := ix.splitsGroup(p)
	if !ok {
		return nil
	}
	evs := ix.tr.Events
	msg := "step %d is inside a group of concurrent calls (steps %d..%d, made on several goroutines, in an order that is not behavior); a fork must not split it. Fork before the group (fork.Step(%d))"
	args := []any{evs[p].Step, evs[g.first].Step, evs[g.last].Step, evs[g.first].Step}
	if after := int(g.last) + 1; after < len(evs) && ix.splits(after) < 0 {
		if _, in := ix.splitsGroup(after); !in {
			msg += " or after it (fork.Step(%d))"
			args = append(args, evs[after].Step)
		}
	}
	return pointErrf(msg+".", args...)
}

// callIdentity is the kind and label replay gives a call event: the tool
// name, or provider/model.
func callIdentity(ev *trace.Event) (replay.CallKind, string) {
	if ev.Type == trace.LLMRequest {
		return replay.KindLLM, trace.LLMLabel(ev.Provider, ev.Model)
	}
	return replay.KindTool, ev.Name
}

func isEnter(ev *trace.Event) bool {
	if !ev.IsMarker() || ev.Key != trace.MarkerNode {
		return false
	}
	ph, _ := ev.After.Get("phase").Str()
	return ph == trace.PhaseEnter
}

// nodeName is the name of the node entered by marker i.
func (ix *index) nodeName(i int32) string {
	name, _ := ix.tr.Events[i].After.Get("name").Str()
	return name
}

// innermostNode is the name of the node event i is in ("" at top level).
func (ix *index) innermostNode(i int) string {
	if i < len(ix.node) && ix.node[i] >= 0 {
		return ix.nodeName(ix.node[i])
	}
	return ""
}

// splits reports the call a fork at position p would split: the call event
// enclosing p (or p's own call, for a result), -1 when p is a boundary.
func (ix *index) splits(p int) int {
	ev := &ix.tr.Events[p]
	if c := ix.call[p]; c >= 0 {
		return int(c)
	}
	if ev.Type == trace.ToolResult || ev.Type == trace.LLMResponse {
		// A result without a parent link (legacy bundle) splits the call
		// it answers; one that answers no call stands for itself.
		if c, ok := ix.answers[int32(p)]; ok {
			return int(c)
		}
		return p
	}
	return -1
}

// boundary checks that a fork may start at position p, and says otherwise
// what the position would split and where the nearest boundaries are.
func (ix *index) boundary(p int) error {
	evs := ix.tr.Events
	switch {
	case p <= 0:
		return pointErrf("step %d is the run's run_start, which every run records; fork.Start() forks right after it", stepAt(evs, 0))
	case p >= len(evs):
		return pointErrf("position %d is past the end of this run (%d events)", p, len(evs))
	}
	c := ix.splits(p)
	if c < 0 {
		return nil
	}
	ev, ce := &evs[p], &evs[c]
	what := callWhat(ce)
	msg := "step %d is a '%s' event inside the call to %s (step %d); a fork must not split a call. Fork before the call (fork.Step(%d))"
	args := []any{ev.Step, ev.Type, what, ce.Step, ce.Step}
	if after := int(ix.end[c]) + 1; after < len(evs) && ix.splits(after) < 0 {
		msg += " or after it (fork.Step(%d))"
		args = append(args, evs[after].Step)
	}
	return pointErrf(msg+".", args...)
}

func stepAt(evs []trace.Event, i int) int {
	if i < len(evs) {
		return evs[i].Step
	}
	return i
}

// callWhat names a call event: "tool 'search'" or "model 'openai/gpt-4o'".
func callWhat(ce *trace.Event) string {
	kind, label := callIdentity(ce)
	if kind == replay.KindLLM {
		return "model '" + label + "'"
	}
	return "tool '" + label + "'"
}

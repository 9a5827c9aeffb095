package fork

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// pointError is the error of a fork point that does not resolve. Its text
// names the point as it was written and says what the run makes
// addressable instead ("BeforeNode(\"x\", 1): node 'x' never executed in
// this run. Nodes that did: research, write."). It matches [ErrUnresolved].
type pointError struct {
	point string // the point as written, e.g. BeforeNode("x", 1)
	msg   string
}

func (e *pointError) Error() string {
	if e.point == "" {
		return e.msg
	}
	return e.point + ": " + e.msg
}

func (e *pointError) Is(target error) bool { return target == ErrUnresolved }

func pointErrf(format string, args ...any) *pointError {
	return &pointError{msg: fmt.Sprintf(format, args...)}
}

// Last addresses the last execution of a node (or call) in BeforeNode,
// AfterNode and BeforeCall.
const Last = -1

// At is a fork point: an address that resolves to one position of the base
// run's events. The variant serves every base event before that position
// from the recording (no tool or model is touched, and those events keep the
// base's ids, payloads and hashes) and executes the agent's calls from that
// position on under the fork's changes (the tail).
//
// Only boundaries are positions: an event that is not part of a tool or
// model call. A tool_result, an llm_response, the error of a failed call, or
// anything a call's body recorded would split that call, and is refused with
// a message naming the call. Nor is a position inside a concurrent group
// (the operations a scope's goroutines other than its own made: calls,
// nodes, markers, state writes, as the bundle's [trace.LanesFile] records
// them, from the first member to the end of the last): their order is an
// accident of scheduling, so the refusal names the points before and after
// the group. A join ends a group's part ([trace.JoinsFile]): the model call
// an agent makes once every tool call of the previous answer, each on its
// goroutine, has returned is a position, and so are the points between
// such turns. Step 0 (run_start) is not a position either:
// every run records its input; Start forks right after it.
type At interface {
	// String is the point as written: Step(6), BeforeNode("write", 1), …
	String() string
	resolve(ix *index) (Resolved, error)
}

// Resolved is a fork point resolved against a base run.
type Resolved struct {
	// Step and EventID are the first base event that is not served: the
	// variant's tail begins there.
	Step    int
	EventID string
	// Node is the node the tail begins in or with ("" at top level), and
	// Occurrence that node's execution number when the point addresses one.
	Node       string
	Occurrence int
	// Description says where the point is, for people: "before 'write'
	// execution 1", "before tool 'search' call 2", "from the start".
	Description string
	// Asked is the point as written (At.String()).
	Asked string

	pos int // index of the event in the base events
}

// String is "step 6 (before 'write' execution 1)".
func (r Resolved) String() string {
	return fmt.Sprintf("step %d (%s)", r.Step, r.Description)
}

func (ix *index) resolvedAt(p int, desc string) Resolved {
	ev := &ix.tr.Events[p]
	r := Resolved{Step: ev.Step, EventID: ev.ID, Description: desc, pos: p, Node: ix.innermostNode(p)}
	if isEnter(ev) {
		r.Node, r.Occurrence = ix.nodeName(int32(p)), int(ix.occ[p])
	}
	return r
}

type atFunc struct {
	s string
	f func(ix *index) (Resolved, error)
}

func (a atFunc) String() string { return a.s }

func (a atFunc) resolve(ix *index) (Resolved, error) {
	r, err := a.f(ix)
	if err == nil {
		err = ix.groupBoundary(r.pos)
	}
	if err != nil {
		var pe *pointError
		if errors.As(err, &pe) && pe.point == "" {
			pe.point = a.s
		}
		return Resolved{}, err
	}
	if r.Asked == "" {
		r.Asked = a.s
	}
	return r, nil
}

// Step is the position of the base event at step n.
func Step(n int) At {
	return atFunc{fmt.Sprintf("Step(%d)", n), func(ix *index) (Resolved, error) {
		evs := ix.tr.Events
		for i := range evs {
			if evs[i].Step == n {
				if err := ix.boundary(i); err != nil {
					return Resolved{}, err
				}
				return ix.resolvedAt(i, ix.describe(i)), nil
			}
		}
		return Resolved{}, pointErrf("no event at step %d in this run (steps %d..%d)", n, stepAt(evs, 0), stepAt(evs, len(evs)-1))
	}}
}

// Event is the position of the base event with the given id.
func Event(id string) At {
	return atFunc{fmt.Sprintf("Event(%q)", id), func(ix *index) (Resolved, error) {
		i, ok := ix.ids.Lookup(id)
		if !ok {
			return Resolved{}, pointErrf("no event '%s' in this run", id)
		}
		if err := ix.boundary(int(i)); err != nil {
			return Resolved{}, err
		}
		return ix.resolvedAt(int(i), ix.describe(int(i))), nil
	}}
}

// Start is the position right after run_start: the whole run is the tail.
func Start() At {
	return atFunc{"Start()", func(ix *index) (Resolved, error) {
		if len(ix.tr.Events) < 2 {
			return Resolved{}, pointErrf("this run recorded nothing after its start, so there is nothing to fork")
		}
		return ix.resolvedAt(1, "from the start"), nil
	}}
}

// defaultAt is the point Run uses when at is nil: Failure on a failed base
// run; on any other run it is an error asking for a point.
func defaultAt() At {
	return atFunc{"nil fork point", func(ix *index) (Resolved, error) {
		if ix.tr.Status == trace.RunFailed {
			r, err := Failure().resolve(ix)
			r.Asked = "Failure()"
			return r, err
		}
		return Resolved{}, pointErrf("this run %s, so there is no obvious fork point. Pass one — fork.Points lists what is addressable.", statusWord(ix.tr.Status))
	}}
}

func statusWord(s trace.RunStatus) string {
	switch s {
	case trace.RunCompleted:
		return "completed"
	case trace.RunRunning:
		return "never finished"
	}
	return string(s)
}

// Failure is the position before what failed, on a failed base run: before
// the innermost node that exited with the run's error (so that node
// re-executes); when no node failed, before the failed tool or model call
// that precedes the run's failure; else at the run-level error itself (every
// call is served and the agent's own logic runs again).
func Failure() At {
	return atFunc{"Failure()", func(ix *index) (Resolved, error) {
		tr := ix.tr
		if tr.Status != trace.RunFailed {
			return Resolved{}, pointErrf("this run %s, so there is no failure to fork before. Name a point explicitly — fork.Points lists them.", statusWord(tr.Status))
		}
		evs := tr.Events
		fail := len(evs)
		for i := range evs {
			if evs[i].Type == trace.ErrorEvent && ix.call[i] < 0 && (ix.parent[i] < 0 || evs[ix.parent[i]].Type == trace.RunStart) {
				fail = i
				break
			}
		}
		// The failing node: the last top-level node that exited with an
		// error before the failure, then the last failed node inside it, and
		// so on down.
		failedKids := func(parent int32, before int) int32 {
			found := int32(-1)
			for _, e := range ix.enters {
				if int(e) >= before {
					break
				}
				if ix.node[e] != parent || ix.call[e] >= 0 {
					continue
				}
				if x, ok := ix.exitOf(e); ok && exitFailed(&evs[x]) {
					found = e
				}
			}
			return found
		}
		n := failedKids(-1, fail)
		for n >= 0 {
			inner := failedKids(n, int(ix.end[n])+1)
			if inner < 0 {
				break
			}
			n = inner
		}
		if n >= 0 {
			name := ix.nodeName(n)
			return ix.resolvedAt(int(n), fmt.Sprintf("before the failing node ('%s', execution %d)", name, ix.occ[n])), nil
		}
		for i := fail - 1; i > 0; i-- {
			ev := &evs[i]
			if (ev.Type == trace.ToolCall || ev.Type == trace.LLMRequest) && ix.call[i] < 0 && callFailed(ix, i) {
				kind, label := callIdentity(ev)
				return ix.resolvedAt(i, fmt.Sprintf("before the failed %s call '%s'", kind, label)), nil
			}
		}
		if fail < len(evs) {
			return ix.resolvedAt(fail, "before the run's failure"), nil
		}
		return Resolved{}, pointErrf("the run is marked failed but records no run-level error to fork before")
	}}
}

func exitFailed(ev *trace.Event) bool {
	st, _ := ev.After.Get("status").Str()
	return st == trace.NodeStatusFail
}

// callFailed reports whether call event i has a failed result or error.
func callFailed(ix *index, i int) bool {
	for j := i + 1; j <= int(ix.end[i]); j++ {
		if ix.parent[j] == int32(i) {
			ev := &ix.tr.Events[j]
			if ev.Type == trace.ErrorEvent || ev.Status == trace.StatusError {
				return true
			}
		}
	}
	return false
}

// selectOccurrence picks occurrence occ (1-based, or Last) of list.
func selectOccurrence(list []int32, occ int, what string) (int32, int, error) {
	switch {
	case occ == Last:
		return list[len(list)-1], len(list), nil
	case occ < 1 || occ > len(list):
		return 0, 0, pointErrf("%s %d time(s), so occurrence %s does not exist.", what, len(list), occName(occ))
	}
	return list[occ-1], occ, nil
}

func occName(occ int) string {
	if occ == Last {
		return "Last"
	}
	return strconv.Itoa(occ)
}

func nameList(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// BeforeNode is the position of the node's @node enter marker, execution occ
// (1-based, or Last): the node executes again in the tail.
func BeforeNode(name string, occ int) At {
	return atFunc{fmt.Sprintf("BeforeNode(%q, %s)", name, occName(occ)), func(ix *index) (Resolved, error) {
		e, n, err := ix.nodeExecution(name, occ)
		if err != nil {
			return Resolved{}, err
		}
		return ix.resolvedAt(int(e), fmt.Sprintf("before '%s' execution %d", name, n)), nil
	}}
}

// AfterNode is the position of the node's @node exit marker, execution occ
// (1-based, or Last): the node's execution is served as recorded, and only
// what follows it runs under the changes.
func AfterNode(name string, occ int) At {
	return atFunc{fmt.Sprintf("AfterNode(%q, %s)", name, occName(occ)), func(ix *index) (Resolved, error) {
		e, n, err := ix.nodeExecution(name, occ)
		if err != nil {
			return Resolved{}, err
		}
		x, ok := ix.exitOf(e)
		if !ok {
			return Resolved{}, pointErrf("node '%s' execution %d never finished in this run, so there is no point after it.", name, n)
		}
		if err := ix.boundary(int(x)); err != nil {
			return Resolved{}, err
		}
		r := ix.resolvedAt(int(x), fmt.Sprintf("after '%s' execution %d", name, n))
		return r, nil
	}}
}

func (ix *index) nodeExecution(name string, occ int) (int32, int, error) {
	list := ix.nodes[name]
	if len(list) == 0 {
		return 0, 0, pointErrf("node '%s' never executed in this run. Nodes that did: %s.", name, nameList(ix.nodeOrder))
	}
	e, n, err := selectOccurrence(list, occ, fmt.Sprintf("node '%s' executed", name))
	if err != nil {
		return 0, 0, err
	}
	if err := ix.boundary(int(e)); err != nil {
		return 0, 0, err
	}
	return e, n, nil
}

// BeforeCall is the position of a tool call (kind replay.KindTool, name the
// tool's name) or a model call (replay.KindLLM, name "provider/model" or the
// model alone), occurrence occ (1-based, or Last): that call and everything
// after it run in the tail.
func BeforeCall(kind replay.CallKind, name string, occ int) At {
	return atFunc{fmt.Sprintf("BeforeCall(%s, %q, %s)", kind, name, occName(occ)), func(ix *index) (Resolved, error) {
		if kind != replay.KindTool && kind != replay.KindLLM {
			return Resolved{}, pointErrf("kind %q is not a call kind; use replay.KindTool or replay.KindLLM", kind)
		}
		what, verb := "tool", "called"
		if kind == replay.KindLLM {
			what = "model"
		}
		list := ix.calls[callKey(kind, name)]
		if len(list) == 0 {
			return Resolved{}, pointErrf("%s '%s' was never called in this run. %ss that were: %s.", what, name,
				strings.ToUpper(what[:1])+what[1:], nameList(ix.callOrder[kind]))
		}
		c, n, err := selectOccurrence(list, occ, fmt.Sprintf("%s '%s' was %s", what, name, verb))
		if err != nil {
			return Resolved{}, err
		}
		if err := ix.boundary(int(c)); err != nil {
			return Resolved{}, err
		}
		return ix.resolvedAt(int(c), fmt.Sprintf("before %s '%s' call %d", what, name, n)), nil
	}}
}

// BeforeFirstWriteOf is the position before the first write of a plain state
// key (replay.Set): before the innermost node that made the write, so that
// the writer executes again; at the write itself when it was made outside
// any node.
func BeforeFirstWriteOf(key string) At {
	return atFunc{fmt.Sprintf("BeforeFirstWriteOf(%q)", key), func(ix *index) (Resolved, error) {
		w, ok := ix.firstWrite[key]
		if !ok {
			return Resolved{}, pointErrf("no state write of '%s' in this run. Keys written: %s.", key, nameList(ix.keyOrder))
		}
		p := int(w)
		desc := fmt.Sprintf("before the first write of '%s'", key)
		if n := ix.node[w]; n >= 0 {
			p = int(n)
			desc = fmt.Sprintf("before '%s' first wrote '%s'", ix.nodeName(n), key)
		}
		if err := ix.boundary(p); err != nil {
			return Resolved{}, err
		}
		return ix.resolvedAt(p, desc), nil
	}}
}

// BeforeFirstReadOf is the position before the first read of a state key
// through replay.Read (its @read marker): before the innermost node that
// read it, so that the reader executes again and reads what a [State]
// change gives it; at the read itself when it was made outside any node.
// It is the fork point "before the node whose read injected a given fact".
//
// replay.Read records where it reads: a base recorded before reads were
// recorded has none, and the error says so.
func BeforeFirstReadOf(key string) At {
	return atFunc{fmt.Sprintf("BeforeFirstReadOf(%q)", key), func(ix *index) (Resolved, error) {
		r, ok := ix.firstRead[key]
		if !ok {
			if len(ix.readOrder) == 0 {
				return Resolved{}, pointErrf("no state read of '%s' in this run: it records no read at all (replay.Read records where it reads; a run recorded before it did has none: record it again). Keys written: %s.", key, nameList(ix.keyOrder))
			}
			return Resolved{}, pointErrf("no state read of '%s' in this run. Keys read: %s.", key, nameList(ix.readOrder))
		}
		p := int(r)
		desc := fmt.Sprintf("before the first read of '%s'", key)
		if n := ix.node[r]; n >= 0 {
			p = int(n)
			desc = fmt.Sprintf("before '%s' first read '%s'", ix.nodeName(n), key)
		}
		if err := ix.boundary(p); err != nil {
			return Resolved{}, err
		}
		return ix.resolvedAt(p, desc), nil
	}}
}

// BeforeDecision is the position of the first @decision marker of the
// decision (or approval) name: everything before is served, and the decision
// is made again (or forced with a Decision change).
func BeforeDecision(name string) At {
	return atFunc{fmt.Sprintf("BeforeDecision(%q)", name), func(ix *index) (Resolved, error) {
		list := ix.decisions[name]
		if len(list) == 0 {
			var names []string
			for i := range ix.tr.Events {
				if m, ok := ix.tr.Events[i].Marker(); ok && m.Key == trace.MarkerDecision && ix.decisions[m.Name][0] == int32(i) {
					names = append(names, m.Name)
				}
			}
			return Resolved{}, pointErrf("no decision '%s' in this run. Decisions made: %s.", name, nameList(names))
		}
		if err := ix.boundary(int(list[0])); err != nil {
			return Resolved{}, err
		}
		return ix.resolvedAt(int(list[0]), fmt.Sprintf("before decision '%s'", name)), nil
	}}
}

// Where is the position of the first event after run_start for which match
// returns true. The event must be a boundary (match a call, a node marker, a
// decision, a state write, the run's end), not a result inside a call.
func Where(match func(trace.Event) bool) At {
	return atFunc{"Where(…)", func(ix *index) (Resolved, error) {
		if match == nil {
			return Resolved{}, pointErrf("the predicate is nil")
		}
		evs := ix.tr.Events
		for i := 1; i < len(evs); i++ {
			if !match(evs[i]) {
				continue
			}
			if c := ix.splits(i); c >= 0 {
				return Resolved{}, pointErrf("the predicate matched step %d, a '%s' event inside the call to %s (step %d); a fork must not split a call — match the call itself, or a node marker, instead.",
					evs[i].Step, evs[i].Type, callWhat(&evs[c]), evs[c].Step)
			}
			return ix.resolvedAt(i, ix.describe(i)), nil
		}
		return Resolved{}, pointErrf("the predicate matched no event of this run after its run_start")
	}}
}

// PointInfo is one addressable fork point of a run.
type PointInfo struct {
	Step    int
	EventID string
	// Kind is what happens at the point: tool_call, llm_request,
	// node_enter, node_exit, decision, approval, param, now, id, effect,
	// state, error or run_end.
	Kind string
	// Name is the tool name, model label, node, decision, parameter or
	// effect name, or state key ("" for the others).
	Name string
	// Occurrence is the 1-based number of this kind and name so far (the
	// execution of a node, the call of a tool), 0 when not counted.
	Occurrence int
	// Node is the innermost node the point is in ("" at top level).
	Node string
	// Description is the resolved point's description.
	Description string
}

// At returns the address of the point (Step(n)).
func (p PointInfo) At() At { return Step(p.Step) }

// Points lists every position of tr a fork may start at, in order: every
// boundary event after run_start (see At). Each resolves with Step(p.Step).
func Points(tr *trace.Trace) []PointInfo {
	if tr == nil {
		return nil
	}
	return indexOf(tr).points()
}

func (ix *index) points() []PointInfo {
	evs := ix.tr.Events
	out := make([]PointInfo, 0, len(evs))
	for i := 1; i < len(evs); i++ {
		if ix.splits(i) >= 0 {
			continue
		}
		if _, in := ix.splitsGroup(i); in {
			continue
		}
		ev := &evs[i]
		p := PointInfo{Step: ev.Step, EventID: ev.ID, Kind: string(ev.Type), Occurrence: int(ix.occ[i]),
			Node: ix.innermostNode(i), Description: ix.describe(i)}
		switch ev.Type {
		case trace.ToolCall, trace.LLMRequest:
			_, p.Name = callIdentity(ev)
		case trace.StateChange:
			p.Kind, p.Name = "state", ev.Key
			if m, ok := ev.Marker(); ok {
				p.Kind, p.Name = markerKind(m), m.Name
			}
		case trace.ErrorEvent:
			p.Name = ev.ErrorType
		}
		out = append(out, p)
	}
	return out
}

func markerKind(m trace.Marker) string {
	switch m.Key {
	case trace.MarkerNode:
		return "node_" + m.Phase
	case trace.MarkerDecision:
		if m.Kind == trace.KindApproval {
			return "approval"
		}
		return "decision"
	}
	return strings.TrimPrefix(m.Key, "@")
}

// describe says, for people, where a fork at position i starts.
func (ix *index) describe(i int) string {
	ev := &ix.tr.Events[i]
	occ := ix.occ[i]
	switch ev.Type {
	case trace.ToolCall:
		return fmt.Sprintf("before tool '%s' call %d", ev.Name, occ)
	case trace.LLMRequest:
		return fmt.Sprintf("before model '%s' call %d", trace.LLMLabel(ev.Provider, ev.Model), occ)
	case trace.RunEnd:
		return "at the run's end"
	case trace.ErrorEvent:
		return "before the run's failure"
	case trace.StateChange:
		m, ok := ev.Marker()
		if !ok {
			return fmt.Sprintf("before state write '%s'", ev.Key)
		}
		switch m.Key {
		case trace.MarkerNode:
			if m.Phase == trace.PhaseEnter {
				return fmt.Sprintf("before '%s' execution %d", m.Name, occ)
			}
			return fmt.Sprintf("after '%s' execution %d", m.Name, occ)
		case trace.MarkerDecision:
			return fmt.Sprintf("before %s '%s'", markerKind(m), m.Name)
		case trace.MarkerParam:
			return fmt.Sprintf("before parameter '%s' is read", m.Name)
		case trace.MarkerEffect:
			return fmt.Sprintf("before effect '%s'", m.Name)
		case trace.MarkerNow:
			return "before the time is read"
		case trace.MarkerID:
			return "before an id is drawn"
		case trace.MarkerRead:
			return fmt.Sprintf("before state '%s' is read", m.Name)
		}
		return fmt.Sprintf("before marker %s", ev.Key)
	}
	return fmt.Sprintf("before the %s at step %d", ev.Type, ev.Step)
}

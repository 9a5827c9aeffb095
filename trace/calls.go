package trace

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"weak"
)

// Call is one dependency call of a run: a tool_call or llm_request event and
// what answered it. [Trace.Calls] lists them.
//
// Which event answers a call is one rule, the one Python stepfork's replay
// and diff apply:
//
//   - A tool call is answered by its first tool_result child (an event whose
//     parent_id is the call's id). In a bundle without parent links it is
//     answered by the first later tool_result of the same name that answers
//     no earlier call, unless another tool_call of that name comes first.
//     A failed result (status error) is described by its first error child,
//     else by the "error_type" and "message" members of its output.
//   - A model call is answered by its first llm_response child, else it
//     failed with its first error child (status error, output null).
//   - A call with neither has status skipped: no result was captured
//     ([Call.Missing]).
type Call struct {
	// Index is the position of the call among the run's calls (tool_call
	// and llm_request events in file order), from 0.
	Index int
	// Event is the index in [Trace.Events] of the tool_call or llm_request
	// event.
	Event int
	// Result is the index of the tool_result or llm_response answering the
	// call, -1 when there is none.
	Result int
	// Failure is the index of the error event describing a recorded
	// failure, -1 when there is none.
	Failure int
	// Label is the tool name, or the model call's provider/model
	// ([LLMLabel]).
	Label string
	// Status is the status of the result: ok or error; error for a model
	// call that failed without a response; skipped when nothing answered
	// the call.
	Status Status
	// Output is the result's output; null for a model call that failed
	// without a response; absent when nothing answered the call.
	Output Value
	// ErrorType and Message describe a recorded failure (Status error).
	ErrorType, Message string
	// Lane says which goroutine made the call, relative to the scope it was
	// made in (the event its parent_id names: the run, a node, or a call
	// whose body ran): 0 for the goroutine that opened the scope, n for the
	// n-th other goroutine that called in it. The calls of one scope with a
	// Lane of 1 or more form the scope's concurrent group: their relative
	// order is an accident of scheduling, not behaviour. Lanes come from the
	// bundle's [LanesFile]; a bundle without one (every bundle of Python
	// stepfork, every run made on one goroutine) has only lane 0, and its
	// calls are strictly ordered.
	Lane int
}

// Concurrent reports whether the call belongs to its scope's concurrent
// group ([Call.Lane] 1 or more).
func (c *Call) Concurrent() bool { return c.Lane > 0 }

// LanesFile is the extra bundle file ([Trace.Extras]) that records which
// operations of a run were made from goroutines other than their scope's
// own: a JSON object from an event's id to its lane ([EventLane.Number]),
// listing only lanes of 1 or more. The events it names are the run's
// operations: tool_call and llm_request events, runtime markers (a node's
// enter marker stands for the node) and plain state_change events (bundles
// written before every operation had a lane list calls and node enters
// only). What happened inside an operation made on such a goroutine (a
// node's events, a call's result and body) is as unordered, relative to the
// rest of the scope, as the operation itself. A run made on one goroutine
// has none. Like every extra file it is listed in, and verified by,
// integrity.json.
const LanesFile = "lanes.json"

// JoinsFile is the extra bundle file ([Trace.Extras]) that records where a
// scope's concurrent group was joined: a JSON array of the ids of the
// operations its own goroutine (lane 0) made after everything its other
// goroutines had done in it so far had completed, every result recorded
// and every node exited, as an agent does when it waits for the tool calls
// of a model's answer before it asks the model again. Such a join closes
// the part of the group before it: what the scope's goroutines do after it
// is the group's next part ([EventLane.Part]), so that a fork point or a
// set of concurrent calls never spans a join. Only joins that close
// something are listed. A run without one (every run recorded before joins
// were, every bundle of Python stepfork) has one part per scope. Like
// every extra file it is listed in, and verified by, integrity.json.
const JoinsFile = "joins.json"

// Joins decodes a [JoinsFile]: the ids of the joins, in file order. It
// reports an error for anything else than a JSON array of strings.
func Joins(data []byte) ([]string, error) {
	var ids []string
	if err := json.Unmarshal(data, &ids); err != nil {
		return nil, fmt.Errorf("%s: %w", JoinsFile, err)
	}
	if ids == nil {
		return nil, fmt.Errorf("%s: not a JSON array", JoinsFile)
	}
	return ids, nil
}

// Lanes decodes a [LanesFile]: event id → lane (1 or more). It reports
// an error for anything else than a JSON object of positive integers.
func Lanes(data []byte) (map[string]int, error) {
	var m map[string]int
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", LanesFile, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%s: not a JSON object", LanesFile)
	}
	for id, n := range m {
		if n < 1 {
			return nil, fmt.Errorf("%s: event %q has lane %d; only lanes of 1 or more are listed", LanesFile, id, n)
		}
	}
	return m, nil
}

// EventLane is where one event of a run was made, as the run's
// [LanesFile] records it ([Trace.EventLanes]).
//
// A run is a tree of scopes: the run itself, each node, each call whose
// body ran. The operations one goroutine makes in a scope are ordered; those
// other goroutines make in it (its concurrent group) are not, relative to
// them or to each other: their order is an accident of scheduling, and
// replay, forks and the diff match them as a set.
type EventLane struct {
	// Number is the event's lane in its scope: 0 for the goroutine that
	// opened the scope (and for every event the lanes file does not list),
	// n for the n-th other goroutine that made an operation in it.
	Number int
	// Free says the event is unordered relative to the rest of its scope:
	// it was made on another goroutine than the scope's own (Number ≥ 1),
	// or inside an operation that was (a call's result, a node's events).
	Free bool
	// Part is the part of its scope's concurrent group the event belongs
	// to: the number of joins of its scope ([JoinsFile]) at or before it in
	// the file. The members of a scope's group with equal parts form one
	// set; a join separates the sets before and after it.
	Part int
}

// EventLanes returns, for each event of the run (in file order), its lane
// and whether it belongs to a concurrent group (see [EventLane]), from the
// run's [LanesFile] and [JoinsFile]; nil when the run has no lanes or they
// are unreadable (every event then has lane 0 and is ordered); an
// unreadable joins file counts as absent, and a join naming an event of
// lane 1 or more is ignored. An event is inside the event its
// parent_id names when that one comes earlier in the file.
//
// The list is computed once per trace and shared, like [Trace.Calls]: do
// not modify it.
func (t *Trace) EventLanes() []EventLane {
	return t.structure().eventLanes(t.Extras[LanesFile], t.Extras[JoinsFile])
}

// Missing reports whether nothing answered the call: no result and no
// failure was recorded.
func (c *Call) Missing() bool { return c.Result < 0 && c.Failure < 0 }

// Node is one execution of a node: the @node marker that entered it and the
// one that exited it. [Trace.Nodes] lists them.
//
// An exit marker closes the node its parent_id names when that node has the
// exit's name and is still open; otherwise (a bundle without parent links)
// the innermost open node of the same name. An exit that closes nothing is a
// Node of its own, without an enter.
type Node struct {
	Name string
	// Enter is the index in [Trace.Events] of the enter marker, -1 for an
	// exit that closes no node.
	Enter int
	// Exit is the index of the exit marker, -1 when the node never exited
	// (the run stopped inside it).
	Exit int
}

// Calls returns the run's calls in file order, each with what answered it
// and its lane (see [Call]). An unreadable [LanesFile] counts as absent
// (every lane 0).
//
// The list is computed once per trace in one pass over the events, without
// decoding payloads, and shared by every caller: do not modify it. It is
// safe to call Calls from several goroutines. A trace whose Events slice is
// replaced or grown is computed again; the events must not be changed in
// place once Calls (or [Trace.Nodes]) has been called.
func (t *Trace) Calls() []Call { return t.structure().calls(t.Extras[LanesFile]) }

// Nodes returns the run's node executions in the order of their first
// marker (see [Node]); it is computed once per trace and shared, like
// [Trace.Calls]: do not modify it.
func (t *Trace) Nodes() []Node { return t.structure().nodes() }

// structure is what Calls and Nodes compute from a trace's events, cached
// per trace. The Trace struct has no room for it (traces are compared with
// cmp and reflect.DeepEqual), so the cache is keyed by a weak pointer to the
// trace and dropped when the trace is collected.
type structure struct {
	evs []Event // the events it was computed from (identity only)

	callsOnce sync.Once
	callList  []Call
	nodesOnce sync.Once
	nodeList  []Node
	lanesOnce sync.Once
	laneList  []EventLane
}

var structures sync.Map // weak.Pointer[Trace] → *structure

func (t *Trace) structure() *structure {
	key := weak.Make(t)
	if v, ok := structures.Load(key); ok {
		if s := v.(*structure); sameEvents(s.evs, t.Events) {
			return s
		}
	}
	s := &structure{evs: t.Events}
	if old, loaded := structures.Swap(key, s); loaded {
		// A stale entry (the events changed), or one another goroutine
		// stored meanwhile for the same events: keep using that one.
		if o := old.(*structure); sameEvents(o.evs, t.Events) {
			structures.CompareAndSwap(key, s, o)
			return o
		}
	} else {
		runtime.AddCleanup(t, func(k weak.Pointer[Trace]) { structures.Delete(k) }, key)
	}
	return s
}

// sameEvents reports whether a and b are the same slice.
func sameEvents(a, b []Event) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (s *structure) calls(lanes []byte) []Call {
	s.callsOnce.Do(func() {
		s.callList = pairCalls(s.evs)
		if len(lanes) == 0 {
			return
		}
		m, err := Lanes(lanes)
		if err != nil {
			return
		}
		for i := range s.callList {
			c := &s.callList[i]
			c.Lane = m[s.evs[c.Event].ID]
		}
	})
	return s.callList
}

func (s *structure) eventLanes(data, joinData []byte) []EventLane {
	s.lanesOnce.Do(func() {
		if len(data) == 0 {
			return
		}
		m, err := Lanes(data)
		if err != nil || len(m) == 0 {
			return
		}
		var joins map[string]bool
		if len(joinData) > 0 {
			if ids, err := Joins(joinData); err == nil && len(ids) > 0 {
				joins = make(map[string]bool, len(ids))
				for _, id := range ids {
					joins[id] = true
				}
			}
		}
		evs := s.evs
		index := make(map[string]int32, len(evs))
		for i := len(evs) - 1; i >= 0; i-- { // the first event with an id wins
			index[evs[i].ID] = int32(i)
		}
		out := make([]EventLane, len(evs))
		var parts map[int32]int // scope (parent event, -1 for none) → joins so far
		for i := range evs {
			ev := &evs[i]
			n := m[ev.ID]
			free := n > 0
			scope := int32(-1)
			if j, ok := index[ev.ParentID]; ok && ev.ParentID != "" && int(j) < i {
				scope = j
				free = free || out[j].Free
			}
			part := 0
			if joins != nil {
				if n == 0 && joins[ev.ID] && index[ev.ID] == int32(i) {
					if parts == nil {
						parts = map[int32]int{}
					}
					parts[scope]++
				}
				part = parts[scope]
			}
			out[i] = EventLane{Number: n, Free: free, Part: part}
		}
		s.laneList = out
	})
	return s.laneList
}

func (s *structure) nodes() []Node {
	s.nodesOnce.Do(func() { s.nodeList = matchNodes(s.evs) })
	return s.nodeList
}

// resultKids records, for one parent event, the indexes of its first child
// of each type a call is answered with (-1: none).
type resultKids struct{ result, response, err int32 }

// pairCalls computes the calls of evs (see Call).
func pairCalls(evs []Event) []Call {
	kids := make(map[string]resultKids, len(evs)/4)
	n := 0
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case ToolCall, LLMRequest:
			n++
			continue
		case ToolResult, LLMResponse, ErrorEvent:
		default:
			continue
		}
		if ev.ParentID == "" {
			continue
		}
		k, ok := kids[ev.ParentID]
		if !ok {
			k = resultKids{-1, -1, -1}
		}
		switch {
		case ev.Type == ToolResult && k.result < 0:
			k.result = int32(i)
		case ev.Type == LLMResponse && k.response < 0:
			k.response = int32(i)
		case ev.Type == ErrorEvent && k.err < 0:
			k.err = int32(i)
		}
		kids[ev.ParentID] = k
	}
	// A child counts only when it follows its parent.
	kidsOf := func(i int) resultKids {
		k, ok := kids[evs[i].ID]
		if !ok {
			return resultKids{-1, -1, -1}
		}
		if int(k.result) <= i {
			k.result = -1
		}
		if int(k.response) <= i {
			k.response = -1
		}
		if int(k.err) <= i {
			k.err = -1
		}
		return k
	}

	calls := make([]Call, 0, n)
	var provider, model, label string // the last model label, reused while it repeats
	var legacy *legacyPairing
	var paired []bool // tool results already answering a call
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case ToolCall:
			c := Call{Index: len(calls), Event: i, Result: -1, Failure: -1, Label: ev.Name, Status: StatusSkipped}
			res := int(kidsOf(i).result)
			if res < 0 {
				if legacy == nil {
					legacy = newLegacyPairing(evs)
				}
				res = legacy.forward(i, ev.Name, paired)
			}
			if res >= 0 {
				if paired == nil {
					paired = make([]bool, len(evs))
				}
				paired[res] = true
				r := &evs[res]
				c.Result, c.Status, c.Output = res, r.Status, r.Output
				if r.Status == StatusError {
					if e := kidsOf(res).err; e >= 0 {
						c.Failure = int(e)
						c.ErrorType, c.Message = evs[e].ErrorType, evs[e].Message
					} else {
						c.ErrorType, _ = r.Output.Get("error_type").Str()
						c.Message, _ = r.Output.Get("message").Str()
					}
				}
			}
			calls = append(calls, c)
		case LLMRequest:
			if ev.Provider != provider || ev.Model != model || label == "" {
				provider, model, label = ev.Provider, ev.Model, LLMLabel(ev.Provider, ev.Model)
			}
			c := Call{Index: len(calls), Event: i, Result: -1, Failure: -1, Label: label, Status: StatusSkipped}
			switch k := kidsOf(i); {
			case k.response >= 0:
				r := &evs[k.response]
				c.Result, c.Status, c.Output = int(k.response), r.Status, r.Output
			case k.err >= 0:
				e := &evs[k.err]
				c.Failure, c.Status, c.Output = int(k.err), StatusError, NullValue
				c.ErrorType, c.Message = e.ErrorType, e.Message
			}
			calls = append(calls, c)
		}
	}
	return calls
}

// legacyPairing finds results for tool calls that have no tool_result child
// (bundles without parent links): stepfork's forward scan, the first later
// unpaired tool_result of the same name, stopping at the next tool_call of
// that name. Events are indexed by name once so that many unpaired calls do
// not make the scan quadratic.
type legacyPairing struct {
	evs    []Event
	byName map[string][]int32 // indexes of tool_call and tool_result events, by name
}

func newLegacyPairing(evs []Event) *legacyPairing {
	l := &legacyPairing{evs: evs, byName: make(map[string][]int32)}
	for i := range evs {
		if t := evs[i].Type; t == ToolCall || t == ToolResult {
			l.byName[evs[i].Name] = append(l.byName[evs[i].Name], int32(i))
		}
	}
	return l
}

func (l *legacyPairing) forward(call int, name string, paired []bool) int {
	idx := l.byName[name]
	pos, _ := slices.BinarySearch(idx, int32(call))
	for _, j := range idx[pos+1:] {
		ev := &l.evs[j]
		if ev.Type == ToolCall {
			return -1
		}
		if paired == nil || !paired[j] {
			return int(j)
		}
	}
	return -1
}

// matchNodes computes the node executions of evs (see Node).
func matchNodes(evs []Event) []Node {
	var nodes []Node
	var open []int32 // indexes in nodes of the open nodes, innermost last
	for i := range evs {
		ev := &evs[i]
		if ev.Type != StateChange || ev.Key != MarkerNode {
			continue
		}
		name, _ := ev.After.Get("name").Str()
		if phase, _ := ev.After.Get("phase").Str(); phase != PhaseExit {
			open = append(open, int32(len(nodes)))
			nodes = append(nodes, Node{Name: name, Enter: i, Exit: -1})
			continue
		}
		j := -1 // position in open of the node the exit closes
		if ev.ParentID != "" {
			for k := len(open) - 1; k >= 0; k-- {
				if n := &nodes[open[k]]; evs[n.Enter].ID == ev.ParentID {
					if n.Name == name {
						j = k
					}
					break
				}
			}
		}
		if j < 0 {
			for j = len(open) - 1; j >= 0 && nodes[open[j]].Name != name; j-- {
			}
		}
		if j < 0 {
			nodes = append(nodes, Node{Name: name, Enter: -1, Exit: i})
			continue
		}
		nodes[open[j]].Exit = i
		open = slices.Delete(open, j, j+1)
	}
	return nodes
}

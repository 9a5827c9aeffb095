package replay

import (
	"github.com/stepfork/stepfork/trace"
)

// Concurrent groups.
//
// Every operation of a run (a tool or model call, an entered node, a
// decision, parameter, approval, time, id or side effect, a state write)
// belongs to a scope (the run, a node, a call whose body ran) and a lane:
// lane 0 for the goroutine that opened the scope, 1, 2, … for the others
// (trace.EventLane). What lane 0 did is ordered, and is matched as before:
// calls at the strict cursor, markers in order by kind and name. What the
// other goroutines did, and everything inside it, is the scope's concurrent
// group: its order is an accident of scheduling, so its operations are
// matched as a set. Groups are keyed by scope path ("/node:worker"), so
// the operations of every node of one name on goroutines form one group.
//
// Within a group an operation is matched by its identity: kind and name,
// and the input that identifies it where it has one (a call's input, a
// decision's value, a parameter's default, a state write's key and value).
// Operations without one (a time, an id, a side effect, an approval, an
// entered node) are told apart only by what their goroutine did before. So
// the matcher prefers, in this order:
//
//  1. the recorded operation that follows, in its recorded lane, the one
//     this goroutine matched last in this scope (for the goroutine that
//     opened a scope, the first the scope's recorded counterpart holds);
//  2. another operation of that recorded lane;
//  3. an operation that is ready (first of its lane, or its lane's
//     previous operation is matched) and that no goroutine expects next,
//     in the scope's own recorded counterpart first;
//  4. any other ready one; then any.
//
// Ties go to the earliest in the recording. Identifying operations take the
// same order among those with equal identity and input, so a worker pool
// whose workers take other tasks than when it was recorded is matched task
// by task, and two identical calls with different recorded results are
// told apart by what each goroutine did before.

// opNode is the kind of an entered node, as a group matches it.
const opNode CallKind = "node"

// opRead is the kind of a state read's @read marker (replay.Read).
const opRead CallKind = "read"

// opIndex is the concurrency model of a laned base run, computed once per
// Prepared: for every event, its lane and its neighbours in its lane, and
// the operations of each concurrent group by identity.
type opIndex struct {
	parent []int32 // parent event, -1
	lane   []int32 // lane number (trace.EventLane.Number)
	part   []int32 // part of its scope's group (trace.EventLane.Part)
	prev   []int32 // previous operation in the same scope and lane, -1
	next   []int32 // next operation in the same scope and lane, -1
	inner  []int32 // first operation the scope's own goroutine made inside the event, -1
	group  []int32 // the concurrent group of a free operation, -1
	kind   []CallKind
	exit   map[int32]int32 // node enter → exit

	groups  map[string]int32 // scope path → group
	lists   map[listKey]int32
	members [][]int32 // per list: its operations, in file order
}

// listKey names a list of a group's operations: those of one kind and name
// (byName), or those of one kind, name and identifying input.
type listKey struct {
	group  int32
	kind   CallKind
	name   string
	input  string // canonical identifying input
	byName bool
}

// identityOf is how an event is matched as an operation: its kind and name,
// and its identifying input (Absent when it has none). ok is false for an
// event that is no operation (a result, an error, a node's exit, run_start,
// run_end).
func identityOf(ev *trace.Event) (kind CallKind, name string, input trace.Value, ok bool) {
	switch ev.Type {
	case trace.ToolCall:
		return KindTool, ev.Name, inputOf(ev), true
	case trace.LLMRequest:
		return KindLLM, trace.LLMLabel(ev.Provider, ev.Model), inputOf(ev), true
	case trace.StateChange:
	default:
		return "", "", trace.Value{}, false
	}
	m, isMarker := ev.Marker()
	if !isMarker {
		return KindState, ev.Key, stateValue(ev.After), true
	}
	switch m.Key {
	case trace.MarkerNode:
		if m.Phase == trace.PhaseExit {
			return "", "", trace.Value{}, false
		}
		return opNode, m.Name, trace.Value{}, true
	case trace.MarkerDecision:
		if m.Kind == trace.KindApproval {
			return KindApproval, m.Name, trace.Value{}, true
		}
		return KindDecision, m.Name, m.Value, true
	case trace.MarkerParam:
		return KindParam, m.Name, m.Value, true
	case trace.MarkerNow:
		return KindNow, "", trace.Value{}, true
	case trace.MarkerID:
		return KindID, "", trace.Value{}, true
	case trace.MarkerEffect:
		return KindEffect, m.Name, trace.Value{}, true
	case trace.MarkerRead:
		return opRead, m.Name, trace.Value{}, true
	}
	return "", "", trace.Value{}, false
}

// stateValue is the value a state write leaves (null for a deletion, whose
// "after" is absent), as its identity compares it.
func stateValue(v trace.Value) trace.Value {
	if v.IsAbsent() {
		return trace.NullValue
	}
	return v
}

func newOpIndex(p *Prepared, lanes []trace.EventLane, parent []int32) *opIndex {
	evs := p.base.Events
	n := len(evs)
	ix := &opIndex{
		parent: parent,
		lane:   make([]int32, n),
		part:   make([]int32, n),
		prev:   make([]int32, n),
		next:   make([]int32, n),
		inner:  make([]int32, n),
		group:  make([]int32, n),
		kind:   make([]CallKind, n),
		exit:   map[int32]int32{},
		groups: map[string]int32{},
		lists:  map[listKey]int32{},
	}
	type laneOf struct{ scope, lane int32 }
	last := map[laneOf]int32{}
	for i := range evs {
		ix.prev[i], ix.next[i], ix.inner[i], ix.group[i] = -1, -1, -1, -1
		ix.lane[i] = int32(lanes[i].Number)
		ix.part[i] = int32(lanes[i].Part)
		kind, name, input, ok := identityOf(&evs[i])
		if !ok {
			continue
		}
		ix.kind[i] = kind
		sc := parent[i]
		k := laneOf{sc, ix.lane[i]}
		if j, seen := last[k]; seen {
			ix.prev[i], ix.next[j] = j, int32(i)
		} else if ix.lane[i] == 0 && sc >= 0 {
			ix.inner[sc] = int32(i)
		}
		last[k] = int32(i)
		if !lanes[i].Free {
			continue
		}
		path := p.scopeOf(i)
		g, seen := ix.groups[path]
		if !seen {
			g = int32(len(ix.groups))
			ix.groups[path] = g
		}
		ix.group[i] = g
		ix.add(listKey{group: g, kind: kind, name: name, byName: true}, int32(i))
		if !input.IsAbsent() {
			ix.add(listKey{group: g, kind: kind, name: name, input: input.Canonical()}, int32(i))
		}
	}
	for _, nd := range p.base.Nodes() {
		if nd.Enter >= 0 && nd.Exit >= 0 {
			ix.exit[int32(nd.Enter)] = int32(nd.Exit)
		}
	}
	return ix
}

func (ix *opIndex) add(k listKey, i int32) {
	l, ok := ix.lists[k]
	if !ok {
		l = int32(len(ix.members))
		ix.lists[k] = l
		ix.members = append(ix.members, nil)
	}
	ix.members[l] = append(ix.members[l], i)
}

// opQuery is a live operation to match in its scope's concurrent group.
type opQuery struct {
	kind  CallKind
	name  string
	input trace.Value // the identifying input, Absent when the operation has none
}

// pendingOp reports whether base operation i is neither matched nor
// skipped.
func (p *plan) pendingOp(i int32) bool {
	if c := p.callAt[i]; c >= 0 {
		return p.state[c] == callPending
	}
	if m := p.markerAt[i]; m >= 0 {
		return !p.markerDone[m]
	}
	return p.taken == nil || !p.taken[i]
}

// takeOp marks base operation i matched. Calls are consumed by their own
// path (consume, takeLocked), which also skips what they hold.
func (p *plan) takeOp(i int32) {
	if c := p.callAt[i]; c >= 0 {
		p.consume(&p.calls[c])
		return
	}
	if m := p.markerAt[i]; m >= 0 {
		p.markerDone[m] = true
		return
	}
	if p.taken != nil {
		p.taken[i] = true
	}
}

// groupOf is the concurrent group of the scope sc, -1 when the base has
// none there.
func (s *session) groupOf(sc *scope) int32 {
	ix := s.plan.ops
	if ix == nil {
		return -1
	}
	g, ok := ix.groups[sc.pathLocked()]
	if !ok {
		return -1
	}
	return g
}

// successorLocked is the recorded operation that goroutine gid, on lane
// lane of sc, is expected to make next: the one after the operation it
// matched last in sc, in that operation's lane; for the goroutine that
// opened sc and has matched nothing in it yet, the first operation of lane
// 0 inside sc's recorded counterpart. -1 when none is known.
func (s *session) successorLocked(sc *scope, gid uint64, lane int) int32 {
	ix := s.plan.ops
	if h, ok := sc.last[gid]; ok {
		return ix.next[h]
	}
	if lane == 0 && sc.cp >= 0 {
		return ix.inner[sc.cp]
	}
	return -1
}

// advanceLocked notes that goroutine gid matched base operation b in sc.
func (s *session) advanceLocked(sc *scope, gid uint64, b int32) {
	if s.plan == nil || s.plan.ops == nil || b < 0 {
		return
	}
	if sc.last == nil {
		sc.last = map[uint64]int32{}
	}
	if h, ok := sc.last[gid]; ok {
		s.plan.claims[h]--
	}
	sc.last[gid] = b
	s.plan.claims[b]++
}

// groupMatchLocked finds the recorded operation of sc's concurrent group
// that the operation q, made by goroutine gid on lane lane, stands for (see
// the rules above), without taking it; -1 when none has q's identity. With
// byName, q's input is not compared: the closest operation of its kind and
// name that accept (when not nil) accepts.
func (s *session) groupMatchLocked(sc *scope, gid uint64, lane int, q opQuery, byName bool, accept func(int32) bool) int32 {
	g := s.groupOf(sc)
	if g < 0 {
		return -1
	}
	ix, p := s.plan.ops, s.plan
	k := listKey{group: g, kind: q.kind, name: q.name, byName: true}
	if !byName && !q.input.IsAbsent() {
		k = listKey{group: g, kind: q.kind, name: q.name, input: q.input.Canonical()}
	}
	l, ok := ix.lists[k]
	if !ok {
		return -1
	}
	if succ := s.successorLocked(sc, gid, lane); succ >= 0 && ix.group[succ] == g && p.pendingOp(succ) &&
		s.hasIdentity(succ, q, byName) && (accept == nil || accept(succ)) {
		return succ
	}
	members := ix.members[l]
	start := p.listAt[l]
	for start < int32(len(members)) && !p.pendingOp(members[start]) {
		start++
	}
	p.listAt[l] = start
	h, known := sc.last[gid]
	best, bestScore := int32(-1), 6
	for _, b := range members[start:] {
		if !p.pendingOp(b) || accept != nil && !accept(b) {
			continue
		}
		score := 5
		prev := ix.prev[b]
		switch {
		case known && ix.parent[b] == ix.parent[h] && ix.lane[b] == ix.lane[h]:
			score = 1 // made by the goroutine this one followed so far
		case prev < 0 || !p.pendingOp(prev): // ready
			switch {
			case prev >= 0 && p.claims[prev] > 0:
				score = 4
			case ix.parent[b] == sc.cp:
				score = 2
			default:
				score = 3
			}
		}
		if score < bestScore {
			best, bestScore = b, score
			if score == 1 {
				break
			}
		}
	}
	return best
}

// hasIdentity reports whether base operation b has q's kind and name and,
// unless byName, its identifying input.
func (s *session) hasIdentity(b int32, q opQuery, byName bool) bool {
	kind, name, input, ok := identityOf(&s.plan.base.Events[b])
	if !ok || kind != q.kind || name != q.name {
		return false
	}
	return byName || q.input.IsAbsent() || input.Canonical() == q.input.Canonical()
}

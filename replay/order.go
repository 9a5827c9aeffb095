package replay

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sort"
	"strings"

	"github.com/stepfork/stepfork/internal/traceindex"
	"github.com/stepfork/stepfork/internal/volatile"
	"github.com/stepfork/stepfork/trace"
)

// The canonical order of the trace a session writes.
//
// Goroutines append their events in the order they happen to arrive, which
// differs from run to run. A session that recorded an operation on another
// goroutine than its scope's own puts its trace in one order, a function of
// what happened and not of when, before the trace is kept (finish):
//
//   - Every event is followed by the events under it (its result, a node's
//     events, a call's body), as a run on one goroutine writes them.
//   - Under one scope, what the scope's own goroutine did (lane 0) keeps
//     its order. What other goroutines did is cut into segments: each
//     operation that says what it is (a call, a node, a decision, a
//     parameter, a state write) starts one, and the approvals, times, ids
//     and side effects its goroutine made right after it join it.
//   - A segment is placed after the lane-0 operations that were over
//     before it began (in a replay, those before the base operation it
//     stands for); segments
//     placed at one point are ordered, in a replay, as the base operations
//     they stand for are, and otherwise by their content: kind (parameters
//     and decisions, then calls and nodes, then state writes), name and
//     identifying input, then everything they hold, with ids and times
//     blanked out (package volatile); equal content, by arrival.
//
// An operation of a scope's own goroutine made after everything the
// segments placed before it (since the scope's previous join) had done was
// over, results recorded and nodes exited, is a join (trace.JoinsFile): it
// closes that part of the group, as an agent that waits for the tool calls
// of a model's answer before it asks the model again closes a turn. In a
// replay, where a segment and the operation both stand for base
// operations, the base says whether the segment was over (a join of the
// base lies between them); a null fork therefore has its base's joins.
//
// Steps are then numbered in that order, the lanes of each scope numbered
// in order of first appearance, every state write's "before" set to the
// value the key had before it in that order, and, in a replay, the base's
// event ids kept while the trace equals the base event by event. A null
// fork's trace is therefore its base's, and two recordings of the same
// behaviour are written alike, whatever the schedule. What no order can
// say: an operation of a scope's own goroutine that a goroutine of the
// scope races (the goroutine begins while the operation runs in one run,
// after it in another) is placed as it happened.

// orderer computes the canonical order of a session's events (arrival
// order in evs).
type orderer struct {
	evs     []trace.Event
	kids    [][]int32 // children of each event, in arrival order
	roots   []int32
	lane    []int32
	cps     []int32  // base event each stands for, -1; nil outside replays
	ops     *opIndex // the base's concurrency model, nil outside replays of a laned base
	joins   []int32  // the joins found (ordered), in no particular order
	digest  map[int32][sha256.Size]byte
	order   map[int32][]int32 // ordered children, once computed
	end     []int32           // the last event under each event (last)
	scratch []byte
}

// canonicalOrder returns the canonical order of evs (new position → index
// in evs), nil when it is evs' own order, and the joins (indexes in evs, in
// canonical order). parents holds each event's parent (parentsOf), lanes
// the lanes of the operations (by event id), cps the base events they stand
// for (by index; nil when not replaying) and ops the base's concurrency
// model (nil when not replaying a laned base).
func canonicalOrder(evs []trace.Event, parents []int32, lanes map[string]int, cps []int32, ops *opIndex) (ord, joins []int32) {
	n := len(evs)
	o := &orderer{evs: evs, kids: make([][]int32, n), lane: make([]int32, n), cps: cps, ops: ops}
	for i := range evs {
		if l, ok := lanes[evs[i].ID]; ok {
			o.lane[i] = int32(l)
		}
		if p := parents[i]; p >= 0 {
			o.kids[p] = append(o.kids[p], int32(i))
		} else {
			o.roots = append(o.roots, int32(i))
		}
	}
	out := make([]int32, 0, n)
	stack := make([]int32, 0, 64)
	for _, r := range o.roots {
		stack = append(stack[:0], r)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			out = append(out, i)
			kids := o.ordered(i)
			for k := len(kids) - 1; k >= 0; k-- {
				stack = append(stack, kids[k])
			}
		}
	}
	if len(o.joins) > 0 {
		pos := make([]int32, n)
		for k, i := range out {
			pos[i] = int32(k)
		}
		joins = o.joins
		slices.SortFunc(joins, func(a, b int32) int { return cmp.Compare(pos[a], pos[b]) })
	}
	for i, j := range out {
		if int(j) != i {
			return out, joins
		}
	}
	return nil, joins
}

// last is the index of the last event appended under event i (i itself
// when nothing is under it).
func (o *orderer) last(i int32) int32 {
	if o.end == nil {
		o.end = make([]int32, len(o.evs))
		for j := len(o.evs) - 1; j >= 0; j-- {
			o.end[j] = max(o.end[j], int32(j))
			for _, k := range o.kids[j] {
				o.end[j] = max(o.end[j], o.end[k])
			}
		}
	}
	return o.end[i]
}

// cp is the base event event i stands for, -1.
func (o *orderer) cp(i int32) int32 {
	if o.cps == nil || int(i) >= len(o.cps) {
		return -1
	}
	return o.cps[i]
}

// segment is a run of operations one goroutine made in a scope's
// concurrent group (see above).
type segment struct {
	ops   []int32
	epoch int
	cp    int32
	key   string
	keyed bool
}

// follower reports whether ev joins the segment of the operation its
// goroutine made before it: an approval, a time, an id, a side effect.
func follower(ev *trace.Event) bool {
	if ev.Type != trace.StateChange || !strings.HasPrefix(ev.Key, "@") {
		return false
	}
	switch ev.Key {
	case trace.MarkerNow, trace.MarkerID, trace.MarkerEffect:
		return true
	case trace.MarkerDecision:
		m, _ := ev.Marker()
		return m.Kind == trace.KindApproval
	}
	return false
}

// ordered is the canonical order of the children of event p.
func (o *orderer) ordered(p int32) []int32 {
	if done, ok := o.order[p]; ok {
		return done
	}
	kids := o.kids[p]
	concurrent := false
	for _, k := range kids {
		if o.lane[k] > 0 {
			concurrent = true
			break
		}
	}
	if !concurrent {
		return kids
	}
	var lane0 []int32
	var segs []*segment
	cur := map[int32]*segment{}
	for _, k := range kids {
		l := o.lane[k]
		if l == 0 {
			lane0 = append(lane0, k)
			continue
		}
		sg := cur[l]
		if sg == nil || !follower(&o.evs[k]) {
			sg = &segment{cp: o.cp(k)}
			segs = append(segs, sg)
			cur[l] = sg
		}
		sg.ops = append(sg.ops, k)
	}
	for _, sg := range segs {
		first := sg.ops[0]
		// An operation of the scope's own goroutine comes before the
		// segment when it was over (its last event written) before the
		// segment began; in a replay, when the base says so. Both orders
		// follow the goroutine's own, so the first that does not is found
		// by bisection.
		sg.epoch = sort.Search(len(lane0), func(k int) bool {
			l := lane0[k]
			if lc := o.cp(l); lc >= 0 && sg.cp >= 0 {
				return lc > sg.cp
			}
			return o.last(l) >= first
		})
	}
	slices.SortStableFunc(segs, func(a, b *segment) int {
		if c := cmp.Compare(a.epoch, b.epoch); c != 0 {
			return c
		}
		switch am, bm := a.cp >= 0, b.cp >= 0; {
		case am && bm:
			return cmp.Compare(a.cp, b.cp)
		case am != bm: // what stands for the base first
			if am {
				return -1
			}
			return 1
		}
		return strings.Compare(o.key(a), o.key(b)) // equal keys keep their arrival order
	})
	o.findJoins(lane0, segs)
	out := make([]int32, 0, len(kids))
	s := 0
	for e := 0; e <= len(lane0); e++ {
		for ; s < len(segs) && segs[s].epoch == e; s++ {
			out = append(out, segs[s].ops...)
		}
		if e < len(lane0) {
			out = append(out, lane0[e])
		}
	}
	if o.order == nil {
		o.order = map[int32][]int32{}
	}
	o.order[p] = out
	return out
}

// findJoins notes the joins among the operations of a scope's own
// goroutine, lane0, given the segments of its group, sorted by epoch (see
// above).
func (o *orderer) findJoins(lane0 []int32, segs []*segment) {
	s := 0 // the first segment placed after the last join
	for k, l := range lane0 {
		if _, _, _, isOp := identityOf(&o.evs[l]); !isOp {
			continue
		}
		e := s
		for e < len(segs) && segs[e].epoch <= k {
			e++
		}
		if e == s {
			continue // nothing to close
		}
		joined := true
		for _, sg := range segs[s:e] {
			if !o.over(sg, l) {
				joined = false
				break
			}
		}
		if joined {
			o.joins = append(o.joins, l)
			s = e
		}
	}
}

// over reports whether everything segment sg did was over before the
// operation l of its scope's own goroutine began: in a replay, when both
// stand for base operations of one scope, whether a join of the base lies
// between them; otherwise whether the last event under sg arrived before l.
func (o *orderer) over(sg *segment, l int32) bool {
	if lc := o.cp(l); lc >= 0 && sg.cp >= 0 && o.ops != nil {
		ix := o.ops
		if ix.parent[lc] == ix.parent[sg.cp] {
			return ix.part[lc] > ix.part[sg.cp]
		}
	}
	for _, op := range sg.ops {
		if o.last(op) >= l {
			return false
		}
	}
	return true
}

// kindRank orders the segments of a group by the kind of their first
// operation: what decides comes before what acts, what acts before the
// state it leaves.
func kindRank(ev *trace.Event) int {
	kind, _, _, ok := identityOf(ev)
	if !ok {
		return 9
	}
	switch kind {
	case KindNow, KindID, KindEffect, KindApproval:
		return 0
	case KindParam, opRead:
		return 1
	case KindDecision:
		return 2
	case KindTool, KindLLM, opNode:
		return 3
	case KindState:
		return 4
	}
	return 9
}

// key is the content key of a segment: its first operation's kind, name and
// identifying input, then a digest of everything it holds, volatile values
// blanked out.
func (o *orderer) key(sg *segment) string {
	if sg.keyed {
		return sg.key
	}
	var b strings.Builder
	first := sg.ops[0]
	b.WriteByte(byte('0' + kindRank(&o.evs[first])))
	// A node is known by what it does first: its first operation inside,
	// and so on down.
	for depth := 0; first >= 0 && depth < 8; depth++ {
		kind, name, input, _ := identityOf(&o.evs[first])
		b.WriteString(string(kind))
		b.WriteByte(0)
		b.WriteString(volatile.Blank(name))
		b.WriteByte(0)
		if !input.IsAbsent() {
			b.WriteString(volatile.Blank(input.Canonical()))
		}
		b.WriteByte(1)
		if kind != opNode {
			break
		}
		next := int32(-1)
		for _, k := range o.ordered(first) {
			if _, _, _, ok := identityOf(&o.evs[k]); ok {
				next = k
				break
			}
		}
		first = next
	}
	b.WriteByte(0)
	h := sha256.New()
	for _, k := range sg.ops {
		d := o.digestOf(k)
		h.Write(d[:])
	}
	b.Write(h.Sum(nil))
	sg.key, sg.keyed = b.String(), true
	return sg.key
}

// digestOf is a digest of event i and everything under it, in canonical
// order, volatile values blanked out.
func (o *orderer) digestOf(i int32) [sha256.Size]byte {
	if d, ok := o.digest[i]; ok {
		return d
	}
	kids := o.ordered(i)
	subs := make([][sha256.Size]byte, len(kids))
	for j, k := range kids {
		subs[j] = o.digestOf(k)
	}
	b := appendContent(o.scratch[:0], &o.evs[i])
	for j := range subs {
		b = append(b, subs[j][:]...)
	}
	o.scratch = b
	d := sha256.Sum256(b)
	if o.digest == nil {
		o.digest = map[int32][sha256.Size]byte{}
	}
	o.digest[i] = d
	return d
}

// appendContent appends what an event says (not its id, parent, step,
// time or duration) to b, volatile values blanked out.
func appendContent(b []byte, ev *trace.Event) []byte {
	for _, s := range [...]string{string(ev.Type), string(ev.Status), ev.Name, ev.Key, ev.Provider, ev.Model,
		ev.ErrorType, ev.Message, string(ev.RunStatus)} {
		b = appendString(b, volatile.Blank(s))
	}
	for _, v := range [...]trace.Value{ev.Input, ev.Output, ev.Before, ev.After, ev.Details} {
		b = appendString(b, volatile.Blank(v.Canonical()))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// canonicalLocked puts evs, the session's events in the order they were
// appended, in the canonical order, and renumbers and rewrites what depends
// on the order (see above): steps, lanes, the "before" of state writes, the
// ids kept from the base, and every reference to an event (parents, the
// redactions, the call records, the run's failure). It returns evs itself
// when nothing moved.
func (s *session) canonicalLocked(evs []trace.Event) []trace.Event {
	parents := traceindex.Parents(evs)
	s.settleNodesLocked(evs, parents)
	var ops *opIndex
	if s.plan != nil {
		ops = s.plan.ops
	}
	ord, joins := canonicalOrder(evs, parents, s.lanes, s.cps, ops)
	if ord == nil {
		s.joins = s.joins[:0]
		for _, j := range joins {
			s.joins = append(s.joins, evs[j].ID)
		}
		return evs
	}
	n := len(evs)
	moved := make([]int32, n) // arrival index → new step
	for k, i := range ord {
		moved[i] = int32(k)
	}
	// Permute in place, cycle by cycle: event i goes to moved[i].
	for i := range evs {
		for int(moved[i]) != i {
			j := moved[i]
			evs[i], evs[j] = evs[j], evs[i]
			moved[i], moved[j] = moved[j], moved[i]
		}
	}
	for k, i := range ord {
		moved[i] = int32(k)
	}
	out := evs
	for k := range out {
		out[k].Step = k
	}
	s.moved = moved
	if s.tr.Failure != nil && s.tr.Failure.Step < n {
		s.tr.Failure.Step = int(moved[s.tr.Failure.Step])
	}

	// Lanes, by first appearance in each scope.
	lanes := make(map[string]int, len(s.lanes))
	next := map[string]int{}
	type scopeLane struct {
		parent string
		lane   int
	}
	renamed := map[scopeLane]int{}
	for k := range out {
		l := s.lanes[out[k].ID]
		if l < 1 {
			continue
		}
		sl := scopeLane{out[k].ParentID, l}
		nl, ok := renamed[sl]
		if !ok {
			next[sl.parent]++
			nl = next[sl.parent]
			renamed[sl] = nl
		}
		lanes[out[k].ID] = nl
	}

	s.restateLocked(out, ord)
	remap := s.rebaseLocked(out)
	s.joins = s.joins[:0]
	for _, j := range joins {
		s.joins = append(s.joins, out[moved[j]].ID)
	}

	s.lanes = make(map[string]int, len(lanes))
	for id, l := range lanes {
		if nid, ok := remap[id]; ok {
			id = nid
		}
		s.lanes[id] = l
	}
	if len(s.tr.Redactions) > 0 {
		pos := make(map[string]int, n)
		for k := range out {
			pos[out[k].ID] = k
		}
		for i := range s.tr.Redactions {
			if nid, ok := remap[s.tr.Redactions[i].EventID]; ok {
				s.tr.Redactions[i].EventID = nid
			}
		}
		slices.SortStableFunc(s.tr.Redactions, func(a, b trace.RedactionEntry) int {
			return cmp.Compare(pos[a.EventID], pos[b.EventID])
		})
	}
	calls := s.calls.all()
	for i := range calls {
		if nid, ok := remap[calls[i].EventID]; ok {
			calls[i].EventID = nid
		}
	}
	return out
}

// restateLocked sets the "before" of every plain state write of out (in
// canonical order; ord maps it to the order of arrival) to the value its
// key had before it in that order: the "after" of the key's previous
// write, or, for the key's first write, what the first write to arrive
// found (null, or the value a patched Read started from).
func (s *session) restateLocked(out []trace.Event, ord []int32) {
	type first struct {
		arrival int32
		before  trace.Value
		hidden  bool
	}
	firsts := map[string]first{}
	for k := range out {
		ev := &out[k]
		if ev.Type != trace.StateChange || ev.IsMarker() {
			continue
		}
		if f, ok := firsts[ev.Key]; !ok || ord[k] < f.arrival {
			firsts[ev.Key] = first{ord[k], ev.Before, slices.Contains(ev.Redactions, "/before")}
		}
	}
	type last struct {
		after  trace.Value
		hidden bool
	}
	seen := map[string]last{}
	for k := range out {
		ev := &out[k]
		if ev.Type != trace.StateChange || ev.IsMarker() {
			continue
		}
		before, hidden := firsts[ev.Key].before, firsts[ev.Key].hidden
		if l, ok := seen[ev.Key]; ok {
			before, hidden = l.after, l.hidden
			if before.IsAbsent() {
				before, hidden = trace.NullValue, false
			}
		}
		seen[ev.Key] = last{ev.After, slices.Contains(ev.Redactions, "/after")}
		was := slices.Contains(ev.Redactions, "/before")
		if before == ev.Before && hidden == was {
			continue
		}
		ev.Before = before
		if hidden != was {
			ev.Redactions = slices.DeleteFunc(slices.Clone(ev.Redactions), func(p string) bool { return p == "/before" })
			s.tr.Redactions = slices.DeleteFunc(s.tr.Redactions, func(e trace.RedactionEntry) bool {
				return e.EventID == ev.ID && e.Path == "/before"
			})
			if hidden {
				ev.Redactions = append(ev.Redactions, "/before")
				s.tr.Redactions = append(s.tr.Redactions, trace.RedactionEntry{EventID: ev.ID, Path: "/before",
					Reason: trace.ReasonSensitiveKey, Replacement: trace.Redacted})
			}
		}
		var buf [2 * 2 * sha256.Size]byte
		ev.InputHash, ev.OutputHash = payloadHashes(buf[:0], ev)
	}
}

// rebaseLocked gives out's events, in canonical order, the base's event
// ids (and hashes) while each equals the base event at its position, and
// fresh ids from the first that does not on (an event that took a base id
// when it arrived, but is past that point, gets a fresh one). Parents are
// renamed along. It returns the ids it changed, old → new.
func (s *session) rebaseLocked(out []trace.Event) map[string]string {
	remap := map[string]string{}
	var base []trace.Event
	if s.plan != nil {
		base = s.plan.base.Events
	}
	aligned := base != nil
	for k := range out {
		ev := &out[k]
		if p, ok := remap[ev.ParentID]; ok {
			ev.ParentID = p
		}
		old := ev.ID
		if aligned && k < len(base) && sameEvent(&base[k], ev) {
			ev.ID = base[k].ID
			ev.InputHash, ev.OutputHash = s.plan.hashesOf(k)
		} else {
			aligned = false
			if s.plan == nil {
				continue // a recording: its ids are all fresh
			}
			if _, isBase := s.plan.ids.Lookup(ev.ID); isBase {
				var buf [36]byte
				ev.ID = string(s.ids.append(buf[:0]))
			}
		}
		if ev.ID != old {
			remap[old] = ev.ID
		}
	}
	return remap
}

// settleNodesLocked corrects which base node each node of a replay stands
// for. A node on a goroutine is matched when it is entered, by name and its
// goroutine's history, before anything tells it apart from the other nodes
// of its name; what it then holds does. Nodes return nothing, so the match
// can be settled afterwards: a node stands for the base node that holds the
// base events its own events stand for.
func (s *session) settleNodesLocked(evs []trace.Event, parents []int32) {
	if s.cps == nil {
		return
	}
	ix := s.plan.ops
	vote := map[int32]int32{} // live node enter → base node enter
	var nodes []int32
	exits := map[int32]int32{} // live node enter → its exit
	for i := range evs {
		ev := &evs[i]
		p := parents[i]
		if p < 0 || !isEnterMarker(&evs[p]) {
			continue
		}
		if isExitMarker(ev) {
			exits[p] = int32(i)
			continue
		}
		c := s.cps[i]
		if c < 0 {
			continue
		}
		bp := ix.parent[c]
		if _, voted := vote[p]; !voted && bp >= 0 && ix.kind[bp] == opNode {
			vote[p] = bp
			nodes = append(nodes, p)
		}
	}
	taken := map[int32]bool{}
	for _, p := range nodes {
		if b := vote[p]; !taken[b] {
			taken[b] = true
		} else {
			delete(vote, p)
		}
	}
	for i := range evs {
		p := int32(i)
		if !isEnterMarker(&evs[i]) {
			continue
		}
		b, ok := vote[p]
		switch {
		case ok:
		case s.cps[p] >= 0 && taken[s.cps[p]]:
			b = -1 // its match belongs to the node that holds what it stood for
		default:
			continue
		}
		s.cps[p] = b
		if x, ok := exits[p]; ok {
			s.cps[x] = -1
			if e, ok := s.exitOf(b); ok {
				s.cps[x] = e
			}
		}
	}
}

func isEnterMarker(ev *trace.Event) bool {
	if !ev.IsMarker() || ev.Key != trace.MarkerNode {
		return false
	}
	m, _ := ev.Marker()
	return m.Phase != trace.PhaseExit
}

func isExitMarker(ev *trace.Event) bool {
	if !ev.IsMarker() || ev.Key != trace.MarkerNode {
		return false
	}
	m, _ := ev.Marker()
	return m.Phase == trace.PhaseExit
}

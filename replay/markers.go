package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/trace"
)

// Node runs fn as a named phase of the agent. It records an @node enter
// marker, runs fn with a context whose events hang under that marker, and
// records an @node exit marker (status ok, or error with the error's text)
// under it too. Nodes nest. fn's error is returned as is; a panic is recorded
// as an error exit and re-raised. Nodes are the boundaries forks address
// (BeforeNode, AfterNode); they are re-recorded on replay, not matched. With
// no session in the context it is fn(ctx).
func Node(ctx context.Context, name string, fn func(context.Context) error) error {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			if err := sessionless("Node", "node", name); err != nil {
				return err
			}
		}
		return fn(ctx)
	}
	if name == "" {
		return errors.New("replay.Node: the node name is empty")
	}
	s := sc.s
	gid := goid()
	s.mu.Lock()
	enter := s.appendMarkerLocked(trace.Marker{Key: trace.MarkerNode, Name: name, Phase: trace.PhaseEnter}, sc.parent)
	lane := s.laneLocked(sc, gid)
	s.noteLaneLocked(enter, lane)
	cp := s.nodeCPLocked(sc, gid, lane, name)
	s.noteCPLocked(s.log.n-1, cp)
	s.mu.Unlock()

	exit := func(err error) {
		m := trace.Marker{Key: trace.MarkerNode, Name: name, Phase: trace.PhaseExit, Status: trace.NodeStatusOK}
		if err != nil {
			m.Status, m.Error = trace.NodeStatusFail, errorMessage(err, errorType(err))
		}
		s.mu.Lock()
		s.appendMarkerLocked(m, enter)
		if x, ok := s.exitOf(cp); ok {
			s.noteCPLocked(s.log.n-1, x)
		}
		s.mu.Unlock()
	}
	done := false
	defer func() {
		if !done {
			p := recover()
			exit(panicError{p})
			panic(p)
		}
	}()
	child, _ := sc.child(ctx, enter, name, "node", name, gid, sc.free || lane > 0, false, cp)
	err := fn(child)
	done = true
	exit(err)
	return err
}

// Set records a write of state key: a state_change event with the value
// the key had before in this run (null the first time) and the new value.
// Forks patch state and diffs report it by key. Keys must not be empty or
// start with '@' (reserved for markers). State writes are re-recorded on
// replay, not matched: a replay whose writes differ shows it in the diff of
// its trace against the base. With no session in the context it does nothing.
func Set(ctx context.Context, key string, value any) error {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			return sessionless("Set", "state write", key)
		}
		return nil
	}
	if key == "" || strings.HasPrefix(key, "@") {
		return fmt.Errorf("replay.Set: state key %q is not allowed: keys must be non-empty and must not start with '@' (reserved for markers)", key)
	}
	v, err := sc.s.valueOf(value)
	if err != nil {
		return fmt.Errorf("replay.Set: state '%s': %w", key, err)
	}
	s := sc.s
	var gid uint64
	if s.tracksLanes() {
		gid = goid()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(sc, gid, key, v)
	delete(s.patched, key)
	return nil
}

// setLocked records a state write made by goroutine gid. A key that is
// itself sensitive (password, api_key…: trace.IsSensitiveKey) has its
// values redacted, as a member of that name would be.
func (s *session) setLocked(sc *scope, gid uint64, key string, v trace.Value) {
	before, ok := s.state[key]
	if !ok {
		before = trace.NullValue
	}
	after := v // Absent for a deletion: the key has no value after it
	if v.IsAbsent() {
		delete(s.state, key)
	} else {
		s.state[key] = v
	}
	ev := s.newEventLocked() // built in place (see commitLocked)
	ev.Type, ev.ParentID, ev.Key, ev.Before, ev.After = trace.StateChange, sc.parent, key, before, after
	var paths []string
	if trace.IsSensitiveKey(key) {
		hides := func(v trace.Value) bool {
			return !v.IsNull() && !v.IsAbsent() && v.Canonical() != redactedValue.Canonical()
		}
		if hides(ev.Before) {
			ev.Before = redactedValue
			paths = append(paths, "/before")
		}
		if hides(ev.After) {
			ev.After = redactedValue
			paths = append(paths, "/after")
		}
		ev.Redactions = paths
	}
	id := s.commitLocked(ev, nil)
	for _, p := range paths {
		s.tr.Redactions = append(s.tr.Redactions, trace.RedactionEntry{EventID: id, Path: p, Reason: trace.ReasonSensitiveKey, Replacement: trace.Redacted})
	}
	lane := s.laneLocked(sc, gid)
	s.noteLaneLocked(id, lane)
	if s.plan != nil && s.plan.ops != nil && (lane > 0 || sc.free) {
		// A state write on a goroutine is matched in its group, by key and
		// value, for the order of the new trace and its goroutine's history.
		q := opQuery{kind: KindState, name: key, input: stateValue(s.log.last().After)}
		if b := s.groupMatchLocked(sc, gid, lane, q, false, nil); b >= 0 {
			s.plan.takeOp(b)
			s.advanceLocked(sc, gid, b)
			s.noteCPLocked(s.log.n-1, b)
		}
	}
}

// nodeCPLocked matches a node entered by goroutine gid on lane lane of sc
// with the base node it stands for, and returns that node's enter marker
// (-1 when none, or when the base has no lanes): in a concurrent group by
// name and the goroutine's history, otherwise the next recorded node of
// that name. Nodes are not checked: the match only places the node's
// events in the new trace and tells its goroutines what to expect.
func (s *session) nodeCPLocked(sc *scope, gid uint64, lane int, name string) int32 {
	if s.plan == nil || s.plan.ops == nil {
		return -1
	}
	if lane > 0 || sc.free {
		b := s.groupMatchLocked(sc, gid, lane, opQuery{kind: opNode, name: name}, true, nil)
		if b >= 0 {
			s.plan.takeOp(b)
			s.advanceLocked(sc, gid, b)
		}
		return b
	}
	m, slot := s.plan.nextMarker(trace.MarkerNode, name)
	if m == nil {
		return -1
	}
	s.plan.markerDone[slot] = true
	return m.i
}

// exitOf is the exit marker of the base node entered at event enter.
func (s *session) exitOf(enter int32) (int32, bool) {
	if enter < 0 || s.plan == nil || s.plan.ops == nil {
		return -1, false
	}
	x, ok := s.plan.ops.exit[enter]
	return x, ok
}

var redactedValue = trace.StringValue(trace.Redacted)

// appendMarkerLocked appends the marker m under parent, built in the
// session's next event (see newEventLocked) rather than copied there.
func (s *session) appendMarkerLocked(m trace.Marker, parent string) string {
	if s.aligned && s.plan != nil && s.log.n < len(s.plan.base.Events) {
		if b := &s.plan.base.Events[s.log.n]; b.Type == trace.StateChange && b.Key == m.Key && isNodeMarker(b.After.Canonical(), &m) {
			// The base's marker at this place is this one: its text, not
			// a new copy of it (which commitLocked would replace by the
			// base's anyway), so that a replay that follows its base
			// writes its nodes without allocating.
			ev := s.newEventLocked()
			ev.Type, ev.Status, ev.ReplayPolicy, ev.Key, ev.Before, ev.After = trace.StateChange, trace.StatusOK, trace.PolicyFrozen, m.Key, trace.NullValue, b.After
			ev.ParentID = parent
			return s.commitLocked(ev, nil)
		}
	}
	ev := s.newEventLocked()
	fillMarker(ev, m)
	ev.ParentID = parent
	return s.commitLocked(ev, nil)
}

// isNodeMarker reports whether text is the canonical text of the @node
// marker m (what trace.MarkerEvent(m) holds) for an enter marker or an
// exit marker with status ok whose name (not empty: MarkerEvent omits
// an empty one) needs no escaping; false
// otherwise, whatever text is (markers_test.go checks it against
// trace.MarkerEvent).
func isNodeMarker(text string, m *trace.Marker) bool {
	if m.Key != trace.MarkerNode || m.Name == "" || m.Error != "" || m.ErrorType != "" || m.Kind != "" || m.Forced || !m.Value.IsAbsent() {
		return false
	}
	var tail string
	switch {
	case m.Phase == trace.PhaseEnter && m.Status == "":
		tail = `","phase":"enter"}`
	case m.Phase == trace.PhaseExit && m.Status == trace.NodeStatusOK:
		tail = `","phase":"exit","status":"ok"}`
	default:
		return false
	}
	const head = `{"name":"`
	name := m.Name
	if len(text) != len(head)+len(name)+len(tail) || text[:len(head)] != head ||
		text[len(head):len(head)+len(name)] != name || text[len(head)+len(name):] != tail {
		return false
	}
	// A name is written as it is when it is UTF-8 without control
	// characters, quotes or backslashes (trace's canonical strings).
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.ValidString(name)
}

// fillMarker sets, in a zero event, the fields trace.MarkerEvent(m) sets
// (markers_test.go checks that they are all): a field at a time, where
// assigning the whole event would copy its 416 bytes into the session's
// log through the write barriers of its every pointer.
func fillMarker(ev *trace.Event, m trace.Marker) {
	mk := trace.MarkerEvent(m)
	ev.Type, ev.Status, ev.ReplayPolicy, ev.Key, ev.Before, ev.After = mk.Type, mk.Status, mk.ReplayPolicy, mk.Key, mk.Before, mk.After
}

// Read returns the value of state key that the agent holds as current. It
// is the seam through which a fork patches state: a Director may answer the
// read with another value (recorded as a state_change from current to the
// patched value), and the agent continues with that. The patched value
// stands until the agent writes the key ([Set]): later reads of the key
// return it too, so goroutines that read the key concurrently all see it,
// whichever reads first. Without a Director it returns current.
//
// Where the agent read the key is recorded as an @read marker (its name
// only, not the value), so that a fork can start before the first read of a
// key (fork.BeforeFirstReadOf). A replay of a recording that holds no @read
// marker (made before reads were recorded) records none either, so that it
// stays event for event the recording. With no session in the context it
// returns current and records nothing.
func Read[T any](ctx context.Context, key string, current T) T {
	sc := fromContext(ctx)
	if sc == nil && activeSessions.Load() != 0 {
		_ = sessionless("Read", "state read", key) // kept by a strict run
	}
	if sc == nil {
		return current
	}
	s := sc.s
	var gid uint64
	if s.tracksLanes() {
		gid = goid()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	step := s.log.n // the read's own step: before its marker
	s.readLocked(sc, gid, key)
	if s.plan == nil || s.cfg.director == nil {
		return current
	}
	cur, err := valueOf(current)
	if err != nil {
		return current
	}
	c := &s.direct
	*c = Call{Kind: KindState, Name: key, Input: s.redacted(cur), Parent: sc.parent, Node: sc.node,
		Occurrence: s.occurrenceLocked(KindState, key), Step: step, Seq: s.directLocked()}
	seq := c.Seq
	a := s.cfg.director.Direct(c)
	if a.kind != actServe {
		if v, ok := s.patched[key]; ok {
			// The key was patched and the agent has not written it since.
			if v.IsAbsent() {
				var zero T
				return zero
			}
			if out, err := decodeValue[T](v); err == nil {
				return out
			}
		}
		return current
	}
	var out T
	if !a.value.IsAbsent() {
		var err error
		if out, err = decodeValue[T](a.value); err != nil {
			s.noteLocked(&MismatchError{Kind: KindState, Label: key, Step: -1,
				msg: fmt.Sprintf("patched state '%s' %s does not decode into %T: %v", key, preview(a.value), out, err)})
			return current
		}
	}
	if s.patched == nil {
		s.patched = map[string]trace.Value{}
	}
	s.patched[key] = a.value
	if _, known := s.state[key]; !known {
		s.state[key] = cur
	}
	s.setLocked(sc, gid, key, a.value)
	s.noteDirectedLocked(seq, s.log.n-1)
	return out
}

// readLocked records that the agent reads state key: an @read marker,
// standing for the base run's @read of key it matches on replay (as any
// marker does). A replay of a base that records no reads records none.
func (s *session) readLocked(sc *scope, gid uint64, key string) {
	lane := s.laneLocked(sc, gid)
	free := lane > 0 || sc.free
	matched := int32(-1)
	if s.plan != nil {
		next, slot := s.markerCPLocked(sc, gid, lane, free, opRead, key, trace.Value{})
		if next == nil && !s.plan.reads {
			return
		}
		if next != nil {
			s.plan.markerDone[slot] = true
			matched = next.i
			if free {
				s.advanceLocked(sc, gid, matched)
			}
		}
	}
	id := s.appendMarkerLocked(trace.Marker{Key: trace.MarkerRead, Name: key}, sc.parent)
	s.noteLaneLocked(id, lane)
	s.noteCPLocked(s.log.n-1, matched)
}

// Decide records a decision the agent computed (a route, a branch) as a
// @decision marker and returns it. A fork may force another value through
// its Director (recorded with "forced":true). On replay the computed value is
// checked against the recorded one, in order, by name: a different value, or
// a decision the recording does not have, is a divergence (kept in
// Result.Divergence; the computed value is returned). With no session in the
// context it returns computed.
func Decide[T any](ctx context.Context, name string, computed T) T {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			_ = sessionless("Decide", "decision", name) // kept by a strict run
		}
		return computed
	}
	cv, err := valueOf(computed)
	if err != nil {
		sc.s.note(fmt.Errorf("replay.Decide: decision '%s': %w", name, err))
		return computed
	}
	m := sc.s.marker(sc, KindDecision, name, cv, nil)
	if m.forced {
		if out, err := decodeValue[T](m.value); err == nil {
			return out
		}
		sc.s.note(&MismatchError{Kind: KindDecision, Label: name, Step: -1,
			msg: fmt.Sprintf("forced decision '%s' %s does not decode into %T", name, preview(m.value), computed)})
	}
	return computed
}

// Approve asks a human (or any approver) for a decision: ask runs while
// recording and its answer is recorded as a @decision marker of kind
// approval; on replay the recorded answer (or failure, as a *RecordedError) is
// served without asking; a fork may answer in ask's place. As with [Tool],
// the answer reaches the agent as the recording keeps it, live or served.
// With no session in the context it is ask(ctx).
func Approve[T any](ctx context.Context, name string, ask func(context.Context) (T, error)) (T, error) {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			if err := sessionless("Approve", "approval", name); err != nil {
				var zero T
				return zero, err
			}
		}
		return ask(ctx)
	}
	return effect(ctx, sc, KindApproval, name, func(ctx context.Context) (T, error) { return ask(ctx) })
}

// SideEffect runs fn once and records its result as an @effect marker; on
// replay the recorded result is returned without running fn (Temporal's
// SideEffect). Use it for any nondeterminism that is not a tool: random
// numbers, environment reads, a file's modification time. A recorded error
// comes back as a *RecordedError. As with [Tool], fn's result reaches the
// agent as the recording keeps it, live or served. With no session in the
// context it is fn().
func SideEffect[T any](ctx context.Context, name string, fn func() (T, error)) (T, error) {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			if err := sessionless("SideEffect", "side effect", name); err != nil {
				var zero T
				return zero, err
			}
		}
		return fn()
	}
	return effect(ctx, sc, KindEffect, name, func(context.Context) (T, error) { return fn() })
}

func effect[T any](ctx context.Context, sc *scope, kind CallKind, name string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	var liveVal T
	m := sc.s.marker(sc, kind, name, trace.Value{}, func() (trace.Value, error) {
		v, err := fn(ctx)
		if err != nil {
			return trace.Value{}, err
		}
		rec, err := valueOf(v)
		if err == nil {
			liveVal, err = asRecorded(v, rec)
		}
		return rec, err
	})
	if m.err != nil {
		return zero, m.err
	}
	if !m.served {
		return liveVal, nil
	}
	return decodeServed[T](sc, kind, name, m.value)
}

// Param returns the value of a knob the agent reads (a limit, a threshold, a
// prompt variant) and records it as a @param marker. While recording it is
// def, as the recording keeps it (see [Tool]); on replay the recorded value
// is served (a recording without it is a divergence, and def is used); a
// fork may set another value. With no session in the context it returns
// def.
func Param[T any](ctx context.Context, name string, def T) T {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			_ = sessionless("Param", "parameter", name) // kept by a strict run
		}
		return def
	}
	dv, err := valueOf(def)
	if err != nil {
		sc.s.note(fmt.Errorf("replay.Param: parameter '%s': %w", name, err))
		return def
	}
	m := sc.s.marker(sc, KindParam, name, dv, nil)
	if !m.served {
		if v, err := asRecorded(def, dv); err == nil {
			return v // as a replay serves it
		}
		return def
	}
	out, err := decodeValue[T](m.value)
	if err != nil {
		sc.s.note(&MismatchError{Kind: KindParam, Label: name, Step: -1,
			msg: fmt.Sprintf("recorded parameter '%s' %s does not decode into %T", name, preview(m.value), def)})
		return def
	}
	return out
}

// Now returns the current time, recorded as a @now marker (UTC, microsecond
// precision) and served on replay. With no session in the context it is
// time.Now().
func Now(ctx context.Context) time.Time {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			_ = sessionless("Now", "", "") // kept by a strict run
		}
		return time.Now()
	}
	var live time.Time
	m := sc.s.marker(sc, KindNow, "", trace.Value{}, func() (trace.Value, error) {
		live = now()
		return trace.StringValue(live.Format(time.RFC3339Nano)), nil
	})
	if !m.served {
		return live
	}
	str, _ := m.value.Str()
	t, err := time.Parse(time.RFC3339Nano, str)
	if err != nil {
		sc.s.note(&MismatchError{Kind: KindNow, Label: "now", Step: -1,
			msg: fmt.Sprintf("recorded time %s is not an RFC 3339 time: %v", preview(m.value), err)})
		return time.Now()
	}
	return t
}

// NewID returns a new random id (a UUID), recorded as an @id marker and
// served on replay. With no session in the context it is uuid.NewString().
func NewID(ctx context.Context) string {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			_ = sessionless("NewID", "", "") // kept by a strict run
		}
		return uuid.NewString()
	}
	var live string
	m := sc.s.marker(sc, KindID, "", trace.Value{}, func() (trace.Value, error) {
		live = uuid.NewString()
		return trace.StringValue(live), nil
	})
	if !m.served {
		return live
	}
	str, _ := m.value.Str()
	return str
}

// markerResult is how a marker call was answered.
type markerResult struct {
	value  trace.Value
	served bool // value comes from the recording or the Director
	forced bool // value was forced by the Director
	err    error
}

// note keeps err as the divergence when it is the first.
func (s *session) note(err error) {
	s.mu.Lock()
	s.noteLocked(err)
	s.mu.Unlock()
}

// marker handles a marker call. computed is the agent's value for decisions
// and parameters; live produces the value for the others. It returns the
// value to use and records the marker event.
func (s *session) marker(sc *scope, kind CallKind, name string, computed trace.Value, live func() (trace.Value, error)) markerResult {
	key := kind.markerKey()
	var gid uint64
	if s.tracksLanes() {
		gid = goid()
	}
	s.mu.Lock()
	lane := s.laneLocked(sc, gid)
	free := lane > 0 || sc.free
	occ := s.occurrenceLocked(kind, name)
	act := Strict()
	var (
		next *markerRec
		slot int32
		seq  int
	)
	if s.plan != nil {
		next, slot = s.markerCPLocked(sc, gid, lane, free, kind, name, computed)
		if d := s.cfg.director; d != nil {
			c := &s.direct
			*c = Call{Kind: kind, Name: name, Input: s.redacted(computed), Occurrence: occ, Parent: sc.parent, Node: sc.node, Step: s.log.n,
				Seq: s.directLocked()}
			seq = c.Seq
			if next != nil {
				c.Marker = next.ev
			}
			act = d.Direct(c)
		}
	}
	var res markerResult
	switch {
	case s.plan == nil:
		act = Execute()
	case act.kind == actServe:
		res = markerResult{value: act.value, served: true, forced: true}
	case act.kind == actBlock && live != nil && (kind == KindEffect || kind == KindApproval):
		res.err = &BlockedError{Kind: kind, Label: name, Reason: act.reason}
	case act.kind == actFail && (kind == KindEffect || kind == KindApproval):
		res.err = act.err
	case act.kind == actFail:
		s.noteLocked(act.err)
		act = Execute()
	case act.kind == actBlock:
		act = Execute()
	}
	matched := int32(-1) // the base marker this one stands for
	if res.err == nil && !res.served && (act.kind == actStrict || act.kind == actServeMatch) {
		res = s.matchMarkerLocked(kind, name, computed, next, slot)
		if next != nil {
			matched = next.i
		}
		if res.err != nil && kind != KindEffect && kind != KindApproval {
			res.err = nil // noted as the divergence; the live value is used
			act = Execute()
		}
	} else if res.forced && free && next != nil && s.plan.ops != nil {
		// A forced value in a concurrent group still stands for the
		// recorded marker: its goroutine goes on from there.
		s.plan.markerDone[slot] = true
		matched = next.i
	} else if act.kind == actExecute && res.err == nil && !res.served && next != nil && kind == KindDecision &&
		next.m.Kind == trace.KindDecision && next.m.Value == s.redacted(computed) {
		// A decision the Director lets the agent make (a fork's tail) that
		// comes out as recorded is the recorded one.
		s.plan.markerDone[slot] = true
		matched = next.i
	}
	if matched >= 0 && free {
		s.advanceLocked(sc, gid, matched)
	}
	s.mu.Unlock()

	var recordErr error
	if !res.served && res.err == nil {
		if live != nil {
			v, err := live()
			if err != nil {
				recordErr = err
				res.err = err
			}
			res.value = v
		} else {
			res.value = computed
		}
	}
	m := trace.Marker{Key: key, Name: name, Value: res.value, Forced: res.forced}
	if kind == KindDecision || kind == KindApproval {
		m.Kind = trace.KindDecision
		if kind == KindApproval {
			m.Kind = trace.KindApproval
		}
	}
	if res.err != nil {
		e := res.err
		if recordErr != nil {
			e = recordErr
		}
		m.Value, m.ErrorType = trace.Value{}, errorType(e)
		m.Error = errorMessage(e, m.ErrorType)
	}
	s.mu.Lock()
	id := s.appendMarkerLocked(m, sc.parent)
	s.noteLaneLocked(id, lane)
	s.noteCPLocked(s.log.n-1, matched)
	s.noteDirectedLocked(seq, s.log.n-1)
	s.mu.Unlock()
	if res.err != nil {
		s.scrubErr(res.err)
	}
	return res
}

// markerCPLocked is the recorded marker a marker call stands for: in a
// concurrent group (free), the group's marker of its kind and name with
// its identifying value (a decision's, a parameter's default) as the group
// matcher picks it, else the closest of its kind and name; otherwise, or
// when the group has none (a base whose markers have no lanes), the next
// recorded marker of its kind and name.
func (s *session) markerCPLocked(sc *scope, gid uint64, lane int, free bool, kind CallKind, name string, computed trace.Value) (*markerRec, int32) {
	p := s.plan
	if free && p.ops != nil {
		q := opQuery{kind: kind, name: name}
		if kind == KindDecision || kind == KindParam {
			q.input = s.redacted(computed)
		}
		b := s.groupMatchLocked(sc, gid, lane, q, false, nil)
		if b < 0 && !q.input.IsAbsent() {
			b = s.groupMatchLocked(sc, gid, lane, q, true, nil)
		}
		if b >= 0 {
			m := p.markerAt[b]
			return &p.markers[m], m
		}
	}
	return p.nextMarker(kind.markerKey(), name)
}

// matchMarkerLocked serves or checks a marker from the recording: the next
// recorded marker of the same kind and name. Decisions are checked (the
// computed value must equal the recorded one); the others are served.
func (s *session) matchMarkerLocked(kind CallKind, name string, computed trace.Value, next *markerRec, slot int32) markerResult {
	label := name
	if label == "" {
		label = string(kind)
	}
	if next == nil {
		n := s.plan.queueLen(kind.markerKey(), name)
		e := &ExhaustedError{Kind: kind, Label: label, msg: fmt.Sprintf(
			"unexpected %s '%s': all %d recorded %s marker(s) of that name were already consumed", kind, label, n, kind.markerKey())}
		s.noteLocked(e)
		return markerResult{err: e}
	}
	s.plan.markerDone[slot] = true
	ev, m := next.ev, next.m
	wantKind := ""
	switch kind {
	case KindDecision:
		wantKind = trace.KindDecision
	case KindApproval:
		wantKind = trace.KindApproval
	}
	if wantKind != "" && m.Kind != wantKind {
		e := &MismatchError{Kind: kind, Label: label, Step: ev.Step, EventID: ev.ID,
			msg: fmt.Sprintf("%s '%s': the recording has a %s of that name here", kind, label, m.Kind)}
		s.noteLocked(e)
		return markerResult{err: e}
	}
	if kind == KindDecision {
		if m.Value != s.redacted(computed) {
			e := &MismatchError{Kind: kind, Label: label, Step: ev.Step, EventID: ev.ID, Recorded: m.Value, Actual: s.redacted(computed),
				msg: fmt.Sprintf("decision '%s' diverged from the recording\n  recorded: %s\n  actual:   %s", label, preview(m.Value), preview(computed))}
			s.noteLocked(e)
			return markerResult{err: e}
		}
		return markerResult{value: computed}
	}
	if m.Error != "" {
		typ := m.ErrorType
		if typ == "" {
			typ = "DependencyError"
		}
		return markerResult{served: true, err: &RecordedError{Kind: kind, Label: label, Type: typ, Message: m.Error}}
	}
	return markerResult{value: m.Value, served: true}
}

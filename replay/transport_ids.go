package replay

import (
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// mintedIDs binds the ids a provider minted during a run (response ids,
// tool-call ids such as call_… and toolu_…, output item ids) to the ids they
// stand for in the recording, so that a request carrying a live id back
// (tool_call_id, tool_use_id, call_id, previous_response_id) is matched,
// memoized and recorded as the request of the recording that carried the
// recorded id. Guarded by the session's mu.
type mintedIDs struct {
	canon map[string]string // live id → the recorded id it stands for
	live  map[string]string // recorded id → the live id, for requests a Director patched
}

// bind makes live stand for recorded.
func (m *mintedIDs) bind(live, recorded string) {
	if live == "" || recorded == "" || live == recorded {
		return
	}
	if m.canon == nil {
		m.canon, m.live = make(map[string]string), make(map[string]string)
	}
	m.canon[live] = recorded
	m.live[recorded] = live
}

// canonical is v with every string that is a bound live id replaced by the
// recorded id it stands for.
func (m *mintedIDs) canonical(v trace.Value) trace.Value { return replaceStrings(v, m.canon) }

// toLive is v with every recorded id replaced by the live id bound to it.
func (m *mintedIDs) toLive(v trace.Value) trace.Value { return replaceStrings(v, m.live) }

// replaceStrings is v with every string value (not key) found in by
// replaced by its image.
func replaceStrings(v trace.Value, by map[string]string) trace.Value {
	if len(by) == 0 || v.Kind() != trace.Object && v.Kind() != trace.Array && v.Kind() != trace.String {
		return v
	}
	if !mayContain(v.Canonical(), by) {
		return v
	}
	out, _ := replaceIn(v, by)
	return out
}

// mayContain reports whether s contains one of the keys of by (a quick
// rejection before the walk).
func mayContain(s string, by map[string]string) bool {
	for k := range by {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

func replaceIn(v trace.Value, by map[string]string) (trace.Value, bool) {
	switch v.Kind() {
	case trace.String:
		s, _ := v.Str()
		if r, ok := by[s]; ok {
			return trace.StringValue(r), true
		}
	case trace.Array:
		var es []trace.Value
		changed := false
		for _, e := range v.Elems() {
			r, c := replaceIn(e, by)
			es, changed = append(es, r), changed || c
		}
		if changed {
			out, err := trace.ArrayValue(es...)
			if err == nil {
				return out, true
			}
		}
	case trace.Object:
		var ms []trace.Member
		changed := false
		for k, e := range v.Members() {
			r, c := replaceIn(e, by)
			ms, changed = append(ms, trace.Member{Key: k, Value: r}), changed || c
		}
		if changed {
			out, err := trace.ObjectValue(ms...)
			if err == nil {
				return out, true
			}
		}
	}
	return v, false
}

// recordedIDs are the ids a recorded response minted, as the recording
// knows them: read from its body or stream, through its "ids" member (the
// live ids of a recording that was itself a fork's).
func recordedIDs(w wire, out trace.Value) []mintedID {
	a := assemble(w, out)
	ids := out.Get("ids")
	if ids.Kind() == trace.Object {
		for i, m := range a.minted {
			if r, ok := ids.Get(m.id).Str(); ok {
				a.minted[i].id = r
			}
		}
	}
	return a.minted
}

// pairIDs binds the ids of a live response to those of the recorded response
// it stands in for, kind by kind in order, and returns the bindings made
// (live → recorded).
func (m *mintedIDs) pairIDs(live, recorded []mintedID) []trace.Member {
	var made []trace.Member
	var next [3]int
	for _, l := range live {
		k := int(l.kind)
		for next[k] < len(recorded) && recorded[next[k]].kind != l.kind {
			next[k]++
		}
		if next[k] == len(recorded) {
			continue
		}
		r := recorded[next[k]].id
		next[k]++
		if r == l.id {
			continue
		}
		if _, done := m.canon[l.id]; done {
			continue
		}
		m.bind(l.id, r)
		made = append(made, trace.Member{Key: l.id, Value: trace.StringValue(r)})
	}
	return made
}

// bindServed binds the live ids recorded in a served response's "ids"
// member, so that the agent's next request, which carries them, reads as
// the recorded one.
func (m *mintedIDs) bindServed(out trace.Value) {
	ids := out.Get("ids")
	if ids.Kind() != trace.Object {
		return
	}
	for live, r := range ids.Members() {
		if s, ok := r.Str(); ok {
			m.bind(live, s)
		}
	}
}

// correspondingLocked is the recorded model call a live call stands in for:
// the one matched strictly, the one of equal input a Director saw, or else
// the recorded call with the same label and occurrence.
func (s *session) correspondingLocked(ic *intercept, d *decision) *Recorded {
	if s.plan == nil {
		return nil
	}
	if d.rec != nil {
		return &d.rec.Recorded
	}
	if s.cfg.director != nil && s.direct.Match != nil {
		return s.direct.Match
	}
	n := 0
	for i := range s.plan.calls {
		r := &s.plan.calls[i]
		if r.Kind == ic.kind && r.Label == ic.label() {
			if n++; n == ic.occurrence {
				return &r.Recorded
			}
		}
	}
	return nil
}

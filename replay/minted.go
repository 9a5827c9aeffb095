package replay

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// ReportIDs tells the session that the response of the model call whose
// body is running in ctx holds ids the provider minted, of one kind, in the
// order the response holds them: the response's own id ("response":
// chatcmpl-…, resp_…, msg_…), its tool calls' ids ("call": call_…,
// toolu_…), its output items' ids ("item"), or a kind of the adapter's own.
// Call it from inside the call function of [LLM] or [LLMRaw] (an adapter
// calls it where it reads the provider's answer), once per kind or once per
// id; outside a model call's body it does nothing. [Transport] reports the
// ids of every wire format it knows, and [LLM] the ids of
// Response.ToolCalls, themselves.
//
// Provider-minted ids change on every call of the same behavior, and the
// agent sends some of them back (a tool result names the call it answers,
// a Responses request its previous response). When the call runs live in a
// replay or a fork's tail, each id it reports is bound, kind by kind in
// order, to the id of that kind the recorded call it stands in for
// reported; from then on the run records the recorded id wherever the live
// one appears: in this response (the agent still gets the live one), in
// the requests and tool inputs that carry it back, which are matched,
// memoized and guarded as the recording's (the model and the tools still
// get the live ones). So a live tail whose model says the same thing is
// equivalent to its base. Every run keeps the ids its responses minted in
// its [trace.MintedFile], so that renderings (goldens, Explain, pages) show
// them as placeholders instead of values that change between recordings.
func ReportIDs(ctx context.Context, kind string, ids ...string) {
	sc := fromContext(ctx)
	if sc == nil || sc.usage == nil || kind == "" {
		return
	}
	sc.s.mu.Lock()
	for _, id := range ids {
		if id != "" {
			sc.usage.ids = append(sc.usage.ids, mintedID{kind, id})
		}
	}
	sc.s.mu.Unlock()
}

// mintedID is an id a provider minted in a response, of a kind (see
// ReportIDs).
type mintedID struct {
	kind string
	id   string
}

// mintedIDs binds the ids a provider minted during a run (response ids,
// tool-call ids such as call_… and toolu_…, output item ids) to the ids they
// stand for in the recording, so that a request carrying a live id back
// (tool_call_id, tool_use_id, call_id, previous_response_id) is matched,
// memoized and recorded as the request of the recording that carried the
// recorded id. Guarded by the session's mu.
type mintedIDs struct {
	canon map[string]string // live id → the recorded id it stands for
	live  map[string]string // recorded id → the live id, for requests a Director patched
	// file is the new trace's trace.MintedFile: call event id → the ids its
	// response minted, as the run records them.
	file map[string][]trace.MintedID
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
	next := map[string]int{}
	for _, l := range live {
		k := l.kind
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

// note records, for the new trace's MintedFile, the ids the response of the
// call callID minted: live, as the provider sent them, recorded as the ids
// bound to them (or themselves).
func (m *mintedIDs) note(callID string, live []mintedID) {
	if len(live) == 0 {
		return
	}
	ids := make([]trace.MintedID, len(live))
	for i, l := range live {
		ids[i] = trace.MintedID{Kind: l.kind, ID: l.id}
		if r, ok := m.canon[l.id]; ok {
			ids[i].ID, ids[i].Live = r, l.id
		}
	}
	m.keep(callID, ids)
}

// keep records ids for call callID as they are (a served call's, from the
// recording).
func (m *mintedIDs) keep(callID string, ids []trace.MintedID) {
	if len(ids) == 0 {
		return
	}
	if m.file == nil {
		m.file = map[string][]trace.MintedID{}
	}
	m.file[callID] = ids
}

// fileData is the new trace's MintedFile, nil when no response minted ids.
func (m *mintedIDs) fileData() []byte {
	if len(m.file) == 0 {
		return nil
	}
	data, err := json.Marshal(m.file)
	if err != nil {
		return nil
	}
	return data
}

// recordedMinted is what the recorded call r reported as minted, from the
// base's MintedFile.
func (p *Prepared) recordedMinted(r *Recorded) []mintedID {
	if r == nil || r.Call == nil {
		return nil
	}
	ids := p.minted[r.Call.ID]
	out := make([]mintedID, len(ids))
	for i, id := range ids {
		out[i] = mintedID{id.Kind, id.ID}
	}
	return out
}

// bindLocked binds the ids a live model call's body reported (ReportIDs)
// to those the recorded call it stands in for reported, notes them for the
// new trace, and returns out as the run records it: with every bound live
// id replaced by the recorded one.
func (s *session) bindLocked(callID string, corr *Recorded, live []mintedID, out trace.Value) trace.Value {
	if len(live) == 0 {
		return out
	}
	if s.plan != nil && corr != nil {
		s.minted.pairIDs(live, s.plan.recordedMinted(corr))
	}
	s.minted.note(callID, live)
	return s.minted.canonical(out)
}

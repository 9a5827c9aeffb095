package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/stepfork/stepfork/internal/scopepath"
	"github.com/stepfork/stepfork/internal/traceindex"
	"github.com/stepfork/stepfork/internal/vouch"
	"github.com/stepfork/stepfork/trace"
)

// Recorded is one dependency call of the base run as a replay session sees
// it: the call event and what answered it, as [trace.Trace.Calls] pairs them.
// A Director reads it and must not change it.
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

// rec is a recorded call as the plan holds it. It is part of a Prepared
// and never changes once Prepare returns; what a session does with it
// (consumed, skipped) is kept by the session's plan.
type rec struct {
	Recorded
	event  int // index of Call in the base events
	result int // index of Result in the base events, -1 when none
	// free says the call belongs to its scope's concurrent group: made on
	// a concurrent goroutine (lane 1 or more) or inside a node or call
	// that was.
	free bool
}

// markerRec is a recorded runtime marker.
type markerRec struct {
	ev *trace.Event
	m  trace.Marker
	i  int32 // index of ev in the base events
}

// matchKey is what concurrent groups and Call.Match look a recorded call
// up by: its identity and canonical input (equal inputs, equal
// fingerprints; the map hashes the text, no SHA-256 needed).
type matchKey struct {
	kind            CallKind
	name            string // tool name
	provider, model string
	input           string // canonical recorded input (null when absent)
}

// Prepared is the replay plan of a trace, computed once by [Prepare] and
// read-only afterwards: the expected call list (every tool_call and
// llm_request in file order) with each call paired with its result and
// failure, the input fingerprints, the runtime markers by kind and name, the
// parent/child links, and the payload hashes of the events. Any number of
// replays, concurrently, may run from one Prepared ([Prepared.Replay]):
// package fork prepares the base run of a sweep once and shares it across
// the variants.
//
// The trace must not be changed while a Prepared of it is in use.
type Prepared struct {
	base     *trace.Trace
	input    trace.Value // the run_start input handed to the agent
	calls    []rec
	callAt   []int32 // base event index → index in calls, -1
	markers  []markerRec
	markerAt []int32             // base event index → index in markers, -1
	queueID  map[[2]string]int32 // (marker key, name) → index in queues
	queues   [][]int32           // indexes in markers, in order
	kids     []int32             // children of event i: kids[kidAt[i]:kidAt[i+1]]
	kidAt    []int32
	parent   []int32 // index of event i's parent (traceindex.Index.Parents; shared, read-only), -1
	rootID   string
	ids      *traceindex.Index // the base's events by id, and parent (shared with a fork index)
	// byKey and sameKey index the calls by matchKey, built on the first
	// lookup (keyIndex): a faithful replay matches every call at the
	// cursor and never needs them.
	keysOnce sync.Once
	byKey    map[matchKey]int32 // the first call with the key
	sameKey  []int32            // per call: the next call with its key, -1 for none
	tools    map[string]bool
	models   map[string]bool
	laned    bool // some call belongs to a concurrent group (lane ≥ 1)
	reads    bool // the base records state reads (@read markers)
	writes   int  // state writes of the base (not markers): a replay's state map is sized for them
	// minted are the ids the base's model responses minted, by call event
	// id (its trace.MintedFile; nil without one).
	minted map[string][]trace.MintedID

	// hashes are the payload hashes of each event (input, output), filled
	// on first use: hashState[i] goes 0 → 1 (being computed by one
	// session) → 2 (hashes[i] set, never written again).
	hashes    [][2]string
	hashState []atomic.Uint32

	// cleanState[i] holds three verdicts on base event i, two bits each
	// (verdict, settle): whether the whole event holds nothing to redact
	// (cleanAt: a new event equal to a clean one needs no redaction
	// pass), whether its redactable fields do (contentCleanAt), and, for a
	// call, whether its input does (inputCleanAt).
	cleanState []atomic.Uint32

	pathsOnce sync.Once
	paths     []string // scope path inside each event (see pathOf)

	// ops is the concurrency model of a laned base (groups.go); nil
	// without lanes.
	ops *opIndex

	memo *memo // plain values encoded by its replays (memo.go)

	// vouch is what the recording of this process that made the base's
	// events, or the verified load that read them, established about them
	// (package vouch); nil for any other base.
	vouch *vouch.Vouch

	reasonsOnce sync.Once
	reasons     map[[2]string]string // (event id, path) → reason of the base's redaction entries
}

// nullHash is the hash of a null payload.
var nullHash = trace.Hash(trace.NullValue)

func prepare(base *trace.Trace) *Prepared { return prepareFrom(base, base) }

// prepareFrom plans base, the shallow copy Prepare keeps, of tr: the calls
// and lanes are tr's (trace.Trace.Calls and EventLanes, cached on tr's
// pointer), which a fork index has paired already for its own copy, the tr
// it plans; base's own would be paired again.
func prepareFrom(base, tr *trace.Trace) *Prepared {
	evs := base.Events
	n := len(evs)
	p := &Prepared{
		base:      base,
		input:     trace.NullValue,
		callAt:    make([]int32, n),
		markerAt:  make([]int32, n),
		queueID:   map[[2]string]int32{},
		tools:     map[string]bool{},
		models:    map[string]bool{},
		hashes:    make([][2]string, n),
		hashState: make([]atomic.Uint32, n),

		cleanState: make([]atomic.Uint32, n),
		memo:       newMemo(n),
		vouch:      vouch.Of(evs),
	}
	// Children in compressed form: parents precede their children.
	p.ids = traceindex.Of(tr)
	parent := p.ids.Parents()
	p.parent = parent
	p.kidAt = make([]int32, n+1)
	for _, j := range parent {
		if j >= 0 {
			p.kidAt[j+1]++
		}
	}
	for i := range n {
		p.kidAt[i+1] += p.kidAt[i]
	}
	p.kids = make([]int32, p.kidAt[n])
	fill := make([]int32, n)
	copy(fill, p.kidAt[:n])
	for i, j := range parent {
		if j >= 0 {
			p.kids[fill[j]] = int32(i)
			fill[j]++
		}
	}

	if data := base.Extras[trace.MintedFile]; len(data) > 0 {
		p.minted, _ = trace.Minted(data) // unreadable: no ids to bind
	}

	// Lanes: an event is free when it, or an event it is nested in, was
	// made on a concurrent goroutine of its scope.
	lanes := tr.EventLanes()
	p.laned = lanes != nil
	calls := tr.Calls()
	p.calls = make([]rec, 0, len(calls))
	next := 0 // the next of calls
	runStart := false
	for i := range evs {
		ev := &evs[i]
		p.callAt[i], p.markerAt[i] = -1, -1
		switch {
		case ev.Type == trace.RunStart && !runStart:
			runStart = true
			p.rootID = ev.ID
			if !ev.Input.IsAbsent() {
				p.input = ev.Input
			}
		case ev.Type == trace.ToolCall || ev.Type == trace.LLMRequest:
			c := &calls[next]
			next++
			r := rec{event: i, result: c.Result, free: lanes != nil && lanes[i].Free}
			r.Kind, r.Label, r.Call = KindTool, c.Label, ev
			if ev.Type == trace.LLMRequest {
				r.Kind = KindLLM
				p.models[c.Label] = true
			} else {
				p.tools[c.Label] = true
			}
			if c.Result >= 0 {
				r.Result = &evs[c.Result]
			}
			if c.Failure >= 0 {
				r.Failure = &evs[c.Failure]
			}
			r.Status, r.Output, r.ErrorType, r.Message, r.Missing = c.Status, c.Output, c.ErrorType, c.Message, c.Missing()
			p.addCall(r)
		case ev.Type == trace.StateChange && !ev.IsMarker():
			p.writes++
		case ev.IsMarker():
			if ev.Key == trace.MarkerNode && lanes == nil {
				// Recorded nodes are looked up only in a base with lanes
				// (nodeCPLocked, groups.go): without lanes neither the
				// markers nor their queues would ever be read, and a run
				// of 1,000 nodes would parse 2,000 markers and queue
				// 1,000 names for nothing.
				continue
			}
			m, _ := ev.Marker()
			if m.Key == trace.MarkerNode && m.Phase != trace.PhaseEnter {
				continue
			}
			p.markerAt[i] = int32(len(p.markers))
			p.reads = p.reads || m.Key == trace.MarkerRead
			p.markers = append(p.markers, markerRec{ev: ev, m: m, i: int32(i)})
			if lanes != nil && lanes[i].Free {
				// Matched within its concurrent group (groups.go), not
				// from the queue of its kind and name.
				continue
			}
			k := [2]string{m.Key, m.Name}
			q, ok := p.queueID[k]
			if !ok {
				q = int32(len(p.queues))
				p.queueID[k] = q
				p.queues = append(p.queues, nil)
			}
			p.queues[q] = append(p.queues[q], int32(len(p.markers)-1))
		}
	}
	if lanes != nil {
		p.ops = newOpIndex(p, lanes, parent)
	}
	return p
}

// addCall appends r.
func (p *Prepared) addCall(r rec) {
	r.Position = len(p.calls) + 1
	p.callAt[r.event] = int32(len(p.calls))
	p.calls = append(p.calls, r)
}

// keyIndex indexes the calls by identity and input, once: each key's
// first call, and each call's next with its key (a list through the
// calls, where a slice per key would take an allocation per distinct
// input: a thousand for a run whose calls all differ).
func (p *Prepared) keyIndex() {
	p.keysOnce.Do(func() {
		p.byKey = make(map[matchKey]int32, len(p.calls))
		p.sameKey = make([]int32, len(p.calls))
		last := make([]int32, len(p.calls)) // by a key's first call: its last so far
		for i := range p.calls {
			r := &p.calls[i]
			ev := r.Call
			k := matchKey{kind: r.Kind, input: inputOf(ev).Canonical()}
			if r.Kind == KindTool {
				k.name = ev.Name
			} else {
				k.provider, k.model = ev.Provider, ev.Model
			}
			p.sameKey[i] = -1
			if first, ok := p.byKey[k]; ok {
				p.sameKey[last[first]] = int32(i)
				last[first] = int32(i)
			} else {
				p.byKey[k] = int32(i)
				last[i] = int32(i)
			}
		}
	})
}

// children are the indexes of the events whose parent is event i.
func (p *Prepared) children(i int) []int32 { return p.kids[p.kidAt[i]:p.kidAt[i+1]] }

// hashesOf is the payload hashes of base event i (what ExpectedHashes
// returns), computed once: the first session to need them stores them;
// one that finds them being stored computes its own copy.
func (p *Prepared) hashesOf(i int) (in, out string) { return p.hashesFor(i, nil) }

// hashesFor is hashesOf for session s, which hashes with the memory of
// its last payloads (appendHashLocked) and whose lock is held; s nil for
// none.
func (p *Prepared) hashesFor(i int, s *session) (in, out string) {
	st := &p.hashState[i]
	if st.Load() == 2 {
		h := &p.hashes[i]
		return h[0], h[1]
	}
	ev := &p.base.Events[i]
	if p.vouched(i, false) {
		return ev.InputHash, ev.OutputHash
	}
	var buf [2 * 2 * sha256.Size]byte
	var (
		b  []byte
		na int
	)
	if s != nil {
		pin, pout := hashedPayloads(ev)
		b = s.appendHashLocked(buf[:0], pin)
		na = len(b)
		b = s.appendHashLocked(b, pout)
	} else {
		b, na = appendPayloadHashes(buf[:0], ev)
	}
	if string(b[:na]) == ev.InputHash && string(b[na:]) == ev.OutputHash {
		// The recorded hashes are right (the rule for a saved base): keep
		// the event's own strings, without a string of the computed ones
		// to compare and drop.
		in, out = ev.InputHash, ev.OutputHash
	} else {
		str := string(b)
		in, out = str[:na], str[na:]
		// Where one recorded hash is right, keep the event's own string
		// rather than a second copy.
		if in == ev.InputHash {
			in = ev.InputHash
		}
		if out == ev.OutputHash {
			out = ev.OutputHash
		}
	}
	if st.CompareAndSwap(0, 1) {
		p.hashes[i] = [2]string{in, out}
		st.Store(2)
	}
	return in, out
}

// The verdicts of cleanState, by their place in its word: 0 not known
// yet, 1 clean, 2 not.
const (
	wholeEvent   = 0 // the whole event
	eventContent = 2 // its names, key, error and payloads
	callInput    = 4 // a call's input
)

// verdict is the verdict at place at on base event i, if known.
func (p *Prepared) verdict(i, at int) (clean, known bool) {
	switch p.cleanState[i].Load() >> at & 3 {
	case 1:
		return true, true
	case 2:
		return false, true
	}
	return false, false
}

// settle records the verdict at place at on base event i and returns it.
// Verdicts are functions of the event, so sessions that compute one
// concurrently record the same bits.
func (p *Prepared) settle(i, at int, clean bool) bool {
	v := uint32(2)
	if clean {
		v = 1
	}
	p.cleanState[i].Or(v << at)
	return clean
}

// cleanAt reports whether base event i holds nothing a redaction pass would
// change (what it holds is already "[REDACTED]", or was never a secret),
// computed once per event.
func (p *Prepared) cleanAt(i int) bool {
	if clean, ok := p.verdict(i, wholeEvent); ok {
		return clean
	}
	if p.vouched(i, true) {
		return true
	}
	_, entries, err := trace.RedactEvent(p.base.Events[i])
	return p.settle(i, wholeEvent, err == nil && len(entries) == 0)
}

// contentCleanAt reports whether the fields of base event i that a
// redaction pass may change (its names, key, error and payloads) hold
// nothing it would change, computed once per event. A new event equal to
// it holds nothing to redact either: redacting it would keep it as it is,
// whatever its ids, hashes and redactions list (the protected fields,
// which a credential makes a redaction pass refuse, keeping the event as
// it is too), so they are not scanned.
func (p *Prepared) contentCleanAt(i int) bool {
	if clean, ok := p.verdict(i, wholeEvent); ok && clean {
		return true
	}
	if clean, ok := p.verdict(i, eventContent); ok {
		return clean
	}
	if p.vouched(i, true) {
		return true
	}
	return p.settle(i, eventContent, contentClean(&p.base.Events[i]))
}

// contentClean reports whether the fields of ev that a redaction pass
// without scrubbers may change (its names, key, error and payloads) hold
// nothing it would change: the pass then keeps ev as it is (or refuses
// it for a credential in a protected field, keeping it as it is too).
func contentClean(ev *trace.Event) bool {
	if !cleanStrings(ev) {
		return false
	}
	for _, v := range [...]trace.Value{ev.Input, ev.Output, ev.Before, ev.After, ev.Details} {
		if _, found := trace.RedactValue(v); len(found) > 0 {
			return false
		}
	}
	return true
}

// inputCleanAt reports whether the input of the recorded call r holds
// nothing a redaction pass without scrubbers would change, computed once
// per call: a call event that holds nothing to redact has a clean input,
// and otherwise the input alone is scanned (not the ids, names and hashes
// around it, which the event's pass reads too).
func (p *Prepared) inputCleanAt(r *rec) bool {
	if clean, ok := p.verdict(r.event, wholeEvent); ok && clean {
		return true
	}
	if clean, ok := p.verdict(r.event, callInput); ok {
		return clean
	}
	if p.vouched(r.event, true) {
		return true
	}
	_, found := trace.RedactValue(inputOf(r.Call))
	return p.settle(r.event, callInput, len(found) == 0)
}

// vouched reports whether the recording or the verified load that made or
// read the base's events vouches for event i as it is now: that its stored
// hashes are its payloads' and, with clean, that it holds nothing to redact
// as well. What it vouches for is settled for every session.
func (p *Prepared) vouched(i int, clean bool) bool {
	v := p.vouch
	if v == nil || !v.IsHashed(i) || clean && !v.IsClean(i) || !v.Holds(i, &p.base.Events[i]) {
		return false
	}
	ev := &p.base.Events[i]
	if st := &p.hashState[i]; st.CompareAndSwap(0, 1) {
		p.hashes[i] = [2]string{ev.InputHash, ev.OutputHash}
		st.Store(2)
	}
	if v.IsClean(i) {
		p.settle(i, wholeEvent, true)
	}
	return true
}

// payloadHashes computes the hashes of ev's payloads (what
// ev.ExpectedHashes returns) in one allocation, using buf as scratch.
func payloadHashes(buf []byte, ev *trace.Event) (in, out string) {
	b, na := appendPayloadHashes(buf, ev)
	if len(b) == 0 {
		return "", ""
	}
	s := string(b)
	return s[:na], s[na:]
}

// appendPayloadHashes appends the hashes of ev's payloads to buf, the
// input's ending at na.
func appendPayloadHashes(buf []byte, ev *trace.Event) (_ []byte, na int) {
	a, b := hashedPayloads(ev)
	buf = appendHash(buf, a)
	na = len(buf)
	return appendHash(buf, b), na
}

// hashedPayloads are the payloads of ev that its input and output hashes
// cover (absent for none).
func hashedPayloads(ev *trace.Event) (a, b trace.Value) {
	switch ev.Type {
	case trace.RunStart, trace.LLMRequest, trace.ToolCall:
		a = ev.Input
	case trace.LLMResponse, trace.ToolResult, trace.RunEnd:
		b = ev.Output
	case trace.StateChange:
		a, b = ev.Before, ev.After
	case trace.ErrorEvent:
		b = ev.Details
	}
	return a, b
}

// appendHash appends trace.Hash(v) to dst (nothing for an absent value).
func appendHash(dst []byte, v trace.Value) []byte {
	if v.IsAbsent() {
		return dst
	}
	c := v.Canonical()
	if c == "null" {
		return append(dst, nullHash...) // every marker's before, a deletion's after…
	}
	// The text itself, not a copy: Sum256 only reads it.
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(c), len(c)))
	n := len(dst)
	dst = append(dst, make([]byte, 2*sha256.Size)...)
	hex.Encode(dst[n:], sum[:])
	return dst
}

// entry is the redactions.json entry for a path redacted in a base event
// (reason sensitive_key when the base lists none).
func (p *Prepared) entry(eventID, path string) trace.RedactionEntry {
	p.reasonsOnce.Do(func() {
		p.reasons = make(map[[2]string]string, len(p.base.Redactions))
		for _, e := range p.base.Redactions {
			p.reasons[[2]string{e.EventID, e.Path}] = e.Reason
		}
	})
	reason := p.reasons[[2]string{eventID, path}]
	if reason == "" {
		reason = trace.ReasonSensitiveKey
	}
	return trace.RedactionEntry{EventID: eventID, Path: path, Reason: reason, Replacement: trace.Redacted}
}

// redactionsOf is what a new event equal to base event b records as
// redacted: b's redactions (the same payloads, so the same places, even
// where the new event received a value that was already "[REDACTED]", as a
// secret handed on from a served result is, and redacting it again found
// nothing), followed by any found that b does not list, with the entries of
// redactions.json for them (b's reasons; found's for the others).
func (p *Prepared) redactionsOf(b *trace.Event, found []string, entries []trace.RedactionEntry) ([]string, []trace.RedactionEntry) {
	paths := append([]string(nil), b.Redactions...)
	out := make([]trace.RedactionEntry, 0, len(paths)+len(found))
	for _, path := range paths {
		out = append(out, p.entry(b.ID, path))
	}
	for _, e := range entries {
		if !slices.Contains(b.Redactions, e.Path) {
			paths = append(paths, e.Path)
			out = append(out, e)
		}
	}
	for _, path := range found {
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	return paths, out
}

// scopeOf is the path of the scope event i was recorded in: the labels of
// its enclosing events from the run down ("/node:worker/tool:fetch"), "" at
// top level. Paths, not ids, identify scopes across runs, so calls made in
// two nodes of the same name are told apart only by their order.
func (p *Prepared) scopeOf(i int) string {
	p.pathsOnce.Do(p.computePaths)
	j := p.parent[i]
	if j < 0 {
		return ""
	}
	return p.paths[j]
}

// computePaths computes the scope path inside every event, in one forward
// pass (parents precede their children).
func (p *Prepared) computePaths() {
	evs := p.base.Events
	p.paths = make([]string, len(evs))
	for i := range evs {
		ev := &evs[i]
		if ev.Type == trace.RunStart {
			continue
		}
		up := ""
		if j := p.parent[i]; j >= 0 {
			up = p.paths[j]
		}
		p.paths[i] = up + "/" + scopepath.Label(ev)
	}
}

// outputHash is the hash of r's recorded output, computed once.
func (p *Prepared) outputHash(r *rec) string {
	if r.result < 0 || r.Output.IsAbsent() {
		return trace.Hash(r.Output)
	}
	_, out := p.hashesOf(r.result)
	return out
}

// fingerprint is the hash of r's recorded input (of null when it has none),
// computed once.
func (p *Prepared) fingerprint(r *rec) string {
	if r.Call.Input.IsAbsent() {
		return nullHash
	}
	in, _ := p.hashesOf(r.event)
	return in
}

// inputOf is the input of a call event, null when absent (hashed like any
// value: no "<none>").
func inputOf(ev *trace.Event) trace.Value {
	if ev.Input.IsAbsent() {
		return trace.NullValue
	}
	return ev.Input
}

// Call states in a session's plan.
const (
	callPending uint8 = iota
	callConsumed
	callSkipped
)

// plan is a session's progress through a Prepared: which recorded calls
// and markers are consumed or skipped, and the cursors. Everything shared
// lives in the Prepared; a plan costs a few small slices per session.
type plan struct {
	*Prepared
	state      []uint8 // per call: callPending, callConsumed or callSkipped
	markerDone []bool
	next       []int32 // per marker queue: next position to look at
	keyNext    []int32 // by a key's first call: 2 + the call its pending ones start from (-1: none), 0 for that first call; nil until the first match
	cursor     int     // calls before cursor are all consumed or skipped
	left       int     // calls neither consumed nor skipped
	skipped    int     // calls skipped

	// The concurrent groups of a laned base (groups.go): per event, a
	// state write matched (calls and markers keep their own state above),
	// and how many goroutines matched it last; per list, where its
	// pending members start.
	taken  []bool
	claims []int32
	listAt []int32

	// stack is skipNested's scratch, kept for the session: every served
	// call has a nested result to walk.
	stack []int32
}

// newPlan starts a session's walk through p.
func newPlan(p *Prepared) *plan {
	pl := &plan{
		Prepared:   p,
		state:      make([]uint8, len(p.calls)),
		markerDone: make([]bool, len(p.markers)),
		next:       make([]int32, len(p.queues)),
		left:       len(p.calls),
	}
	if p.ops != nil {
		n := len(p.base.Events)
		pl.taken, pl.claims, pl.listAt = make([]bool, n), make([]int32, n), make([]int32, len(p.ops.members))
	}
	return pl
}

// at returns the first call at or after the cursor that is neither consumed
// nor skipped and belongs to no concurrent group, moving the cursor over the
// consumed and skipped ones; nil when none is left. Calls of concurrent
// groups are matched as a set (matchGroup), never at the cursor.
func (p *plan) at() *rec {
	for p.cursor < len(p.calls) && p.state[p.cursor] != callPending {
		p.cursor++
	}
	if !p.laned {
		if p.cursor < len(p.calls) {
			return &p.calls[p.cursor]
		}
		return nil
	}
	for i := p.cursor; i < len(p.calls); i++ {
		if p.state[i] == callPending && !p.calls[i].free {
			return &p.calls[i]
		}
	}
	return nil
}

// groupPending lists the pending calls of the concurrent group of the scope
// with the given path, in recorded order.
func (p *plan) groupPending(path string) []*rec {
	var out []*rec
	for i := p.cursor; i < len(p.calls); i++ {
		if r := &p.calls[i]; p.state[i] == callPending && r.free && p.scopeOf(r.event) == path {
			out = append(out, r)
		}
	}
	return out
}

// consume marks r matched.
func (p *plan) consume(r *rec) {
	if i := r.Position - 1; p.state[i] == callPending {
		p.state[i] = callConsumed
		p.left--
	}
}

// skipNested marks every call and marker nested under r's call as skipped:
// r was served, so its body (and whatever it called) does not run.
func (p *plan) skipNested(r *rec) {
	kids := p.children(r.event)
	if len(kids) == 0 {
		return
	}
	stack := append(p.stack[:0], kids...)
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c := p.callAt[i]; c >= 0 && p.state[c] == callPending {
			p.state[c] = callSkipped
			p.left--
			p.skipped++
		}
		if m := p.markerAt[i]; m >= 0 {
			p.markerDone[m] = true
		}
		if p.taken != nil {
			p.taken[i] = true
		}
		stack = append(stack, p.children(int(i))...)
	}
	p.stack = stack
}

// match finds the earliest pending call with the given identity and
// (redacted) input; when scoped, only calls of the concurrent group of the
// scope with the given path qualify.
func (p *plan) match(kind CallKind, name, provider, model string, input trace.Value, path string, scoped bool) *rec {
	if input.IsAbsent() {
		return nil
	}
	k := matchKey{kind: kind, input: input.Canonical()}
	if kind == KindTool {
		k.name = name
	} else {
		k.provider, k.model = provider, model
	}
	p.keyIndex()
	first, ok := p.byKey[k]
	if !ok {
		return nil
	}
	if p.keyNext == nil {
		p.keyNext = make([]int32, len(p.calls))
	}
	start := first
	if n := p.keyNext[first]; n != 0 {
		start = n - 2
	}
	for start >= 0 && p.state[start] != callPending {
		start = p.sameKey[start]
	}
	p.keyNext[first] = start + 2
	for c := start; c >= 0; c = p.sameKey[c] {
		if p.state[c] != callPending {
			continue
		}
		r := &p.calls[c]
		if scoped && (!r.free || p.scopeOf(r.event) != path) {
			continue
		}
		return r
	}
	return nil
}

// matchAny is match, then, when no pending call has an equal input, the
// earliest pending call with the identity whose input the matchers ms
// accept; by names the matchers ("" for an equal input). This lookup and
// matchers.same are the one place a replay compares a live input with a
// recorded one.
func (p *plan) matchAny(ms matchers, kind CallKind, name, provider, model string, input trace.Value, path string, scoped bool) (r *rec, by string) {
	if r := p.match(kind, name, provider, model, input, path, scoped); r != nil || len(ms) == 0 {
		return r, ""
	}
	for i := p.cursor; i < len(p.calls); i++ {
		c := &p.calls[i]
		if p.state[i] != callPending || c.Kind != kind || scoped && (!c.free || p.scopeOf(c.event) != path) {
			continue
		}
		if kind == KindTool && c.Call.Name != name || kind == KindLLM && (c.Call.Provider != provider || c.Call.Model != model) {
			continue
		}
		if by, ok := ms.same(kind, name, provider, model, inputOf(c.Call), input); ok {
			return c, by
		}
	}
	return nil, ""
}

// nextMarker returns the next unconsumed recorded marker with the key and
// name, or nil.
func (p *plan) nextMarker(key, name string) (*markerRec, int32) {
	q, ok := p.queueID[[2]string{key, name}]
	if !ok {
		return nil, -1
	}
	list := p.queues[q]
	for n := p.next[q]; n < int32(len(list)); n++ {
		if m := list[n]; !p.markerDone[m] {
			p.next[q] = n
			return &p.markers[m], m
		}
	}
	p.next[q] = int32(len(list))
	return nil, -1
}

// queueLen is the number of recorded markers with the key and name.
func (p *plan) queueLen(key, name string) int {
	if q, ok := p.queueID[[2]string{key, name}]; ok {
		return len(p.queues[q])
	}
	return 0
}

// pending lists the calls neither consumed nor skipped, in order.
func (p *plan) pending() []*rec {
	var out []*rec
	for i := p.cursor; i < len(p.calls); i++ {
		if p.state[i] == callPending {
			out = append(out, &p.calls[i])
		}
	}
	return out
}

package replay

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/internal/tracecache"
	"github.com/stepfork/stepfork/internal/vouch"
	"github.com/stepfork/stepfork/trace"
)

// Version is the stepfork_version this package writes into the manifests
// of the runs it records.
const Version = "go-0.1.0"

// Agent is the unit Record and Replay run: a function from a context and the
// run's input to its output. Record stores the input in run_start; Replay hands
// the recorded input back, so a test never restates it. Use Typed to adapt a
// function with typed input and output.
type Agent func(ctx context.Context, input trace.Value) (any, error)

// Typed adapts a typed agent function: the run's input is decoded into In
// with encoding/json (a decoding failure is returned as the agent's error),
// and Out is recorded as the run's output.
func Typed[In, Out any](fn func(context.Context, In) (Out, error)) Agent {
	return func(ctx context.Context, input trace.Value) (any, error) {
		var in In
		if !input.IsAbsent() {
			var err error
			if in, err = decodeValue[In](input); err != nil {
				return nil, fmt.Errorf("replay.Typed: the run input %s does not decode into %T: %w", preview(input), in, err)
			}
		}
		return fn(ctx, in)
	}
}

// Outcome says how a session answered a dependency call.
type Outcome string

// Outcomes of dependency calls.
const (
	Served   Outcome = "served"   // answered from the recording (or a Director's value); the body did not run
	Executed Outcome = "executed" // the body ran
	Blocked  Outcome = "blocked"  // a Director blocked it; the body did not run
	Failed   Outcome = "failed"   // the session refused it (a divergence, or a Director's Fail)
)

// CallRecord is one dependency call of a session, in the order the session
// answered them.
type CallRecord struct {
	Position int // 1-based among the run's dependency calls
	Kind     CallKind
	Label    string // tool name or provider/model
	Outcome  Outcome
	EventID  string    // the call's event in the session's trace
	Recorded *Recorded // the base call matched or served, if any
	// MatchedBy names the user matchers ([Match]) through which the call
	// matched Recorded although their inputs differ; "" when they are
	// canonically equal or nothing was matched.
	MatchedBy string
}

// Result is the outcome of Record or Replay.
type Result struct {
	// Trace is the run as it happened: the recording of Record; for Replay a
	// complete new recording in which served results appear as if they had
	// happened and live calls as they did. It is nil when Record ran inertly
	// inside another session.
	Trace *trace.Trace
	// Output and Err are what the agent returned.
	Output any
	Err    error
	// Divergence is the first divergence of a replay (an error matching
	// ErrDiverged), kept even when the agent swallowed it.
	Divergence error
	// Mode is the replay mode ("" for Record).
	Mode Mode
	// Calls lists the dependency calls in the order they were answered;
	// Served, Executed and Blocked count them by outcome.
	Calls                     []CallRecord
	Served, Executed, Blocked int
	// Path is where the trace was saved ("" when it was not).
	Path string

	pending  []*Recorded
	directed []int32 // see session.directed
	moved    []int32 // see session.moved
}

// DirectedStep is the step, in [Result.Trace], of the event that the call
// a Director was given with [Call.Seq] seq produced, and false when it
// produced none (a state read the Director did not patch). A Director that
// reports steps maps them through it: [Call.Step] is only the number of
// events when the call arrived, and a session that recorded concurrent
// work writes its trace in the canonical order afterwards.
func (r *Result) DirectedStep(seq int) (int, bool) {
	if seq < 1 || seq > len(r.directed) || r.directed[seq-1] < 0 {
		return 0, false
	}
	step := r.directed[seq-1]
	if r.moved != nil && int(step) < len(r.moved) {
		step = r.moved[step]
	}
	return int(step), true
}

// RunTrace returns the session's trace, so that a Result can stand wherever a
// run is expected.
func (r *Result) RunTrace() *trace.Trace { return r.Trace }

// VerifyComplete reports the recorded dependency calls the replay did not
// consume, in stepfork's words: "replay ended before consuming 2 recorded
// dependency call(s): #3 tool x, #4 llm fake/model". Up to five are listed.
// It returns nil after Record, and after a replay that consumed every call.
func (r *Result) VerifyComplete() error {
	if len(r.pending) == 0 {
		return nil
	}
	parts := make([]string, 0, 5)
	for i, p := range r.pending {
		if i == 5 {
			break
		}
		parts = append(parts, fmt.Sprintf("#%d %s %s", p.Position, p.Kind, p.Label))
	}
	msg := fmt.Sprintf("replay ended before consuming %d recorded dependency call(s): %s", len(r.pending), strings.Join(parts, ", "))
	if len(r.pending) > 5 {
		msg += fmt.Sprintf(" (+%d more)", len(r.pending)-5)
	}
	first := r.pending[0]
	return &MismatchError{Call: first.Position, Kind: first.Kind, Label: first.Label, Step: first.Call.Step, EventID: first.Call.ID, msg: msg}
}

// ctxKey carries the *scope of the running session.
type ctxKey struct{}

// scope is what a context carries: the session and the event new events hang
// under (run_start, an executing call, a node).
type scope struct {
	s      *session
	parent string
	node   string
	usage  *usageSlot // inside a model call's body: where ReportUsage writes

	// The scope's place and goroutines, for lanes ([trace.Call.Lane]):
	// the enclosing scope and this one's label (kind and name), the
	// goroutine that opened it (0: unknown), and the lanes of the other
	// goroutines that called in it. Guarded by the session's lock.
	up         *scope
	kind, name string
	path       string // computed by pathLocked
	pathDone   bool
	gid        uint64
	others     map[uint64]int
	// free says the scope was opened on a concurrent goroutine of its
	// enclosing scope (or inside such a scope): its calls are unordered
	// relative to the rest of the enclosing scope.
	free bool

	// In a replay of a laned base (groups.go): the base event the scope
	// stands for (-1: none known), and the base operation each goroutine
	// matched last in it.
	cp   int32
	last map[uint64]int32
}

func fromContext(ctx context.Context) *scope {
	if ctx == nil {
		return nil
	}
	sc, _ := ctx.Value(ctxKey{}).(*scope)
	return sc
}

// scopeCtx is a context carrying a scope, and the usage slot of a model
// call's body: one allocation where context.WithValue and the scope would
// take three.
type scopeCtx struct {
	context.Context
	sc   scope
	slot usageSlot
}

// Value returns the scope for ctxKey and asks the parent context otherwise.
func (c *scopeCtx) Value(key any) any {
	if _, ok := key.(ctxKey); ok {
		return &c.sc
	}
	return c.Context.Value(key)
}

// child returns a context for the events of a call or node: they hang under
// parent, in node. kind and name label the scope ("tool", "search"); gid is
// the goroutine opening it (0: unknown). usage says the context is a model
// call's body, where ReportUsage writes. cp is the base event the scope
// stands for in a replay (-1: none).
func (sc *scope) child(ctx context.Context, parent, node, kind, name string, gid uint64, free, usage bool, cp int32) (context.Context, *usageSlot) {
	c := &scopeCtx{Context: ctx, sc: scope{s: sc.s, parent: parent, node: node, up: sc, kind: kind, name: name, gid: gid, free: free, cp: cp}}
	if usage {
		c.sc.usage = &c.slot
	}
	return c, &c.slot
}

// session is one recording or replay. Every field is guarded by mu.
type session struct {
	mu      sync.Mutex
	cfg     config
	plan    *plan // nil when recording
	tr      *trace.Trace
	log     chunks[trace.Event] // the events of tr, until finish
	root    string
	aligned bool        // every event so far equals the base event at its position
	parted  atomic.Bool // !aligned, readable without the lock (memo.go)

	// cleanBits has a bit per event of a recording, set when addLocked
	// found nothing to redact in it and stamped its hashes, and sums the
	// digest of each as it was added (vouch.go).
	cleanBits, sums []uint64

	// hashed are the payloads the session's new events hashed last
	// (appendHashLocked), nextHashed the one to replace.
	hashed     [4]hashedText
	nextHashed int

	lastEncoded atomic.Pointer[encodedValue] // the plain value the tail encoded last (memo.go)
	memoize     bool                         // the memo is filled: not the Prepared's first replay (memo.go)
	state       map[string]trace.Value
	patched     map[string]trace.Value // keys a Director patched on Read, until the agent writes them
	occ         map[occKey]int
	position    int // dependency calls intercepted
	matched     int // recorded calls consumed by strict matching
	divergence  error
	calls       chunks[CallRecord]
	counts      [4]int // served, executed, blocked, failed
	liveModels  map[string]bool
	liveTools   map[string]bool
	ids         ids
	clock       clock
	direct      Call           // the Call handed to the Director, reused (valid only during Direct)
	obs         Observer       // from the run's context; set before the agent runs, never changed
	minted      mintedIDs      // provider-minted ids bound during the run (Transport)
	lanes       map[string]int // operation event id → lane, for lanes ≥ 1
	noSession   *ContextError  // the first wrapper called without the session (StrictContext)
	owned       []uint64       // the goroutines of a strict run (nosession.go)
	// cps holds, for each event appended (by step), the base event it
	// stands for, -1 for none: kept when replaying a laned base, for the
	// canonical order of the new trace (order.go).
	cps []int32
	// joins are the ids of the new trace's joins (trace.JoinsFile), in
	// file order, set by canonicalLocked.
	joins []string
	// moved maps the step an event was appended at to its step in the
	// canonical order; nil when nothing moved (order.go).
	moved []int32
	// directed holds, for each call directed (Call.Seq - 1), the step the
	// event it produced was appended at, -1 for none.
	directed []int32
	// scrub holds the session's scrubbers (Scrubbers): those of its
	// options, and those of every Transport a request of the run went
	// through (scrubbedBy), added under mu; rescrub says events were
	// recorded before some of them came.
	scrub      atomic.Pointer[[]trace.Scrubber]
	scrubbedBy map[*transport]bool
	rescrub    bool
	// In a replay of a base with concurrent groups: every divergence, and
	// the calls that matched no pending call of their group.
	diverged []error
	misses   []groupMiss
	build    []byte // the run's trace.BuildFile, nil for none
}

// scrubbers returns the session's scrubbers.
func (s *session) scrubbers() []trace.Scrubber {
	if p := s.scrub.Load(); p != nil {
		return *p
	}
	return nil
}

// addScrubbersLocked installs the scrubbers of a Transport a request of
// the run went through, once per Transport. Events recorded before are
// scrubbed again when the run finishes.
func (s *session) addScrubbersLocked(t *transport) {
	if len(t.scrub) == 0 || s.scrubbedBy[t] {
		return
	}
	if s.scrubbedBy == nil {
		s.scrubbedBy = map[*transport]bool{}
	}
	s.scrubbedBy[t] = true
	all := append(append([]trace.Scrubber(nil), s.scrubbers()...), t.scrub...)
	s.scrub.Store(&all)
	s.rescrub = s.rescrub || s.log.n > 0
}

// redacted is v after redaction and the session's scrubbers: what the
// session records of a live value, compares with the recording and quotes.
func (s *session) redacted(v trace.Value) trace.Value {
	r, _ := trace.RedactValue(v, s.scrubbers()...)
	return r
}

// scrubErr gives a divergence or a blocked call the session's scrubbers,
// which its message then passes through as it passes through redaction.
func (s *session) scrubErr(err error) error {
	sc := s.scrubbers()
	if len(sc) == 0 {
		return err
	}
	switch e := err.(type) {
	case *MismatchError:
		e.scrub = sc
	case *ExhaustedError:
		e.scrub = sc
	case *PolicyError:
		e.scrub = sc
	case *BlockedError:
		e.scrub = sc
	}
	return err
}

// hashedText is a payload's text and its hash.
type hashedText struct {
	text string
	hash [2 * sha256.Size]byte
}

// occKey counts the calls of one kind and name.
type occKey struct {
	kind CallKind
	name string
}

// newSession starts a recording (p nil) or a replay of p's trace.
func newSession(cfg config, p *Prepared, agent string) *session {
	s := &session{
		cfg:   cfg,
		state: map[string]trace.Value{},
		occ:   map[occKey]int{},
		ids:   newIDs(),
		clock: newClock(),
	}
	if len(cfg.scrub) > 0 {
		sc := append([]trace.Scrubber(nil), cfg.scrub...)
		s.scrub.Store(&sc)
	}
	goos := runtime.GOOS
	version := Version
	runID := cfg.runID
	if runID == "" {
		runID = newRunID()
	}
	s.tr = &trace.Trace{Manifest: trace.Manifest{
		RunID:       runID,
		AgentName:   agent,
		CreatedAt:   s.clock.now(),
		Status:      trace.RunRunning,
		Environment: trace.Environment{OS: &goos, StepforkVersion: &version},
	}}
	if p != nil {
		s.plan = newPlan(p)
		s.memoize = p.memo != nil && p.memo.sessions.Add(1) > 1
		if p.writes > 0 {
			// Sized for the base's writes (as many keys at most), so that
			// the map does not grow through every size on the way.
			s.state = make(map[string]trace.Value, min(p.writes, 1<<16))
		}
		s.log.cur = make([]trace.Event, 0, len(p.base.Events)+2)
		s.calls.cur = make([]CallRecord, 0, len(p.calls))
		s.aligned = true
		if p.ops != nil {
			s.cps = make([]int32, 0, len(p.base.Events)+2)
		}
		if cfg.director != nil {
			s.directed = make([]int32, 0, len(p.calls)+len(p.markers)+8)
		}
		if len(cfg.liveModels) > 0 {
			s.liveModels = setOf(cfg.liveModels)
		}
		if len(cfg.liveTools) > 0 {
			s.liveTools = setOf(cfg.liveTools)
		}
	}
	return s
}

// chunks holds a session's events (or call records) in chunks that are
// never copied while the run goes on (an append to one growing slice would
// copy every element again at each growth, and allocate several times the
// final size); all assembles them once, at the end. Up to maxChunk/4
// elements they are one slice that doubles (nothing to assemble), and a
// replay starts with one chunk the size of the base run, which usually
// suffices.
type chunks[T any] struct {
	full [][]T
	cur  []T
	n    int
}

const (
	firstChunk = 64
	maxChunk   = 4096
)

func (l *chunks[T]) add(v *T) { *l.push() = *v }

// push appends a zero element and returns it, to be filled in place: an
// element built where it stays is not copied there (a trace.Event is 416
// bytes). The pointer is valid until the next push.
func (l *chunks[T]) push() *T {
	if len(l.cur) == cap(l.cur) && len(l.full) == 0 && len(l.cur) < maxChunk/4 {
		// A short run grows one slice (no assembly at the end); chunks
		// start once it is long.
		grown := make([]T, len(l.cur), max(firstChunk, 2*cap(l.cur)))
		copy(grown, l.cur)
		l.cur = grown
	}
	if len(l.cur) == cap(l.cur) {
		size := firstChunk
		if c := cap(l.cur); c > 0 {
			l.full = append(l.full, l.cur)
			size = min(2*c, maxChunk)
		}
		l.cur = make([]T, 0, size)
	}
	l.cur = l.cur[:len(l.cur)+1]
	l.n++
	return &l.cur[len(l.cur)-1]
}

// last is the element added last.
func (l *chunks[T]) last() *T { return &l.cur[len(l.cur)-1] }

// all returns every element in one slice.
func (l *chunks[T]) all() []T {
	if len(l.full) == 0 {
		return l.cur
	}
	out := make([]T, 0, l.n)
	for _, c := range l.full {
		out = append(out, c...)
	}
	out = append(out, l.cur...)
	l.full, l.cur = nil, out
	return out
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// clock gives a session's time stamps: the wall time when the session
// started plus the monotonic time elapsed since, in whole microseconds
// (stepfork's resolution), in UTC. One monotonic reading per event instead
// of time.Now's wall and monotonic readings; the stamps of a run never go
// backwards, even when the wall clock is set back during it.
type clock struct {
	start time.Time // with its monotonic reading
	wall  int64     // start in nanoseconds since the epoch
}

func newClock() clock {
	t := time.Now()
	return clock{start: t, wall: t.UnixNano()}
}

// now is the session's current time stamp.
func (c *clock) now() time.Time { return stamp(c.wall + int64(time.Since(c.start))) }

// now is time.Now().UTC().Truncate(time.Microsecond).
func now() time.Time { return stamp(time.Now().UnixNano()) }

// stamp is the time ns nanoseconds after the epoch in whole microseconds,
// in UTC (Truncate without its general division: since 1970 whole
// microseconds since the epoch are whole microseconds since the zero time
// too).
func stamp(ns int64) time.Time { return time.Unix(0, ns-ns%int64(time.Microsecond)).UTC() }

func newRunID() string {
	u := uuid.New()
	return "run_" + hex.EncodeToString(u[:])
}

// ids makes event ids: "evt_" and a version 4 UUID in hex, drawn from a
// ChaCha8 stream seeded from crypto/rand (one system call per session, not
// per event). Guarded by the session's lock.
type ids struct{ rng *rand.ChaCha8 }

func newIDs() ids {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	return ids{rand.NewChaCha8(seed)}
}

// append appends a new event id to dst.
func (g ids) append(dst []byte) []byte {
	var u [16]byte
	_, _ = g.rng.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	dst = append(dst, "evt_"...)
	n := len(dst)
	dst = append(dst, make([]byte, 32)...)
	hex.Encode(dst[n:], u[:])
	return dst
}

// appendLocked adds (a copy of) ev to the session's trace, filling in ev: run id, step, time, redaction
// (before anything is kept), hashes, and an id. While every event so far
// equals the base event at the same position (type, names, parent, status and
// payloads), the base event's id is reused, so a faithful replay or the
// unchanged prefix of a fork carries the base's ids; from the first
// difference on, ids are fresh.
func (s *session) appendLocked(ev *trace.Event) string { return s.addLocked(ev, nil) }

// addLocked is appendLocked for an event whose payloads are already
// redacted when clean is not nil: the redactions of the recorded event
// clean stands for are carried over instead of redacting again.
func (s *session) addLocked(ev *trace.Event, clean *trace.Event) string {
	slot := s.newEventLocked()
	*slot = *ev
	return s.commitLocked(slot, clean)
}

// newEventLocked returns the session's next event, zero, for the caller to
// fill in place and hand to commitLocked before any other event is added:
// the hot paths of a replay build their events where they stay instead of
// copying each into the trace.
func (s *session) newEventLocked() *trace.Event { return s.log.push() }

// commitLocked is addLocked for ev, the event newEventLocked returned last.
func (s *session) commitLocked(ev *trace.Event, clean *trace.Event) string {
	ev.RunID = s.tr.RunID
	ev.Step = s.log.n - 1
	ev.Timestamp = s.clock.now()
	if ev.Status == "" {
		ev.Status = trace.StatusOK
	}
	if ev.ReplayPolicy == "" {
		ev.ReplayPolicy = trace.PolicyFrozen
	}
	var entries []trace.RedactionEntry
	same := false // ev equals the base event at its place
	// vouched: an event of a recording, its hashes stamped, nothing to redact
	vouched := false
	scrub := s.scrubbers()
	switch {
	case len(scrub) > 0:
		// Scrubbers see everything: no event is taken for clean as it is.
		red, es, err := trace.RedactEvent(*ev, scrub...)
		if err == nil {
			*ev, entries = red, es
		}
	case clean != nil && cleanStrings(ev):
		// Payloads served from the recording: its redactions carry over.
		// (A recording's call whose input needed no redaction holds
		// nothing to redact.)
		vouched = s.plan == nil && len(clean.Redactions) == 0
		if len(clean.Redactions) > 0 {
			ev.Redactions = append([]string(nil), clean.Redactions...)
			for _, p := range ev.Redactions {
				entries = append(entries, s.plan.entry(clean.ID, p))
			}
		}
	case s.aligned && ev.Step < len(s.plan.base.Events) &&
		sameEvent(&s.plan.base.Events[ev.Step], ev) && s.plan.contentCleanAt(ev.Step):
		// An event equal, as it is, to the base event at its place, where
		// that one holds nothing to redact, holds nothing either: the
		// common case of a replay, which then needs no redaction pass.
		same = true
	case s.plan != nil && contentClean(ev):
		// Nothing to redact (a replay's new event; a recording needs the
		// pass's verdict on its protected fields too, for vouchFor): the
		// pass would keep the event as it is, without the scan of its ids
		// and hashes and two copies of it.
	default:
		red, es, err := trace.RedactEvent(*ev)
		if err == nil && (len(es) > 0 || hasNumbers(ev)) {
			// Without findings the pass's event is ev's fields as they
			// are (its copies of the numbers aside): copying it back
			// would only move 416 bytes through write barriers.
			*ev, entries = red, es
		}
		vouched = s.plan == nil && err == nil && len(es) == 0
	}
	if s.aligned {
		s.aligned = false
		if base := s.plan.base.Events; ev.Step < len(base) && (same || sameEvent(&base[ev.Step], ev)) {
			// Same type and payloads: the base's hashes (computed once per
			// Prepared, never trusted from the file) and its id.
			ev.InputHash, ev.OutputHash = s.plan.hashesFor(ev.Step, s)
			b := &base[ev.Step]
			ev.ID = b.ID
			// The same payloads: keep the base's strings, so that the new
			// trace shares them instead of holding copies.
			ev.Input, ev.Output, ev.Before, ev.After, ev.Details = b.Input, b.Output, b.Before, b.After, b.Details
			s.aligned = true
			if len(b.Redactions) > 0 {
				ev.Redactions, entries = s.plan.redactionsOf(b, ev.Redactions, entries)
			}
		}
		if !s.aligned {
			s.parted.Store(true)
		}
	}
	if ev.ID == "" {
		s.stampLocked(ev)
	} else {
		vouched = false
	}
	if s.plan == nil {
		s.noteVouchLocked(ev, vouched)
	}
	for i := range entries {
		entries[i].EventID = ev.ID
	}
	if s.cps != nil {
		s.cps = append(s.cps, -1)
	}
	if len(entries) > 0 {
		s.tr.Redactions = append(s.tr.Redactions, entries...)
	}
	return ev.ID
}

// rootCP is the base event the run scope stands for: the base's run_start
// in a replay of a laned base, else -1.
func (s *session) rootCP() int32 {
	if s.plan == nil || s.plan.ops == nil {
		return -1
	}
	if i, ok := s.plan.ids.Lookup(s.plan.rootID); ok {
		return i
	}
	return -1
}

// noteCPLocked records that the event appended at step stands for base
// event b.
func (s *session) noteCPLocked(step int, b int32) {
	if s.cps != nil && step < len(s.cps) && b >= 0 {
		s.cps[step] = b
	}
}

// stampLocked gives ev a fresh id and its payload hashes, all three cut
// from one string.
func (s *session) stampLocked(ev *trace.Event) {
	var buf [36 + 4*sha256.Size]byte
	in, out := hashedPayloads(ev)
	b := s.appendHashLocked(s.ids.append(buf[:0]), in)
	na := len(b)
	b = s.appendHashLocked(b, out)
	str := string(b)
	ev.ID, ev.InputHash, ev.OutputHash = str[:36], str[36:na], str[na:]
}

// appendHashLocked is appendHash for a payload of the session's new
// events, which remembers the last few payloads it hashed: a value is
// often hashed again in the events that follow (a tool's output is the
// state the agent writes and the next tool's input).
func (s *session) appendHashLocked(dst []byte, v trace.Value) []byte {
	c := v.Canonical()
	if len(c) > 4 { // absent, null: appendHash's own
		for i := range s.hashed {
			if h := &s.hashed[i]; h.text == c {
				return append(dst, h.hash[:]...)
			}
		}
	}
	n := len(dst)
	dst = appendHash(dst, v)
	if len(c) > 4 {
		h := &s.hashed[s.nextHashed]
		s.nextHashed = (s.nextHashed + 1) % len(s.hashed)
		h.text = c
		copy(h.hash[:], dst[n:])
	}
	return dst
}

// hasNumbers reports whether ev points to numbers (duration, usage,
// cost), which a redaction pass copies.
func hasNumbers(ev *trace.Event) bool {
	return ev.DurationMS != nil || ev.PromptTokens != nil || ev.CompletionTokens != nil || ev.TotalTokens != nil || ev.CostUSD != nil
}

// cleanStrings reports whether the redactable strings of ev hold no
// credential.
func cleanStrings(ev *trace.Event) bool {
	for _, str := range [...]string{ev.Name, ev.Model, ev.Provider, ev.Key, ev.ErrorType, ev.Message} {
		if str == "" {
			continue
		}
		if _, hit := trace.RedactString(str); hit {
			return false
		}
	}
	return true
}

// sameEvent reports whether a new event equals a base event in everything
// but id, run id, time, duration and usage.
func sameEvent(b, e *trace.Event) bool {
	return b.Type == e.Type && b.ParentID == e.ParentID && b.Status == e.Status &&
		b.Name == e.Name && b.Key == e.Key && b.Model == e.Model && b.Provider == e.Provider &&
		b.ErrorType == e.ErrorType && b.Message == e.Message && b.RunStatus == e.RunStatus &&
		samePayload(b.Input, e.Input) && samePayload(b.Output, e.Output) &&
		samePayload(b.Before, e.Before) && samePayload(b.After, e.After) && samePayload(b.Details, e.Details)
}

// samePayload compares payloads, an absent one counting as null.
func samePayload(a, b trace.Value) bool {
	if a.IsAbsent() {
		a = trace.NullValue
	}
	if b.IsAbsent() {
		b = trace.NullValue
	}
	return a == b
}

// noteLocked keeps err as the run's divergence when it is the first (see
// settleDivergenceLocked for a base with concurrent groups).
func (s *session) noteLocked(err error) {
	if !errors.Is(err, ErrDiverged) {
		return
	}
	if s.divergence == nil {
		s.divergence = err
	}
	if s.plan != nil && s.plan.laned {
		s.diverged = append(s.diverged, err)
	}
}

// settleDivergenceLocked chooses the run's divergence when the base has
// concurrent groups, where which of two goroutines diverges first is an
// accident of scheduling: the divergence whose recorded event comes first
// in the base (then by its text). A call that matched no pending call of
// its group is named after the closest recorded call no goroutine matched
// by the end of the run.
func (s *session) settleDivergenceLocked() {
	if len(s.diverged) < 2 && len(s.misses) == 0 {
		return
	}
	misses := make(map[error]*groupMiss, len(s.misses))
	for i := range s.misses {
		misses[s.misses[i].err] = &s.misses[i]
	}
	key := func(err error) int {
		var m *MismatchError
		if errors.As(err, &m) && m.Step >= 0 {
			return m.Step
		}
		return int(^uint(0) >> 1)
	}
	var best error
	for _, err := range s.diverged {
		if m, ok := misses[err]; ok {
			if group := s.plan.groupPending(m.path); len(group) > 0 {
				err = s.scrubErr(groupMissError(&m.ic, m.path, group, closestOf(&m.ic, group)))
			}
		}
		if best == nil || key(err) < key(best) || key(err) == key(best) && err.Error() < best.Error() {
			best = err
		}
	}
	s.divergence = best
}

// occurrenceLocked counts calls of a kind and name and returns this one's
// 1-based number.
func (s *session) occurrenceLocked(kind CallKind, name string) int {
	k := occKey{kind, name}
	n := s.occ[k] + 1
	s.occ[k] = n
	return n
}

// run executes the agent under the session and finishes the trace. A panic
// is recorded as a failed run and re-raised after the trace is saved. The
// error is a failure of the recording itself (an output that cannot be
// recorded, a failed save); the agent's error is in Result.Err.
func (s *session) run(ctx context.Context, input trace.Value, agent Agent) (*Result, error) {
	s.build = s.buildFile(agent)
	s.mu.Lock()
	s.root = s.appendLocked(&trace.Event{Type: trace.RunStart, Input: input})
	s.mu.Unlock()
	var info *RunInfo
	if s.obs = observerFrom(ctx); s.obs != nil {
		info = &RunInfo{RunID: s.tr.RunID, AgentName: s.tr.AgentName, Directed: s.cfg.director != nil}
		if s.plan != nil {
			info.BaseRunID, info.Mode = s.plan.base.RunID, s.cfg.mode
		}
		ctx = s.obs.StartRun(ctx, info)
	}
	obsCtx := ctx
	gid := goid()
	ctx = context.WithValue(ctx, ctxKey{}, &scope{s: s, parent: s.root, gid: gid, cp: s.rootCP()})
	s.started(gid)
	defer s.ended()

	var (
		out       any
		err       error
		panicking bool
		panicVal  any
	)
	func() {
		defer func() {
			if p := recover(); p != nil {
				panicking, panicVal = true, p
			}
		}()
		out, err = agent(ctx, input)
	}()
	runErr := err
	if panicking {
		runErr = panicError{panicVal}
	}
	res, recErr := s.finish(out, runErr)
	res.Err = err
	if s.cfg.save {
		if serr := s.save(res); serr != nil {
			if panicking {
				panic(fmt.Sprintf("%v [stepfork: trace was not saved: %v]", panicVal, serr))
			}
			recErr = errors.Join(recErr, serr)
		}
	}
	if s.obs != nil {
		s.obs.EndRun(obsCtx, info, res)
	}
	if panicking {
		panic(panicVal)
	}
	return res, recErr
}

// panicError stands for a panic in the recording of a failed run.
type panicError struct{ v any }

func (p panicError) Error() string     { return fmt.Sprint(p.v) }
func (p panicError) ErrorType() string { return "panic" }

// finish writes the run's end (stepfork's layout: a failed run gets a
// run-level error under run_start, the manifest's failure, and a run_end with
// parent null) and builds the Result. An output that cannot be recorded
// fails the recorded run, and is returned as the error.
func (s *session) finish(out any, err error) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		ov     trace.Value
		recErr error
	)
	if err == nil {
		v, verr := valueOf(out)
		if verr != nil {
			err = fmt.Errorf("replay: the agent's output cannot be recorded: %w", verr)
			recErr = err
		}
		ov = v
	}
	if err != nil {
		typ := errorType(err)
		s.appendLocked(&trace.Event{Type: trace.ErrorEvent, ParentID: s.root, Status: trace.StatusError,
			ErrorType: typ, Message: errorMessage(err, typ)})
		ev := s.log.last()
		s.tr.Failure = &trace.Failure{Type: ev.ErrorType, Message: ev.Message, Step: ev.Step}
		s.appendLocked(&trace.Event{Type: trace.RunEnd, RunStatus: trace.RunFailed, Output: trace.NullValue})
		s.tr.Status = trace.RunFailed
	} else {
		s.appendLocked(&trace.Event{Type: trace.RunEnd, RunStatus: trace.RunCompleted, Output: ov})
		s.tr.Status = trace.RunCompleted
	}
	if s.plan != nil && s.plan.laned {
		s.settleDivergenceLocked()
	}
	s.tr.Events = s.log.all()
	if s.rescrub {
		s.rescrubLocked()
	}
	if len(s.lanes) > 0 {
		s.tr.Events = s.canonicalLocked(s.tr.Events)
	} else if s.plan == nil && !s.rescrub {
		vouch.For(s.tr.Events, s.sums, s.cleanBits, s.cleanBits) // a clean event's hashes were stamped
	}
	lanes, joins := s.lanesFile(), []byte(nil)
	if lanes != nil {
		joins = s.joinsFile()
	}
	for name, data := range map[string][]byte{trace.LanesFile: lanes, trace.JoinsFile: joins, trace.MintedFile: s.minted.fileData()} {
		if data == nil {
			continue
		}
		if s.tr.Extras == nil {
			s.tr.Extras = map[string][]byte{}
		}
		s.tr.Extras[name] = data
	}
	if s.build != nil {
		if s.tr.Extras == nil {
			s.tr.Extras = make(map[string][]byte, 1)
		}
		s.tr.Extras[trace.BuildFile] = s.build
	}
	t := trace.TotalsOf(s.tr.Events)
	s.tr.Totals.Events, s.tr.Totals.LLMCalls, s.tr.Totals.ToolCalls = t.Events, t.LLMCalls, t.ToolCalls
	if t.CostUSD != nil {
		s.tr.Totals.CostUSD = t.CostUSD
	}
	last := s.tr.Events[len(s.tr.Events)-1].Timestamp
	d := max(last.Sub(s.tr.CreatedAt).Milliseconds(), 0)
	s.tr.Totals.DurationMS = &d

	res := &Result{
		Trace:      s.tr,
		Output:     out,
		Divergence: s.divergence,
		Calls:      s.calls.all(),
		Served:     s.counts[0],
		Executed:   s.counts[1],
		Blocked:    s.counts[2],
		directed:   s.directed,
		moved:      s.moved,
	}
	if s.plan != nil {
		res.Mode = s.cfg.mode
		for _, r := range s.plan.pending() {
			res.pending = append(res.pending, &r.Recorded)
		}
	}
	return res, recErr
}

// rescrubLocked passes the events recorded before a Transport's scrubbers
// came through them too, and the failure taken from them.
func (s *session) rescrubLocked() {
	scrub := s.scrubbers()
	for i := range s.tr.Events {
		ev := &s.tr.Events[i]
		red, es, err := trace.RedactEvent(*ev, scrub...)
		if err != nil || len(es) == 0 {
			continue
		}
		*ev = red
		s.tr.Redactions = append(s.tr.Redactions, es...)
		if f := s.tr.Failure; f != nil && ev.Type == trace.ErrorEvent && ev.Step == f.Step {
			f.Type, f.Message = ev.ErrorType, ev.Message
		}
	}
}

// checkNames refuses an agent name or run id that holds a credential (or
// what a scrubber removes): both are written into the bundle's manifest,
// every event and the bundle's file name, where nothing may be redacted.
func checkNames(fn, agentName, runID string, scrub []trace.Scrubber) error {
	if red, hit := trace.RedactString(agentName, scrub...); hit {
		return optionErrf("%s: the agent name %q holds a credential or what a scrubber removes; name the agent without it (the name is written into the bundle and its file name)", fn, red)
	}
	if red, hit := trace.RedactString(runID, scrub...); hit {
		return optionErrf("replay.RunID: the run id %q holds a credential or what a scrubber removes; choose an id without it (the run id is written into every event and the bundle's file name)", red)
	}
	return nil
}

// unsafeAgentChars is compiled on first use, not when every program that
// links package replay starts.
var unsafeAgentChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]+`) })

// DefaultPath is where [SaveTo]("") saves a run: .stepfork/traces/<agent>-<run
// id>.sftrace, with every run of characters outside [A-Za-z0-9._-] in the
// agent name replaced by '-' (stepfork's rule; "agent" when nothing is left).
func DefaultPath(agent, runID string) string {
	safe := strings.Trim(unsafeAgentChars().ReplaceAllString(agent, "-"), "-")
	if safe == "" {
		safe = "agent"
	}
	return ".stepfork/traces/" + safe + "-" + runID + ".sftrace"
}

func (s *session) save(res *Result) error {
	path := s.cfg.savePath
	if path == "" {
		path = DefaultPath(s.tr.AgentName, s.tr.RunID)
	}
	if err := s.tr.Save(path, s.cfg.saveOpts...); err != nil {
		return fmt.Errorf("replay: trace was not saved: %w", err)
	}
	res.Path = s.tr.Path
	return nil
}

// Record runs agent with a recording session in its context and returns the
// run: its trace in [Result.Trace], and what the agent returned in
// [Result.Output] and [Result.Err]. input is recorded in run_start and
// handed to the agent as a [trace.Value].
//
// A run whose agent returns an error is recorded like any other: a valid
// failed trace (a run-level error event under run_start, the failure in the
// manifest, a run_end with status failed), with the agent's error in
// Result.Err. A panic is recorded the same way and re-raised once the trace
// is saved. With [SaveTo] the trace is saved whatever the outcome.
//
// The error is nil unless recording failed: an empty agent name, a nil
// agent, an input or output that cannot be recorded as JSON (matching
// [ErrNotRecordable]; for the output, the Result still holds the failed
// trace), a failed save (the Result holds the unsaved trace), or, under
// [StrictContext], a wrapper called without the session (matching
// [ErrNoSession]; the Result holds the trace that misses it).
//
// Inside another session (a replay whose agent calls Record, for instance)
// Record is inert: the agent runs against the enclosing session, nothing is
// saved, and Result.Trace is nil.
func Record(ctx context.Context, agentName string, input any, agent Agent, opts ...RecordOption) (*Result, error) {
	cfg := recordConfig(opts)
	if agentName == "" {
		return nil, optionErrf("replay.Record: the agent name must not be empty")
	}
	if agent == nil {
		return nil, optionErrf("replay.Record: the agent is nil")
	}
	if err := checkNames("replay.Record", agentName, cfg.runID, cfg.scrub); err != nil {
		return nil, err
	}
	if err := cfg.checkBuild(); err != nil {
		return nil, err
	}
	v, err := valueOf(input)
	if err != nil {
		return nil, fmt.Errorf("replay.Record: the run input cannot be recorded: %w", err)
	}
	if fromContext(ctx) != nil {
		out, err := agent(ctx, v)
		return &Result{Output: out, Err: err}, nil
	}
	s := newSession(cfg, nil, agentName)
	res, err := s.run(ctx, v, agent)
	if ne := s.noSessionErr(); ne != nil {
		err = errors.Join(err, fmt.Errorf("replay.Record: the recording misses a call: %w", ne))
	}
	return res, err
}

// Replay runs agent against tr: it is [Prepare](tr).Replay(ctx, agent,
// opts...).
func Replay(ctx context.Context, tr *trace.Trace, agent Agent, opts ...ReplayOption) (*Result, error) {
	return Prepare(tr).Replay(ctx, agent, opts...)
}

// Prepare returns the replay plan of tr, computed once per trace in time
// linear in the trace and shared by every replay of it ([Prepared.Replay],
// [Replay]) instead of each building its own. A trace whose Events slice is
// replaced or grown, or whose manifest, path, redactions or extras change,
// is planned again; events must not be changed in place once a trace was
// replayed (the rule of [trace.Trace.Calls]). A nil tr gives a Prepared
// whose Replay reports an error matching [ErrInvalidOptions].
func Prepare(tr *trace.Trace) *Prepared {
	if tr == nil {
		return &Prepared{}
	}
	return plans.GetFrom(tr, prepareFrom)
}

// plans are the Prepared of the traces replayed so far.
var plans tracecache.Cache[Prepared]

// Replay runs agent against the prepared trace: the recorded run_start input
// is handed back to the agent, and every call it makes through the wrappers
// is answered as the mode says (frozen unless [Hybrid] or [Live] is given:
// every result served, nothing executed). [Result.Trace] is a complete new
// recording of the replayed run; [Result.Output] and [Result.Err] are what
// the agent returned.
//
// The error is nil when the replay reproduced the recording. Otherwise it
// is, in this order of precedence: invalid options (matching
// [ErrInvalidOptions], reported before the agent runs, with a nil Result);
// the first divergence ([Result.Divergence], even if the agent swallowed
// it); in a frozen replay without a Director, a [*MismatchError] when the
// outcome differs from the recording (calls left unconsumed, an error where
// the recording completed or the reverse, another failure type, another
// final output); a failed save. Under [StrictContext], a wrapper called
// without the session (matching [ErrNoSession]) comes before all but the
// divergence, joined with it. The agent's own error is never the error:
// with live calls the outcome may legitimately differ.
//
// Replay may run concurrently with other replays of the same Prepared.
func (p *Prepared) Replay(ctx context.Context, agent Agent, opts ...ReplayOption) (*Result, error) {
	if p.base == nil {
		return nil, optionErrf("replay.Replay: the trace is nil")
	}
	if agent == nil {
		return nil, optionErrf("replay.Replay: the agent is nil")
	}
	cfg := replayConfig(opts)
	if err := cfg.checkReplay(p); err != nil {
		return nil, err
	}
	s := newSession(cfg, p, p.base.AgentName)
	res, recErr := s.run(ctx, p.input, agent)
	if ne := s.noSessionErr(); ne != nil {
		recErr = errors.Join(fmt.Errorf("replay: the replay's trace misses a call: %w", ne), recErr)
		if res.Divergence != nil {
			return res, errors.Join(res.Divergence, recErr)
		}
		return res, recErr
	}
	if res.Divergence != nil {
		return res, res.Divergence
	}
	if cfg.mode == ModeFrozen && cfg.director == nil {
		if oerr := outcomeDiffers(p.base, res); oerr != nil {
			return res, oerr
		}
	}
	return res, recErr
}

// outcomeDiffers compares a frozen replay's outcome with the recording
// (stepfork's replay command, §5.5), in stepfork's words.
func outcomeDiffers(base *trace.Trace, res *Result) error {
	if err := res.VerifyComplete(); err != nil {
		return err
	}
	var end *trace.Event
	for i := len(base.Events) - 1; i >= 0; i-- {
		if base.Events[i].Type == trace.RunEnd {
			end = &base.Events[i]
			break
		}
	}
	status := base.Status
	if end != nil {
		status = end.RunStatus
	}
	if res.Err != nil {
		if status != trace.RunFailed {
			return &MismatchError{Step: -1, msg: fmt.Sprintf("entrypoint raised %s: %s but the trace recorded status %s",
				errorType(res.Err), redactedText(res.Err.Error()), status)}
		}
		if base.Failure != nil && !sameErrorType(errorType(res.Err), base.Failure.Type) {
			return &MismatchError{Step: -1, msg: fmt.Sprintf("entrypoint raised %s: %s but the trace recorded status failed (failure %s)",
				errorType(res.Err), redactedText(res.Err.Error()), base.Failure.Type)}
		}
		return nil
	}
	if status == trace.RunFailed {
		return &MismatchError{Step: -1, msg: "trace recorded a failed run but the entrypoint completed without raising"}
	}
	if end == nil || end.Output.IsAbsent() || end.Output.IsNull() {
		return nil
	}
	got := res.Trace.Events[len(res.Trace.Events)-1].Output
	if got != end.Output {
		path, rv, av := firstDifference(end.Output, got, "$")
		return &MismatchError{Step: end.Step, EventID: end.ID, Recorded: end.Output, Actual: got,
			msg: fmt.Sprintf("final result differs from recorded output at '%s': recorded %s, actual %s. Possible causes include untraced nondeterminism or changed local logic.",
				path, previewOrMissing(rv), previewOrMissing(av))}
	}
	return nil
}

// noSessionErr is the first wrapper called without the session under
// StrictContext, nil when none was.
func (s *session) noSessionErr() *ContextError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noSession
}

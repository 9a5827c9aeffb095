package fork

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/internal/rawline"
	"github.com/stepfork/stepfork/trace"
)

// staticError is the error of a static fork that cannot be made. Its text is
// the message alone ("step 999 not found in trace"); it unwraps to the
// sentinel of the case ([ErrUnresolved], [ErrInvalidChange], [ErrConflict],
// [ErrBrokenTrace]) or, for storage problems, to the error of package trace.
type staticError struct {
	msg string
	err error
}

func (e *staticError) Error() string { return e.msg }
func (e *staticError) Unwrap() error { return e.err }

func forkErr(sentinel error, format string, args ...any) *staticError {
	return &staticError{msg: fmt.Sprintf(format, args...), err: sentinel}
}

// Cut is where a static fork ends: the fork keeps every event through it,
// the cut event included. Build it with [ThroughStep] or [ThroughEvent].
// A Cut is not a counterfactual fork point: [Step] re-runs its step, while
// ThroughStep keeps it as recorded.
type Cut struct {
	step    int
	event   string
	byEvent bool
}

// ThroughStep keeps every event whose step is at most n (steps start at 0,
// with run_start).
func ThroughStep(n int) Cut { return Cut{step: n} }

// ThroughEvent keeps every event up to and including the event with the
// given id.
func ThroughEvent(id string) Cut { return Cut{event: id, byEvent: true} }

// String is "step 5" or "event evt_abc", as fork.json records the cut.
func (c Cut) String() string {
	if c.byEvent {
		return "event " + c.event
	}
	return "step " + strconv.Itoa(c.step)
}

// TraceOption configures [Trace]: [Override] and [SaveTo].
type TraceOption interface{ applyTrace(*traceConfig) }

type traceOptionFunc func(*traceConfig)

func (f traceOptionFunc) applyTrace(c *traceConfig) { f(c) }

type traceConfig struct {
	overrides []override
	save      bool
	out       string
	saveOpts  []trace.SaveOption
	runID     string           // "" makes a fresh one (tests set it)
	now       func() time.Time // nil is time.Now (tests set it)
}

// override is one [Override] as given.
type override struct {
	target Target
	output any
}

// Override replaces what a recorded call returned in a static fork: the
// output of the tool_result or llm_response event that target addresses
// ([OnStep] or [OnEvent]: the result event itself; [OnCall]: the result
// that answers that call, or every kept call of the name for occurrence 0).
// output is a
// [trace.Value] or anything [trace.ValueOf] accepts; nil is JSON null.
//
// An overridden event gets status "ok": the override says what the call
// returned, so a replay of the fork serves that output instead of a
// recorded failure. An event-id override beats a step override of the same
// event, which beats a call override; two overrides of the same target are
// refused.
func Override(target Target, output any) TraceOption {
	return traceOptionFunc(func(c *traceConfig) { c.overrides = append(c.overrides, override{target, output}) })
}

// Source is what [Trace] forks: a loaded trace, or the path of a bundle.
type Source interface{ *trace.Trace | string }

// Result reports a fork made by [Trace].
type Result struct {
	// Path is where the fork was saved ("" when it was not).
	Path string
	// OriginalEventCount is the number of events of the trace forked (for a
	// path, the manifest's count unless the whole trace was read), and
	// ForkedEventCount the number the fork kept.
	OriginalEventCount int
	ForkedEventCount   int
	// Trace is the fork of a *trace.Trace, exactly as saved (redacted,
	// hashes and totals recomputed, fork.json in Extras). A fork of a path
	// is streamed to its bundle and never held in memory: Trace is nil
	// (load Path to read it).
	Trace *trace.Trace
	// Info is the fork's provenance, as written to fork.json: the fork
	// point resolved and the overrides applied.
	Info *Info
}

// Trace makes a static fork of src through cut: the events up to and
// including the cut, with a new run id, the overrides applied, hashes and
// totals recomputed and the provenance in fork.json.
//
// src is a *trace.Trace or the path of a bundle. A path is streamed: only
// the events up to the cut are read, and lines already in the form Save
// writes are copied with only their run id rewritten, so the cost grows
// with the cut, not with the trace (a packed bundle's archive is still
// decompressed to its end, undecoded, so that one holding more than its
// bundle is refused as every reader refuses it; see [trace.PackedSuffix]).
// The fork of a path is saved to
// [SaveTo]'s path, by default [DefaultOutputPath] beside it; the fork of a
// *trace.Trace is saved only with SaveTo.
//
// Every problem is reported before anything is visible at the output path:
// a cut the trace does not hold matches [ErrUnresolved], an override that
// cannot be applied [ErrInvalidChange] (every such problem in one error),
// two overrides of the same target [ErrConflict], events that would not
// form a valid trace [ErrBrokenTrace], an unreadable bundle or a failed
// save [trace.ErrStorage].
func Trace[S Source](src S, cut Cut, opts ...TraceOption) (*Result, error) {
	var cfg traceConfig
	for _, o := range opts {
		if o != nil {
			o.applyTrace(&cfg)
		}
	}
	switch s := any(src).(type) {
	case *trace.Trace:
		if s == nil {
			return nil, &staticError{msg: "fork.Trace: the trace is nil"}
		}
		return forkLoaded(s, cut, &cfg)
	default:
		return forkPath(any(src).(string), cut, &cfg)
	}
}

func forkLoaded(tr *trace.Trace, cut Cut, cfg *traceConfig) (*Result, error) {
	if cfg.save {
		if err := checkOutput(cfg.out, tr.Path); err != nil {
			return nil, err
		}
	}
	src := &source{
		manifest:   tr.Manifest,
		redactions: func() []trace.RedactionEntry { return tr.Redactions },
		events:     eventsOf(tr.Events),
		parentPath: tr.Path,
		parentFork: tr.Extras[infoFile],
		lanes:      tr.Extras[trace.LanesFile],
		joins:      tr.Extras[trace.JoinsFile],
		build:      tr.Extras[trace.BuildFile],
		minted:     tr.Extras[trace.MintedFile],
	}
	var sc scan
	made, err := forkSource(src, cut, cfg, &sc, true)
	if err != nil {
		return nil, err
	}
	return &Result{Path: made.forked.Path, OriginalEventCount: len(tr.Events), ForkedEventCount: made.forked.Totals.Events,
		Trace: made.forked, Info: made.info}, nil
}

func forkPath(path string, cut Cut, cfg *traceConfig) (*Result, error) {
	if !cfg.save {
		cfg.save, cfg.out = true, DefaultOutputPath(path)
	}
	if err := checkOutput(cfg.out, path); err != nil {
		return nil, err
	}
	// The lines are decoded and checked on every core and come back in
	// file order, each noted as in saved form or not; payloads are only
	// hashed unless an event is decoded in full.
	r, err := trace.Open(path, rawline.CheckSavedForm[trace.OpenOption](), trace.SkipPayloads(), trace.Workers(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	parentFork, err := readParentInfo(r)
	if err != nil {
		return nil, err
	}
	lanes, err := r.Extra(trace.LanesFile)
	if err != nil {
		return nil, &staticError{msg: fmt.Sprintf("cannot read the lanes of %s: %v", path, err), err: err}
	}
	joins, err := r.Extra(trace.JoinsFile)
	if err != nil {
		return nil, &staticError{msg: fmt.Sprintf("cannot read the joins of %s: %v", path, err), err: err}
	}
	build, err := r.Extra(trace.BuildFile)
	if err != nil {
		return nil, &staticError{msg: fmt.Sprintf("cannot read the build of %s: %v", path, err), err: err}
	}
	minted, err := r.Extra(trace.MintedFile)
	if err != nil {
		return nil, &staticError{msg: fmt.Sprintf("cannot read the minted ids of %s: %v", path, err), err: err}
	}
	src := &source{
		manifest:   r.Manifest(),
		redactions: r.Redactions,
		events:     r.Events(),
		rawLine:    func() ([]byte, bool) { return rawline.Line(r) },
		decode:     r.Decode,
		parentPath: path,
		parentFork: parentFork,
		lanes:      lanes,
		joins:      joins,
		build:      build,
		finish:     r.Close,
		minted:     minted,
	}
	var sc scan
	made, err := forkSource(src, cut, cfg, &sc, false)
	if err != nil {
		return nil, err
	}
	n := max(sc.scanned, r.Manifest().Totals.Events)
	if sc.complete {
		n = sc.scanned
	}
	return &Result{Path: made.forked.Path, OriginalEventCount: n, ForkedEventCount: made.forked.Totals.Events, Info: made.info}, nil
}

func eventsOf(evs []trace.Event) iter.Seq2[*trace.Event, error] {
	return func(yield func(*trace.Event, error) bool) {
		for i := range evs {
			ev := evs[i] // the fork rewrites its copy, never the trace's event
			if !yield(&ev, nil) {
				return
			}
		}
	}
}

// DefaultOutputPath is where a fork of the bundle at path is saved when no
// output path is given: {stem}-forked.sftrace beside it.
func DefaultOutputPath(path string) string {
	clean := filepath.Clean(path)
	return strings.TrimSuffix(clean, ".sftrace") + "-forked.sftrace"
}

// checkOutput refuses to write over the trace being forked before anything
// is read. (An existing bundle at out is refused by trace.NewBundleWriter
// unless the save options include trace.Overwrite.)
func checkOutput(out, in string) error {
	if !strings.HasSuffix(strings.TrimRight(out, `/\`), ".sftrace") {
		return &staticError{msg: fmt.Sprintf("output path must end with .sftrace: %s", out), err: trace.ErrStorage}
	}
	if in != "" && samePath(out, in) {
		return &staticError{msg: fmt.Sprintf("output path %s is the trace being forked; choose another output path", out)}
	}
	return nil
}

func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	if aa == bb {
		return true
	}
	sa, err1 := os.Stat(aa)
	sb, err2 := os.Stat(bb)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// source is a trace being forked: its manifest and redactions, and its
// events as a stream read at most once. A bundle read from disk also says
// whether the current event's line is already what Save writes (rawLine,
// through internal/rawline) and decodes it in full on demand (decode); a
// loaded trace has
// neither, since its events are decoded and need the full path.
type source struct {
	manifest   trace.Manifest
	redactions func() []trace.RedactionEntry
	events     iter.Seq2[*trace.Event, error]
	rawLine    func() (line []byte, saved bool)
	decode     func(*trace.Event) error
	parentPath string
	parentFork []byte       // the parent's fork.json, if it is a fork itself
	lanes      []byte       // the parent's lanes.json, if any
	joins      []byte       // the parent's joins.json, if any
	build      []byte       // the parent's build.json, if any: the code that made the kept events
	minted     []byte       // the parent's minted.json, if any
	finish     func() error // ends reading the parent, nil when read whole
}

type made struct {
	forked *trace.Trace
	info   *Info
}

// target is an override after its output is converted.
type target struct {
	t     Target
	value trace.Value
}

// seenEvent is what the scan past the fork point remembers about an event
// an override names.
type seenEvent struct {
	step int
	typ  trace.EventType
}

// keptMeta is what the checks of a fork need to know of a kept event.
type keptMeta struct {
	id, parent string
	step       int
	typ        trace.EventType
}

func metaOf(ev *trace.Event) keptMeta {
	return keptMeta{id: ev.ID, parent: ev.ParentID, step: ev.Step, typ: ev.Type}
}

// scan is one pass over the events of the trace being forked: the events up
// to the cut are kept, and past it the pass reads on only to diagnose
// overrides that name events the fork does not keep.
type scan struct {
	kept        []keptMeta
	cutFound    bool
	maxStep     int
	beyondSteps map[int]bool
	beyondIDs   map[string]seenEvent
	scanned     int  // events read
	complete    bool // the stream was read to its end
	// callProblems are the OnCall overrides that matched no kept result,
	// reported with the other problems of the overrides.
	callProblems []string
}

// callOverride is an [OnCall] override as the stream meets its calls.
type callOverride struct {
	t          target
	seen, hits int // calls of the name kept so far, results overridden
}

// matches reports whether ev is a call the override names: a tool call of
// that name, or a model call with that label or model.
func (c *callOverride) matches(ev *trace.Event) bool {
	_, label := callIdentity(ev)
	return label == c.t.t.name || ev.Type == trace.LLMRequest && ev.Model == c.t.t.name
}

// answers reports whether ev, a child of a call c names, is its result
// (not an error or another event the call's body recorded).
func (c *callOverride) answers(ev *trace.Event) bool {
	return ev.Type == trace.ToolResult || ev.Type == trace.LLMResponse
}

// run reads events, passing every kept event to keep, in order. The event
// is the stream's: keep must copy what it keeps.
func (s *scan) run(events iter.Seq2[*trace.Event, error], cut Cut, targets []target, keep func(*trace.Event)) error {
	var done, stopped bool
	s.maxStep = -1
	var pendingSteps map[int]bool
	var pendingIDs map[string]bool
	s.beyondSteps, s.beyondIDs = map[int]bool{}, map[string]seenEvent{}
	for ev, err := range events {
		if err != nil {
			return &staticError{msg: fmt.Sprintf("cannot read the trace to fork: %v", err), err: err}
		}
		s.scanned++
		s.maxStep = max(s.maxStep, ev.Step)
		if !done {
			if cut.byEvent || ev.Step <= cut.step {
				s.kept = append(s.kept, metaOf(ev))
				keep(ev)
				if !cut.byEvent {
					s.cutFound = s.cutFound || ev.Step == cut.step
					continue
				}
				if ev.ID != cut.event {
					continue
				}
				s.cutFound = true
			}
			// The cut is passed (or is this event).
			done = true
			if !s.cutFound {
				stopped = true
				break
			}
			pendingSteps, pendingIDs = unresolved(targets, s.kept)
			if len(pendingSteps) == 0 && len(pendingIDs) == 0 {
				stopped = true
				break
			}
			if cut.byEvent {
				continue // this event is the cut, kept
			}
		}
		if pendingSteps[ev.Step] {
			s.beyondSteps[ev.Step] = true
			delete(pendingSteps, ev.Step)
		}
		if pendingIDs[ev.ID] {
			s.beyondIDs[ev.ID] = seenEvent{ev.Step, ev.Type}
			delete(pendingIDs, ev.ID)
		}
		if len(pendingSteps) == 0 && len(pendingIDs) == 0 {
			stopped = true
			break
		}
	}
	s.complete = !stopped
	return nil
}

// check runs the checks that need every kept event, in the order their
// errors are reported: the cut, the overrides, the structure. It returns
// the last kept event.
func (s *scan) check(cut Cut, targets []target) (keptMeta, error) {
	if !s.cutFound {
		switch {
		case cut.byEvent:
			return keptMeta{}, forkErr(ErrUnresolved, "event %s not found in trace", cut.event)
		case cut.step < 0:
			return keptMeta{}, forkErr(ErrUnresolved, "step %d not found in trace; steps start at 0", cut.step)
		}
		return keptMeta{}, forkErr(ErrUnresolved, "step %d not found in trace", cut.step)
	}
	last := s.kept[len(s.kept)-1]
	if err := resolveOverrides(targets, s.kept, last, s.beyondSteps, s.beyondIDs, s.maxStep, s.callProblems); err != nil {
		return last, err
	}
	if err := checkStructure(s.kept, last); err != nil {
		return last, err
	}
	return last, nil
}

// forkRunID returns the run id of the fork and the ancestors its fork.json
// lists: the parent's provenance, if the parent is a fork itself.
func forkRunID(cfg *traceConfig, parentRunID string, parentFork []byte) (string, []Info, error) {
	var ancestors []Info
	if parentFork != nil {
		pi, err := parseInfo(parentFork, parentRunID)
		if err != nil {
			return "", nil, &staticError{msg: fmt.Sprintf("cannot fork: the trace's %s is invalid: %v", infoFile, err), err: err}
		}
		ancestors = append([]Info{pi.withoutAncestors()}, pi.Ancestors...)
	}
	runID := cfg.runID
	if runID == "" {
		runID = "run_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	}
	if runID == parentRunID || slices.ContainsFunc(ancestors, func(a Info) bool { return a.ParentRunID == runID }) {
		return "", nil, &staticError{msg: fmt.Sprintf("run id %s is the run id of the trace being forked or of an ancestor; a fork needs a new run id", runID)}
	}
	return runID, ancestors, nil
}

// newInfo is the fork's provenance, without its overrides.
func newInfo(cfg *traceConfig, runID string, parent *trace.Manifest, parentPath string, cut Cut, last keptMeta, ancestors []Info) *Info {
	now := time.Now
	if cfg.now != nil {
		now = cfg.now
	}
	return &Info{
		Kind:             KindStatic,
		RunID:            runID,
		ParentRunID:      parent.RunID,
		ParentTracePath:  parentPath,
		ForkPoint:        cut.String(),
		ForkPointStep:    last.step,
		ForkPointEventID: last.id,
		ForkTimestamp:    now().UTC().Truncate(time.Microsecond),
		Ancestors:        ancestors,
	}
}

// forkSource is the one static-fork engine: it forks src through cut and,
// when cfg saves, writes the fork to cfg.out as it reads, so that the cost
// is that of the events up to the cut.
//
// Each kept line that is already what Save writes (every line of a bundle
// that Save or Python stepfork wrote, unless it holds what redaction looks
// for) is copied with only its run_id rewritten, since the payload hashes do
// not cover run_id; the other events, and those an override changes, are
// written as Save writes them. The result is byte for byte what loading the
// kept events, applying the overrides and saving would write. Nothing is
// visible at the output until every check has passed: the checks run on
// what was read, and their errors are reported in the same order for every
// source.
//
// With keep, the kept events are returned in made.forked, as Save writes
// them; without, payloads are only hashed and made.forked has no events.
func forkSource(src *source, cut Cut, cfg *traceConfig, sc *scan, keep bool) (*made, error) {
	targets, err := checkOverrides(cfg.overrides)
	if err != nil {
		return nil, err
	}
	parent := src.manifest
	// The run id is needed to write; its errors are reported after the
	// checks of the events.
	runID, ancestors, runIDErr := forkRunID(cfg, parent.RunID, src.parentFork)
	if runIDErr != nil {
		runID = parent.RunID + "_fork" // written under it only until aborted
	}

	m := parent
	m.RunID = runID
	var w *trace.BundleWriter
	var saveErr error
	if cfg.save {
		if w, err = trace.NewBundleWriter(cfg.out, m, cfg.saveOpts...); err != nil {
			return nil, &staticError{msg: fmt.Sprintf("cannot save the fork: %v", err), err: err}
		}
	}
	committed := false
	defer func() {
		if w != nil && !committed {
			w.Abort()
		}
	}()

	byID := map[string]target{}
	byStep := map[int]target{}
	var calls []*callOverride
	for _, t := range targets {
		switch t.t.kind {
		case targetStep:
			byStep[t.t.step] = t
		case targetEvent:
			byID[t.t.id] = t
		default:
			calls = append(calls, &callOverride{t: t})
		}
	}
	awaiting := map[string]*callOverride{} // call event id → the override of its result
	var (
		events       []trace.Event
		applied      []appliedOverride
		appliedOut   []trace.Event // the overridden events as written
		overrideReds []trace.RedactionEntry
		prepErr      error
		prevStep     int
		hasEnd       bool
		totals       trace.Totals // of the events written; only its cost is used
		full         trace.Event
	)
	write := func(ev *trace.Event) {
		index := len(sc.kept) - 1 // scan has noted ev
		if ev.Type == trace.RunEnd {
			hasEnd = true
		}
		totals.Add(ev)
		// The override this event takes when the overrides resolve
		// without error (resolveOverrides): its id's, or else its step's
		// if it is the first event of that step.
		// (Steps do not decrease in a trace that passes checkStructure.)
		if ev.Type == trace.ToolCall || ev.Type == trace.LLMRequest {
			for _, c := range calls {
				if c.matches(ev) {
					c.seen++
					if c.t.t.occ == 0 || c.seen == c.t.t.occ {
						awaiting[ev.ID] = c
					}
				}
			}
		}
		t, ok := byID[ev.ID]
		if !ok && (index == 0 || ev.Step != prevStep) {
			t, ok = byStep[ev.Step]
		}
		// A call's override takes the result that answers it (by its parent
		// link), unless an event-id or step override took that event.
		if c := awaiting[ev.ParentID]; c != nil && ev.ParentID != "" && c.answers(ev) {
			delete(awaiting, ev.ParentID)
			c.hits++ // taken by this override, or by an id or step override that beats it
			if !ok {
				t, ok = c.t, true
			}
		}
		prevStep = ev.Step
		ok = ok && (ev.Type == trace.ToolResult || ev.Type == trace.LLMResponse)
		var line []byte
		saved := false
		if src.rawLine != nil {
			line, saved = src.rawLine()
		}
		raw := !ok && saved // before ev's run id changes
		e := ev
		if !raw && !keep && src.decode != nil {
			if err := src.decode(&full); err != nil {
				prepErr = cmpErr(prepErr, err)
				return
			}
			e = &full
		}
		e.RunID = runID
		if ok {
			orig, _ := trace.RedactValue(e.Output)
			a := appliedOverride{t: t, index: index, originalHash: trace.Hash(orig)}
			e.Output = t.value
			e.Status = trace.StatusOK
			e.Redactions = slices.DeleteFunc(slices.Clone(e.Redactions), isOutputPointer)
			red, entries, err := trace.RedactEvent(*e)
			if err != nil {
				prepErr = cmpErr(prepErr, fmt.Errorf("event %s: %w", e.ID, err))
				return
			}
			red.SetHashes()
			*e = red
			overrideReds = append(overrideReds, entries...)
			applied = append(applied, a)
			appliedOut = append(appliedOut, red)
		}
		if keep {
			events = append(events, *e)
		}
		if w == nil || saveErr != nil {
			return
		}
		if raw {
			saveErr = rawline.WriteRaw(w, e, line)
		} else {
			saveErr = w.WriteEvent(e)
		}
	}
	if err := sc.run(src.events, cut, targets, write); err != nil {
		return nil, err
	}
	if src.finish != nil {
		// A parent read up to the cut is still read as a whole bundle: a
		// packed parent whose archive holds more than its bundle is refused.
		if err := src.finish(); err != nil {
			return nil, err
		}
	}
	for _, c := range calls {
		if c.hits > 0 {
			continue
		}
		if c.seen < c.t.t.occ || c.seen == 0 {
			sc.callProblems = append(sc.callProblems, fmt.Sprintf("override targets %s, but the fork keeps %d such call(s)", c.t.t, c.seen))
		} else {
			sc.callProblems = append(sc.callProblems, fmt.Sprintf("override targets %s, but the fork does not keep its result", c.t.t))
		}
	}
	last, err := sc.check(cut, targets)
	if err != nil {
		return nil, err
	}
	if runIDErr != nil {
		return nil, runIDErr
	}
	if prepErr != nil {
		return nil, &staticError{msg: fmt.Sprintf("cannot fork: %v", prepErr), err: prepErr}
	}

	// A fork that keeps the run's end keeps its status, failure and
	// totals; any other fork is an unfinished run.
	if !hasEnd {
		m.Status, m.Failure = trace.RunRunning, nil
		m.Totals.DurationMS = nil
		m.Totals.CostUSD = totals.CostUSD
	}
	m.Totals.Events, m.Totals.LLMCalls, m.Totals.ToolCalls = len(sc.kept), 0, 0
	keptIDs := make(map[string]bool, len(sc.kept))
	for _, k := range sc.kept {
		keptIDs[k.id] = true
		switch k.typ {
		case trace.LLMRequest:
			m.Totals.LLMCalls++
		case trace.ToolCall:
			m.Totals.ToolCalls++
		}
	}
	overridden := map[string]bool{}
	for _, a := range applied {
		overridden[sc.kept[a.index].id] = true
	}
	var reds []trace.RedactionEntry
	for _, e := range src.redactions() {
		if e.EventID != trace.ManifestEventID && !keptIDs[e.EventID] {
			continue
		}
		if overridden[e.EventID] && isOutputPointer(e.Path) {
			continue // the output it described is replaced
		}
		reds = append(reds, e)
	}
	reds = append(reds, overrideReds...)

	info := newInfo(cfg, runID, &parent, src.parentPath, cut, last, ancestors)
	data, err := info.recordOverrides(applied, func(k int) *trace.Event { return &appliedOut[k] })
	if err != nil {
		return nil, err
	}
	forked := &trace.Trace{Manifest: m, Events: events, Redactions: reds, Extras: map[string][]byte{infoFile: data}}
	if lanes := keptLanes(src.lanes, keptIDs); lanes != nil {
		forked.Extras[trace.LanesFile] = lanes
		if joins := keptJoins(src.joins, keptIDs); joins != nil {
			forked.Extras[trace.JoinsFile] = joins
		}
	}
	if src.build != nil {
		forked.Extras[trace.BuildFile] = src.build
	}
	if minted := keptMinted(src.minted, keptIDs); minted != nil {
		forked.Extras[trace.MintedFile] = minted
	}
	if keep {
		// As Save writes it: redacted, payload hashes computed.
		if forked, err = forked.Prepared(); err != nil {
			return nil, &staticError{msg: fmt.Sprintf("cannot fork: %v", err), err: err}
		}
	}
	if w == nil {
		return &made{forked: forked, info: info}, nil
	}
	if saveErr == nil {
		w.SetManifest(m)
		w.SetRedactions(reds)
		// fork.json, and the parent's lanes, build and minted ids that the
		// fork keeps.
		for _, name := range slices.Sorted(maps.Keys(forked.Extras)) {
			if saveErr == nil {
				saveErr = w.SetExtra(name, forked.Extras[name])
			}
		}
	}
	if saveErr == nil {
		committed = true
		saveErr = w.Close()
	}
	if saveErr != nil {
		return nil, &staticError{msg: fmt.Sprintf("cannot save the fork: %v", saveErr), err: saveErr}
	}
	forked.Path = w.Path()
	return &made{forked: forked, info: info}, nil
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// checkOverrides converts the outputs and checks each override's target,
// and that no two name the same step or event.
func checkOverrides(overrides []override) ([]target, error) {
	targets := make([]target, 0, len(overrides))
	steps := map[int]bool{}
	ids := map[string]bool{}
	calls := map[Target]bool{}
	var problems []string
	for _, o := range overrides {
		switch o.target.kind {
		case targetStep:
			if steps[o.target.step] {
				return nil, forkErr(ErrConflict, "duplicate override for step %d", o.target.step)
			}
			steps[o.target.step] = true
		case targetEvent:
			if ids[o.target.id] {
				return nil, forkErr(ErrConflict, "duplicate override for event %s", o.target.id)
			}
			ids[o.target.id] = true
		default:
			switch {
			case o.target.name == "":
				problems = append(problems, fmt.Sprintf("override of %s: the target names no call; give fork.OnCall a tool name or a model label", o.target))
				continue
			case o.target.occ < 0:
				problems = append(problems, fmt.Sprintf("override of %s: occurrences are 1-based (0 for every call)", o.target))
				continue
			case calls[o.target]:
				return nil, forkErr(ErrConflict, "duplicate override for %s", o.target)
			}
			calls[o.target] = true
		}
		v, ok := o.output.(trace.Value)
		if !ok {
			var err error
			if v, err = trace.ValueOf(o.output); err != nil {
				problems = append(problems, fmt.Sprintf("override of %s: output is not JSON: %v", o.target, err))
				continue
			}
		}
		if v.IsAbsent() {
			problems = append(problems, fmt.Sprintf("override of %s has no output (an absent trace.Value); use trace.NullValue for null", o.target))
			continue
		}
		targets = append(targets, target{t: o.target, value: v})
	}
	if len(problems) > 0 {
		return nil, forkErr(ErrInvalidChange, "invalid overrides: %s", strings.Join(problems, "; "))
	}
	return targets, nil
}

// unresolved returns the step and event-id targets the kept events do not
// hold: the scan goes on past the cut to tell "beyond the fork" from "not
// in the trace".
func unresolved(targets []target, kept []keptMeta) (map[int]bool, map[string]bool) {
	steps, ids := map[int]bool{}, map[string]bool{}
	for _, t := range targets {
		switch t.t.kind {
		case targetStep:
			steps[t.t.step] = true
		case targetEvent:
			ids[t.t.id] = true
		}
	}
	for i := range kept {
		delete(steps, kept[i].step)
		delete(ids, kept[i].id)
	}
	return steps, ids
}

// recordOverrides lists the applied overrides in i (event(k) is the
// event of applied[k] as written) and returns fork.json.
func (i *Info) recordOverrides(applied []appliedOverride, event func(k int) *trace.Event) ([]byte, error) {
	i.OverridesApplied = len(applied)
	for k, a := range applied {
		ev := event(k)
		i.Overrides = append(i.Overrides, AppliedOverride{
			Target:             a.t.t.String(),
			Step:               ev.Step,
			EventID:            ev.ID,
			Type:               ev.Type,
			Output:             ev.Output,
			OutputHash:         ev.OutputHash,
			OriginalOutputHash: a.originalHash,
		})
	}
	data, err := i.marshal()
	if err != nil {
		return nil, &staticError{msg: fmt.Sprintf("cannot fork: writing %s: %v", infoFile, err), err: err}
	}
	return data, nil
}

type appliedOverride struct {
	t            target
	index        int // index in the kept events
	originalHash string
}

// resolveOverrides checks that every override names a kept, overridable
// event, or explains why it does not: every problem is reported, in the
// order of the overrides.
func resolveOverrides(targets []target, kept []keptMeta, last keptMeta, beyondSteps map[int]bool, beyondIDs map[string]seenEvent, maxStep int, callProblems []string) error {
	if len(targets) == 0 {
		return nil
	}
	byID := make(map[string]int, len(kept))
	byStep := make(map[int][]int, len(kept))
	for i := range kept {
		if _, dup := byID[kept[i].id]; !dup {
			byID[kept[i].id] = i
		}
		byStep[kept[i].step] = append(byStep[kept[i].step], i)
	}
	forkEnd := fmt.Sprintf("the fork ends at step %d (fork point event %s)", last.step, last.id)
	var problems []string
	chosen := map[int]bool{} // kept indexes an event-id override takes
	overridable := func(i int, what string) bool {
		switch kept[i].typ {
		case trace.ToolResult, trace.LLMResponse:
			return true
		}
		problems = append(problems, fmt.Sprintf("override targets %s (%s); only tool_result and llm_response can be overridden", what, kept[i].typ))
		return false
	}
	// Event-id overrides first: they beat a step override of the same event.
	for _, t := range targets {
		if t.t.kind != targetEvent {
			continue
		}
		id := t.t.id
		i, ok := byID[id]
		switch {
		case ok:
			if overridable(i, "event "+id) {
				chosen[i] = true
			}
		case beyondIDs[id].typ != "":
			s := beyondIDs[id]
			problems = append(problems, fmt.Sprintf("override targets event %s (step %d, %s) but %s; fork at step %d or later, or drop the override", id, s.step, s.typ, forkEnd, s.step))
		default:
			problems = append(problems, fmt.Sprintf("override targets event %s, which is not in the trace", id))
		}
	}
	for _, t := range targets {
		if t.t.kind != targetStep {
			continue
		}
		s := t.t.step
		idx := byStep[s]
		switch {
		case s < 0:
			problems = append(problems, fmt.Sprintf("override targets step %d; steps start at 0", s))
		case len(idx) > 1:
			var names []string
			for _, i := range idx {
				names = append(names, fmt.Sprintf("%s (%s)", kept[i].id, kept[i].typ))
			}
			problems = append(problems, fmt.Sprintf("override targets step %d, which %d events share: %s; target one by event_id", s, len(idx), strings.Join(names, ", ")))
		case len(idx) == 1:
			if !chosen[idx[0]] { // an event-id override of the same event wins
				overridable(idx[0], "step "+strconv.Itoa(s))
			}
		case beyondSteps[s]:
			problems = append(problems, fmt.Sprintf("override targets step %d but %s; fork at step %d or later, or drop the override", s, forkEnd, s))
		case s > maxStep:
			problems = append(problems, fmt.Sprintf("override targets step %d but trace only has %d steps", s, maxStep+1))
		default:
			problems = append(problems, fmt.Sprintf("override targets step %d, but no event of the trace has that step", s))
		}
	}
	for _, p := range callProblems {
		problems = append(problems, p+" ("+forkEnd+")")
	}
	if len(problems) > 0 {
		return forkErr(ErrInvalidChange, "invalid overrides: %s", strings.Join(problems, "; "))
	}
	return nil
}

// checkStructure refuses a fork whose kept events would not validate: a
// parent that is not kept before its child, a step lower than the previous
// one, an event id used twice. These can only come from an invalid trace.
func checkStructure(kept []keptMeta, last keptMeta) error {
	seen := make(map[string]int, len(kept))
	prev := 0
	for i := range kept {
		ev := &kept[i]
		if i > 0 && ev.step < prev {
			return forkErr(ErrBrokenTrace, "cannot fork: event %s step %d is less than the previous step %d; the trace is invalid (run stepfork validate)", ev.id, ev.step, prev)
		}
		prev = ev.step
		if _, dup := seen[ev.id]; dup {
			return forkErr(ErrBrokenTrace, "cannot fork: event id %s appears more than once; the trace is invalid (run stepfork validate)", ev.id)
		}
		if ev.parent != "" {
			if _, ok := seen[ev.parent]; !ok {
				return forkErr(ErrBrokenTrace, "cannot fork at step %d: event %s (step %d) has parent %s, which the fork would not keep before it", last.step, ev.id, ev.step, ev.parent)
			}
		}
		seen[ev.id] = i
	}
	return nil
}

// keptJoins is the joins file of a static fork: the parent's joins that
// the fork keeps (nil when none is left, or the parent's file is
// unreadable: each scope's group is then one part).
func keptJoins(data []byte, kept map[string]bool) []byte {
	if len(data) == 0 {
		return nil
	}
	joins, err := trace.Joins(data)
	if err != nil {
		return nil
	}
	joins = slices.DeleteFunc(joins, func(id string) bool { return !kept[id] })
	if len(joins) == 0 {
		return nil
	}
	out, err := json.Marshal(joins)
	if err != nil {
		return nil
	}
	return out
}

func isOutputPointer(p string) bool { return p == "/output" || strings.HasPrefix(p, "/output/") }

// keptLanes is the lanes file of a static fork: the parent's lanes of the
// events the fork keeps (nil when none is left, or the parent's file is
// unreadable: the fork's calls are then strictly ordered).
func keptLanes(data []byte, kept map[string]bool) []byte {
	if len(data) == 0 {
		return nil
	}
	lanes, err := trace.Lanes(data)
	if err != nil {
		return nil
	}
	for id := range lanes {
		if !kept[id] {
			delete(lanes, id)
		}
	}
	if len(lanes) == 0 {
		return nil
	}
	out, err := json.Marshal(lanes)
	if err != nil {
		return nil
	}
	return out
}

// keptMinted is the minted-ids file of a static fork: the parent's entries
// for the calls the fork keeps (nil when none is left, or the parent's file
// is unreadable: renderings then show those ids as they are).
func keptMinted(data []byte, kept map[string]bool) []byte {
	if len(data) == 0 {
		return nil
	}
	minted, err := trace.Minted(data)
	if err != nil {
		return nil
	}
	for id := range minted {
		if !kept[id] {
			delete(minted, id)
		}
	}
	if len(minted) == 0 {
		return nil
	}
	out, err := json.Marshal(minted)
	if err != nil {
		return nil
	}
	return out
}

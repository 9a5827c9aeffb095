package fork

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/trace"
)

// Sentinel errors. Every error of a static fork is a *ForkError; those below
// are matched with errors.Is to tell the cases apart.
var (
	// ErrPointRequired: the Point names neither a step nor an event, or both.
	ErrPointRequired = errors.New("fork point requires either event_id or step")
	// ErrPointNotFound: the step or event of the Point is not in the trace.
	ErrPointNotFound = errors.New("fork point not found in trace")
	// ErrInvalidOverrides: an override's target is missing, not overridable,
	// ambiguous, or beyond the fork point.
	ErrInvalidOverrides = errors.New("invalid overrides")
	// ErrDuplicateOverride: two overrides name the same step or event id.
	ErrDuplicateOverride = errors.New("duplicate override")
	// ErrBrokenTrace: the events the fork would keep do not form a valid
	// trace (a parent left out or later than its child, steps going back,
	// a repeated event id). The trace being forked is itself invalid.
	ErrBrokenTrace = errors.New("fork would break the trace structure")
)

// ForkError is the error of every fork that cannot be made. Its text is the
// message alone ("step 999 not found in trace"); Unwrap gives the sentinel
// above, and for storage problems the error of package trace.
type ForkError struct {
	Msg string
	Err error
}

// Error returns the message.
func (e *ForkError) Error() string { return e.Msg }

// Unwrap returns the sentinel or underlying error.
func (e *ForkError) Unwrap() error { return e.Err }

func forkErr(sentinel error, format string, args ...any) *ForkError {
	return &ForkError{Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// Point says where to fork: at a step or at an event id, exactly one of them.
// Build it with AtStep or AtEvent; HasStep is what tells step 0 from no step.
type Point struct {
	Step    int    // the step, when HasStep is set
	HasStep bool   // Step is set
	EventID string // the event id, when not ""
}

// AtStep is the point at step n (0-based): the fork keeps every event whose
// step is at most n.
func AtStep(n int) Point { return Point{Step: n, HasStep: true} }

// AtEvent is the point at the event with the given id: the fork keeps every
// event up to and including it.
func AtEvent(id string) Point { return Point{EventID: id} }

// String is "step 5" or "event evt_abc".
func (p Point) String() string {
	if p.HasStep {
		return "step " + strconv.Itoa(p.Step)
	}
	if p.EventID != "" {
		return "event " + p.EventID
	}
	return "no fork point"
}

func (p Point) check() error {
	switch {
	case p.HasStep && p.EventID != "":
		return forkErr(ErrPointRequired, "%s, not both (got step %d and event_id %s)", ErrPointRequired, p.Step, p.EventID)
	case p.HasStep && p.Step < 0:
		return forkErr(ErrPointNotFound, "step %d not found in trace; steps start at 0", p.Step)
	case p.HasStep || p.EventID != "":
		return nil
	case p.Step != 0:
		return forkErr(ErrPointRequired, "%s (Step is %d but HasStep is false; build the point with fork.AtStep(%d))", ErrPointRequired, p.Step, p.Step)
	}
	return &ForkError{Msg: ErrPointRequired.Error(), Err: ErrPointRequired}
}

// Override replaces what a recorded call returned: the output of one
// tool_result or llm_response event, chosen by step or by event id (exactly
// one; build it with OverrideStep or OverrideEvent). Output is a trace.Value
// or anything trace.ValueOf accepts; nil is JSON null.
//
// An overridden event gets status "ok": the override says what the call
// returned, so a replay serves that output instead of a recorded failure.
type Override struct {
	Step    int  // the step, when HasStep is set
	HasStep bool // Step is set
	EventID string
	Output  any
}

// OverrideStep overrides the output of the event at step n.
func OverrideStep(n int, output any) Override {
	return Override{Step: n, HasStep: true, Output: output}
}

// OverrideEvent overrides the output of the event with the given id.
func OverrideEvent(id string, output any) Override { return Override{EventID: id, Output: output} }

// target is "step 5" or "event evt_abc".
func (o Override) target() string {
	if o.HasStep {
		return "step " + strconv.Itoa(o.Step)
	}
	return "event " + o.EventID
}

// Options configure a fork. The zero value forks without overrides.
type Options struct {
	// Overrides are applied to the kept events. They are all validated before
	// anything is written; an event-id override beats a step override of the
	// same event, and at most one override is applied per event.
	Overrides []Override
	// OutputPath is where Trace saves the fork. When it is "" and the fork is
	// of a path, the fork is saved beside it as {stem}-forked.sftrace; a fork
	// of a *trace.Trace is then not saved.
	OutputPath string
	// Overwrite lets Trace replace an existing bundle at OutputPath.
	Overwrite bool
	// ParentPath is recorded as the parent trace path in fork.json. It
	// defaults to the path forked, or to the Path of the *trace.Trace.
	ParentPath string
	// RunID is the run id of the fork; "" makes a fresh "run_<32 hex>".
	RunID string
	// Now gives the fork timestamp; nil means time.Now.
	Now func() time.Time
	// NoTrace leaves Result.Trace nil for a fork of a path. The kept events
	// are then never held in memory nor decoded in full: their payloads
	// are only hashed, and lines already in the form Save writes are
	// copied as they are, so a fork at step N costs about the reading and
	// writing of N lines. `stepfork fork` sets it. It does not change a
	// fork of a *trace.Trace.
	NoTrace bool
}

// Engine forks one trace in memory. It is the low-level form of Trace.
type Engine struct {
	tr    *trace.Trace
	point Point
	opts  Options
}

// NewEngine returns an engine that forks tr at point. tr is not changed.
func NewEngine(tr *trace.Trace, point Point, opts Options) *Engine {
	return &Engine{tr: tr, point: point, opts: opts}
}

// Fork makes the fork: the events up to the fork point with a new run id,
// event ids kept, overrides applied, hashes and totals recomputed, and its
// provenance in Extras["fork.json"]. The returned trace is as Save would
// write it (trace.Prepared) and is not saved.
func (e *Engine) Fork() (*trace.Trace, *Info, error) {
	parentPath := e.opts.ParentPath
	if parentPath == "" {
		parentPath = e.tr.Path
	}
	src := source{
		manifest:   e.tr.Manifest,
		redactions: e.tr.Redactions,
		events:     eventsOf(e.tr.Events),
		parentPath: parentPath,
		parentFork: e.tr.Extras[InfoFile],
	}
	out, err := forkSource(&src, e.point, e.opts)
	if err != nil {
		return nil, nil, err
	}
	return out.forked, out.info, nil
}

func eventsOf(evs []trace.Event) iter.Seq2[*trace.Event, error] {
	return func(yield func(*trace.Event, error) bool) {
		for i := range evs {
			if !yield(&evs[i], nil) {
				return
			}
		}
	}
}

// Source is what Trace forks: a loaded trace, or the path of a bundle.
type Source interface{ *trace.Trace | string }

// Result reports a fork made by Trace.
type Result struct {
	Success            bool
	ForkedTracePath    string // "" when the fork was not saved
	OriginalEventCount int
	ForkedEventCount   int
	ForkPointStep      int
	ForkPointEventID   string
	OverridesApplied   int
	ErrorMessage       string // the error's text when Success is false

	// Trace is the fork (with fork.json in Extras). Its events are what was
	// saved; a fork of a path keeps the parent's payload hashes, which Save
	// recomputes to the same values for any bundle stepfork wrote.
	Trace *trace.Trace
	Info  *Info // the fork's provenance, as written to fork.json
}

// ExcludedEvents is the number of events of the original the fork left out.
func (r *Result) ExcludedEvents() int { return r.OriginalEventCount - r.ForkedEventCount }

// Trace forks a trace at point, applies the overrides, and saves the fork.
//
// src is a *trace.Trace or the path of a bundle. A path is streamed: only the
// events up to the fork point are read and decoded (the rest only when an
// override must be diagnosed), so the cost grows with the fork point, not
// with the trace. OriginalEventCount is then the manifest's event count
// unless the whole trace was read.
//
// On failure Trace returns a Result with Success false and ErrorMessage set,
// together with the error: a *ForkError, or for an unreadable bundle an error
// matching trace.ErrStorage.
func Trace[S Source](src S, point Point, opts Options) (*Result, error) {
	var res *Result
	var err error
	switch s := any(src).(type) {
	case *trace.Trace:
		res, err = forkLoaded(s, point, opts)
	case string:
		res, err = forkPath(s, point, opts)
	}
	if err != nil {
		if res == nil {
			res = &Result{}
		}
		res.Success, res.ErrorMessage = false, err.Error()
		return res, err
	}
	return res, nil
}

func forkLoaded(tr *trace.Trace, point Point, opts Options) (*Result, error) {
	if tr == nil {
		return nil, &ForkError{Msg: "fork.Trace: the trace is nil"}
	}
	res := &Result{OriginalEventCount: len(tr.Events)}
	if opts.OutputPath != "" {
		if err := checkOutput(opts.OutputPath, tr.Path, opts.Overwrite); err != nil {
			return res, err
		}
	}
	forked, info, err := NewEngine(tr, point, opts).Fork()
	if err != nil {
		return res, err
	}
	res.fill(forked, info)
	if opts.OutputPath != "" {
		if err := save(forked, opts.OutputPath, opts.Overwrite); err != nil {
			return res, err
		}
		res.ForkedTracePath = forked.Path
	}
	res.Success = true
	return res, nil
}

func forkPath(path string, point Point, opts Options) (*Result, error) {
	res := &Result{}
	out := opts.OutputPath
	if out == "" {
		out = DefaultOutputPath(path)
	}
	if err := checkOutput(out, path, opts.Overwrite); err != nil {
		return res, err
	}
	r, err := trace.Open(path)
	if err != nil {
		return res, err
	}
	defer r.Close()
	parentFork, err := readParentInfo(r)
	if err != nil {
		return res, err
	}
	parentPath := opts.ParentPath
	if parentPath == "" {
		parentPath = path
	}
	var sc scan
	made, err := forkStream(r, parentFork, parentPath, point, opts, out, !opts.NoTrace, &sc)
	res.OriginalEventCount = max(sc.scanned, r.Manifest().Totals.Events)
	if sc.complete {
		res.OriginalEventCount = sc.scanned
	}
	if err != nil {
		return res, err
	}
	res.fill(made.forked, made.info)
	if opts.NoTrace {
		res.Trace = nil
	}
	res.ForkedTracePath = made.forked.Path
	res.Success = true
	return res, nil
}

func (r *Result) fill(forked *trace.Trace, info *Info) {
	r.Trace, r.Info = forked, info
	r.ForkedEventCount = forked.Totals.Events
	r.ForkPointStep, r.ForkPointEventID = info.ForkPointStep, info.ForkPointEventID
	r.OverridesApplied = info.OverridesApplied
}

// DefaultOutputPath is where a fork of the bundle at path is saved when no
// output path is given: {stem}-forked.sftrace beside it.
func DefaultOutputPath(path string) string {
	clean := filepath.Clean(path)
	return strings.TrimSuffix(clean, ".sftrace") + "-forked.sftrace"
}

// checkOutput refuses to write over the trace being forked, and over an
// existing bundle without Overwrite, before anything is read.
func checkOutput(out, in string, overwrite bool) error {
	if !strings.HasSuffix(strings.TrimRight(out, `/\`), ".sftrace") {
		return &ForkError{Msg: fmt.Sprintf("output path must end with .sftrace: %s", out), Err: trace.ErrStorage}
	}
	if in != "" && samePath(out, in) {
		return &ForkError{Msg: fmt.Sprintf("output path %s is the trace being forked; choose another output path", out)}
	}
	if overwrite {
		return nil
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return &ForkError{Msg: fmt.Sprintf("%s already exists; set Options.Overwrite (stepfork fork --overwrite) to replace it", out), Err: os.ErrExist}
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

func save(forked *trace.Trace, out string, overwrite bool) error {
	var opts []trace.SaveOption
	if overwrite {
		opts = append(opts, trace.Overwrite())
	}
	if err := forked.Save(out, opts...); err != nil {
		return &ForkError{Msg: fmt.Sprintf("cannot save the fork: %v", err), Err: err}
	}
	return nil
}

// source is a trace being forked: its manifest and redactions, and its events
// as a stream read at most once.
type source struct {
	manifest   trace.Manifest
	redactions []trace.RedactionEntry
	events     iter.Seq2[*trace.Event, error]
	parentPath string
	parentFork []byte // the parent's fork.json, if it is a fork itself

	scanned  int  // events read from the stream
	complete bool // the stream was read to its end
}

type made struct {
	forked *trace.Trace
	info   *Info
}

// target is an override after its output is converted.
type target struct {
	o     Override
	value trace.Value
	index int // index of the override in Options.Overrides
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
// to the fork point are kept, and past it the pass reads on only to
// diagnose overrides that name events the fork does not keep.
type scan struct {
	kept        []keptMeta
	pointFound  bool
	maxStep     int
	beyondSteps map[int]bool
	beyondIDs   map[string]seenEvent
	scanned     int  // events read
	complete    bool // the stream was read to its end
}

// run reads events, passing every kept event to keep, in order. The event
// is the stream's: keep must copy what it keeps.
func (s *scan) run(events iter.Seq2[*trace.Event, error], point Point, targets []target, keep func(*trace.Event)) error {
	var done, stopped bool
	s.maxStep = -1
	var pendingSteps map[int]bool
	var pendingIDs map[string]bool
	s.beyondSteps, s.beyondIDs = map[int]bool{}, map[string]seenEvent{}
	for ev, err := range events {
		if err != nil {
			return &ForkError{Msg: fmt.Sprintf("cannot read the trace to fork: %v", err), Err: err}
		}
		s.scanned++
		s.maxStep = max(s.maxStep, ev.Step)
		if !done {
			if !point.HasStep || ev.Step <= point.Step {
				s.kept = append(s.kept, metaOf(ev))
				keep(ev)
				if point.HasStep {
					s.pointFound = s.pointFound || ev.Step == point.Step
					continue
				}
				if ev.ID != point.EventID {
					continue
				}
				s.pointFound = true
			}
			// The fork point is passed (or is this event).
			done = true
			if !s.pointFound {
				stopped = true
				break
			}
			pendingSteps, pendingIDs = unresolved(targets, s.kept)
			if len(pendingSteps) == 0 && len(pendingIDs) == 0 {
				stopped = true
				break
			}
			if !point.HasStep {
				continue // this event is the fork point, kept
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
// errors are reported: the fork point, the overrides, the structure. It
// returns the overrides chosen, by index of kept event, and the fork point
// event.
func (s *scan) check(point Point, targets []target) (map[int]target, keptMeta, error) {
	if !s.pointFound {
		if point.HasStep {
			return nil, keptMeta{}, forkErr(ErrPointNotFound, "step %d not found in trace", point.Step)
		}
		return nil, keptMeta{}, forkErr(ErrPointNotFound, "event %s not found in trace", point.EventID)
	}
	last := s.kept[len(s.kept)-1]
	chosen, err := resolveOverrides(targets, s.kept, last, s.beyondSteps, s.beyondIDs, s.maxStep)
	if err != nil {
		return nil, last, err
	}
	if err := checkStructure(s.kept, last); err != nil {
		return nil, last, err
	}
	return chosen, last, nil
}

// forkRunID returns the run id of the fork and the ancestors its fork.json
// lists: the parent's provenance, if the parent is a fork itself.
func forkRunID(opts Options, parentRunID string, parentFork []byte) (string, []Info, error) {
	var ancestors []Info
	if parentFork != nil {
		pi, err := parseInfo(parentFork, parentRunID)
		if err != nil {
			return "", nil, &ForkError{Msg: fmt.Sprintf("cannot fork: the trace's %s is invalid: %v", InfoFile, err), Err: err}
		}
		ancestors = append([]Info{pi.withoutAncestors()}, pi.Ancestors...)
	}
	runID := opts.RunID
	if runID == "" {
		runID = "run_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	}
	if runID == parentRunID || slices.ContainsFunc(ancestors, func(a Info) bool { return a.ParentRunID == runID }) {
		return "", nil, &ForkError{Msg: fmt.Sprintf("Options.RunID %s is the run id of the trace being forked or of an ancestor; a fork needs a new run id (leave RunID empty for a fresh one)", runID)}
	}
	return runID, ancestors, nil
}

// newInfo is the fork's provenance, without its overrides.
func newInfo(opts Options, runID string, parent *trace.Manifest, parentPath string, point Point, last keptMeta, ancestors []Info) *Info {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	return &Info{
		Kind:             KindStatic,
		RunID:            runID,
		ParentRunID:      parent.RunID,
		ParentTracePath:  parentPath,
		ForkPoint:        point.String(),
		ForkPointStep:    last.step,
		ForkPointEventID: last.id,
		ForkTimestamp:    now().UTC().Truncate(time.Microsecond),
		Ancestors:        ancestors,
	}
}

func forkSource(src *source, point Point, opts Options) (*made, error) {
	if err := point.check(); err != nil {
		return nil, err
	}
	targets, err := checkOverrides(opts.Overrides)
	if err != nil {
		return nil, err
	}
	var kept []trace.Event
	var sc scan
	err = sc.run(src.events, point, targets, func(ev *trace.Event) { kept = append(kept, *ev) })
	src.scanned, src.complete = sc.scanned, sc.complete
	if err != nil {
		return nil, err
	}
	chosen, last, err := sc.check(point, targets)
	if err != nil {
		return nil, err
	}
	applied := make([]appliedOverride, 0, len(chosen))
	for i, t := range chosen {
		orig, _ := trace.RedactValue(kept[i].Output)
		applied = append(applied, appliedOverride{t: t, index: i, originalHash: trace.Hash(orig)})
	}
	slices.SortFunc(applied, func(a, b appliedOverride) int { return a.index - b.index })

	runID, ancestors, err := forkRunID(opts, src.manifest.RunID, src.parentFork)
	if err != nil {
		return nil, err
	}
	forked := buildFork(src, kept, runID, applied)
	prep, err := forked.Prepared()
	if err != nil {
		return nil, &ForkError{Msg: fmt.Sprintf("cannot fork: %v", err), Err: err}
	}
	info := newInfo(opts, runID, &src.manifest, src.parentPath, point, last, ancestors)
	data, err := info.recordOverrides(applied, func(i int) *trace.Event { return &prep.Events[applied[i].index] })
	if err != nil {
		return nil, err
	}
	prep.Extras = map[string][]byte{InfoFile: data}
	return &made{forked: prep, info: info}, nil
}

// checkOverrides converts the outputs and checks each override's shape and
// that no two name the same step or event.
func checkOverrides(overrides []Override) ([]target, error) {
	targets := make([]target, 0, len(overrides))
	steps := map[int]bool{}
	ids := map[string]bool{}
	var problems []string
	for i, o := range overrides {
		switch {
		case o.HasStep && o.EventID != "":
			problems = append(problems, fmt.Sprintf("override %d names both step %d and event %s; an override requires either event_id or step", i+1, o.Step, o.EventID))
			continue
		case !o.HasStep && o.EventID == "" && o.Step != 0:
			problems = append(problems, fmt.Sprintf("override %d requires either event_id or step (Step is %d but HasStep is false; use fork.OverrideStep(%d, output))", i+1, o.Step, o.Step))
			continue
		case !o.HasStep && o.EventID == "":
			problems = append(problems, fmt.Sprintf("override %d requires either event_id or step", i+1))
			continue
		}
		if o.HasStep {
			if steps[o.Step] {
				return nil, forkErr(ErrDuplicateOverride, "duplicate override for step %d", o.Step)
			}
			steps[o.Step] = true
		} else {
			if ids[o.EventID] {
				return nil, forkErr(ErrDuplicateOverride, "duplicate override for event %s", o.EventID)
			}
			ids[o.EventID] = true
		}
		var v trace.Value
		if tv, ok := o.Output.(trace.Value); ok {
			v = tv
		} else {
			var err error
			if v, err = trace.ValueOf(o.Output); err != nil {
				problems = append(problems, fmt.Sprintf("override of %s: output is not JSON: %v", o.target(), err))
				continue
			}
		}
		if v.IsAbsent() {
			problems = append(problems, fmt.Sprintf("override of %s has no output (an absent trace.Value); use trace.NullValue for null", o.target()))
			continue
		}
		targets = append(targets, target{o: o, value: v, index: i})
	}
	if len(problems) > 0 {
		return nil, forkErr(ErrInvalidOverrides, "invalid overrides: %s", strings.Join(problems, "; "))
	}
	return targets, nil
}

// unresolved returns the step and event-id targets the kept events do not
// hold: the scan goes on past the fork point to tell "beyond the fork" from
// "not in the trace".
func unresolved(targets []target, kept []keptMeta) (map[int]bool, map[string]bool) {
	steps, ids := map[int]bool{}, map[string]bool{}
	for _, t := range targets {
		if t.o.HasStep {
			steps[t.o.Step] = true
		} else {
			ids[t.o.EventID] = true
		}
	}
	for i := range kept {
		delete(steps, kept[i].step)
		delete(ids, kept[i].id)
	}
	return steps, ids
}

// recordOverrides lists the applied overrides in i (event(k) is the
// prepared event of applied[k]) and returns fork.json.
func (i *Info) recordOverrides(applied []appliedOverride, event func(k int) *trace.Event) ([]byte, error) {
	i.OverridesApplied = len(applied)
	for k, a := range applied {
		ev := event(k)
		i.Overrides = append(i.Overrides, AppliedOverride{
			Target:             a.t.o.target(),
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
		return nil, &ForkError{Msg: fmt.Sprintf("cannot fork: writing %s: %v", InfoFile, err), Err: err}
	}
	return data, nil
}

type appliedOverride struct {
	t            target
	index        int // index in the kept events
	originalHash string
}

// resolveOverrides maps every override to a kept event, or explains why it
// cannot be: every problem is reported, in the order of the overrides.
func resolveOverrides(targets []target, kept []keptMeta, last keptMeta, beyondSteps map[int]bool, beyondIDs map[string]seenEvent, maxStep int) (map[int]target, error) {
	if len(targets) == 0 {
		return nil, nil
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
	chosen := map[int]target{} // kept index → override
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
		if t.o.HasStep {
			continue
		}
		id := t.o.EventID
		i, ok := byID[id]
		switch {
		case ok:
			if overridable(i, "event "+id) {
				chosen[i] = t
			}
		case beyondIDs[id].typ != "":
			s := beyondIDs[id]
			problems = append(problems, fmt.Sprintf("override targets event %s (step %d, %s) but %s; fork at step %d or later, or drop the override", id, s.step, s.typ, forkEnd, s.step))
		default:
			problems = append(problems, fmt.Sprintf("override targets event %s, which is not in the trace", id))
		}
	}
	for _, t := range targets {
		if !t.o.HasStep {
			continue
		}
		s := t.o.Step
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
			i := idx[0]
			if _, taken := chosen[i]; taken {
				continue // an event-id override of the same event wins
			}
			if overridable(i, "step "+strconv.Itoa(s)) {
				chosen[i] = t
			}
		case beyondSteps[s]:
			problems = append(problems, fmt.Sprintf("override targets step %d but %s; fork at step %d or later, or drop the override", s, forkEnd, s))
		case s > maxStep:
			problems = append(problems, fmt.Sprintf("override targets step %d but trace only has %d steps", s, maxStep+1))
		default:
			problems = append(problems, fmt.Sprintf("override targets step %d, but no event of the trace has that step", s))
		}
	}
	if len(problems) > 0 {
		return nil, forkErr(ErrInvalidOverrides, "invalid overrides: %s", strings.Join(problems, "; "))
	}
	return chosen, nil
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

// buildFork assembles the fork from the kept events: new run id everywhere,
// the overrides applied, the manifest's status and totals made true of the
// kept events.
func buildFork(src *source, kept []trace.Event, runID string, applied []appliedOverride) *trace.Trace {
	m := src.manifest
	m.RunID = runID
	hasEnd := false
	var cost float64
	hasCost := false
	for i := range kept {
		ev := &kept[i]
		ev.RunID = runID
		switch ev.Type {
		case trace.RunEnd:
			hasEnd = true
		case trace.LLMResponse:
			if ev.CostUSD != nil {
				cost += *ev.CostUSD
				hasCost = true
			}
		}
	}
	// A fork that keeps the run's end keeps its status, failure and totals;
	// any other fork is an unfinished run.
	if !hasEnd {
		m.Status, m.Failure = trace.RunRunning, nil
		m.Totals.DurationMS = nil
		m.Totals.CostUSD = nil
		if hasCost {
			m.Totals.CostUSD = &cost
		}
	}
	overridden := map[string]bool{}
	for _, a := range applied {
		ev := &kept[a.index]
		ev.Output = a.t.value
		ev.Status = trace.StatusOK
		ev.Redactions = slices.DeleteFunc(slices.Clone(ev.Redactions), isOutputPointer)
		overridden[ev.ID] = true
	}
	keptIDs := make(map[string]bool, len(kept))
	for i := range kept {
		keptIDs[kept[i].ID] = true
	}
	var reds []trace.RedactionEntry
	for _, r := range src.redactions {
		if r.EventID != trace.ManifestEventID && !keptIDs[r.EventID] {
			continue
		}
		if overridden[r.EventID] && isOutputPointer(r.Path) {
			continue // the output it described is replaced
		}
		reds = append(reds, r)
	}
	return &trace.Trace{Manifest: m, Events: kept, Redactions: reds}
}

func isOutputPointer(p string) bool { return p == "/output" || strings.HasPrefix(p, "/output/") }

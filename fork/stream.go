package fork

import (
	"fmt"
	"runtime"
	"slices"

	"github.com/stepfork/stepfork/trace"
)

// forkStream forks the bundle r reads and writes the fork to out as it
// reads, so that the cost is that of the events up to the fork point.
//
// Each kept line that is already what Save writes (trace.Reader.SavedForm:
// every line of a bundle that Save or Python stepfork wrote, unless it holds
// what redaction looks for) is copied with only its run_id rewritten, since
// the payload hashes do not cover run_id; the other lines, and the events
// an override changes, are decoded in full and written as Save writes them.
// The result is byte for byte what loading the kept events, applying the
// overrides and saving would write. Nothing is visible at out until every
// check has passed: the checks run on what was read, and their errors are
// reported in the same order as for a fork in memory.
//
// With keep, the kept events are also decoded in full and returned in
// made.forked.Events, as Result.Trace has them; without, payloads are only
// hashed and made.forked has no events.
func forkStream(r *trace.Reader, parentFork []byte, parentPath string, point Point, opts Options, out string, keep bool, sc *scan) (*made, error) {
	if err := point.check(); err != nil {
		return nil, err
	}
	targets, err := checkOverrides(opts.Overrides)
	if err != nil {
		return nil, err
	}
	parent := r.Manifest()
	// The run id is needed to write; its errors are reported after the
	// checks of the events, as for a fork in memory.
	runID, ancestors, runIDErr := forkRunID(opts, parent.RunID, parentFork)
	if runIDErr != nil {
		runID = parent.RunID + "_fork" // written under it only until aborted
	}

	var saveOpts []trace.SaveOption
	if opts.Overwrite {
		saveOpts = append(saveOpts, trace.Overwrite())
	}
	m := parent
	m.RunID = runID
	w, saveErr := trace.NewBundleWriter(out, m, saveOpts...)
	committed := false
	defer func() {
		if w != nil && !committed {
			w.Abort()
		}
	}()

	byID := map[string]target{}
	byStep := map[int]target{}
	for _, t := range targets {
		if t.o.HasStep {
			byStep[t.o.Step] = t
		} else {
			byID[t.o.EventID] = t
		}
	}
	r.CheckSavedForm()
	if !keep {
		r.SkipPayloads()
	}
	// Nobody here asks for the digest of events.jsonl; the lines are
	// decoded and checked on every core, and come back in file order.
	r.SkipDigest()
	r.DecodeOn(runtime.GOMAXPROCS(0))
	var (
		events       []trace.Event
		applied      []appliedOverride
		appliedOut   []trace.Event // the overridden events as written
		overrideReds []trace.RedactionEntry
		prepErr      error
		prevStep     int
		hasEnd       bool
		cost         float64
		hasCost      bool
		full         trace.Event
	)
	write := func(ev *trace.Event) {
		index := len(sc.kept) - 1 // scan has noted ev
		switch ev.Type {
		case trace.RunEnd:
			hasEnd = true
		case trace.LLMResponse:
			if ev.CostUSD != nil {
				cost += *ev.CostUSD
				hasCost = true
			}
		}
		// The override this event takes when the overrides resolve
		// without error (resolveOverrides): its id's, or else its step's
		// if it is the first event of that step.
		// (Steps do not decrease in a trace that passes checkStructure.)
		t, ok := byID[ev.ID]
		if !ok && (index == 0 || ev.Step != prevStep) {
			t, ok = byStep[ev.Step]
		}
		prevStep = ev.Step
		ok = ok && (ev.Type == trace.ToolResult || ev.Type == trace.LLMResponse)
		raw := !ok && r.SavedForm() // before ev's run id changes
		e := ev
		if !raw && !keep {
			if err := r.Decode(&full); err != nil {
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
			saveErr = w.WriteRaw(e, r.RawLine())
		} else {
			saveErr = w.WriteEvent(e)
		}
	}
	err = sc.run(r.Events(), point, targets, write)
	if err != nil {
		return nil, err
	}
	_, last, err := sc.check(point, targets)
	if err != nil {
		return nil, err
	}
	if runIDErr != nil {
		return nil, runIDErr
	}
	if prepErr != nil {
		return nil, &ForkError{Msg: fmt.Sprintf("cannot fork: %v", prepErr), Err: prepErr}
	}

	// The manifest and redactions, as buildFork and Save make them.
	if !hasEnd {
		m.Status, m.Failure = trace.RunRunning, nil
		m.Totals.DurationMS = nil
		m.Totals.CostUSD = nil
		if hasCost {
			m.Totals.CostUSD = &cost
		}
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
	for _, e := range r.Redactions() {
		if e.EventID != trace.ManifestEventID && !keptIDs[e.EventID] {
			continue
		}
		if overridden[e.EventID] && isOutputPointer(e.Path) {
			continue // the output it described is replaced
		}
		reds = append(reds, e)
	}
	reds = append(reds, overrideReds...)

	info := newInfo(opts, runID, &parent, parentPath, point, last, ancestors)
	data, err := info.recordOverrides(applied, func(k int) *trace.Event { return &appliedOut[k] })
	if err != nil {
		return nil, err
	}
	forked := &trace.Trace{Manifest: m, Events: events, Redactions: reds, Extras: map[string][]byte{InfoFile: data}}

	if saveErr == nil {
		w.SetManifest(m)
		w.SetRedactions(reds)
		saveErr = w.SetExtra(InfoFile, data)
	}
	if saveErr == nil {
		committed = true
		saveErr = w.Close()
	}
	if saveErr != nil {
		return nil, &ForkError{Msg: fmt.Sprintf("cannot save the fork: %v", saveErr), Err: saveErr}
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

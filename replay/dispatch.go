package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// intercept is a dependency call the agent made.
type intercept struct {
	kind            CallKind
	name            string // tool name
	provider, model string
	input           trace.Value // after redaction
	fp              string
	parent, node    string
	sc              *scope // the scope the call was made in
	gid             uint64 // the goroutine that made it (0: not looked up)
	lane            int    // trace.Call.Lane of the call in sc
	position        int
	occurrence      int
	lbl             string // label(), once computed
	cp              int32  // the base call event it stands for, -1 (set by dispatch)
	seq             int    // Call.Seq when a Director was asked, else 0
}

// query is the call as its concurrent group matches it.
func (ic *intercept) query() opQuery {
	return opQuery{kind: ic.kind, name: ic.label(), input: ic.input}
}

// free reports whether the call is unordered relative to the rest of its
// scope: made on a concurrent goroutine of the scope, or in a scope opened
// on one.
func (ic *intercept) free() bool { return ic.lane > 0 || ic.sc != nil && ic.sc.free }

// label is the tool name, or provider/model.
func (ic *intercept) label() string {
	if ic.kind != KindLLM {
		return ic.name
	}
	if ic.lbl == "" {
		ic.lbl = trace.LLMLabel(ic.provider, ic.model)
	}
	return ic.lbl
}

// actual is the name stepfork prints for the call the agent made: the tool
// name or the model.
func (ic *intercept) actual() string {
	if ic.kind == KindLLM {
		return ic.model
	}
	return ic.name
}

func (ic *intercept) fingerprint() string {
	if ic.fp == "" {
		ic.fp = trace.Hash(ic.input)
	}
	return ic.fp
}

func (ic *intercept) descriptor() string {
	return descriptor(ic.kind, ic.name, ic.provider, ic.model)
}

// decision is what the session does with one dependency call.
type decision struct {
	act     actionKind // actServe, actExecute, actBlock or actFail
	rec     *rec       // the recorded call matched, if any
	value   trace.Value
	failure *RecordedError
	input   trace.Value // patched input (Absent: the agent's)
	model   string      // patched model ("": the agent's)
	reason  string
	err     error
	by      string // the user matchers through which rec matched
}

// dispatchLocked decides what to do with a dependency call: record it, ask
// the Director, or match it strictly (strictLocked; the order of the checks
// is in the package doc).
func (s *session) dispatchLocked(ic *intercept) decision {
	s.position++
	ic.position = s.position
	ic.occurrence = s.occurrenceLocked(ic.kind, ic.label())
	ic.cp = -1
	if s.plan == nil {
		return decision{act: actExecute}
	}
	if d := s.cfg.director; d != nil {
		c := &s.direct // valid only during Direct: reused, not allocated per call
		*c = Call{Kind: ic.kind, Name: ic.label(), Provider: ic.provider, Model: ic.model, Input: ic.input,
			Position: ic.position, Occurrence: ic.occurrence, Parent: ic.parent, Node: ic.node, Step: s.log.n,
			Seq: s.directLocked(), matchers: s.cfg.matchers}
		ic.seq = c.Seq
		cur, m, by := s.counterpartsLocked(ic)
		c.MatchedBy = by
		if cur != nil {
			c.Cursor = &cur.Recorded
		}
		if m != nil {
			c.Match = &m.Recorded
		}
		a := d.Direct(c)
		switch a.kind {
		case actServe:
			if r := s.recordedOf(a.instead); r != nil && s.plan.state[r.Position-1] == callPending {
				// A substituted result stands in for the recorded call it
				// replaces: consumed, so that no other call is served it.
				s.plan.consume(r)
				s.plan.skipNested(r)
				s.claimLocked(ic, r)
			}
			return decision{act: actServe, value: a.value}
		case actServeMatch:
			if m == nil {
				return decision{act: actFail, err: &MismatchError{Call: ic.position, Kind: ic.kind, Label: ic.label(), Step: -1,
					msg: fmt.Sprintf("call #%d: no unconsumed recorded %s call '%s' has this input\n  actual: %s\n  actual input fingerprint: %s",
						ic.position, ic.kind, ic.label(), ic.descriptor(), ic.fingerprint())}}
			}
			s.plan.consume(m)
			s.plan.skipNested(m)
			s.claimLocked(ic, m)
			d := serveRecorded(m)
			d.by = by
			return d
		case actExecute:
			if m != nil {
				// Not consumed (the call runs), but it is the call this
				// goroutine makes: what follows it is expected next.
				ic.cp = int32(m.event)
				if ic.free() {
					s.advanceLocked(ic.sc, ic.gid, ic.cp)
				}
			}
			return decision{act: actExecute, input: a.input, model: a.model}
		case actBlock:
			return decision{act: actBlock, reason: a.reason}
		case actFail:
			return decision{act: actFail, err: a.err}
		}
	}
	return s.strictLocked(ic)
}

// sameIdentity reports whether the recorded call r has ic's kind and tool
// name, or provider and model.
func sameIdentity(r *rec, ic *intercept) bool {
	if r.Kind != ic.kind {
		return false
	}
	if ic.kind == KindTool {
		return r.Call.Name == ic.name
	}
	return r.Call.Provider == ic.provider && r.Call.Model == ic.model
}

func serveRecorded(r *rec) decision {
	d := decision{act: actServe, rec: r, value: r.Output}
	if r.Status == trace.StatusError {
		typ, msg := r.ErrorType, r.Message
		if typ == "" {
			typ = "DependencyError"
		}
		if msg == "" {
			msg = "recorded dependency failure"
		}
		d.failure = &RecordedError{Kind: r.Kind, Label: r.Label, Type: typ, Message: msg}
	}
	return d
}

func fail(err error) decision { return decision{act: actFail, err: err} }

// counterpartsLocked is what a Director is told about the recorded calls
// ic may stand for. cursor is the one strict matching would use: for a call
// made in a scope's concurrent group, the group's pending call with ic's
// identity and input as the group matcher picks it (groups.go), else the
// closest of its kind and name, else the first pending of the group;
// otherwise the call at the cursor. match is a pending call with ic's
// identity and input: the group's, else the earliest anywhere; with user
// matchers ([Match]) an input they accept will do when none is equal, and
// by names them.
func (s *session) counterpartsLocked(ic *intercept) (cursor, match *rec, by string) {
	if ic.free() && s.plan.ops != nil {
		q := ic.query()
		if b := s.groupMatchLocked(ic.sc, ic.gid, ic.lane, q, false, nil); b >= 0 {
			r := s.plan.recAt(b)
			return r, r, ""
		}
		if b, by := s.groupMatchUserLocked(ic, q); b >= 0 {
			r := s.plan.recAt(b)
			return r, r, by
		}
		if b := s.groupMatchLocked(ic.sc, ic.gid, ic.lane, q, true, nil); b >= 0 {
			cursor = s.plan.recAt(b)
		} else if group := s.plan.groupPending(ic.sc.pathLocked()); len(group) > 0 {
			cursor = group[0]
		}
	}
	if cursor == nil {
		cursor = s.plan.at()
	}
	if cursor != nil && sameIdentity(cursor, ic) && inputOf(cursor.Call) == ic.input && s.plan.state[cursor.Position-1] == callPending {
		return cursor, cursor, "" // the earliest pending call, with this identity and input
	}
	match, by = s.plan.matchAny(s.cfg.matchers, ic.kind, ic.name, ic.provider, ic.model, ic.input, "", false)
	return cursor, match, by
}

// groupMatchUserLocked is the group match of q through the user matchers:
// the recorded operation of ic's scope's concurrent group, with q's kind
// and name, whose input the matchers accept, picked as groupMatchLocked
// picks; -1 when there are no matchers or none is accepted.
func (s *session) groupMatchUserLocked(ic *intercept, q opQuery) (int32, string) {
	if len(s.cfg.matchers) == 0 {
		return -1, ""
	}
	var by string
	b := s.groupMatchLocked(ic.sc, ic.gid, ic.lane, q, true, func(b int32) bool {
		if s.plan.callAt[b] < 0 {
			return false
		}
		r := s.plan.recAt(b)
		if !sameIdentity(r, ic) {
			return false
		}
		var ok bool
		by, ok = s.cfg.matchers.same(ic.kind, ic.name, ic.provider, ic.model, inputOf(r.Call), ic.input)
		return ok
	})
	return b, by
}

// directLocked numbers a call about to be directed (Call.Seq).
func (s *session) directLocked() int {
	s.directed = append(s.directed, -1)
	return len(s.directed)
}

// noteDirectedLocked records that the directed call seq produced the event
// appended at step.
func (s *session) noteDirectedLocked(seq, step int) {
	if seq > 0 && seq <= len(s.directed) {
		s.directed[seq-1] = int32(step)
	}
}

// recAt is the recorded call whose event is base event i.
func (p *plan) recAt(i int32) *rec { return &p.calls[p.callAt[i]] }

// recordedOf is the rec a *Recorded handed to a Director stands for, nil
// when it is not one of this plan's.
func (s *session) recordedOf(r *Recorded) *rec {
	if r == nil || r.Position < 1 || r.Position > len(s.plan.calls) {
		return nil
	}
	rc := &s.plan.calls[r.Position-1]
	if &rc.Recorded != r {
		return nil
	}
	return rc
}

// claimLocked notes that ic stands for the recorded call r: its counterpart
// in the new trace, and, in a concurrent group, its goroutine's last match.
func (s *session) claimLocked(ic *intercept, r *rec) {
	ic.cp = int32(r.event)
	if ic.free() {
		s.advanceLocked(ic.sc, ic.gid, ic.cp)
	}
}

// strictLocked is stepfork's matching, with concurrent groups: a call made
// on its scope's own goroutine is matched with the call at the cursor; one
// made on another goroutine, with the matching pending call of its scope's
// concurrent group (groupLocked).
func (s *session) strictLocked(ic *intercept) decision {
	if ic.free() && s.plan.laned {
		if d, ok := s.groupLocked(ic); ok {
			return d
		}
	}
	r := s.plan.at()
	if r == nil {
		if s.plan.laned {
			if d, ok := s.groupLocked(ic); ok {
				return d
			}
		}
		return fail(s.exhausted(ic))
	}
	n := s.matched + 1
	if s.plan.laned {
		// Not the number of calls matched so far, which depends on how far
		// the goroutines of concurrent groups got: the recorded call's own.
		n = r.Position
	}
	mismatch := func(format string, args ...any) decision {
		msg := fmt.Sprintf(format, args...) + fmt.Sprintf("\n  recorded: %s\n  actual:   %s",
			descriptor(r.Kind, r.Call.Name, r.Call.Provider, r.Call.Model), ic.descriptor())
		return fail(&MismatchError{Call: n, Kind: ic.kind, Label: r.Label, Step: r.Call.Step, EventID: r.Call.ID, msg: msg})
	}
	switch {
	case r.Kind != ic.kind:
		return mismatch("call #%d: expected %s '%s' but the agent made a %s call '%s'", n, r.Kind, r.Label, ic.kind, ic.actual())
	case ic.kind == KindTool && r.Call.Name != ic.name:
		return mismatch("call #%d: expected tool '%s' but the agent called '%s'", n, r.Label, ic.name)
	case ic.kind == KindLLM && r.Call.Model != ic.model:
		d := mismatch("call #%d: expected LLM model '%s' but the agent used '%s'", n, r.Call.Model, ic.model)
		return withModelFingerprints(d, r, ic)
	case ic.kind == KindLLM && r.Call.Provider != ic.provider:
		d := mismatch("call #%d: expected provider %s but the agent used %s", n, pyStr(r.Call.Provider), pyStr(ic.provider))
		return withModelFingerprints(d, r, ic)
	}
	return s.takeLocked(ic, r, n)
}

func withModelFingerprints(d decision, r *rec, ic *intercept) decision {
	m := d.err.(*MismatchError)
	m.msg += fmt.Sprintf("\n  recorded model fingerprint: %s\n  actual model fingerprint: %s",
		modelFingerprint(r.Call.Provider, r.Call.Model), modelFingerprint(ic.provider, ic.model))
	return d
}

func (s *session) exhausted(ic *intercept) error {
	total := len(s.plan.calls) - s.plan.skipped
	return &ExhaustedError{Kind: ic.kind, Label: ic.actual(), msg: fmt.Sprintf(
		"unexpected %s call '%s': all %d recorded dependency call(s) were already consumed\n  actual: %s\n  actual input fingerprint: %s",
		ic.kind, ic.actual(), total, ic.descriptor(), ic.fingerprint())}
}

// groupLocked matches ic with the earliest pending call of its scope's
// concurrent group with the same kind, name (or provider and model) and
// input: the order in which goroutines reach the wrappers is not behaviour.
// It reports false when the group has no pending call (the call is then
// matched at the cursor); a call that matches none of the pending ones
// fails, listing them and the closest by label with where its input
// differs.
func (s *session) groupLocked(ic *intercept) (decision, bool) {
	path := ic.sc.pathLocked()
	if s.plan.ops != nil {
		b := s.groupMatchLocked(ic.sc, ic.gid, ic.lane, ic.query(), false, nil)
		if b < 0 {
			b, _ = s.groupMatchUserLocked(ic, ic.query())
		}
		if b >= 0 {
			r := s.plan.recAt(b)
			d := s.takeLocked(ic, r, r.Position)
			if d.act != actFail {
				s.claimLocked(ic, r)
			}
			return d, true
		}
	} else if r, _ := s.plan.matchAny(s.cfg.matchers, ic.kind, ic.name, ic.provider, ic.model, ic.input, path, true); r != nil {
		return s.takeLocked(ic, r, r.Position), true
	}
	group := s.plan.groupPending(path)
	if len(group) == 0 {
		return decision{}, false
	}
	var closest *rec
	if s.plan.ops != nil {
		if b := s.groupMatchLocked(ic.sc, ic.gid, ic.lane, ic.query(), true, nil); b >= 0 {
			closest = s.plan.recAt(b)
		}
	}
	if closest == nil {
		closest = closestOf(ic, group)
	}
	e := groupMissError(ic, path, group, closest)
	if s.plan.laned {
		s.misses = append(s.misses, groupMiss{err: e, ic: *ic, path: path})
	}
	return fail(e), true
}

// groupMiss is a call that matched no pending call of its concurrent group,
// kept so that the run's divergence can name the recorded call closest to
// it among those no goroutine matched by the end of the run, rather than
// among those still pending when it happened to arrive.
type groupMiss struct {
	err  *MismatchError
	ic   intercept
	path string
}

// closestOf is the call of group with ic's identity whose input shares the
// longest beginning with ic's (the earliest of those), nil when none has
// its identity.
func closestOf(ic *intercept, group []*rec) *rec {
	var best *rec
	bestLen := -1
	in := ic.input.Canonical()
	for _, r := range group {
		if !sameIdentity(r, ic) {
			continue
		}
		rin := inputOf(r.Call).Canonical()
		n := 0
		for n < len(in) && n < len(rin) && in[n] == rin[n] {
			n++
		}
		if n > bestLen {
			best, bestLen = r, n
		}
	}
	return best
}

// groupMissError is the divergence of a call that matches no pending call
// of its scope's concurrent group (whose pending calls are group), named
// after the recorded call closest to it (or the group's first), not after
// the order in which the goroutines arrived.
func groupMissError(ic *intercept, path string, group []*rec, closest *rec) *MismatchError {
	var listed []string
	for i, p := range group {
		if i == 5 {
			break
		}
		listed = append(listed, fmt.Sprintf("#%d %s %s", p.Position, p.Kind, p.Label))
	}
	n := group[0].Position
	if closest != nil {
		n = closest.Position
	}
	where := "the run"
	if path != "" {
		where = "'" + strings.TrimPrefix(path, "/") + "'"
	}
	msg := fmt.Sprintf("call #%d: %s '%s', made on a concurrent goroutine in %s, matches no pending call of that scope's concurrent group\n  actual: %s\n  actual input fingerprint: %s\n  pending in the group: %s",
		n, ic.kind, ic.label(), where, ic.descriptor(), ic.fingerprint(), strings.Join(listed, ", "))
	if len(group) > 5 {
		msg += fmt.Sprintf(" (+%d more)", len(group)-5)
	}
	e := &MismatchError{Call: n, Kind: ic.kind, Label: ic.label(), Step: -1, msg: msg}
	if closest != nil {
		recorded := inputOf(closest.Call)
		at, rv, av := firstDifference(recorded, ic.input, "$")
		e.msg += fmt.Sprintf("\n  closest: #%d %s '%s' (step %d), whose input differs at '%s': recorded %s, actual %s",
			closest.Position, closest.Kind, closest.Label, closest.Call.Step, at, previewOrMissing(rv), previewOrMissing(av))
		e.Step, e.EventID, e.Recorded, e.Actual = closest.Call.Step, closest.Call.ID, recorded, ic.input
		e.Label = closest.Label
	}
	return e
}

// takeLocked runs the checks of §5.4 steps 4–12 on the recorded call r that
// ic was matched with, and consumes it.
func (s *session) takeLocked(ic *intercept, r *rec, n int) decision {
	hybridLive := s.cfg.mode == ModeHybrid && ic.kind == KindLLM && s.liveModels[r.Label]
	base := MismatchError{Call: n, Kind: ic.kind, Label: r.Label, Step: r.Call.Step, EventID: r.Call.ID}
	mismatch := func(msg string) decision { e := base; e.msg = msg; return fail(&e) }
	recorded := inputOf(r.Call)
	by, same := s.cfg.matchers.same(ic.kind, ic.name, ic.provider, ic.model, recorded, ic.input)
	if stored := r.Call.InputHash; stored != "" && stored != s.plan.fingerprint(r) {
		return mismatch(fmt.Sprintf("call #%d: recorded %s '%s' has an invalid input fingerprint\n  recorded input fingerprint: %s\n  computed input fingerprint: %s\n  %s",
			n, r.Kind, r.Label, stored, s.plan.fingerprint(r), validateAdvice))
	}
	if !hybridLive && !same {
		fp := r.Call.InputHash
		if fp == "" {
			fp = s.plan.fingerprint(r) + " (computed; recording had no stored input_hash)"
		}
		e := base
		e.Recorded, e.Actual = recorded, ic.input
		e.msg = fmt.Sprintf("call #%d: %s '%s' input diverged from the recording\n  recorded input fingerprint: %s\n  actual input fingerprint: %s\n  recorded: %s\n  actual:   %s",
			n, r.Kind, r.Label, fp, ic.fingerprint(), preview(recorded), preview(ic.input))
		return fail(&e)
	}
	switch r.Call.ReplayPolicy {
	case trace.PolicyForbidden:
		return fail(&PolicyError{Kind: ic.kind, Label: r.Label, msg: fmt.Sprintf("recorded %s call '%s' forbids automatic replay", r.Kind, r.Label)})
	case trace.PolicyManual:
		return fail(&PolicyError{Kind: ic.kind, Label: r.Label, msg: fmt.Sprintf("recorded %s call '%s' requires manual approval before replay", r.Kind, r.Label)})
	}
	if !hybridLive {
		if r.Missing {
			return mismatch(fmt.Sprintf("no captured result for recorded %s call '%s' at position %d", r.Kind, r.Label, n))
		}
		if r.Result != nil {
			if stored := r.Result.OutputHash; stored != "" && stored != s.plan.outputHash(r) {
				return mismatch(fmt.Sprintf("call #%d: recorded %s '%s' has an invalid output fingerprint\n  recorded output fingerprint: %s\n  computed output fingerprint: %s\n  %s",
					n, r.Kind, r.Label, stored, trace.Hash(r.Output), validateAdvice))
			}
		}
	}
	if s.cfg.mode == ModeLive && ic.kind == KindTool && !s.liveTools[ic.name] {
		return fail(&PolicyError{Kind: ic.kind, Label: ic.name, msg: fmt.Sprintf(
			"live tool '%s' requires explicit authorization; pass allow_live_tools={'%s'} (replay.Live(%q))", ic.name, ic.name, ic.name)})
	}
	s.plan.consume(r)
	s.matched++
	ic.cp = int32(r.event)
	if hybridLive || s.cfg.mode == ModeLive {
		return decision{act: actExecute, rec: r, by: by}
	}
	s.plan.skipNested(r)
	d := serveRecorded(r)
	d.by = by
	return d
}

const validateAdvice = "run `stepfork validate --verify-integrity` on the trace; legacy or tampered recordings cannot be used for strict replay"

// runFunc runs a dependency's body with the (possibly patched) input and
// model and returns its output as a Value.
type runFunc func(ctx context.Context, input trace.Value, model string, patched bool) (trace.Value, error)

// usageSlot is where ReportUsage and ReportIDs write, inside a model
// call's body.
type usageSlot struct {
	set   bool
	usage Usage
	ids   []mintedID
}

// dependency handles one tool or model call end to end: dispatch, the events
// of the new trace, and the body when it executes. raw is the agent's input
// before redaction. served reports that the output comes from the recording
// or a Director rather than from the body.
func (s *session) dependency(ctx context.Context, sc *scope, ic *intercept, raw trace.Value, run runFunc) (out trace.Value, served bool, err error) {
	ic.parent, ic.node, ic.sc = sc.parent, sc.node, sc
	ic.input = s.cleanInput(raw)
	var gid uint64
	if s.tracksLanes() {
		gid = goid()
	}
	s.mu.Lock()
	ic.gid = gid
	ic.lane = s.laneLocked(sc, gid)
	// The body gets the live input, unless a Director patched it; the run
	// records it with the provider-minted ids it carries back (ReportIDs,
	// Transport) replaced by the recorded ones they stand for.
	live := raw
	if c := s.minted.canonical(raw); c != raw {
		raw, ic.input = c, s.redacted(c)
	}
	d := s.dispatchLocked(ic)
	input, model := raw, ic.model
	if !d.input.IsAbsent() {
		input, live = d.input, s.minted.toLive(d.input)
	}
	if d.model != "" {
		model = d.model
	}
	callID := s.appendCallLocked(ic, input, model, d.rec, d.input.IsAbsent() && ic.input == raw)
	s.noteLaneLocked(callID, ic.lane)
	s.noteCPLocked(s.log.n-1, ic.cp)
	s.noteDirectedLocked(ic.seq, s.log.n-1)
	switch d.act {
	case actServe:
		s.appendServedLocked(ic, callID, model, d)
		cr := s.noteCallLocked(ic, callID, Served, d.rec, d.by)
		if d.rec != nil && ic.kind == KindLLM {
			s.minted.keep(callID, s.plan.minted[d.rec.Call.ID])
		}
		s.mu.Unlock()
		if d.failure != nil {
			s.observeAnswered(ctx, ic, cr, model, d.failure)
			return trace.Value{}, true, d.failure
		}
		s.observeAnswered(ctx, ic, cr, model, nil)
		return d.value, true, nil
	case actBlock:
		reason := d.reason
		if reason == "" {
			reason = "blocked by the director"
		}
		failure := failureOutput("Blocked", reason)
		s.appendResultLocked(ic, callID, model, trace.StatusSkipped, failure, nil, nil)
		cr := s.noteCallLocked(ic, callID, Blocked, nil, "")
		s.mu.Unlock()
		err := &BlockedError{Kind: ic.kind, Label: ic.label(), Reason: reason}
		s.scrubErr(err)
		s.observeAnswered(ctx, ic, cr, model, err)
		return trace.Value{}, false, err
	case actFail:
		s.scrubErr(d.err)
		s.noteLocked(d.err)
		s.appendFailureLocked(ic, callID, model, d.err)
		cr := s.noteCallLocked(ic, callID, Failed, d.rec, "")
		s.mu.Unlock()
		s.observeAnswered(ctx, ic, cr, model, d.err)
		return trace.Value{}, false, d.err
	}
	cr := s.noteCallLocked(ic, callID, Executed, d.rec, d.by)
	if gid == 0 {
		gid = goid()
		ic.gid, ic.lane = gid, s.laneLocked(sc, gid)
	}
	s.noteLaneLocked(callID, ic.lane)
	var corr *Recorded // the recorded model call this one stands in for (ReportIDs)
	if ic.kind == KindLLM {
		corr = s.correspondingLocked(ic, &d)
	}
	s.mu.Unlock()

	var ci *CallInfo
	if s.obs != nil {
		ci = observed(ic, cr, model)
		ctx = s.obs.StartCall(ctx, ci)
	}
	child, slot := sc.child(ctx, callID, sc.node, string(ic.kind), ic.label(), gid, ic.free(), true, ic.cp)
	start := time.Now()
	done := false
	defer func() {
		if done {
			return
		}
		p := recover()
		s.mu.Lock()
		s.appendFailureLocked(ic, callID, model, panicError{p})
		s.mu.Unlock()
		if ci != nil {
			ci.Err = panicError{p}
			s.obs.EndCall(ctx, ci)
		}
		panic(p)
	}()
	out, err = run(child, live, model, !d.input.IsAbsent() || d.model != "")
	done = true
	ms := time.Since(start).Milliseconds()
	if ci != nil {
		ci.Err = err
		if slot.set {
			ci.Usage = slot.usage
		}
		defer s.obs.EndCall(ctx, ci) // after the result is recorded and the lock released
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.appendFailureLocked(ic, callID, model, err)
		return out, false, err
	}
	var u *Usage
	if slot.set {
		u = &slot.usage
	}
	recorded := out
	if len(slot.ids) > 0 && ic.kind == KindLLM {
		recorded = s.bindLocked(callID, corr, slot.ids, out)
	}
	s.appendResultLocked(ic, callID, model, trace.StatusOK, recorded, &ms, u)
	return out, false, nil
}

// cleanInput is raw after redaction. An input equal to the input of the
// recorded call at the cursor, when that call holds nothing to redact, is
// clean as it is: the common case of a replay, spared the redaction pass.
// (Cleanness is a property of the text, so a cursor that moves before the
// call is dispatched changes nothing.) Without scrubbers, where redacting
// raw gives raw exactly when it finds nothing, the recorded input alone
// decides it.
func (s *session) cleanInput(raw trace.Value) trace.Value {
	if s.plan != nil {
		s.mu.Lock()
		r := s.plan.at()
		clean := false
		if r != nil && inputOf(r.Call) == raw {
			if len(s.scrubbers()) == 0 {
				clean = s.plan.inputCleanAt(r)
			} else {
				clean = s.plan.cleanAt(r.event)
			}
		}
		s.mu.Unlock()
		if clean {
			return raw
		}
	}
	return s.redacted(raw)
}

// observed describes a call to the session's Observer.
func observed(ic *intercept, cr CallRecord, model string) *CallInfo {
	return &CallInfo{CallRecord: cr, Provider: ic.provider, Model: model, Node: ic.node}
}

// observeAnswered reports a call that did not execute (served, blocked or
// failed) to the session's Observer: StartCall and EndCall at once.
func (s *session) observeAnswered(ctx context.Context, ic *intercept, cr CallRecord, model string, err error) {
	if s.obs == nil {
		return
	}
	ci := observed(ic, cr, model)
	ctx = s.obs.StartCall(ctx, ci)
	ci.Err = err
	s.obs.EndCall(ctx, ci)
}

func (s *session) noteCallLocked(ic *intercept, callID string, o Outcome, r *rec, by string) CallRecord {
	cr := CallRecord{Position: ic.position, Kind: ic.kind, Label: ic.label(), Outcome: o, EventID: callID, MatchedBy: by}
	if r != nil {
		cr.Recorded = &r.Recorded
	}
	s.calls.add(&cr)
	switch o {
	case Served:
		s.counts[0]++
	case Executed:
		s.counts[1]++
	case Blocked:
		s.counts[2]++
	default:
		s.counts[3]++
	}
	return cr
}

// appendCallLocked writes the tool_call or llm_request.
// clean says the input needed no redaction.
func (s *session) appendCallLocked(ic *intercept, input trace.Value, model string, r *rec, clean bool) string {
	ev := s.newEventLocked()
	ev.ParentID, ev.Input = ic.parent, input
	if r != nil {
		ev.ReplayPolicy = r.Call.ReplayPolicy
	}
	if ic.kind == KindLLM {
		ev.Type, ev.Provider, ev.Model = trace.LLMRequest, ic.provider, model
	} else {
		ev.Type, ev.Name = trace.ToolCall, ic.name
	}
	if clean {
		return s.commitLocked(ev, &noRedactions)
	}
	return s.commitLocked(ev, nil)
}

// noRedactions stands for a payload that needed none.
var noRedactions trace.Event

// appendServedLocked writes a served result as if the call had happened: the
// recorded result (and failure) of r, or the Director's value.
func (s *session) appendServedLocked(ic *intercept, callID, model string, d decision) {
	r := d.rec
	if r == nil {
		s.appendResultLocked(ic, callID, model, trace.StatusOK, d.value, nil, nil)
		return
	}
	resCP, failCP := s.resultCPs(int32(r.event))
	if ic.kind == KindTool {
		res := s.newEventLocked()
		res.Type, res.ParentID, res.Name, res.Status, res.Output = trace.ToolResult, callID, ic.name, r.Status, r.Output
		var resID string
		if r.Result != nil {
			res.DurationMS = r.Result.DurationMS
			resID = s.commitLocked(res, r.Result)
		} else {
			resID = s.commitLocked(res, nil)
		}
		s.noteCPLocked(s.log.n-1, resCP)
		if d.failure != nil && r.Failure != nil {
			s.addLocked(&trace.Event{Type: trace.ErrorEvent, ParentID: resID, Status: trace.StatusError,
				ErrorType: r.Failure.ErrorType, Message: r.Failure.Message, Details: r.Failure.Details}, r.Failure)
			s.noteCPLocked(s.log.n-1, failCP)
		}
		return
	}
	if b := r.Result; b != nil {
		// Built in place (see commitLocked), with copies of the recorded
		// numbers: the new trace shares no pointer with the base.
		ev := s.newEventLocked()
		ev.Type, ev.ParentID, ev.Model, ev.Status, ev.Output = trace.LLMResponse, callID, b.Model, b.Status, b.Output
		copyNumbers(ev, b)
		s.commitLocked(ev, b)
		s.noteCPLocked(s.log.n-1, resCP)
		return
	}
	if r.Failure != nil {
		s.addLocked(&trace.Event{Type: trace.ErrorEvent, ParentID: callID, Status: trace.StatusError,
			ErrorType: r.Failure.ErrorType, Message: r.Failure.Message, Details: r.Failure.Details}, r.Failure)
		s.noteCPLocked(s.log.n-1, failCP)
	}
}

// resultCPs are the base events that answered the base call event b: its
// result and its failure (-1 for none, and when the session keeps no
// counterparts).
func (s *session) resultCPs(b int32) (res, fail int32) {
	res, fail = -1, -1
	if s.cps == nil || b < 0 {
		return
	}
	c := s.plan.callAt[b]
	if c < 0 {
		return
	}
	r := &s.plan.calls[c]
	res = int32(r.result)
	if r.Failure != nil {
		if i, ok := s.plan.ids.Lookup(r.Failure.ID); ok {
			fail = i
		}
	}
	return
}

// appendResultLocked writes a tool_result or llm_response.
func (s *session) appendResultLocked(ic *intercept, callID, model string, st trace.Status, out trace.Value, ms *int64, u *Usage) {
	if out.IsAbsent() {
		out = trace.NullValue
	}
	resCP, _ := s.resultCPs(ic.cp)
	ev := s.newEventLocked() // built in place (see commitLocked)
	if ic.kind == KindTool {
		ev.Type, ev.ParentID, ev.Name, ev.Status, ev.Output = trace.ToolResult, callID, ic.name, st, out
		s.commitLocked(ev, nil)
		s.noteCPLocked(s.log.n-1, resCP)
		return
	}
	ev.Type, ev.ParentID, ev.Model, ev.Status, ev.Output, ev.DurationMS = trace.LLMResponse, callID, model, st, out, ms
	if u != nil {
		ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens = nonZero(u.PromptTokens), nonZero(u.CompletionTokens), nonZero(u.TotalTokens)
		if u.CostUSD > 0 {
			c := u.CostUSD
			ev.CostUSD = &c
		}
	}
	s.commitLocked(ev, nil)
	s.noteCPLocked(s.log.n-1, resCP)
}

// copyNumbers sets ev's duration, token counts and cost to copies of b's,
// nil where b's are nil ([trace.Event.Clone]'s, made in one allocation):
// the new trace shares no pointer with the base.
func copyNumbers(ev, b *trace.Event) {
	c := trace.Event{DurationMS: b.DurationMS, PromptTokens: b.PromptTokens, CompletionTokens: b.CompletionTokens,
		TotalTokens: b.TotalTokens, CostUSD: b.CostUSD}.Clone() // the numbers alone: no copy of b's redactions
	ev.DurationMS, ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens, ev.CostUSD = c.DurationMS, c.PromptTokens, c.CompletionTokens, c.TotalTokens, c.CostUSD
}

func nonZero(n int64) *int64 {
	if n <= 0 {
		return nil
	}
	return &n
}

// appendFailureLocked writes a failed call the way stepfork's recorder does:
// for a tool, a tool_result with status error and output {error_type,
// message} and an error event under it; for a model, an error event under
// the request.
func (s *session) appendFailureLocked(ic *intercept, callID, model string, err error) {
	typ := errorType(err)
	msg := errorMessage(err, typ)
	parent := callID
	resCP, failCP := s.resultCPs(ic.cp)
	if ic.kind == KindTool {
		parent = s.appendLocked(&trace.Event{Type: trace.ToolResult, ParentID: callID, Name: ic.name,
			Status: trace.StatusError, Output: failureOutput(typ, msg)})
		s.noteCPLocked(s.log.n-1, resCP)
	}
	s.appendLocked(&trace.Event{Type: trace.ErrorEvent, ParentID: parent, Status: trace.StatusError, ErrorType: typ, Message: msg})
	s.noteCPLocked(s.log.n-1, failCP)
}

func failureOutput(typ, msg string) trace.Value {
	v, _ := trace.ObjectValue(trace.Member{Key: "error_type", Value: trace.StringValue(typ)},
		trace.Member{Key: "message", Value: trace.StringValue(msg)})
	return v
}

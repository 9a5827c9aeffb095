package assert

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// Counterfactual assertions look at what a fork changed: how the variant
// run of a counterfactual fork differs from its base run, and what the fork
// did to get there.

// Counterfactual is what the counterfactual assertions inspect: a
// *[fork.Variant] (the result of [fork.Run] or sftest.Fork: the diff
// against its base and everything the fork did), or a *[diff.Result]
// ([diff.Runs] of a base and a variant, when only the two runs are at
// hand). It is a constraint, so passing anything else does not compile.
// The assertions that need what only a fork knows (suppressed effects,
// incurred cost, changes) take a *fork.Variant. A nil one fails with an
// [ErrInvalid] error.
type Counterfactual interface{ *fork.Variant | *diff.Result }

// subject is a Counterfactual resolved: the diff, and the variant when there
// is one.
type subject struct {
	v *fork.Variant
	d *diff.Result
}

func subjectOf(c any) (subject, error) {
	switch x := c.(type) {
	case *fork.Variant:
		if x == nil {
			break
		}
		if x.Diff != nil {
			return subject{v: x, d: x.Diff}, nil
		}
		if x.Base == nil || x.Trace == nil {
			return subject{}, invalidf("the *fork.Variant has no Diff, and no Base and Trace to compute it from; pass the variant fork.Run returned")
		}
		return subject{v: x, d: diff.Runs(x.Base, x.Trace)}, nil
	case *diff.Result:
		if x != nil {
			return subject{d: x}, nil
		}
	}
	return subject{}, invalidf("no counterfactual to check: got %s; pass the *fork.Variant of fork.Run or sftest.Fork, or a *diff.Result", typeName(c))
}

func typeName(c any) string {
	if c == nil {
		return "nil"
	}
	if rv := reflect.ValueOf(c); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return fmt.Sprintf("a nil %T", c)
	}
	return fmt.Sprintf("a %T", c)
}

// variantOf is subjectOf for the assertions that take a *fork.Variant.
func variantOf(v *fork.Variant) (*fork.Variant, error) {
	s, err := subjectOf(v)
	if err != nil {
		return nil, err
	}
	return s.v, nil
}

// on runs check on the resolved c.
func on(c any, check func(subject) error) error {
	s, err := subjectOf(c)
	if err != nil {
		return err
	}
	return check(s)
}

// describeDivergence says in one line where the two runs of d first part,
// naming the step ([diff.Divergence.String]): "steps 7–8: llm 'fake/fake-1'
// changed: output.content "refund" → "escalate"".
func describeDivergence(d *diff.Result) string {
	if d.Divergence == nil {
		return fmt.Sprintf("nowhere: the runs are equivalent (%d steps unchanged)", len(d.Steps))
	}
	return d.Divergence.String()
}

// shortRepr is reprValue cut to 120 characters.
func shortRepr(v trace.Value) string {
	return clip.Head(reprValue(v), 120)
}

// divergenceLine is "\nfirst divergence: …", or "" when d is equivalent.
func divergenceLine(d *diff.Result) string {
	if d.Divergence == nil {
		return ""
	}
	return "\nfirst divergence: " + describeDivergence(d)
}

// ---- Equivalent, Diverged, DivergesAtStep, DivergesInNode ----

// CheckEquivalent reports whether the variant behaved exactly like its base
// (diff.Result.Equivalent: no behavior step added, removed or changed;
// ids, timestamps, durations and costs are not behavior). The failure starts
// with the first divergence and is followed by the diff ([diff.Result.Explain]):
//
//	expected the variant to behave like the base; it diverged at steps 7–8: llm 'fake/fake-1' changed: output.content "refund" → "escalate"
func CheckEquivalent[C Counterfactual](c C) error {
	return on(c, func(s subject) error {
		if s.d.Equivalent() {
			return nil
		}
		return atDivergence(mismatchf("expected the variant to behave like the base; it diverged at %s\n%s",
			describeDivergence(s.d), strings.TrimRight(s.d.Explain(), "\n")), s.d.Divergence)
	})
}

// Equivalent asserts that the variant behaved exactly like its base; see
// CheckEquivalent.
func Equivalent[C Counterfactual](t TestingT, c C, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckEquivalent(c), msgAndArgs)
}

// CheckDiverged reports whether the variant behaved differently from its
// base: the opposite of CheckEquivalent.
//
//	expected the variant to diverge from the base; it behaved the same (16 steps unchanged)
func CheckDiverged[C Counterfactual](c C) error {
	return on(c, func(s subject) error {
		if !s.d.Equivalent() {
			return nil
		}
		return mismatchf("expected the variant to diverge from the base; it behaved the same (%d steps unchanged)", len(s.d.Steps))
	})
}

// Diverged asserts that the variant behaved differently from its base.
func Diverged[C Counterfactual](t TestingT, c C, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckDiverged(c), msgAndArgs)
}

// CheckDivergesAtStep reports whether the first divergence of the two runs
// is at step: a step number of the first differing behavior step's events,
// in the variant when it has that step (a changed or added step), else in
// the base (a removed step). A call is made at one step and answered at
// another, as the divergence names it ("steps 6–7"): either number
// matches; for a changed step whose step numbers differ between the runs
// those of either run match.
//
//	expected the runs to diverge at step 7; they diverged at steps 11–12: tool 'issue_refund' only in the base
func CheckDivergesAtStep[C Counterfactual](c C, step int) error {
	return on(c, func(s subject) error {
		return divergesAt(s, fmt.Sprintf("at step %d", step), "", func(dv *diff.Divergence) bool {
			at := func(s *trace.BehaviorStep) bool {
				return s != nil && (s.Step == step || s.ResultStep == step)
			}
			return at(dv.Variant) || at(dv.Base)
		})
	})
}

// DivergesAtStep asserts that the first divergence of the two runs is at
// step; see [CheckDivergesAtStep].
func DivergesAtStep[C Counterfactual](t TestingT, c C, step int, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckDivergesAtStep(c, step), msgAndArgs)
}

// CheckDivergesInNode reports whether the first divergence of the two runs
// is in node: the first differing step is that node's own step (its exit
// status changed), or, on a *fork.Variant, the differing event lies inside
// an execution of that node. A *diff.Result holds no events, so there only
// the node's own step matches.
//
//	expected the runs to diverge in node 'decide'; they diverged at steps 2–3: tool 'get_order' changed: output.amount 250.0 → 90.0 (in node 'lookup')
func CheckDivergesInNode[C Counterfactual](c C, node string) error {
	return on(c, func(s subject) error {
		if node == "" {
			return invalidf("DivergesInNode: the node name is empty")
		}
		return divergesAt(s, "in node "+reprString(node), node, func(dv *diff.Divergence) bool {
			return slices.Contains(nodesOf(s, dv), node)
		})
	})
}

// DivergesInNode asserts that the first divergence of the two runs is in
// node; see [CheckDivergesInNode].
func DivergesInNode[C Counterfactual](t TestingT, c C, node string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckDivergesInNode(c, node), msgAndArgs)
}

// divergesAt checks the first divergence of s with match; want says where
// it was expected, and node, when set, has the failure name the node the
// divergence was in.
func divergesAt(s subject, want, node string, match func(dv *diff.Divergence) bool) error {
	dv := s.d.Divergence
	if dv == nil {
		return mismatchf("expected the runs to diverge %s; they are equivalent (%d steps unchanged)", want, len(s.d.Steps))
	}
	if match(dv) {
		return nil
	}
	where := ""
	if node != "" {
		if nodes := nodesOf(s, dv); len(nodes) > 0 {
			where = " (in node " + reprString(nodes[0]) + ")"
		} else {
			where = " (outside any node)"
		}
	}
	return atDivergence(mismatchf("expected the runs to diverge %s; they diverged at %s%s", want, describeDivergence(s.d), where), dv)
}

// atDivergence notes on err the step of the divergence dv: the variant's,
// or the base's for a step only the base has.
func atDivergence(err error, dv *diff.Divergence) error {
	ce, ok := err.(*checkError)
	if !ok || dv == nil {
		return err
	}
	side := dv.Variant
	if side == nil {
		side = dv.Base
	}
	if side != nil {
		n := side.Step
		ce.step = &n
	}
	return ce
}

// nodesOf lists the nodes the diverging step is in, innermost first: the
// step itself when it is a node step, then, on a variant, the nodes whose
// enter markers are ancestors of its event.
func nodesOf(s subject, dv *diff.Divergence) []string {
	step, tr := dv.Variant, (*trace.Trace)(nil)
	if s.v != nil {
		tr = s.v.Trace
	}
	if step == nil {
		step = dv.Base
		if s.v != nil {
			tr = s.v.Base
		}
	}
	var nodes []string
	if step.Type == trace.StepNode {
		nodes = append(nodes, step.Label)
	}
	if tr == nil {
		return nodes
	}
	ev, _ := tr.Event(step.EventID)
	for hops := 0; ev != nil && hops <= len(tr.Events); hops++ {
		if ev.ID != step.EventID {
			if m, ok := ev.Marker(); ok && m.Key == trace.MarkerNode && m.Phase == trace.PhaseEnter {
				nodes = append(nodes, m.Name)
			}
		}
		if ev.ParentID == "" {
			break
		}
		ev, _ = tr.Event(ev.ParentID)
	}
	return nodes
}

// ---- Completed, Status ----

// statusOf is how the variant ended: the fork's status for a variant; the
// variant run's terminal run status for a diff.
func statusOf(s subject) fork.Status {
	if s.v != nil {
		return s.v.Status
	}
	return fork.Status(s.d.Variant.Terminal())
}

// endText says how the variant ended, with the failure or what the guard
// held back.
func endText(s subject) string {
	st := statusOf(s)
	text := string(st)
	if st == fork.StatusBlocked && s.v != nil && len(s.v.Suppressed) > 0 {
		e := s.v.Suppressed[0]
		text += fmt.Sprintf(": the guard held back step %d %s %s", e.Step, e.Kind, reprString(e.Tool))
		if len(s.v.Suppressed) > 1 {
			text += fmt.Sprintf(" (+%d more)", len(s.v.Suppressed)-1)
		}
		return text
	}
	if s.v != nil && s.v.Trace != nil && s.v.Trace.Failure != nil {
		f := s.v.Trace.Failure
		return text + ": " + f.Type + ": " + f.Message
	}
	if s.v != nil && s.v.Err != nil {
		return text + ": " + s.v.Err.Error()
	}
	if st == fork.StatusFailed {
		for i := len(s.d.Steps) - 1; i >= 0; i-- {
			if e := s.d.Steps[i].Variant; e != nil && e.Type == trace.StepError {
				msg, _ := e.Payload.Get("message").Str()
				return text + ": " + e.Label + ": " + msg
			}
		}
	}
	return text
}

// CheckStatus reports whether the variant ended with status want
// (fork.StatusCompleted, StatusFailed, StatusBlocked, StatusCanceled). On a
// *diff.Result the status is the variant run's terminal run status
// ("completed", "failed" or "running"), which never says blocked.
//
//	expected the variant to end blocked; it completed
//	first divergence: steps 7–8: llm 'fake/fake-1' changed: …
func CheckStatus[C Counterfactual](c C, want fork.Status) error {
	return on(c, func(s subject) error {
		if statusOf(s) == want {
			return nil
		}
		return mismatchf("expected the variant to end %s; it %s%s", want, endedText(s), divergenceLine(s.d))
	})
}

// endedText is endText as a verb phrase: "completed", "failed: …", "was
// blocked: …".
func endedText(s subject) string {
	t := endText(s)
	switch statusOf(s) {
	case fork.StatusBlocked, fork.StatusCanceled:
		return "was " + t
	case fork.StatusCompleted, fork.StatusFailed:
		return t
	}
	return "ended " + t
}

// Status asserts that the variant ended with status want; see CheckStatus.
func Status[C Counterfactual](t TestingT, c C, want fork.Status, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckStatus(c, want), msgAndArgs)
}

// CheckCompleted reports whether the variant completed: the agent returned
// without error and the guard held nothing back.
//
//	expected the variant to complete; it failed: PolicyViolation: refund of 250.00 USD exceeds the automatic refund limit
//	first divergence: step 7: …
func CheckCompleted[C Counterfactual](c C) error {
	return on(c, func(s subject) error {
		if statusOf(s) == fork.StatusCompleted {
			return nil
		}
		return mismatchf("expected the variant to complete; it %s%s", endedText(s), divergenceLine(s.d))
	})
}

// Completed asserts that the variant completed; see CheckCompleted.
func Completed[C Counterfactual](t TestingT, c C, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckCompleted(c), msgAndArgs)
}

// ---- state ----

// finalState returns the variant's final value of the plain state key and
// whether the variant run ends with the key set: the "after" of its last
// state step for key (a changed key's StateDelta.After).
func finalState(d *diff.Result, key string) (trace.Value, bool) {
	for _, sd := range d.State {
		if sd.Key == key {
			return sd.After, !sd.After.IsAbsent()
		}
	}
	for i := len(d.Steps) - 1; i >= 0; i-- {
		v := d.Steps[i].Variant
		if v != nil && v.Type == trace.StepState && v.Label == key {
			after := v.Payload.Get("after")
			return after, !after.IsAbsent()
		}
	}
	return trace.Value{}, false
}

// stateText is a final state value for a message: its repr, or "absent".
func stateText(v trace.Value, ok bool) string {
	if !ok {
		return "absent"
	}
	return shortRepr(v)
}

// CheckStateChanged reports whether the final value of the state key differs
// between the base and the variant (set, removed or changed; see
// diff.StateDelta).
//
//	expected state 'decision' to change; it is 'issue_refund' in both runs
func CheckStateChanged[C Counterfactual](c C, key string) error {
	return on(c, func(s subject) error {
		for _, sd := range s.d.State {
			if sd.Key == key {
				return nil
			}
		}
		v, ok := finalState(s.d, key)
		if !ok {
			return mismatchf("expected state %s to change; it is absent from both runs%s", reprString(key), stateKeys(s.d))
		}
		return mismatchf("expected state %s to change; it is %s in both runs", reprString(key), stateText(v, ok))
	})
}

// stateKeys lists the keys that did change, for a message about one that
// did not.
func stateKeys(d *diff.Result) string {
	if len(d.State) == 0 {
		return ""
	}
	keys := make([]string, len(d.State))
	for i, s := range d.State {
		keys[i] = s.Key
	}
	return "; the keys that changed: " + reprNames(keys)
}

// StateChanged asserts that the final value of the state key differs between
// the base and the variant.
func StateChanged[C Counterfactual](t TestingT, c C, key string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckStateChanged(c, key), msgAndArgs)
}

// CheckStateUnchanged reports whether the final value of the state key is
// the same in the base and the variant (absent from both counts as the
// same).
//
//	expected state 'decision' to be unchanged; it changed from 'issue_refund' to 'request_approval'
func CheckStateUnchanged[C Counterfactual](c C, key string) error {
	return on(c, func(s subject) error {
		for _, sd := range s.d.State {
			if sd.Key == key {
				return mismatchf("expected state %s to be unchanged; it changed from %s to %s", reprString(key),
					stateText(sd.Before, !sd.Before.IsAbsent()), stateText(sd.After, !sd.After.IsAbsent()))
			}
		}
		return nil
	})
}

// StateUnchanged asserts that the final value of the state key is the same
// in the base and the variant.
func StateUnchanged[C Counterfactual](t TestingT, c C, key string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckStateUnchanged(c, key), msgAndArgs)
}

// CheckStateEqual reports whether the variant's final value of the state
// key equals want. Without options want is converted to JSON, redacted, and
// compared canonically with the recorded value (1 and 1.0 differ); with cmp
// options the recorded value is decoded into a value of want's type and
// compared with cmp. A difference is shown as cmp.Diff output (-want +got).
//
//	state 'decision': expected 'request_approval'; actual 'issue_refund'
func CheckStateEqual[C Counterfactual](c C, key string, want any, opts ...cmp.Option) error {
	return on(c, func(s subject) error {
		got, ok := finalState(s.d, key)
		if !ok {
			return mismatchf("state %s: expected %s; the variant ends without it%s", reprString(key), wantRepr(want), stateKeys(s.d))
		}
		return valueEqual("state "+reprString(key), got, want, opts)
	})
}

// StateEqual asserts that the variant's final value of the state key equals
// want; see CheckStateEqual. The leading values of args that are cmp.Options
// are comparison options; the rest are msgAndArgs.
func StateEqual[C Counterfactual](t TestingT, c C, key string, want any, args ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	opts, msgAndArgs := splitArgs(args)
	return report(t, CheckStateEqual(c, key, want, opts...), msgAndArgs)
}

func wantRepr(want any) string {
	v, err := trace.ValueOf(want)
	if err != nil {
		return fmt.Sprintf("%v", want)
	}
	v, _ = trace.RedactValue(v)
	return shortRepr(v)
}

// valueEqual compares a recorded value with want, as CheckStateEqual says.
func valueEqual(what string, got trace.Value, want any, opts []cmp.Option) error {
	wantValue, err := trace.ValueOf(want)
	if err != nil {
		return invalidf("%s: the expected value is not JSON: %v", what, err)
	}
	wantValue, _ = trace.RedactValue(wantValue)
	got, _ = trace.RedactValue(got)
	msg := fmt.Sprintf("%s: expected %s; actual %s", what, shortRepr(wantValue), shortRepr(got))
	if len(opts) == 0 {
		if got == wantValue {
			return nil
		}
		if d, err := cmpDiff(plainOf(wantValue), plainOf(got)); err == nil && d != "" {
			msg += labelled(what, d)
		}
		return mismatchf("%s", msg)
	}
	wantTyped, err := redactedLike(want, wantValue)
	if err != nil {
		return err
	}
	p := reflect.New(reflect.TypeOf(want))
	if err := got.Decode(p.Interface()); err != nil {
		return mismatchf("%s\ncannot decode the actual value into %T: %v", msg, want, err)
	}
	d, err := cmpDiff(wantTyped, p.Elem().Interface(), opts...)
	if err != nil {
		return err
	}
	if d == "" {
		return nil
	}
	return mismatchf("%s%s", msg, labelled(what, d))
}

// ---- path and output ----

// pathOf is the variant run's behavior path: one "type:label" token per
// step ("tool:get_order", "llm:fake/fake-1", "state:decision",
// "decision:action", "node:decide", "error:PolicyViolation"), and "run"
// for its end.
func pathOf(d *diff.Result) []string {
	out := []string{}
	for i := range d.Steps {
		v := d.Steps[i].Variant
		if v == nil {
			continue
		}
		if v.Type == trace.StepRun {
			out = append(out, "run")
			continue
		}
		out = append(out, string(v.Type)+":"+v.Label)
	}
	return out
}

// CheckPathEqual reports whether the variant's behavior path equals want.
// The path has one "type:label" token per behavior step of the variant run
// (see trace.BehaviorStep): "node:decide", "tool:get_order",
// "llm:fake/fake-1", "state:decision", "decision:action",
// "param:policy_limit", "error:PolicyViolation", and "run" for its end,
// the tokens of [diff.Result.Explain]'s path line. opts are passed to cmp (for
// instance cmpopts.IgnoreSliceElements to drop node tokens).
//
//	expected the variant's path ['tool:get_order', 'run']; actual ['tool:get_order', 'tool:issue_refund', 'run']
//	path (-want +got): …
func CheckPathEqual[C Counterfactual](c C, want []string, opts ...cmp.Option) error {
	return on(c, func(s subject) error {
		got := pathOf(s.d)
		if want == nil {
			want = []string{}
		}
		d, err := cmpDiff(want, got, opts...)
		if err != nil {
			return err
		}
		if d == "" {
			return nil
		}
		return mismatchf("expected the variant's path %s; actual %s%s", reprNames(want), reprNames(got), labelled("path", d))
	})
}

// PathEqual asserts that the variant's behavior path equals want; see
// CheckPathEqual. The leading values of args that are cmp.Options are
// comparison options; the rest are msgAndArgs.
func PathEqual[C Counterfactual](t TestingT, c C, want []string, args ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	opts, msgAndArgs := splitArgs(args)
	return report(t, CheckPathEqual(c, want, opts...), msgAndArgs)
}

// CheckOutputEqual reports whether the variant's final output (the output
// of its run_end, as recorded) equals want, compared as CheckStateEqual
// compares state. A variant that ended without an output (a failed run has
// none) fails with its status.
//
//	output: expected {'status': 'awaiting_approval'}; actual {'refund_id': 'rf_o_1842', 'status': 'refunded'}
//	output (-want +got): …
func CheckOutputEqual[C Counterfactual](c C, want any, opts ...cmp.Option) error {
	return on(c, func(s subject) error {
		var end *trace.BehaviorStep
		for i := len(s.d.Steps) - 1; i >= 0 && end == nil; i-- {
			if v := s.d.Steps[i].Variant; v != nil && v.Type == trace.StepRun {
				end = v
			}
		}
		if end == nil {
			return mismatchf("output: expected %s; the variant has no run_end", wantRepr(want))
		}
		if statusOf(s) != fork.StatusCompleted {
			return mismatchf("output: expected %s; the variant %s, so it has no output%s", wantRepr(want), endedText(s), divergenceLine(s.d))
		}
		return valueEqual("output", end.Payload.Get("output"), want, opts)
	})
}

// OutputEqual asserts that the variant's final output equals want; see
// CheckOutputEqual. The leading values of args that are cmp.Options are
// comparison options; the rest are msgAndArgs.
func OutputEqual[C Counterfactual](t TestingT, c C, want any, args ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	opts, msgAndArgs := splitArgs(args)
	return report(t, CheckOutputEqual(c, want, opts...), msgAndArgs)
}

// ---- what only a fork knows ----

// CheckNoSuppressedEffects reports whether the fork's side-effect guard held
// nothing back: every tool call of the tail was served from the recording,
// allowed, or not made. It needs a *fork.Variant.
//
//	expected no suppressed side effects; the guard held back 1 call(s):
//	  step 11 tool 'issue_refund' {'amount': 250.0, 'order_id': 'o_1842'}: no recorded call has this input
func CheckNoSuppressedEffects(v *fork.Variant) error {
	v, err := variantOf(v)
	if err != nil {
		return err
	}
	if len(v.Suppressed) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "expected no suppressed side effects; the guard held back %d call(s):", len(v.Suppressed))
	for _, s := range v.Suppressed {
		fmt.Fprintf(&b, "\n  step %d %s %s %s: %s", s.Step, s.Kind, reprString(s.Tool), shortRepr(s.Input), s.Reason)
	}
	return mismatchf("%s", b.String())
}

// NoSuppressedEffects asserts that the fork's side-effect guard held nothing
// back; see [CheckNoSuppressedEffects].
func NoSuppressedEffects(t TestingT, v *fork.Variant, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckNoSuppressedEffects(v), msgAndArgs)
}

// CheckIncurredCostAtMost reports whether the fork's live model calls cost
// at most maxUSD (fork.Variant.IncurredCost: the served prefix, memo hits
// and substituted responses cost nothing). It takes the *fork.Variant: a
// *diff.Result cannot tell served calls from live ones. A live model call
// without a cost (fork.Variant.UnpricedModelCalls: no price was set with
// replay.Prices and none was reported) fails the check, saying how to set
// prices, rather than counting as free.
//
//	expected the variant to incur at most $0.001; it incurred $0.0021 (1 live model call(s), 120 tokens)
func CheckIncurredCostAtMost(v *fork.Variant, maxUSD float64) error {
	v, err := variantOf(v)
	if err != nil {
		return err
	}
	if maxUSD < 0 || math.IsNaN(maxUSD) {
		return invalidf("IncurredCostAtMost: the maximum must be a non-negative number of US dollars, got %v", maxUSD)
	}
	if v.UnpricedModelCalls > 0 {
		return mismatchf("expected the variant to incur at most %s, but %d of its %d live model call(s) have no price, so what it incurred is unknown: "+
			"set each model's price once, with replay.Transport(base, replay.Prices{\"<model>\": {Input: …, Output: …}}) (US dollars per million tokens), "+
			"or report the cost with replay.ReportUsage",
			usd.Format(maxUSD), v.UnpricedModelCalls, v.LiveModelCalls)
	}
	if v.IncurredCost <= maxUSD {
		return nil
	}
	return mismatchf("expected the variant to incur at most %s; it incurred %s (%d live model call(s), %d tokens)",
		usd.Format(maxUSD), usd.Format(v.IncurredCost), v.LiveModelCalls, v.IncurredTokens)
}

// IncurredCostAtMost asserts that the fork's live model calls cost at most
// maxUSD; see CheckIncurredCostAtMost.
func IncurredCostAtMost(t TestingT, v *fork.Variant, maxUSD float64, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckIncurredCostAtMost(v, maxUSD), msgAndArgs)
}

// CheckTokensAtMost reports whether the fork's live model calls used at most
// maxTokens tokens (fork.Variant.IncurredTokens). It needs a *fork.Variant.
//
//	expected the variant to use at most 100 tokens; it used 120 (1 live model call(s), $0.000072)
func CheckTokensAtMost(v *fork.Variant, maxTokens int64) error {
	v, err := variantOf(v)
	if err != nil {
		return err
	}
	if maxTokens < 0 {
		return invalidf("TokensAtMost: the maximum must be a non-negative number of tokens, got %d", maxTokens)
	}
	if v.IncurredTokens <= maxTokens {
		return nil
	}
	return mismatchf("expected the variant to use at most %d tokens; it used %d (%d live model call(s), %s)",
		maxTokens, v.IncurredTokens, v.LiveModelCalls, usd.Format(v.IncurredCost))
}

// TokensAtMost asserts that the fork's live model calls used at most
// maxTokens tokens; see CheckTokensAtMost.
func TokensAtMost(t TestingT, v *fork.Variant, maxTokens int64, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckTokensAtMost(v, maxTokens), msgAndArgs)
}

// CheckChangeApplied reports whether the fork made changes and each of them
// acted on at least one call of the tail. A change whose target matched
// nothing (a misspelt node, a tool the tail never calls, a fork point after
// the target) makes a variant that tests nothing; this catches it. It needs
// a *fork.Variant.
//
//	expected every change to be applied; 1 of 1 matched nothing in the tail, which begins at step 6 (before the failing node ('decide', execution 1)):
//	  prompt of 'desicde'
func CheckChangeApplied(v *fork.Variant) error {
	v, err := variantOf(v)
	if err != nil {
		return err
	}
	if len(v.Changes) == 0 {
		return mismatchf("expected the variant to apply a change; it has none (a null fork)")
	}
	unused := v.Unused()
	if len(unused) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "expected every change to be applied; %d of %d matched nothing in the tail, which begins at %s:", len(unused), len(v.Changes), v.At)
	for _, u := range unused {
		fmt.Fprintf(&b, "\n  %s", u.Description)
	}
	return mismatchf("%s", b.String())
}

// ChangeApplied asserts that the fork made changes and each acted on at
// least one call of the tail; see CheckChangeApplied.
func ChangeApplied(t TestingT, v *fork.Variant, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckChangeApplied(v), msgAndArgs)
}

// ---- Beats ----

// CheckBeats reports whether variant a of a scored sweep ([fork.Score])
// beats variant b beyond the noise of their samples ([fork.Sweep.Beats]:
// the 95 % interval of a's mean score lies entirely above b's):
//
//	expected 'stricter' to beat 'shipped' beyond the noise; 'stricter' scores 0.45 [0.26, 0.66] over 20 sample(s), 'shipped' 0.30 [0.15, 0.52] over 20: the intervals overlap (more samples may tell them apart)
func CheckBeats(s *fork.Sweep, a, b string) error {
	if s == nil {
		return invalidf("Beats: the sweep is nil")
	}
	beats, err := s.Beats(a, b)
	if err != nil {
		return invalidf("Beats: %v", err)
	}
	if beats {
		return nil
	}
	sa, sb := s.Entry(a).Stats(), s.Entry(b).Stats()
	why := "the intervals overlap (more samples may tell them apart)"
	if sa.Mean <= sb.Mean {
		why = "it does not score higher"
	}
	return mismatchf("expected %s to beat %s beyond the noise; %s scores %.2f [%.2f, %.2f] over %d sample(s), %s %.2f [%.2f, %.2f] over %d: %s",
		reprString(a), reprString(b), reprString(a), sa.Mean, sa.Low, sa.High, sa.Samples, reprString(b), sb.Mean, sb.Low, sb.High, sb.Samples, why)
}

// Beats asserts that variant a of a scored sweep beats variant b beyond the
// noise of their samples; see [CheckBeats].
func Beats(t TestingT, s *fork.Sweep, a, b string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckBeats(s, a, b), msgAndArgs)
}

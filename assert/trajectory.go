package assert

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Trajectory assertions look at the dependency calls of a run: its tool_call
// and llm_request events in file order, each with the status of its recorded
// result. Failed calls (status error) count as calls. Each assertion has a
// checker that returns an error wrapping ErrMismatch (or ErrInvalid for a
// misused assertion) and a one-line wrapper that reports that error to t.
// Messages match Python stepfork's assertion messages literally; where Go adds
// detail, it comes on the lines after the first.

// CheckToolCalled reports whether the tool named name was called at least
// once.
//
//	expected tool 'issue_refund' to be called; actual: ['lookup_order']
func CheckToolCalled(run Run, name string) error {
	return onCalls(run, func(calls []call) error { return toolCalledIn(calls, name) })
}

func toolCalledIn(calls []call, name string) error {
	names := toolNames(calls)
	if !slices.Contains(names, name) {
		return mismatchf("expected tool %s to be called; actual: %s", reprString(name), reprNames(names))
	}
	return nil
}

// ToolCalled asserts that the tool named name was called at least once.
func ToolCalled(t TestingT, run Run, name string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckToolCalled(run, name), msgAndArgs)
}

// CheckToolNotCalled reports whether the tool named name was never called.
//
//	expected tool 'issue_refund' not to be called; actual: ['lookup_order', 'issue_refund']
func CheckToolNotCalled(run Run, name string) error {
	return onCalls(run, func(calls []call) error { return toolNotCalledIn(calls, name) })
}

func toolNotCalledIn(calls []call, name string) error {
	names := toolNames(calls)
	if slices.Contains(names, name) {
		return mismatchf("expected tool %s not to be called; actual: %s", reprString(name), reprNames(names))
	}
	return nil
}

// ToolNotCalled asserts that the tool named name was never called.
func ToolNotCalled(t TestingT, run Run, name string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckToolNotCalled(run, name), msgAndArgs)
}

// CheckToolCallCount reports whether the tool named name was called exactly
// count times. A negative count is an ErrInvalid error.
//
//	tool 'search': expected 2 call(s), got 3
func CheckToolCallCount(run Run, name string, count int) error {
	return onCalls(run, func(calls []call) error { return toolCallCountIn(calls, name, count) })
}

func toolCallCountIn(calls []call, name string, count int) error {
	if count < 0 {
		return invalidf("count must be a non-negative integer")
	}
	if got := len(toolCalls(calls, name)); got != count {
		return mismatchf("tool %s: expected %d call(s), got %d", reprString(name), count, got)
	}
	return nil
}

// ToolCallCount asserts that the tool named name was called exactly count
// times.
func ToolCallCount(t TestingT, run Run, name string, count int, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckToolCallCount(run, name, count), msgAndArgs)
}

// CheckToolArguments reports whether some call of the tool named name had the
// arguments want.
//
// Without options, want is converted to JSON (trace.ValueOf), redacted like a
// recorded input (so a secret matches a recorded "[REDACTED]"), and compared
// for canonical equality with each call's redacted input, as stepfork does
// (1 and 1.0 differ). With cmp options, each input is instead decoded into a
// new value of want's type and compared with cmp.Equal(want, input, opts...),
// so that fields can be ignored or numbers compared approximately.
//
//	tool 'search': expected arguments {'q': 'KTM'}; actual: [{'q': 'DEL'}]
//
// When a single call is compared, a cmp.Diff of the arguments follows,
// labelled (-want +got).
func CheckToolArguments(run Run, name string, want any, opts ...cmp.Option) error {
	return onCalls(run, func(calls []call) error { return toolArgumentsIn(calls, name, 0, want, opts) })
}

// CheckToolArgumentsAt is like CheckToolArguments but compares only the
// occurrence-th call of the tool (1-based).
//
//	tool 'search': occurrence 3 was not called; got 2 call(s)
func CheckToolArgumentsAt(run Run, name string, occurrence int, want any, opts ...cmp.Option) error {
	if occurrence < 1 {
		return invalidf("occurrence must be a positive integer")
	}
	return onCalls(run, func(calls []call) error { return toolArgumentsIn(calls, name, occurrence, want, opts) })
}

// ToolArguments asserts that some call of the tool named name had the
// arguments want; see CheckToolArguments. The leading values of args that are
// cmp.Options are comparison options; the rest are msgAndArgs.
func ToolArguments(t TestingT, run Run, name string, want any, args ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	opts, msgAndArgs := splitArgs(args)
	return report(t, CheckToolArguments(run, name, want, opts...), msgAndArgs)
}

// ToolArgumentsAt asserts that the occurrence-th call (1-based) of the tool
// named name had the arguments want; see CheckToolArguments. The leading values
// of args that are cmp.Options are comparison options; the rest are
// msgAndArgs.
func ToolArgumentsAt(t TestingT, run Run, name string, occurrence int, want any, args ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	opts, msgAndArgs := splitArgs(args)
	return report(t, CheckToolArgumentsAt(run, name, occurrence, want, opts...), msgAndArgs)
}

// toolArgumentsIn checks the arguments of the calls of name (occurrence 0:
// any call; k: the k-th).
func toolArgumentsIn(calls []call, name string, occurrence int, want any, opts []cmp.Option) error {
	wantValue, err := trace.ValueOf(want)
	if err != nil {
		return invalidf("tool %s: arguments are not JSON: %v", reprString(name), err)
	}
	wantValue, _ = trace.RedactValue(wantValue)
	candidates := toolCalls(calls, name)
	if occurrence > 0 {
		if len(candidates) < occurrence {
			return mismatchf("tool %s: occurrence %d was not called; got %d call(s)", reprString(name), occurrence, len(candidates))
		}
		candidates = candidates[occurrence-1 : occurrence]
	}
	inputs := make([]trace.Value, len(candidates))
	for i, c := range candidates {
		inputs[i], _ = trace.RedactValue(c.ev.Input)
	}

	var wantTyped any
	if len(opts) > 0 {
		if wantTyped, err = redactedLike(want, wantValue); err != nil {
			return err
		}
	}
	decoded := make([]any, len(inputs))
	for i, in := range inputs {
		if len(opts) == 0 {
			if in == wantValue {
				return nil
			}
			decoded[i] = plainOf(in)
			continue
		}
		p := reflect.New(reflect.TypeOf(want))
		if err := in.Decode(p.Interface()); err != nil {
			continue
		}
		decoded[i] = p.Elem().Interface()
		d, err := cmpDiff(wantTyped, decoded[i], opts...)
		if err != nil {
			return err
		}
		if d == "" {
			return nil
		}
	}

	msg := fmt.Sprintf("tool %s: expected arguments %s; actual: %s", reprString(name), reprValue(wantValue), reprValues(inputs))
	if len(inputs) == 1 {
		wantSide := plainOf(wantValue)
		if len(opts) > 0 {
			wantSide = wantTyped
		}
		if decoded[0] == nil && len(opts) > 0 {
			msg += fmt.Sprintf("\ncannot decode the recorded arguments into %T", want)
		} else if d, err := cmpDiff(wantSide, decoded[0], opts...); err == nil && d != "" {
			msg += labelled("arguments", d)
		}
	}
	return mismatchf("%s", msg)
}

// redactedLike returns want after a round trip through its redacted JSON
// form v, so that secrets in want compare like recorded "[REDACTED]" inputs.
func redactedLike(want any, v trace.Value) (any, error) {
	if want == nil {
		return nil, invalidf("arguments compared with cmp options need a typed value to decode into, got nil")
	}
	p := reflect.New(reflect.TypeOf(want))
	if err := v.Decode(p.Interface()); err != nil {
		return nil, invalidf("arguments of type %T do not survive a JSON round trip: %v", want, err)
	}
	return p.Elem().Interface(), nil
}

// CheckToolOrder reports whether some call of the tool before is followed,
// later in the run, by a call of the tool after.
//
//	expected 'lookup_order' before 'issue_refund'; actual: ['issue_refund', 'lookup_order']
func CheckToolOrder(run Run, before, after string) error {
	return onCalls(run, func(calls []call) error { return toolOrderIn(calls, before, after) })
}

func toolOrderIn(calls []call, before, after string) error {
	names := toolNames(calls)
	if i := slices.Index(names, before); i >= 0 && slices.Contains(names[i+1:], after) {
		return nil
	}
	return mismatchf("expected %s before %s; actual: %s", reprString(before), reprString(after), reprNames(names))
}

// ToolOrder asserts that some call of the tool before is followed, later in
// the run, by a call of the tool after.
func ToolOrder(t TestingT, run Run, before, after string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckToolOrder(run, before, after), msgAndArgs)
}

// Match is how a list of expected tool names is matched against the tool
// calls of a run. The zero Match is Strict.
type Match int

// The match modes. Subset and Superset follow agentevals' trajectory match
// modes: they compare the run's calls to the expected list as multisets, so
// each expected name stands for one call.
const (
	// Strict: the run's tool calls are exactly the expected list, in order.
	Strict Match = iota
	// InOrder: the expected list is an ordered subsequence of the run's
	// calls; other calls may come before, between and after.
	InOrder
	// Unordered: the run's calls are the expected list in any order.
	Unordered
	// Subset: the run called nothing beyond the expected list (each name at
	// most as often as listed); expected calls may be missing.
	Subset
	// Superset: the run called at least the expected list (each name at least
	// as often as listed); extra calls are allowed.
	Superset
)

var matchNames = [...]string{"strict", "in_order", "unordered", "subset", "superset"}

// String returns the name of m as the "match" key of an expectations file
// spells it: "strict", "in_order", "unordered", "subset" or "superset".
func (m Match) String() string {
	if m >= 0 && int(m) < len(matchNames) {
		return matchNames[m]
	}
	return fmt.Sprintf("Match(%d)", int(m))
}

// parseMatch is the inverse of Match.String.
func parseMatch(s string) (Match, bool) {
	i := slices.Index(matchNames[:], s)
	return Match(i), i >= 0
}

// CheckTrajectory reports whether the tool calls of run match want under the
// mode m. want may be empty (Strict and Unordered then require that no tool
// was called); its names must not be "".
//
//	expected exact tool sequence ['a', 'b']; actual: ['a']            Strict
//	expected ordered tool subsequence ['a', 'c']; actual: ['a', 'b']  InOrder
//	expected tool calls ['a', 'b'] in any order; actual: ['b']        Unordered
//	expected only tool calls from ['a']; actual: ['a', 'b']           Subset
//	expected tool calls to include ['a', 'b']; actual: ['a']          Superset
//
// Detail follows on the next lines: a (-want +got) diff of the sequences
// (Strict), the first expected name not matched (InOrder), or the calls
// missing and unexpected.
func CheckTrajectory(run Run, want []string, m Match) error {
	return onCalls(run, func(calls []call) error { return trajectoryIn(calls, want, m) })
}

func trajectoryIn(calls []call, want []string, m Match) error {
	if slices.Contains(want, "") {
		return invalidf("sequence must contain non-empty tool names")
	}
	if m < Strict || m > Superset {
		return invalidf("unknown match mode %v; use Strict, InOrder, Unordered, Subset or Superset", m)
	}
	got := toolNames(calls)
	switch m {
	case Strict:
		if slices.Equal(got, want) {
			return nil
		}
		msg := fmt.Sprintf("expected exact tool sequence %s; actual: %s", reprNames(want), reprNames(got))
		if d, err := cmpDiff(nonNil(want), nonNil(got)); err == nil && d != "" {
			msg += labelled("tool sequence", d)
		}
		return mismatchf("%s", msg)
	case InOrder:
		k := 0
		for _, n := range got {
			if k < len(want) && n == want[k] {
				k++
			}
		}
		if k == len(want) {
			return nil
		}
		return mismatchf("expected ordered tool subsequence %s; actual: %s\nfirst unmatched: %s (position %d of %d)",
			reprNames(want), reprNames(got), reprString(want[k]), k+1, len(want))
	}
	missing, unexpected := multisetDiff(want, got)
	var b strings.Builder
	switch m {
	case Unordered:
		if len(missing) == 0 && len(unexpected) == 0 {
			return nil
		}
		fmt.Fprintf(&b, "expected tool calls %s in any order; actual: %s", reprNames(want), reprNames(got))
	case Subset:
		if len(unexpected) == 0 {
			return nil
		}
		fmt.Fprintf(&b, "expected only tool calls from %s; actual: %s", reprNames(want), reprNames(got))
		missing = nil
	case Superset:
		if len(missing) == 0 {
			return nil
		}
		fmt.Fprintf(&b, "expected tool calls to include %s; actual: %s", reprNames(want), reprNames(got))
		unexpected = nil
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "\nmissing: %s", reprNames(missing))
	}
	if len(unexpected) > 0 {
		fmt.Fprintf(&b, "\nunexpected: %s", reprNames(unexpected))
	}
	return mismatchf("%s", b.String())
}

// Trajectory asserts that the tool calls of run match want under the mode m;
// see CheckTrajectory.
//
//	assert.Trajectory(t, run, []string{"lookup_order", "issue_refund"}, assert.InOrder)
func Trajectory(t TestingT, run Run, want []string, m Match, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckTrajectory(run, want, m), msgAndArgs)
}

// ToolSequence asserts that the tool calls of run are exactly want, in order.
// It is Trajectory with Strict.
func ToolSequence(t TestingT, run Run, want []string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckTrajectory(run, want, Strict), msgAndArgs)
}

// multisetDiff returns the names of want with no matching call in got
// (missing) and the calls of got with no matching name in want (unexpected),
// each in the order they appear.
func multisetDiff(want, got []string) (missing, unexpected []string) {
	left := make(map[string]int, len(want))
	for _, n := range want {
		left[n]++
	}
	for _, n := range got {
		if left[n] > 0 {
			left[n]--
		} else {
			unexpected = append(unexpected, n)
		}
	}
	for i := len(want) - 1; i >= 0; i-- {
		if n := want[i]; left[n] > 0 {
			left[n]--
			missing = append(missing, n)
		}
	}
	slices.Reverse(missing)
	return missing, unexpected
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// CheckMaxSteps reports whether run made at most maximum dependency calls
// (tool and model calls, failed ones included). A negative maximum is an
// ErrInvalid error.
//
//	expected at most 5 dependency step(s), got 7
func CheckMaxSteps(run Run, maximum int) error {
	return onCalls(run, func(calls []call) error { return maxStepsIn(calls, maximum) })
}

func maxStepsIn(calls []call, maximum int) error {
	if maximum < 0 {
		return invalidf("maximum must be a non-negative integer")
	}
	if len(calls) > maximum {
		return mismatchf("expected at most %d dependency step(s), got %d", maximum, len(calls))
	}
	return nil
}

// MaxSteps asserts that run made at most maximum dependency calls (tool and
// model calls, failed ones included).
func MaxSteps(t TestingT, run Run, maximum int, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckMaxSteps(run, maximum), msgAndArgs)
}

// CheckToolSucceeded reports whether the tool named name was called and every
// call of it succeeded (its result has status ok). The first call that did
// not is named with its step and event id.
//
//	tool 'charge': expected every call to succeed; call 2 of 3 failed at step 7 (event evt_008): CardDeclined: insufficient funds
//	tool 'charge': expected every call to succeed; call 1 of 1 has no recorded result at step 3 (event evt_004)
func CheckToolSucceeded(run Run, name string) error {
	return onCalls(run, func(calls []call) error { return toolSucceededIn(calls, name) })
}

func toolSucceededIn(calls []call, name string) error {
	tc := toolCalls(calls, name)
	if len(tc) == 0 {
		return mismatchf("expected tool %s to be called; actual: %s", reprString(name), reprNames(toolNames(calls)))
	}
	for i, c := range tc {
		if c.status == trace.StatusOK {
			continue
		}
		at := fmt.Sprintf("at step %d (event %s)", c.ev.Step, c.ev.ID)
		if c.status == trace.StatusError {
			return mismatchf("tool %s: expected every call to succeed; call %d of %d failed %s%s",
				reprString(name), i+1, len(tc), at, failureText(c))
		}
		return mismatchf("tool %s: expected every call to succeed; call %d of %d has no recorded result %s",
			reprString(name), i+1, len(tc), at)
	}
	return nil
}

// ToolSucceeded asserts that the tool named name was called and every call of
// it succeeded.
func ToolSucceeded(t TestingT, run Run, name string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckToolSucceeded(run, name), msgAndArgs)
}

// CheckToolFailed reports whether at least one call of the tool named name
// failed (its result has status error).
//
//	tool 'charge': expected a failed call; none of 2 call(s) failed
func CheckToolFailed(run Run, name string) error {
	return onCalls(run, func(calls []call) error { return toolFailedIn(calls, name) })
}

func toolFailedIn(calls []call, name string) error {
	tc := toolCalls(calls, name)
	if len(tc) == 0 {
		return mismatchf("expected tool %s to be called; actual: %s", reprString(name), reprNames(toolNames(calls)))
	}
	for _, c := range tc {
		if c.status == trace.StatusError {
			return nil
		}
	}
	return mismatchf("tool %s: expected a failed call; none of %d call(s) failed", reprString(name), len(tc))
}

// ToolFailed asserts that at least one call of the tool named name failed.
func ToolFailed(t TestingT, run Run, name string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckToolFailed(run, name), msgAndArgs)
}

// failureText is ": Type: message" for a failed call, or "" when the trace
// records neither.
func failureText(c call) string {
	switch {
	case c.errType != "" && c.errMsg != "":
		return ": " + c.errType + ": " + c.errMsg
	case c.errType != "" || c.errMsg != "":
		return ": " + c.errType + c.errMsg
	}
	return ""
}

// CheckModelCalled reports whether a model matching label was called. label
// is "provider/model", or a model name, which matches that model from any
// provider.
//
//	expected model 'gpt-4o' to be called; actual: ['openai/gpt-4o-mini']
func CheckModelCalled(run Run, label string) error {
	return onCalls(run, func(calls []call) error { return modelCalledIn(calls, label) })
}

func modelCalledIn(calls []call, label string) error {
	if countModel(calls, label) == 0 {
		return mismatchf("expected model %s to be called; actual: %s", reprString(label), reprNames(nonNil(modelLabels(calls))))
	}
	return nil
}

// ModelCalled asserts that a model matching label ("provider/model", or a
// model name from any provider) was called.
func ModelCalled(t TestingT, run Run, label string, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckModelCalled(run, label), msgAndArgs)
}

// CheckModelCallCount reports whether models matching label (as for
// CheckModelCalled) were called exactly count times, failed calls included.
//
//	model 'openai/gpt-4o': expected 1 call(s), got 3
func CheckModelCallCount(run Run, label string, count int) error {
	return onCalls(run, func(calls []call) error { return modelCallCountIn(calls, label, count) })
}

func modelCallCountIn(calls []call, label string, count int) error {
	if count < 0 {
		return invalidf("count must be a non-negative integer")
	}
	if got := countModel(calls, label); got != count {
		return mismatchf("model %s: expected %d call(s), got %d", reprString(label), count, got)
	}
	return nil
}

// ModelCallCount asserts that models matching label were called exactly
// count times.
func ModelCallCount(t TestingT, run Run, label string, count int, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	return report(t, CheckModelCallCount(run, label, count), msgAndArgs)
}

func countModel(calls []call, label string) int {
	n := 0
	for _, c := range calls {
		if !c.tool && (c.label == label || c.ev.Model == label) {
			n++
		}
	}
	return n
}

// onCalls runs check on the dependency calls of run. As in stepfork, a
// replay that diverged or ended before consuming every recorded call fails
// every trajectory check first:
//
//	stepfork replay diverged: call #2: expected tool 'search' but the agent called 'book'
//	stepfork replay incomplete: replay ended before consuming 1 recorded dependency call(s): #3 tool book
func onCalls(run Run, check func([]call) error) error {
	tr, err := traceOf(run)
	if err != nil {
		return err
	}
	if r, ok := run.(*replay.Result); ok && r.Mode != "" {
		if r.Divergence != nil {
			return &checkError{msg: "stepfork replay diverged: " + r.Divergence.Error(), kind: ErrMismatch, cause: r.Divergence}
		}
		if err := r.VerifyComplete(); err != nil {
			return &checkError{msg: "stepfork replay incomplete: " + err.Error(), kind: ErrMismatch, cause: err}
		}
	}
	return check(callsOf(tr))
}

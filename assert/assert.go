package assert

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/internal/failures"
	"github.com/stepfork/stepfork/trace"
)

// TestingT is what the assertions report to: *testing.T, *testing.B,
// testify's *assert.CollectT, or anything else with an Errorf method. When t
// also has a Helper method, every assertion calls it first, so failures point
// at the caller's line.
type TestingT interface {
	Errorf(format string, args ...any)
}

// tHelper is the optional interface of TestingT values that can mark helpers.
type tHelper interface{ Helper() }

// Run is anything an assertion can inspect: a value that yields the trace of
// one run of an agent. *trace.Trace implements it, and so do the results of
// replays and forks.
type Run interface {
	RunTrace() *trace.Trace
}

// ErrMismatch is wrapped by every error a Check function returns when the run
// does not meet the expectation.
var ErrMismatch = errors.New("run does not meet the expectation")

// ErrInvalid is wrapped by every error about the expectation itself rather than
// the run: a nil run, a negative count, a malformed expectations file. The
// error text says what is wrong and how to fix it.
var ErrInvalid = errors.New("invalid expectation")

// checkError is an error whose text is exactly msg (the failure messages are
// a contract shared with Python stepfork) and which wraps kind, one of
// ErrMismatch or ErrInvalid, and the error that caused it, if any.
type checkError struct {
	msg   string
	kind  error
	cause error
	// step, when set, is the step the failure is about (the variant's, or
	// the base's for what only the base did), for the page of the failed
	// test: the first divergence of a diverging check.
	step *int
}

func (e *checkError) Error() string { return e.msg }
func (e *checkError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// mismatchf returns an error wrapping ErrMismatch.
func mismatchf(format string, args ...any) error {
	return &checkError{msg: fmt.Sprintf(format, args...), kind: ErrMismatch}
}

// invalidf returns an error wrapping ErrInvalid.
func invalidf(format string, args ...any) error {
	return &checkError{msg: fmt.Sprintf(format, args...), kind: ErrInvalid}
}

// traceOf returns the trace of run, or an ErrInvalid error when there is none.
func traceOf(run Run) (*trace.Trace, error) {
	if run == nil || (reflect.ValueOf(run).Kind() == reflect.Pointer && reflect.ValueOf(run).IsNil()) {
		return nil, invalidf("no run to check: got a nil %T; pass the trace, replay result or fork variant under test", run)
	}
	tr := run.RunTrace()
	if tr == nil {
		return nil, invalidf("no run to check: %T.RunTrace returned nil", run)
	}
	return tr, nil
}

// report passes err, if any, to t as one failure and reports whether err was
// nil. The failure text is err's text followed, when msgAndArgs is not empty,
// by a "Messages:" line, as in testify.
func report(t TestingT, err error, msgAndArgs []any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	if err == nil {
		return true
	}
	text := err.Error()
	if m := messageFromMsgAndArgs(msgAndArgs); m != "" {
		text += "\nMessages:   " + m
	}
	step := -1
	if ce, ok := err.(*checkError); ok && ce.step != nil {
		step = *ce.step
	}
	failures.Note(t, text, step, 1) // for the page sftest writes of the failed test
	t.Errorf("%s", text)
	return false
}

// messageFromMsgAndArgs follows testify: nothing gives "", one string gives
// itself, one other value gives its %+v, several give fmt.Sprintf of the first
// (a format string) with the rest.
func messageFromMsgAndArgs(msgAndArgs []any) string {
	switch len(msgAndArgs) {
	case 0:
		return ""
	case 1:
		if s, ok := msgAndArgs[0].(string); ok {
			return s
		}
		return fmt.Sprintf("%+v", msgAndArgs[0])
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(format, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

// splitArgs separates the trailing arguments of a comparing assertion: the
// leading values that are cmp.Options are comparison options, and everything
// from the first other value on is msgAndArgs.
func splitArgs(args []any) (opts []cmp.Option, msgAndArgs []any) {
	for i, a := range args {
		o, ok := a.(cmp.Option)
		if !ok {
			return opts, args[i:]
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// cmpDiff is cmp.Diff(want, got, opts...) that turns a panic of cmp (unexported
// fields, ambiguous options) into an ErrInvalid error instead of crashing the
// test binary.
func cmpDiff(want, got any, opts ...cmp.Option) (d string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = invalidf("cannot compare %T values: %v", want, r)
		}
	}()
	return cmp.Diff(want, got, opts...), nil
}

// labelled indents a cmp diff under a "(-want +got)" heading.
func labelled(what, d string) string {
	return "\n" + what + " (-want +got):\n" + strings.TrimRight(d, "\n")
}

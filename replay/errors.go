package replay

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/trace"
)

// Sentinel errors. Every error this package returns matches one of them with
// errors.Is.
var (
	// ErrDiverged is matched by every divergence: *MismatchError,
	// *ExhaustedError and *PolicyError. The agent did something the
	// recording does not allow the session to answer.
	ErrDiverged = errors.New("replay diverged from the recording")

	// ErrRecordedFailure is matched by *RecordedError: the recorded call
	// failed, and the session hands the recorded failure back. This is the
	// recording being reproduced, not a divergence, so it does not match
	// ErrDiverged (stepfork's RecordedDependencyError has the same meaning).
	ErrRecordedFailure = errors.New("recorded dependency failure")

	// ErrBlocked is matched by *BlockedError: a Director refused to let a
	// call execute.
	ErrBlocked = errors.New("call blocked")

	// ErrInvalidOptions is matched by the errors of Record and Replay when
	// their options contradict each other or the trace.
	ErrInvalidOptions = errors.New("invalid replay options")

	// ErrNotRecordable is matched when a value handed to a wrapper cannot be
	// recorded as JSON (NaN, a channel, a cycle…).
	ErrNotRecordable = errors.New("value cannot be recorded as JSON")

	// ErrNoSession is matched by *ContextError: under [StrictContext], a
	// wrapper was called, on a goroutine of the run, with a context that
	// carries no session.
	ErrNoSession = errors.New("wrapper called without the session")
)

// MismatchError is a divergence: the agent made a call that differs from the
// recorded call the session expected (kind, tool name, model, provider or
// input), the recording cannot be used for that call (invalid fingerprint,
// missing result), or the run's outcome differs from the recording.
//
// Its text begins with stepfork's message for the same situation and adds a
// report: the recorded event's id and step, and for a changed input the
// difference as cmp.Diff output of the two JSON values (-recorded +actual).
type MismatchError struct {
	Call     int      // 1-based number of the call among the recorded calls; 0 when not about a call
	Kind     CallKind // kind of call the agent made
	Label    string   // label of the recorded call (tool name, provider/model, marker name)
	Step     int      // step of the recorded event in the base trace; -1 when none
	EventID  string   // id of the recorded event; "" when none
	Recorded trace.Value
	Actual   trace.Value // set, with Recorded, when inputs or values differ

	msg   string
	scrub []trace.Scrubber // the session's, which the text passes through
}

// Error returns stepfork's text followed by the divergence report,
// redacted: it may quote what the agent did live.
func (e *MismatchError) Error() string { return redactedText(e.text(), e.scrub...) }

func (e *MismatchError) text() string {
	var b strings.Builder
	b.WriteString(e.msg)
	if e.EventID != "" {
		fmt.Fprintf(&b, "\n  recorded event: %s (step %d)", e.EventID, e.Step)
	}
	if d := e.Diff(); d != "" {
		b.WriteString("\n  diff (-recorded +actual):\n")
		for _, line := range strings.Split(strings.TrimRight(d, "\n"), "\n") {
			b.WriteString("    ")
			b.WriteString(strings.TrimRight(strings.ReplaceAll(line, "\u00a0", " "), " "))
			b.WriteByte('\n')
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// Diff is the difference between the recorded and the actual value as
// cmp.Diff prints it (-recorded +actual), or "" when there is none to show.
func (e *MismatchError) Diff() string {
	if e.Recorded.IsAbsent() || e.Actual.IsAbsent() || e.Recorded == e.Actual {
		return ""
	}
	return cmp.Diff(e.Recorded.Any(), e.Actual.Any())
}

// Is makes every MismatchError match ErrDiverged.
func (e *MismatchError) Is(target error) bool { return target == ErrDiverged }

// ExhaustedError is a divergence: the agent made a call after every recorded
// call (or every recorded marker of that name) had been consumed.
type ExhaustedError struct {
	Kind  CallKind
	Label string // tool name, model or marker name of the call the agent made
	msg   string
	scrub []trace.Scrubber
}

// Error returns the error message, redacted.
func (e *ExhaustedError) Error() string { return redactedText(e.msg, e.scrub...) }

// Is makes every ExhaustedError match ErrDiverged.
func (e *ExhaustedError) Is(target error) bool { return target == ErrDiverged }

// PolicyError is a divergence caused by policy: the replay mode or the
// recorded call's replay_policy does not let the session answer the call, or
// a live tool was not authorized. It is raised before the call's body runs
// and before the cursor advances.
type PolicyError struct {
	Kind  CallKind
	Label string
	msg   string
	scrub []trace.Scrubber
}

// Error returns the error message, redacted.
func (e *PolicyError) Error() string { return redactedText(e.msg, e.scrub...) }

// Is makes every PolicyError match ErrDiverged.
func (e *PolicyError) Is(target error) bool { return target == ErrDiverged }

// RecordedError is a recorded failure served back: the call failed when it
// was recorded, and on replay the session returns this error instead of
// running the call. The original Go error type is not reconstructed; Type
// and Message are what the recording holds. It matches ErrRecordedFailure,
// not ErrDiverged.
//
// Error returns the recorded message alone, so that the agent sees the text
// it saw when the run was recorded (agents often hand a tool's error text to
// the model; stepfork's longer text would change that prompt and make the
// replay diverge). Describe returns stepfork's text.
type RecordedError struct {
	Kind    CallKind
	Label   string // tool name, provider/model, or marker name
	Type    string // recorded error_type ("DependencyError" when none was recorded)
	Message string // recorded message ("recorded dependency failure" when none)
}

// Error returns the recorded message.
func (e *RecordedError) Error() string { return e.Message }

// Describe is stepfork's text for the failure: "recorded <kind> failure for
// '<label>': <Type>: <Message>".
func (e *RecordedError) Describe() string {
	return fmt.Sprintf("recorded %s failure for '%s': %s: %s", e.Kind, e.Label, e.Type, e.Message)
}

// Is makes every RecordedError match ErrRecordedFailure.
func (e *RecordedError) Is(target error) bool { return target == ErrRecordedFailure }

// ErrorType returns the recorded error type, so that re-recording a served
// failure writes the same error_type as the original recording.
func (e *RecordedError) ErrorType() string { return e.Type }

// BlockedError is returned for a call a Director blocked: the call did not
// execute and has no result.
type BlockedError struct {
	Kind   CallKind
	Label  string
	Reason string
	scrub  []trace.Scrubber
}

// Error returns the error message, redacted.
func (e *BlockedError) Error() string {
	return redactedText(fmt.Sprintf("%s call '%s' was blocked: %s", e.Kind, e.Label, e.Reason), e.scrub...)
}

// Is makes every BlockedError match ErrBlocked.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// ErrorType returns "Blocked".
func (e *BlockedError) ErrorType() string { return "Blocked" }

// optionError is a construction error of Record or Replay.
type optionError struct{ msg string }

func (e *optionError) Error() string        { return e.msg }
func (e *optionError) Is(target error) bool { return target == ErrInvalidOptions }

func optionErrf(format string, args ...any) error {
	return &optionError{fmt.Sprintf(format, args...)}
}

// errorType names an error for the error_type field of a recording: the
// ErrorType() string of the first error in the chain that has one (a served
// *RecordedError has the recorded type); otherwise the innermost error of
// the chain (following the first of several wrapped errors) whose type says
// something, written as %T writes it without a leading '*'
// ("booking.TimeoutError", "*fs.PathError" as "fs.PathError"). The
// standard library's anonymous carriers of text and wrapping (the types of
// errors.New, fmt.Errorf and errors.Join) say nothing: an error made only of
// them is of type "error" (Python's plain Exception). Naming the root cause
// keeps the type the same whether the agent wraps a live error or a served
// one.
func errorType(err error) string {
	var typed interface{ ErrorType() string }
	if errors.As(err, &typed) {
		if t := typed.ErrorType(); t != "" {
			return t
		}
	}
	named := ""
	for e := err; e != nil; {
		if t := strings.TrimPrefix(fmt.Sprintf("%T", e), "*"); !carrierTypes[t] {
			named = t
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			e = u.Unwrap()
		case interface{ Unwrap() []error }:
			e = nil
			if errs := u.Unwrap(); len(errs) > 0 {
				e = errs[0]
			}
		default:
			e = nil
		}
	}
	if named == "" {
		return plainErrorType
	}
	return named
}

// plainErrorType is the error_type of an error whose chain holds no type of
// its own (errors.New, fmt.Errorf).
const plainErrorType = "error"

// carrierTypes are the types of the standard library's errors that carry a
// text or wrap other errors and name nothing: errors.New's, fmt.Errorf's
// (with one %w or several) and errors.Join's.
var carrierTypes = map[string]bool{
	"errors.errorString": true,
	"fmt.wrapError":      true,
	"fmt.wrapErrors":     true,
	"errors.joinError":   true,
}

// sameErrorType reports whether an error of type got stands for a recorded
// failure of type recorded. Recordings made before plain errors were named
// "error" named them by their carrier ("errors.errorString").
func sameErrorType(got, recorded string) bool {
	return got == recorded || got == plainErrorType && carrierTypes[recorded]
}

// errorMessage is err's text, or its type when the text is empty (stepfork:
// str(exc) or the class name).
func errorMessage(err error, typ string) string {
	if m := err.Error(); m != "" {
		return m
	}
	return typ
}

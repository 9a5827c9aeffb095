// Package rawline lets package fork copy the lines of a parent bundle's
// events.jsonl that need no re-encoding, without making that fast path part
// of package trace's API.
//
// A trace.Reader opened with the option [CheckSavedForm] returns notes, for
// each event it yields, whether the event's line is byte for byte what
// trace.Save writes for it; [Line] returns that line and the note, and
// [WriteRaw] copies such a line into a trace.BundleWriter (rewriting its
// run_id when the event's differs).
//
// Package trace registers the functions when it is initialized, so they may
// be called by any package that imports trace. The type parameters are
// trace's types (trace.OpenOption, *trace.Reader, *trace.BundleWriter,
// *trace.Event); any other is a programming error and panics.
package rawline

var checkSavedForm, line, writeRaw any

// Register is called by package trace's init with its implementations.
func Register[O, R, W, E any](savedForm O, lineOf func(R) ([]byte, bool), write func(W, E, []byte) error) {
	checkSavedForm, line, writeRaw = savedForm, lineOf, write
}

// CheckSavedForm is the trace.OpenOption that makes a Reader note, for every
// event, whether its line is in saved form. It costs about as much as
// validating the payload hashes.
func CheckSavedForm[O any]() O { return checkSavedForm.(O) }

// Line returns the line of events.jsonl that the event last yielded by r was
// decoded from, without its line ending, and whether it is in saved form
// (false unless r was opened with CheckSavedForm). The line is valid until
// the loop body returns.
func Line[R any](r R) (text []byte, saved bool) { return line.(func(R) ([]byte, bool))(r) }

// WriteRaw writes text, the saved-form line of ev, as the next line of w's
// events.jsonl, with ev's run id.
func WriteRaw[W, E any](w W, ev E, text []byte) error {
	return writeRaw.(func(W, E, []byte) error)(w, ev, text)
}

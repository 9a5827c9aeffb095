// Package rawline lets other packages of the module use what package trace
// learns of the lines of events.jsonl as it reads them, without making it
// part of trace's API: package fork copies the lines of a parent bundle that
// are in saved form without re-encoding them, and package sftest's Load
// vouches for the payload hashes it found right (package vouch), which the
// first replay then does not compute again.
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

var checkSavedForm, line, writeRaw, loadVerified any

// Register is called by package trace's init with its implementations.
func Register[O, R, W, E, T, I any](savedForm O, lineOf func(R) ([]byte, bool), write func(W, E, []byte) error,
	load func(string) (T, I, []uint64, bool, error)) {
	checkSavedForm, line, writeRaw, loadVerified = savedForm, lineOf, write, load
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

// LoadVerified is trace.LoadVerified (T is *trace.Trace, I
// trace.IntegrityResult) that also hashes every payload as it reads it: bit
// i of hashed is set when event i's stored payload hashes are its
// payloads', and all reports that of every event. It costs about as much as
// validating the payload hashes after the load.
func LoadVerified[T, I any](path string) (tr T, res I, hashed []uint64, all bool, err error) {
	return loadVerified.(func(string) (T, I, []uint64, bool, error))(path)
}

// Package sharedstart is the fast path of the diff of a variant whose first
// events are its base's (a fork's served prefix, every event of a null
// fork): the base's behavior steps are taken for them, and only the rest of
// the variant is extracted. It keeps that path out of the API of packages
// trace and diff.
//
// Package trace registers [Steps] and package diff [Diff] when they are
// initialized, so each may be called by any package that imports the one
// that registers it. The type parameters are those packages' types
// (*trace.Trace, trace.BehaviorStep, trace.Event, *diff.Prepared,
// *diff.Result); any other is a programming error and panics.
package sharedstart

var steps, diff any

// RegisterSteps is called by package trace's init with its implementation
// of Steps.
func RegisterSteps[T, S any](f func(t T, first, index0 int) ([]S, []int32)) { steps = f }

// Steps returns the behavior steps (trace.Trace.Behavior) of t that come
// from the events t.Events[first:], their calls answered and their nodes
// ended as in the whole run, numbered from index0 (the number of steps of
// the events before first), and for each step the index of the event it
// comes from. Steps(t, 0, 0) is t.Behavior() with the events of its steps.
func Steps[T, S any](t T, first, index0 int) ([]S, []int32) {
	return steps.(func(T, int, int) ([]S, []int32))(t, first, index0)
}

// RegisterDiff is called by package diff's init with its implementation of
// Diff.
func RegisterDiff[P, E, T, R any](f func(db P, base []E, variant T) R) { diff = f }

// Diff is db.Diff(variant), where base are the events db was prepared
// from, unchanged since (a fork index's copy of its base): the variant's
// first events that are the same as base's have base's steps, which are
// not extracted again.
func Diff[P, E, T, R any](db P, base []E, variant T) R {
	return diff.(func(P, []E, T) R)(db, base, variant)
}

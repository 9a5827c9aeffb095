package fork

import "errors"

// Sentinel errors, matched with [errors.Is]. Every error of this package
// that is not the caller's own (the agent's, the context's, a storage
// error of package trace) matches one of them; the message says what was
// wrong, where, and what to do next.
var (
	// ErrUnresolved: a fork point that does not resolve to a position of
	// the base run — a counterfactual [At] that names nothing there, or a
	// static [Cut] through a step or event the trace does not hold. The
	// message names the point as written and what does resolve.
	ErrUnresolved = errors.New("fork point does not resolve")
	// ErrInvalidChange: a change or an [Override] that cannot be applied to
	// the base run (a target that does not exist, that lies in the served
	// prefix or beyond the cut, that is not overridable; a value that
	// cannot be recorded; a malformed wire form), or an option whose value
	// cannot be used ([Budget] below zero, [RunID] of the base run itself).
	ErrInvalidChange = errors.New("invalid change")
	// ErrConflict: two changes (or two overrides) write the same thing.
	ErrConflict = errors.New("conflicting changes")
	// ErrBrokenTrace: the events a static fork would keep do not form a
	// valid trace (a parent left out or later than its child, steps going
	// back, a repeated event id): the trace being forked is itself invalid.
	ErrBrokenTrace = errors.New("fork would break the trace structure")
	// ErrPrefixDiverged: the agent did not reproduce the base run before
	// the fork point. The served prefix is only meaningful when the agent
	// makes the calls the recording holds.
	ErrPrefixDiverged = errors.New("the prefix of the base run did not replay")
	// ErrOverBudget: a fork or sweep whose estimated tails cost more than
	// its [Budget]; nothing ran.
	ErrOverBudget = errors.New("over budget")
	// ErrAgentPanicked: the agent panicked while a variant ran.
	ErrAgentPanicked = errors.New("the agent panicked")
	// ErrNotFork: [ReadInfo] of a trace that has no fork.json, an original
	// recording.
	ErrNotFork = errors.New("trace is not a fork: it has no " + infoFile)
)

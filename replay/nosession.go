package replay

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// A wrapper called with a context that carries no session (a tool that
// calls another through context.Background(), a goroutine started with a
// fresh context) is a plain pass-through: it runs live and nothing records
// it, so a replay of the run cannot serve it either. With no session
// running anywhere in the process that is production, and costs one atomic
// load; while one runs, the wrapper says so once (a warning naming it,
// through log/slog's default logger), and under StrictContext, when it is
// called on a goroutine of the strict run, it fails.

// activeSessions counts the sessions running in the process.
var activeSessions atomic.Int64

// strict runs: how many are running, and the goroutines each has seen (the
// agent's own, and every goroutine that called a wrapper with its
// context), goroutine id → *session.
var (
	strictSessions atomic.Int64
	strictOwners   sync.Map
)

// warnedWrappers are the wrappers whose sessionless call was reported.
var warnedWrappers sync.Map

// StrictContext makes a wrapper that is called with a context that carries
// no session, on a goroutine of the run (the agent's own, or one that called
// a wrapper with the run's context), fail with a [*ContextError] instead of
// running unrecorded: a wrapper that returns an error returns it, and the
// run's [Record] or [Replay] returns it too (the recording misses a call),
// as do the wrappers that return no error ([Decide], [Param], [Now],
// [NewID], [Read]). Without it such a call runs live and is reported once
// per wrapper as a warning through log/slog's default logger.
//
// Calls on goroutines the run never saw (one the agent started and that
// never called a wrapper with the run's context) cannot be told apart from
// the calls of another test or request of the process: they are only
// warned about.
func StrictContext() Option { return both(func(c *config) { c.strict = true }) }

// ContextError is the error of a wrapper called without the session under
// [StrictContext]. It matches [ErrNoSession].
type ContextError struct {
	// Wrapper names the call: `the tool "search" (replay.Tool)`.
	Wrapper string
}

// Error says which wrapper and what to do.
func (e *ContextError) Error() string {
	return "replay: " + e.Wrapper + " was called with a context that carries no session, on a goroutine of a run under replay.StrictContext; " +
		"pass it the ctx the agent was given (or one derived from it), so that the call is recorded and replayed"
}

// Is makes every ContextError match ErrNoSession.
func (e *ContextError) Is(target error) bool { return target == ErrNoSession }

// sessionless reports a wrapper called with no session while sessions run
// (the callers check activeSessions first): fn is the wrapper's function,
// what and name the call ("tool", "search"). It returns a *ContextError
// when the goroutine belongs to a strict run.
func sessionless(fn, what, name string) error {
	w := describeWrapper(fn, what, name)
	if _, done := warnedWrappers.LoadOrStore(w, true); !done {
		slog.Warn(fmt.Sprintf("replay: %s was called with a context that carries no session while a run is recorded or replayed in this process: it runs live and nothing records it. "+
			"Pass it the ctx the agent was given (or one derived from it); replay.StrictContext() makes this an error.", w))
	}
	if strictSessions.Load() == 0 {
		return nil
	}
	owner, ok := strictOwners.Load(goid())
	if !ok {
		return nil
	}
	err := &ContextError{Wrapper: w}
	s := owner.(*session)
	s.mu.Lock()
	if s.noSession == nil {
		s.noSession = err
	}
	s.mu.Unlock()
	return err
}

// describeWrapper names a call for a message: `the tool "search"
// (replay.Tool)`, `replay.Now`.
func describeWrapper(fn, what, name string) string {
	switch {
	case what == "":
		return "replay." + fn
	case fn == "LLM" || fn == "LLMRaw" || fn == "Transport":
		return fmt.Sprintf("the %s %s (replay.%s)", what, name, fn)
	}
	return fmt.Sprintf("the %s %q (replay.%s)", what, name, fn)
}

// started counts s among the running sessions, and, for a strict run,
// makes the goroutine gid (the agent's) its own.
func (s *session) started(gid uint64) {
	activeSessions.Add(1)
	if s.cfg.strict {
		strictSessions.Add(1)
		s.mu.Lock()
		s.ownLocked(gid)
		s.mu.Unlock()
	}
}

// ended undoes started.
func (s *session) ended() {
	if s.cfg.strict {
		s.mu.Lock()
		for _, gid := range s.owned {
			strictOwners.CompareAndDelete(gid, s)
		}
		s.owned = nil
		s.mu.Unlock()
		strictSessions.Add(-1)
	}
	activeSessions.Add(-1)
}

// ownLocked makes the goroutine gid one of a strict run's.
func (s *session) ownLocked(gid uint64) {
	if !s.cfg.strict || gid == 0 {
		return
	}
	if _, seen := strictOwners.Load(gid); seen {
		return
	}
	strictOwners.Store(gid, s)
	s.owned = append(s.owned, gid)
}

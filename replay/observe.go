package replay

import "context"

// An Observer watches sessions as they run: each run's start and end, and
// each dependency call (tool or model) as the session answers it. It is the
// seam for tracing, logging and metrics (package contrib/otel builds
// OpenTelemetry spans and metrics on it); it cannot change what a session
// does. Install one with [WithObserver] in the context given to [Record],
// [Replay], or anything that runs them (fork.Run, fork.Each).
//
// A session calls its Observer without holding any lock, on the goroutine
// that made the call, so an Observer must be safe for concurrent use. The
// contexts its Start methods return are used for what follows: the agent
// runs in the context StartRun returns, an executed call's body in the one
// StartCall returns, so spans started there nest as the calls do.
type Observer interface {
	// StartRun is called before the agent runs.
	StartRun(ctx context.Context, run *RunInfo) context.Context
	// EndRun is called once the agent has returned and the run's trace is
	// complete (and saved, with SaveTo); ctx is the one StartRun returned.
	EndRun(ctx context.Context, run *RunInfo, res *Result)
	// StartCall is called for every dependency call once the session has
	// decided how to answer it (c.Outcome), before the body runs when it is
	// executed. EndCall follows with the call's error and usage; for a call
	// that does not execute, at once.
	StartCall(ctx context.Context, c *CallInfo) context.Context
	EndCall(ctx context.Context, c *CallInfo)
}

// RunInfo describes a session's run to an [Observer].
type RunInfo struct {
	RunID     string // the run's id (the new trace's, for a replay)
	AgentName string
	// BaseRunID is the run id of the trace replayed, "" for Record.
	BaseRunID string
	// Mode is the replay mode, "" for Record.
	Mode Mode
	// Directed reports that a [Director] directs the session, as package
	// fork does for a counterfactual run.
	Directed bool
}

// CallInfo describes a dependency call to an [Observer]. The same *CallInfo
// is passed to StartCall and EndCall; the Observer must not keep it after
// EndCall.
type CallInfo struct {
	// CallRecord is the call as Result.Calls lists it: position, kind,
	// label, outcome, its event in the new trace and the recorded call
	// matched.
	CallRecord
	// Provider and Model are a model call's (the model as patched, when a
	// Director patched it).
	Provider, Model string
	// Node is the innermost Node the call is made in ("" at top level).
	Node string
	// Err is set for EndCall: the error the agent gets (a served recorded
	// failure, a block, a divergence, or the body's error).
	Err error
	// Usage is set for EndCall of an executed model call: the tokens and
	// cost it reported.
	Usage Usage
}

type observerKey struct{}

// WithObserver returns a context that makes every session started with it
// report to o. A nil o removes an observer ctx carries.
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, observerBox{o})
}

// observerBox lets a nil Observer be stored (to remove one).
type observerBox struct{ o Observer }

func observerFrom(ctx context.Context) Observer {
	b, _ := ctx.Value(observerKey{}).(observerBox)
	return b.o
}

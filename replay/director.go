package replay

import (
	"github.com/stepfork/stepfork/trace"
)

// CallKind is the kind of an intercepted call.
type CallKind string

// Call kinds. KindTool and KindLLM are dependency calls (the calls stepfork
// matches); the others are runtime markers and state reads.
const (
	KindTool     CallKind = "tool"     // Tool
	KindLLM      CallKind = "llm"      // LLM, LLMRaw
	KindDecision CallKind = "decision" // Decide
	KindApproval CallKind = "approval" // Approve
	KindParam    CallKind = "param"    // Param
	KindNow      CallKind = "now"      // Now
	KindID       CallKind = "id"       // NewID
	KindEffect   CallKind = "effect"   // SideEffect
	KindState    CallKind = "state"    // Read
)

// markerKey is the reserved state key of a marker kind.
func (k CallKind) markerKey() string {
	switch k {
	case KindDecision, KindApproval:
		return trace.MarkerDecision
	case KindParam:
		return trace.MarkerParam
	case KindNow:
		return trace.MarkerNow
	case KindID:
		return trace.MarkerID
	case KindEffect:
		return trace.MarkerEffect
	case opRead:
		return trace.MarkerRead
	}
	return ""
}

// A Director decides what a replay session does with each intercepted call.
// It is the extension point of counterfactual execution (package fork): serve
// the base run strictly up to a fork point, then run the tail under changes.
//
// Direct is called once per intercepted call, with the session's lock held:
// calls are directed one at a time, in the order the agent makes them, and
// Direct must not call back into the session (no wrappers, no Result
// methods). The *Call is valid only during the call.
type Director interface {
	Direct(c *Call) Action
}

// DirectorFunc adapts a function to a Director.
type DirectorFunc func(c *Call) Action

// Direct calls f(c).
func (f DirectorFunc) Direct(c *Call) Action { return f(c) }

// Call describes an intercepted call to a Director.
type Call struct {
	Kind CallKind
	// Name is the tool name, the model label (provider/model), the marker
	// name (decision, parameter, effect, approval) or the state key. Now and
	// NewID have no name.
	Name            string
	Provider, Model string // model calls
	// Input is the call's input after redaction: the tool or model input;
	// the computed value of a decision; the default of a parameter; the
	// current value of a state key (Absent when unset).
	Input trace.Value
	// Position is the 1-based number of this call among the dependency calls
	// (tool and model) of the run; 0 for markers and state reads.
	Position int
	// Occurrence is the 1-based number of this call among the calls of the
	// same kind and name in the run.
	Occurrence int
	// Parent is the id of the event the call hangs under in the new trace;
	// Node is the innermost Node the call is made in ("" at top level).
	Parent, Node string
	// Step is the number of events in the new trace when the call is
	// directed: the step its event gets when the agent makes calls one at a
	// time. A session that recorded work on several goroutines writes its
	// trace in a canonical order at the end, so a Director that reports
	// where a call is in the new trace keeps Seq and asks
	// [Result.DirectedStep].
	Step int
	// Seq is the number of this call among the calls the session directed,
	// from 1.
	Seq int
	// Cursor is the recorded call that strict matching would use for a
	// dependency call (nil when every recorded call was consumed): for a
	// call its scope's own goroutine made, the call at the cursor; for one
	// made in a scope's concurrent group, the group's pending call with the
	// same identity and input as the group matches it (see "Concurrent
	// groups" in the package doc), else the closest of the same kind and
	// name.
	Cursor *Recorded
	// Match is a recorded dependency call not yet consumed with the same
	// kind, name (or provider and model) and input fingerprint, nil when
	// there is none: in a concurrent group the one the group matches, else
	// the earliest. ServeMatch serves it (occurrence-aware: each recorded
	// call is served at most once).
	Match *Recorded
	// Marker is, for a marker call, the recorded marker it stands for: the
	// next of the same kind and name, or in a concurrent group the one the
	// group matches (nil when none is left).
	Marker *trace.Event
	// MatchedBy names the user matchers ([Match]) through which Match
	// matches the call, "" when its input is canonically equal.
	MatchedBy string

	matchers matchers // the replay's, for Matches
}

type actionKind uint8

const (
	actStrict actionKind = iota
	actServe
	actServeMatch
	actExecute
	actBlock
	actFail
)

// Action is what a Director tells the session to do with a call. Build one
// with Strict, Serve, ServeMatch, Execute, Block or Fail.
type Action struct {
	kind    actionKind
	value   trace.Value
	input   trace.Value
	model   string
	reason  string
	err     error
	instead *Recorded
}

// Strict handles the call as the session's mode does without a Director:
// stepfork's strict matching at the cursor, then serve (or execute in the live
// modes). Its divergences are divergences of the run.
func Strict() Action { return Action{kind: actStrict} }

// Serve answers the call with v without executing it and without consuming
// any recorded call: the substituted result of a tool or model call, a forced
// decision, parameter, approval or effect value (recorded with
// "forced":true), or a patched state read. For a state read, an Absent v
// deletes the key.
func Serve(v trace.Value) Action { return Action{kind: actServe, value: v} }

// Instead makes a Serve action of a tool or model call stand in for the
// recorded call r (the call's Call.Cursor or Call.Match): r is consumed, as
// ServeMatch consumes the call it serves, so that no later call is served
// it, and in a concurrent group the call takes r's place in its goroutine's
// history. It is how a substituted result replaces exactly the recorded
// call it targets. A nil r, or one already consumed, changes nothing.
func (a Action) Instead(r *Recorded) Action { a.instead = r; return a }

// ServeMatch serves the recorded call in Call.Match and consumes it. When
// Call.Match is nil the call fails with a divergence. For markers and state
// reads it is the same as Strict.
func ServeMatch() Action { return Action{kind: actServeMatch} }

// Execute runs the call live and records what it returns. The modifiers
// WithInput and WithModel patch the call before it is sent.
func Execute() Action { return Action{kind: actExecute} }

// WithInput makes an Execute action send input instead of the agent's input
// (a patched prompt or temperature, for example). The typed wrappers decode
// it into their request type.
func (a Action) WithInput(input trace.Value) Action { a.input = input; return a }

// WithModel makes an Execute action of a model call use model instead of the
// agent's model (Request.Model for LLM; the event's model for LLMRaw, whose
// body the Director should patch with WithInput as well).
func (a Action) WithModel(model string) Action { a.model = model; return a }

// Block refuses to run the call: the agent gets a *BlockedError with reason,
// and the trace records the call with a skipped result. Decide, Param, Now
// and NewID cannot return an error; for them Block behaves like Execute.
func Block(reason string) Action { return Action{kind: actBlock, reason: reason} }

// Fail makes the call return err without executing. For Decide, Param, Now
// and NewID, which cannot return an error, err becomes the run's divergence
// (when it is the first) and the live value is used.
func Fail(err error) Action { return Action{kind: actFail, err: err} }

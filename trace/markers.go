package trace

import "strings"

// Runtime markers.
//
// Go agents record more than tools and models: named phases, decisions a fork
// may force, knobs, and the nondeterminism they read. stepfork v0.1 has no
// event types for these and rejects unknown keys, so they are recorded as
// state_change events whose key starts with '@' (a prefix reserved for this
// purpose; user state keys must not start with '@'). Python stepfork reads
// them as ordinary state changes. Each marker's payload is in "after"; "before"
// is null.
//
//	key        after                                                  written by
//	@node      {"name":"write","phase":"enter"}                       replay.Node, entering a phase
//	@node      {"name":"write","phase":"exit","status":"ok"}          replay.Node, leaving it
//	           {"name":"write","phase":"exit","status":"error","error":"…"}
//	@decision  {"name":"route","kind":"decision","value":<json>}      replay.Decide
//	           {"name":"refund","kind":"approval","value":<json>}     replay.Approve (human approval)
//	@param     {"name":"max_results","value":<json>}                  replay.Param
//	@now       {"value":"2026-01-01T00:00:00.000001Z"}                replay.Now
//	@id        {"value":"…"}                                          replay.NewID
//	@effect    {"name":"roll_dice","value":<json>}                    replay.SideEffect
//	           {"name":"roll_dice","error":"…","error_type":"…"}         a failed effect or approval
//	@read      {"name":"tone"}                                        replay.Read, where the agent read a state key
//
// A forced decision, parameter or effect value adds "forced":true. Plain state
// writes (replay.Set) are ordinary state_change events with the user's key,
// the previous value in "before" and the new one in "after".
const (
	MarkerNode     = "@node"
	MarkerDecision = "@decision"
	MarkerParam    = "@param"
	MarkerNow      = "@now"
	MarkerID       = "@id"
	MarkerEffect   = "@effect"
	MarkerRead     = "@read"
)

// Node marker phases and decision kinds.
const (
	PhaseEnter     = "enter"
	PhaseExit      = "exit"
	KindDecision   = "decision"
	KindApproval   = "approval"
	NodeStatusOK   = "ok"
	NodeStatusFail = "error"
)

// IsMarker reports whether ev is a runtime marker (a state_change whose key
// starts with '@').
func (e *Event) IsMarker() bool {
	return e.Type == StateChange && strings.HasPrefix(e.Key, "@")
}

// Marker is the decoded payload of a runtime marker event.
type Marker struct {
	Key    string // MarkerNode, MarkerDecision, …
	Name   string // node, decision, parameter or effect name
	Phase  string // @node: PhaseEnter or PhaseExit
	Status string // @node exit: NodeStatusOK or NodeStatusFail
	Error  string // @node exit with an error: its message
	Kind   string // @decision: KindDecision or KindApproval
	// ErrorType is the type of Error for a failed @effect or approval.
	ErrorType string
	Value     Value // @decision, @param, @now, @id, @effect
	Forced    bool  // the value was forced by a fork
}

// Marker decodes a runtime marker; ok is false when ev is not one.
func (e *Event) Marker() (m Marker, ok bool) {
	if !e.IsMarker() {
		return m, false
	}
	m.Key = e.Key
	// One pass over the members; the first of a duplicated key wins, as
	// Get would have it.
	var seen uint8
	for k, v := range e.After.Members() {
		var bit uint8
		var dst *string
		switch k {
		case "name":
			bit, dst = 1, &m.Name
		case "phase":
			bit, dst = 2, &m.Phase
		case "status":
			bit, dst = 4, &m.Status
		case "error":
			bit, dst = 8, &m.Error
		case "kind":
			bit, dst = 16, &m.Kind
		case "error_type":
			bit, dst = 32, &m.ErrorType
		case "value":
			bit = 64
		case "forced":
			bit = 128
		default:
			continue
		}
		if seen&bit != 0 {
			continue
		}
		seen |= bit
		switch {
		case dst != nil:
			*dst, _ = v.Str()
		case bit == 64:
			m.Value = v
		default:
			m.Forced, _ = v.BoolOf()
		}
	}
	return m, true
}

// MarkerEvent returns a state_change event for m (id, run id, step, parent and
// time are left for the caller to fill).
func MarkerEvent(m Marker) Event {
	// The object is written in canonical form directly: its keys are
	// fixed, and in this order they are sorted.
	b := make([]byte, 0, 48+len(m.Name)+len(m.Error)+len(m.Value.raw))
	b = append(b, '{')
	add := func(k, v string) {
		if v == "" {
			return
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, k...)
		b = appendQuoted(b, v)
	}
	add(`"error":`, m.Error)
	add(`"error_type":`, m.ErrorType)
	if m.Forced {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"forced":true`...)
	}
	add(`"kind":`, m.Kind)
	add(`"name":`, m.Name)
	add(`"phase":`, m.Phase)
	add(`"status":`, m.Status)
	if !m.Value.IsAbsent() {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"value":`...)
		b = append(b, m.Value.raw...)
	}
	b = append(b, '}')
	return Event{Type: StateChange, Status: StatusOK, ReplayPolicy: PolicyFrozen, Key: m.Key, Before: NullValue, After: Value{owned(b)}}
}

package trace

import (
	"fmt"
	"time"
)

// EventType is the discriminator of an event.
type EventType string

// The eight event types of stepfork v0.1.
const (
	RunStart    EventType = "run_start"
	LLMRequest  EventType = "llm_request"
	LLMResponse EventType = "llm_response"
	ToolCall    EventType = "tool_call"
	ToolResult  EventType = "tool_result"
	StateChange EventType = "state_change"
	ErrorEvent  EventType = "error"
	RunEnd      EventType = "run_end"
)

// eventTypes lists the event types in the order of the reference.
var eventTypes = []EventType{RunStart, LLMRequest, LLMResponse, ToolCall, ToolResult, StateChange, ErrorEvent, RunEnd}

// Valid reports whether t is one of the eight event types.
func (t EventType) Valid() bool {
	switch t {
	case RunStart, LLMRequest, LLMResponse, ToolCall, ToolResult, StateChange, ErrorEvent, RunEnd:
		return true
	}
	return false
}

// Status is the status of one event.
type Status string

// Event statuses.
const (
	StatusOK      Status = "ok"
	StatusError   Status = "error"
	StatusSkipped Status = "skipped"
)

// Valid reports whether s is a known event status.
func (s Status) Valid() bool { return s == StatusOK || s == StatusError || s == StatusSkipped }

// Policy is the replay policy recorded with an event, or a replay mode.
type Policy string

// Replay policies of stepfork v0.1.
const (
	PolicyFrozen    Policy = "frozen"
	PolicyLive      Policy = "live"
	PolicyManual    Policy = "manual"
	PolicyForbidden Policy = "forbidden"
	PolicyDerived   Policy = "derived"
)

// Valid reports whether p is a known replay policy.
func (p Policy) Valid() bool {
	switch p {
	case PolicyFrozen, PolicyLive, PolicyManual, PolicyForbidden, PolicyDerived:
		return true
	}
	return false
}

// RunStatus is the status of a whole run, in the manifest and in run_end.
type RunStatus string

// Run statuses.
const (
	RunRunning   RunStatus = "running"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
)

// Valid reports whether s is a known run status.
func (s RunStatus) Valid() bool { return s == RunRunning || s == RunCompleted || s == RunFailed }

// Event is one line of events.jsonl.
//
// Optional strings use "" for null: every optional string of the format must
// be non-empty when present, so nothing is lost. Optional numbers are
// pointers. Payloads are Values, whose zero value means the key was absent
// (which is not the same as an explicit null).
//
// Which fields each type carries:
//
//	run_start     Input
//	llm_request   Provider, Model (required), Input (required)
//	llm_response  Model, Output (required), PromptTokens, CompletionTokens, TotalTokens, CostUSD
//	tool_call     Name (required), Input (required)
//	tool_result   Name (required), Output (required)
//	state_change  Key, Before, After
//	error         ErrorType (required), Message (required), Details
//	run_end       RunStatus (required), Output
type Event struct {
	ID           string
	RunID        string
	ParentID     string // "" is null
	Step         int
	Type         EventType
	Timestamp    time.Time
	DurationMS   *int64
	Status       Status
	ReplayPolicy Policy
	InputHash    string // "" is null
	OutputHash   string // "" is null
	Redactions   []string

	Provider string // llm_request; "" is null
	Model    string // llm_request (required), llm_response ("" is null)
	Name     string // tool_call, tool_result
	Key      string // state_change; "" is null

	Input   Value // run_start, llm_request, tool_call
	Output  Value // llm_response, tool_result, run_end
	Before  Value // state_change
	After   Value // state_change
	Details Value // error

	PromptTokens     *int64   // llm_response
	CompletionTokens *int64   // llm_response
	TotalTokens      *int64   // llm_response
	CostUSD          *float64 // llm_response

	ErrorType string // error
	Message   string // error

	RunStatus RunStatus // run_end
}

// Clone returns a copy of e that shares nothing mutable with it.
func (e Event) Clone() Event {
	c := e
	if e.Redactions != nil {
		c.Redactions = append([]string(nil), e.Redactions...)
	}
	if e.DurationMS != nil || e.PromptTokens != nil || e.CompletionTokens != nil || e.TotalTokens != nil || e.CostUSD != nil {
		// The numbers are copied together, in one allocation.
		n := new(struct {
			duration, prompt, completion, total int64
			cost                                float64
		})
		c.DurationMS = copyInto(&n.duration, e.DurationMS)
		c.PromptTokens = copyInto(&n.prompt, e.PromptTokens)
		c.CompletionTokens = copyInto(&n.completion, e.CompletionTokens)
		c.TotalTokens = copyInto(&n.total, e.TotalTokens)
		c.CostUSD = copyInto(&n.cost, e.CostUSD)
	}
	return c
}

// copyInto stores *p in dst and returns dst, or returns nil for p nil.
func copyInto[T any](dst, p *T) *T {
	if p == nil {
		return nil
	}
	*dst = *p
	return dst
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Label is the short name of an event used in listings: the tool name, the
// model, the state key, the error type or the run status (stepfork inspect).
func (e *Event) Label() string {
	switch e.Type {
	case RunStart:
		return "run_start"
	case LLMRequest:
		return e.Model
	case LLMResponse:
		if e.Model != "" {
			return e.Model
		}
		return "llm_response"
	case ToolCall, ToolResult:
		return e.Name
	case StateChange:
		if e.Key != "" {
			return e.Key
		}
		return "state_change"
	case ErrorEvent:
		return e.ErrorType
	case RunEnd:
		return string(e.RunStatus)
	}
	return string(e.Type)
}

// LLMLabel is "provider/model", or the model alone when there is no provider.
func LLMLabel(provider, model string) string {
	if provider == "" {
		return model
	}
	return provider + "/" + model
}

// ExpectedHashes returns the input and output hashes that the event's
// payloads call for, each the [Hash] of a payload: input_hash of the Input
// of run_start, llm_request and tool_call, and of the Before of a
// state_change; output_hash of the Output of llm_response, tool_result and
// run_end, of the After of a state_change, and of the Details of an error.
// An empty string means the field must be null (the type has no such
// payload).
func (e *Event) ExpectedHashes() (input, output string) {
	switch e.Type {
	case RunStart, LLMRequest, ToolCall:
		input = Hash(e.Input)
	case LLMResponse, ToolResult, RunEnd:
		output = Hash(e.Output)
	case StateChange:
		input, output = Hash(e.Before), Hash(e.After)
	case ErrorEvent:
		output = Hash(e.Details)
	}
	return input, output
}

// SetHashes sets InputHash and OutputHash from the payloads.
func (e *Event) SetHashes() { e.InputHash, e.OutputHash = e.ExpectedHashes() }

// checkFields reports the first violation of the event model's field rules
// (types, required fields, minimum lengths, ranges), or nil.
func (e *Event) checkFields() error {
	if e.ID == "" {
		return fmt.Errorf("id must be a non-empty string")
	}
	if e.RunID == "" {
		return fmt.Errorf("run_id must be a non-empty string")
	}
	if e.Step < 0 {
		return fmt.Errorf("step must be >= 0")
	}
	if !e.Type.Valid() {
		return fmt.Errorf("unknown event type %q", e.Type)
	}
	if e.Timestamp.IsZero() {
		return fmt.Errorf("timestamp is required")
	}
	if e.DurationMS != nil && *e.DurationMS < 0 {
		return fmt.Errorf("duration_ms must be >= 0")
	}
	if !e.Status.Valid() {
		return fmt.Errorf("status %q is not one of ok, error, skipped", e.Status)
	}
	if !e.ReplayPolicy.Valid() {
		return fmt.Errorf("replay_policy %q is not one of frozen, live, manual, forbidden, derived", e.ReplayPolicy)
	}
	switch e.Type {
	case LLMRequest:
		if e.Model == "" {
			return fmt.Errorf("llm_request requires a non-empty model")
		}
		if e.Input.IsAbsent() {
			return fmt.Errorf("llm_request requires input")
		}
	case LLMResponse:
		if e.Output.IsAbsent() {
			return fmt.Errorf("llm_response requires output")
		}
		for _, p := range []*int64{e.PromptTokens, e.CompletionTokens, e.TotalTokens} {
			if p != nil && *p < 0 {
				return fmt.Errorf("token counts must be >= 0")
			}
		}
		if e.CostUSD != nil && *e.CostUSD < 0 {
			return fmt.Errorf("cost_usd must be >= 0")
		}
	case ToolCall:
		if e.Name == "" {
			return fmt.Errorf("tool_call requires a non-empty name")
		}
		if e.Input.IsAbsent() {
			return fmt.Errorf("tool_call requires input")
		}
	case ToolResult:
		if e.Name == "" {
			return fmt.Errorf("tool_result requires a non-empty name")
		}
		if e.Output.IsAbsent() {
			return fmt.Errorf("tool_result requires output")
		}
	case ErrorEvent:
		if e.ErrorType == "" || e.Message == "" {
			return fmt.Errorf("error requires a non-empty error_type and message")
		}
	case RunEnd:
		if !e.RunStatus.Valid() {
			return fmt.Errorf("run_end requires run_status running, completed or failed")
		}
	}
	return nil
}

func isHexDigest(s string) bool { return len(s) == 64 && isLowerHex(s) }

// isLowerHex reports whether every byte of s is a lowercase hexadecimal
// digit.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if lowerHex[s[i]] >= 16 {
			return false
		}
	}
	return true
}

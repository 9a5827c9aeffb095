package trace

import (
	"errors"
	"fmt"
	"time"
)

// Builder assembles a trace in a few lines, with the parents, steps, run ids
// and hashes a recorder would give it. Ids and timestamps are deterministic
// (evt_001, evt_002, …; one second apart from 2026-01-01T00:00:00Z) so that
// built traces make stable test fixtures. Payloads are anything ValueOf
// accepts; the first conversion error is returned by Trace.
//
//	b := trace.NewBuilder("booking-agent")
//	b.RunStart(map[string]any{"city": "Lisbon"})
//	call := b.ToolCall("search_flights", map[string]any{"to": "LIS"})
//	b.ToolResult(call, map[string]any{"price": 320})
//	b.RunEnd(trace.RunCompleted, map[string]any{"booked": true})
//	tr, err := b.Trace()
type Builder struct {
	tr      Trace
	root    string // id of run_start
	scopes  []string
	clock   time.Time
	err     error
	nextID  int
	idStyle func(n int) string
	index   map[string]int // event id → position, so lookups stay O(1)
}

// NewBuilder starts a trace for the named agent, with run id "run_" + the
// agent name.
func NewBuilder(agent string) *Builder {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &Builder{clock: start, index: map[string]int{}}
	b.tr.RunID = "run_" + agent
	b.tr.AgentName = agent
	b.tr.CreatedAt = start
	b.tr.Status = RunRunning
	b.idStyle = func(n int) string { return fmt.Sprintf("evt_%03d", n) }
	return b
}

// RunID sets the run id (before any event is added).
func (b *Builder) RunID(id string) *Builder { b.tr.RunID = id; return b }

// Start sets the creation time; events follow one second apart.
func (b *Builder) Start(t time.Time) *Builder { b.tr.CreatedAt, b.clock = t, t; return b }

// IDs sets how the n-th event id (1-based) is made.
func (b *Builder) IDs(f func(n int) string) *Builder { b.idStyle = f; return b }

func (b *Builder) value(x any) Value {
	if v, ok := x.(Value); ok {
		return v
	}
	v, err := ValueOf(x)
	if err != nil && b.err == nil {
		b.err = err
	}
	return v
}

// add appends an event with the next id, step, time and the given parent ("" =
// the current scope).
func (b *Builder) add(ev Event, parent string) *Event {
	b.nextID++
	ev.ID = b.idStyle(b.nextID)
	ev.RunID = b.tr.RunID
	ev.Step = len(b.tr.Events)
	ev.Timestamp = b.clock
	b.clock = b.clock.Add(time.Second)
	if ev.Status == "" {
		ev.Status = StatusOK
	}
	if ev.ReplayPolicy == "" {
		ev.ReplayPolicy = PolicyFrozen
	}
	switch {
	case parent != "":
		ev.ParentID = parent
	case len(b.scopes) > 0:
		ev.ParentID = b.scopes[len(b.scopes)-1]
	}
	ev.SetHashes()
	b.tr.Events = append(b.tr.Events, ev)
	b.index[ev.ID] = len(b.tr.Events) - 1
	return &b.tr.Events[len(b.tr.Events)-1]
}

// RunStart adds the run_start event with the run's input.
func (b *Builder) RunStart(input any) string {
	ev := b.add(Event{Type: RunStart, Input: b.value(input)}, "")
	ev.ParentID = ""
	ev.SetHashes()
	b.root = ev.ID
	b.scopes = []string{ev.ID}
	return ev.ID
}

// Push makes id the parent of the events added next, until Pop.
func (b *Builder) Push(id string) { b.scopes = append(b.scopes, id) }

// Pop undoes the last Push.
func (b *Builder) Pop() {
	if len(b.scopes) > 1 {
		b.scopes = b.scopes[:len(b.scopes)-1]
	}
}

// ToolCall adds a tool_call and returns its id.
func (b *Builder) ToolCall(name string, input any) string {
	return b.add(Event{Type: ToolCall, Name: name, Input: b.value(input)}, "").ID
}

// ToolResult adds the successful result of the tool call with the given id.
func (b *Builder) ToolResult(call string, output any) string {
	return b.add(Event{Type: ToolResult, Name: b.nameOf(call), Output: b.value(output)}, call).ID
}

// ToolFailure adds a failed tool result and its error event, as the recorder
// writes them, and returns the id of the error event.
func (b *Builder) ToolFailure(call, errorType, message string) string {
	out := map[string]any{"error_type": errorType, "message": message}
	res := b.add(Event{Type: ToolResult, Name: b.nameOf(call), Status: StatusError, Output: b.value(out)}, call)
	return b.add(Event{Type: ErrorEvent, Status: StatusError, ErrorType: errorType, Message: message}, res.ID).ID
}

// Tool adds a tool call and its result and returns the call id.
func (b *Builder) Tool(name string, input, output any) string {
	call := b.ToolCall(name, input)
	b.ToolResult(call, output)
	return call
}

// LLMRequest adds an llm_request and returns its id. provider may be "".
func (b *Builder) LLMRequest(provider, model string, input any) string {
	return b.add(Event{Type: LLMRequest, Provider: provider, Model: model, Input: b.value(input)}, "").ID
}

// LLMResponse adds the response to the request with the given id.
func (b *Builder) LLMResponse(req string, output any) string {
	return b.add(Event{Type: LLMResponse, Model: b.modelOf(req), Output: b.value(output)}, req).ID
}

// LLM adds a model request and its response and returns the request id.
func (b *Builder) LLM(provider, model string, input, output any) string {
	req := b.LLMRequest(provider, model, input)
	b.LLMResponse(req, output)
	return req
}

// State adds a state_change of key from before to after.
func (b *Builder) State(key string, before, after any) string {
	return b.add(Event{Type: StateChange, Key: key, Before: b.value(before), After: b.value(after)}, "").ID
}

// Error adds an error event under parent ("" = the current scope).
func (b *Builder) Error(parent, errorType, message string, details any) string {
	ev := Event{Type: ErrorEvent, Status: StatusError, ErrorType: errorType, Message: message}
	if details != nil {
		ev.Details = b.value(details)
	}
	return b.add(ev, parent).ID
}

// Fail adds the run-level error (parent run_start), sets the manifest's
// failure, and the run_end with status failed.
func (b *Builder) Fail(errorType, message string) {
	id := b.Error(b.root, errorType, message, nil)
	i := b.index[id]
	b.tr.Failure = &Failure{Type: errorType, Message: message, Step: b.tr.Events[i].Step}
	b.RunEnd(RunFailed, nil)
}

// RunEnd adds the run_end (parent null, as the recorder writes it) and sets
// the manifest status.
func (b *Builder) RunEnd(status RunStatus, output any) string {
	ev := Event{Type: RunEnd, RunStatus: status}
	if output != nil {
		ev.Output = b.value(output)
	} else {
		ev.Output = NullValue
	}
	e := b.add(ev, "")
	e.ParentID = ""
	b.tr.Status = status
	return e.ID
}

// Add appends a hand-made event, filling id, run id, step, time, parent and
// hashes where they are empty.
func (b *Builder) Add(ev Event) string {
	id := ev.ID
	e := b.add(ev, ev.ParentID)
	if id != "" {
		delete(b.index, e.ID)
		e.ID = id
		b.index[id] = len(b.tr.Events) - 1
		b.nextID--
	}
	return e.ID
}

// event returns the built event with the given id, or nil.
func (b *Builder) event(id string) *Event {
	if i, ok := b.index[id]; ok {
		return &b.tr.Events[i]
	}
	return nil
}

func (b *Builder) nameOf(id string) string {
	if ev := b.event(id); ev != nil {
		return ev.Name
	}
	b.setErr(fmt.Errorf("trace.Builder: no event %q", id))
	return "unknown"
}

func (b *Builder) modelOf(id string) string {
	if ev := b.event(id); ev != nil {
		return ev.Model
	}
	b.setErr(fmt.Errorf("trace.Builder: no event %q", id))
	return ""
}

func (b *Builder) setErr(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Trace returns the trace built so far with totals computed, or the first
// error met while building.
func (b *Builder) Trace() (*Trace, error) {
	if b.err != nil {
		return nil, b.err
	}
	tr := b.tr.Clone()
	t := TotalsOf(tr.Events)
	tr.Totals = Totals{Events: t.Events, LLMCalls: t.LLMCalls, ToolCalls: t.ToolCalls}
	if tr.Status == RunFailed && tr.Failure == nil {
		return nil, errors.New("trace.Builder: a failed run needs Fail to record its failure")
	}
	return tr, nil
}

// MustTrace is like Trace but panics on error; for tests.
func (b *Builder) MustTrace() *Trace {
	tr, err := b.Trace()
	if err != nil {
		panic(err)
	}
	return tr
}

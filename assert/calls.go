package assert

import (
	"github.com/stepfork/stepfork/trace"
)

// call is one dependency call of a run, as stepfork lists them for replay
// (stepfork-format.md §5.3): a tool_call or llm_request event with its result.
type call struct {
	ev     *trace.Event // the tool_call or llm_request event
	tool   bool         // a tool call; otherwise a model call
	label  string       // tool name, or "provider/model" (model alone without provider)
	status trace.Status // StatusOK, StatusError, or StatusSkipped when no result was recorded
	// errType and errMsg describe a failed call: from its error event, else
	// from a tool result's {"error_type", "message"} output.
	errType, errMsg string
}

// callsOf lists the dependency calls of tr in file order. Runtime markers
// (state_change events with '@' keys) are not calls.
//
// A tool_call's result is its first child tool_result; failing that, the
// first later tool_result of the same name not yet paired, as long as no other
// tool_call of that name comes first (legacy traces without parent links). An
// llm_request's result is its first child llm_response, else its first child
// error event (a failed model call).
func callsOf(tr *trace.Trace) []call {
	evs := tr.Events
	type firsts struct{ toolResult, llmResponse, errorEv int }
	children := make(map[string]*firsts)
	n := 0
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case trace.ToolCall, trace.LLMRequest:
			n++
		}
		if ev.ParentID == "" {
			continue
		}
		var slot *int
		f := children[ev.ParentID]
		switch ev.Type {
		case trace.ToolResult, trace.LLMResponse, trace.ErrorEvent:
			if f == nil {
				f = &firsts{-1, -1, -1}
				children[ev.ParentID] = f
			}
			switch ev.Type {
			case trace.ToolResult:
				slot = &f.toolResult
			case trace.LLMResponse:
				slot = &f.llmResponse
			default:
				slot = &f.errorEv
			}
		default:
			continue
		}
		if *slot < 0 {
			*slot = i
		}
	}
	first := func(id string, pick func(*firsts) int) int {
		if f := children[id]; f != nil {
			return pick(f)
		}
		return -1
	}

	calls := make([]call, 0, n)
	paired := make(map[int]bool)
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case trace.ToolCall:
			c := call{ev: ev, tool: true, label: ev.Name, status: trace.StatusSkipped}
			res := first(ev.ID, func(f *firsts) int { return f.toolResult })
			if res < 0 {
				res = legacyResult(evs, i, paired)
			}
			if res >= 0 {
				paired[res] = true
				r := &evs[res]
				c.status = r.Status
				if r.Status == trace.StatusError {
					if e := first(r.ID, func(f *firsts) int { return f.errorEv }); e >= 0 {
						c.errType, c.errMsg = evs[e].ErrorType, evs[e].Message
					} else {
						c.errType, _ = r.Output.Get("error_type").Str()
						c.errMsg, _ = r.Output.Get("message").Str()
					}
				}
			}
			calls = append(calls, c)
		case trace.LLMRequest:
			c := call{ev: ev, label: trace.LLMLabel(ev.Provider, ev.Model), status: trace.StatusSkipped}
			if res := first(ev.ID, func(f *firsts) int { return f.llmResponse }); res >= 0 {
				c.status = evs[res].Status
			} else if e := first(ev.ID, func(f *firsts) int { return f.errorEv }); e >= 0 {
				c.status = trace.StatusError
				c.errType, c.errMsg = evs[e].ErrorType, evs[e].Message
			}
			calls = append(calls, c)
		}
	}
	return calls
}

// legacyResult finds the result of the tool call at index i in a trace
// without parent links: the first later unpaired tool_result of the same
// name, unless another tool_call of that name comes first. It returns -1 when
// there is none.
func legacyResult(evs []trace.Event, i int, paired map[int]bool) int {
	name := evs[i].Name
	for j := i + 1; j < len(evs); j++ {
		ev := &evs[j]
		if ev.Name != name {
			continue
		}
		switch {
		case ev.Type == trace.ToolCall:
			return -1
		case ev.Type == trace.ToolResult && !paired[j]:
			return j
		}
	}
	return -1
}

// toolNames returns the names of the tool calls among calls, in order.
func toolNames(calls []call) []string {
	names := make([]string, 0, len(calls))
	for _, c := range calls {
		if c.tool {
			names = append(names, c.label)
		}
	}
	return names
}

// modelLabels returns the labels of the model calls among calls, in order.
func modelLabels(calls []call) []string {
	var labels []string
	for _, c := range calls {
		if !c.tool {
			labels = append(labels, c.label)
		}
	}
	return labels
}

// toolCalls returns the calls of the tool named name, in order.
func toolCalls(calls []call, name string) []call {
	var out []call
	for _, c := range calls {
		if c.tool && c.label == name {
			out = append(out, c)
		}
	}
	return out
}

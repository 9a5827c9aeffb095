package assert

import (
	"github.com/stepfork/stepfork/trace"
)

// call is one dependency call of a run: a tool_call or llm_request event with
// what answered it.
type call struct {
	ev     *trace.Event // the tool_call or llm_request event
	tool   bool         // a tool call; otherwise a model call
	label  string       // tool name, or "provider/model" (model alone without provider)
	status trace.Status // StatusOK, StatusError, or StatusSkipped when no result was recorded
	// errType and errMsg describe a failed call: from its error event, else
	// from a tool result's {"error_type", "message"} output.
	errType, errMsg string
}

// callsOf lists the dependency calls of tr in file order, as
// [trace.Trace.Calls] pairs them with their results. Runtime markers
// (state_change events with '@' keys) are not calls.
func callsOf(tr *trace.Trace) []call {
	tcs := tr.Calls()
	calls := make([]call, len(tcs))
	for i := range tcs {
		c := &tcs[i]
		ev := &tr.Events[c.Event]
		calls[i] = call{ev: ev, tool: ev.Type == trace.ToolCall, label: c.Label, status: c.Status,
			errType: c.ErrorType, errMsg: c.Message}
	}
	return calls
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

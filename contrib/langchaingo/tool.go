package langchaingo

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/stepfork/stepfork/replay"
	"github.com/tmc/langchaingo/tools"
)

// recordedTool is a tools.Tool whose calls go through replay.Tool.
type recordedTool struct {
	tools.Tool
	call func(context.Context, any) (string, error)
}

// Tool wraps t so that its calls are recorded and replayed as tool calls
// named t.Name(): one line where the agent's tools are listed,
//
//	agent := agents.NewOpenAIFunctionsAgent(llm, sflcg.Tools(weather, calculator))
//
// The tool's input string is the recorded input — as JSON when it is a JSON
// object or array, so that assertions and diffs see its fields, else as a
// string — and its result the output. On replay the recorded result is
// returned without calling t; in a fork's tail, the side-effect guard serves
// or blocks the call by name and input like any tool's.
func Tool(t tools.Tool) tools.Tool {
	rt := &recordedTool{Tool: t}
	rt.call = replay.Tool(t.Name(), func(ctx context.Context, in any) (string, error) {
		return t.Call(ctx, inputString(in))
	})
	return rt
}

// Tools wraps each of ts with [Tool].
func Tools(ts ...tools.Tool) []tools.Tool {
	out := make([]tools.Tool, len(ts))
	for i, t := range ts {
		out[i] = Tool(t)
	}
	return out
}

// Call runs the tool through the session in ctx, if any.
func (t *recordedTool) Call(ctx context.Context, input string) (string, error) {
	var in any = input
	if s := strings.TrimSpace(input); (strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")) && json.Valid([]byte(s)) {
		in = json.RawMessage(s)
	}
	return t.call(ctx, in)
}

// inputString turns a (possibly patched) recorded input back into the
// string the tool takes.
func inputString(in any) string {
	switch v := in.(type) {
	case string:
		return v
	case json.RawMessage:
		return string(v)
	}
	b, _ := json.Marshal(in)
	return string(b)
}

// Package viewtest builds the runs the tests and benchmarks of package view
// and of the browser tests render: synthetic, deterministic, as large as
// asked.
package viewtest

import (
	"fmt"

	"github.com/stepfork/stepfork/trace"
)

// Secret is a credential LargeRun puts in some payloads, unredacted in
// memory, so that tests can check that no page shows it.
const Secret = "sk-proj-VIEWTESTSECRET0123456789abcdef"

// LargeRun is a run of about events events, built as a recorder would
// write it: nodes ("plan", "search", "write") each holding tool and model
// calls, every tenth node with two concurrent tool calls, every
// hundredth tool call failing, model responses with tokens and cost,
// state writes, a decision per node, and the credential Secret in the
// input of every fiftieth tool call.
func LargeRun(events int) *trace.Trace {
	b := trace.NewBuilder("large-agent").RunID("run_large")
	b.RunStart(map[string]any{"task": "synthetic", "events": events})
	names := []string{"plan", "search", "write"}
	calls, n := 0, 1
	for node := 0; n < events-1; node++ {
		n += 9
		name := names[node%len(names)]
		enter := b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: name, Phase: trace.PhaseEnter}))
		b.Push(enter)
		if node%10 == 9 {
			n += 4
			a := b.ToolCall("fetch", map[string]any{"url": fmt.Sprintf("https://example.com/%d/a", node)})
			c := b.ToolCall("fetch", map[string]any{"url": fmt.Sprintf("https://example.com/%d/b", node)})
			b.ToolResult(a, map[string]any{"status": 200, "bytes": 1024 + node})
			b.ToolResult(c, map[string]any{"status": 200, "bytes": 2048 + node})
			calls += 2
		}
		calls++
		in := map[string]any{"query": fmt.Sprintf("step %d of %s", node, name), "page": node % 7}
		if calls%50 == 0 {
			in["api_token_hint"] = "Bearer " + Secret
		}
		call := b.ToolCall("search", in)
		if calls%100 == 0 {
			n++
			b.ToolFailure(call, "Timeout", fmt.Sprintf("search timed out after %d ms", 3000+node%1000))
		} else {
			b.ToolResult(call, map[string]any{"hits": []any{"a", "b", fmt.Sprintf("result %d", node)}, "total": node % 97})
		}
		req := b.LLMRequest("openai", "gpt-4o-mini", map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("Summarize the results of step %d.", node)}}})
		pt, ct, cost := int64(120+node%50), int64(40+node%20), 0.00002*float64(1+node%5)
		tot := pt + ct
		b.Add(trace.Event{Type: trace.LLMResponse, ParentID: req, Model: "gpt-4o-mini", Status: trace.StatusOK,
			Output:       trace.MustValueOf(map[string]any{"content": fmt.Sprintf("Summary %d: the results look fine.", node)}),
			PromptTokens: &pt, CompletionTokens: &ct, TotalTokens: &tot, CostUSD: &cost})
		b.State("progress", node, node+1)
		b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerDecision, Name: "continue", Kind: trace.KindDecision, Value: trace.TrueValue}))
		b.Pop()
		exit := trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: name, Phase: trace.PhaseExit, Status: trace.NodeStatusOK})
		exit.ParentID = enter
		b.Add(exit)
	}
	b.RunEnd(trace.RunCompleted, map[string]any{"done": true})
	return b.MustTrace()
}

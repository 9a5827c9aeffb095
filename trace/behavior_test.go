package trace_test

import (
	"strings"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

// TestBehaviorLeavesOutUsage checks that the usage a model reports, in the
// shapes the adapters record it, is not part of a model step, and that
// stepfork's extraction keeps it.
func TestBehaviorLeavesOutUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		tool      bool // a tool's output, not a model's
		output    string
		behaviour string // the output in the step; "" when it is output
	}{
		{name: "replay.LLM", output: `{"content":"hi","usage":{"cached_tokens":16,"prompt_tokens":100}}`,
			behaviour: `{"content":"hi"}`},
		{name: "Transport's message", output: `{"headers":{},"message":{"content":"hi","usage":{"prompt_tokens":100}},"status":200}`,
			behaviour: `{"message":{"content":"hi"},"status":200}`},
		{name: "Eino's response_meta", output: `{"content":"hi","response_meta":{"finish_reason":"stop","usage":{"completion_tokens":4,"prompt_token_details":{"cached_tokens":16}}}}`,
			behaviour: `{"content":"hi","response_meta":{"finish_reason":"stop"}}`},
		{name: "a stream", output: `{"stream":[{"content":"h"},{"content":"i","response_meta":{"usage":{"total_tokens":3}}}]}`,
			behaviour: `{"stream":[{"content":"h"},{"content":"i","response_meta":{}}]}`},
		{name: "LangChain's usage_metadata", output: `{"content":"hi","usage_metadata":{"input_tokens":3,"output_tokens":1}}`,
			behaviour: `{"content":"hi"}`},
		{name: "Gemini's usageMetadata", output: `{"candidates":[],"usageMetadata":{"promptTokenCount":3}}`,
			behaviour: `{"candidates":[]}`},
		{name: "Genkit's usage", output: `{"finishReason":"stop","usage":{"inputCharacters":12,"inputTokens":3}}`,
			behaviour: `{"finishReason":"stop"}`},
		{name: "a null usage", output: `{"content":"hi","usage":null}`, behaviour: `{"content":"hi"}`},
		{name: "an argument named usage", output: `{"tool_calls":[{"arguments":{"usage":"daily"},"name":"meter"}]}`},
		{name: "an argument object named usage", output: `{"tool_calls":[{"arguments":{"usage":{"plan":"pro","seats":3}},"name":"meter"}]}`},
		{name: "no usage", output: `{"content":"the usage of tokens"}`},
		{name: "a tool's output", tool: true, output: `{"usage":{"prompt_tokens":100}}`},
	}
	t.Run("an input that repeats an answer's usage", func(t *testing.T) {
		t.Parallel()
		b := trace.NewBuilder("agent")
		b.RunStart(nil)
		in := map[string]any{"messages": []any{map[string]any{"role": "assistant", "content": "hi",
			"response_meta": map[string]any{"usage": map[string]any{"prompt_tokens": 3}}}}}
		b.LLM("openai", "gpt-test", in, "ok")
		b.RunEnd(trace.RunCompleted, nil)
		tr := b.MustTrace()
		const want = `{"messages":[{"content":"hi","response_meta":{},"role":"assistant"}]}`
		if got := tr.Behavior()[0].Payload.Get("input").Canonical(); got != want {
			t.Errorf("Behavior: input %s, want %s", got, want)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := trace.NewBuilder("agent")
			b.RunStart(nil)
			out, err := trace.ParseValue([]byte(tc.output))
			if err != nil {
				t.Fatal(err)
			}
			if tc.tool {
				b.Tool("meter", nil, out)
			} else {
				b.LLM("openai", "gpt-test", nil, out)
			}
			b.RunEnd(trace.RunCompleted, nil)
			tr := b.MustTrace()
			want := tc.behaviour
			if want == "" {
				want = tc.output
			}
			if got := tr.Behavior()[0].Payload.Get("output").Canonical(); got != want {
				t.Errorf("Behavior: output %s, want %s", got, want)
			}
			sf := tr.StepforkBehavior()[0].Payload.Get("output").Canonical()
			if strings.Contains(tc.output, `"usage`) != strings.Contains(sf, `"usage`) {
				t.Errorf("StepforkBehavior: output %s; stepfork's extraction keeps the usage", sf)
			}
		})
	}
}

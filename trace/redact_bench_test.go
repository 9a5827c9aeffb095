package trace

import (
	"strings"
	"testing"
)

// BenchmarkRedactString redacts strings of the kinds the CLI's output and
// the value walk see: prose with no credential, a line of JSON output, a
// URL, and prose holding a token.
func BenchmarkRedactString(b *testing.B) {
	for _, tc := range []struct{ name, s string }{
		{"prose", strings.Repeat("The refund of order 1234 was approved by the agent after checking the policy limits. ", 4)},
		{"json-line", `{"step":12,"type":"llm_response","name":"openai/gpt-4o","output":{"content":"Refund approved for order 1234.","role":"assistant"},"usage":{"prompt_tokens":812,"completion_tokens":40,"total_tokens":852},"latency_ms":930}`},
		{"url", "Fetched https://api.example.com/v1/orders/1234?expand=items&page=2 in 120 ms"},
		{"token", "the key is sk-" + "abcdefghijklmnop1234 in the config"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.s)))
			for b.Loop() {
				RedactString(tc.s)
			}
		})
	}
}

// BenchmarkRedactValue redacts a model response payload with nothing to
// redact but the words of usage counts, as most payloads are.
func BenchmarkRedactValue(b *testing.B) {
	v := MustParse(`{"choices":[{"finish_reason":"stop","message":{"content":"The refund of order 1234 was approved after checking the policy (see https://example.com/policy).","role":"assistant"}}],"model":"gpt-4o","usage":{"completion_tokens":40,"prompt_tokens":812,"total_tokens":852}}`)
	b.SetBytes(int64(len(v.Canonical())))
	for b.Loop() {
		RedactValue(v)
	}
}

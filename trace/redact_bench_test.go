package trace

import (
	"strings"
	"testing"

	"github.com/stepfork/stepfork/internal/cputime"
)

// BenchmarkRedactString redacts strings of the kinds the CLI's output and
// the value walk see: prose with no credential, a line of JSON output, a
// URL, and prose holding a token. Each checks what it got: the string
// unchanged and nothing found, or the token replaced.
func BenchmarkRedactString(b *testing.B) {
	for _, tc := range []struct{ name, s, want string }{
		{"prose", strings.Repeat("The refund of order 1234 was approved by the agent after checking the policy limits. ", 4), ""},
		{"json-line", `{"step":12,"type":"llm_response","name":"openai/gpt-4o","output":{"content":"Refund approved for order 1234.","role":"assistant"},"usage":{"prompt_tokens":812,"completion_tokens":40,"total_tokens":852},"latency_ms":930}`, ""},
		{"url", "Fetched https://api.example.com/v1/orders/1234?expand=items&page=2 in 120 ms", ""},
		{"token", "the key is sk-" + "abcdefghijklmnop1234 in the config", "the key is [REDACTED] in the config"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			want, redacts := tc.want, tc.want != ""
			if !redacts {
				want = tc.s
			}
			b.SetBytes(int64(len(tc.s)))
			defer cputime.Report(b, cputime.Used())
			for b.Loop() {
				if got, hit := RedactString(tc.s); hit != redacts || got != want {
					b.Fatalf("RedactString = %q, %v; want %q, %v", got, hit, want, redacts)
				}
			}
		})
	}
}

// BenchmarkRedactValue redacts payloads of the shapes a recorded run
// holds: a model response with nothing to redact but the words of usage
// counts, as most payloads are ("response"); a model request, whose
// max_tokens key the old filters took for a possible sensitive key, and
// whose messages hold escapes ("request"); a tool result nested four
// deep ("nested"); and a request that does hold secrets, a sensitive key
// two levels down and a token in a message ("secret"). Each checks how
// many findings it made.
func BenchmarkRedactValue(b *testing.B) {
	for _, tc := range []struct {
		name, text string
		found      int
	}{
		{"response", `{"choices":[{"finish_reason":"stop","message":{"content":"The refund of order 1234 was approved after checking the policy (see https://example.com/policy).","role":"assistant"}}],"model":"gpt-4o","usage":{"completion_tokens":40,"prompt_tokens":812,"total_tokens":852}}`, 0},
		{"request", `{"max_tokens":512,"messages":[{"content":"You are a careful agent.\nAnswer in JSON.","role":"system"},{"content":"step 0: emoji🚀 policy Zürich p95 😀 x=1;y=2 emoji🚀 naïve काठमाडौँ say \"hi\" ünïcödé timeout काठमाडौँ ","role":"user"}],"stop":null,"temperature":0.61,"top_p":0.00001}`, 0},
		{"nested", `{"count":1,"epsilon":0.00001,"large":1234567890123,"meta":{"lines":"a\nb\r\nc","nested":{"deep":{"deeper":[1,2.5,null]}}},"negative":-7,"ok":true,"results":[{"id":"r1-0","price":141.9,"rank":0},{"id":"r1-1","price":447.07,"rank":1},{"id":"r1-2","price":322.0,"rank":2}],"score":0.61,"text":"naïve\nfaçade naïve tab\there bravo\nalpha ☃ tab\there ledger alpha checkout ledger say \"hi\" ünïcödé Lisbon ✈","tool":"search_flights","unicode":"काठमाडौँ 東京 😀"}`, 0},
		{"secret", `{"headers":{"auth":{"api_key":"k-123"}},"max_tokens":512,"messages":[{"content":"call it with sk-abcdefghijklmnop1234 please","role":"user"}]}`, 2},
	} {
		v := MustParse(tc.text)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(v.Canonical())))
			b.ReportAllocs()
			defer cputime.Report(b, cputime.Used())
			for b.Loop() {
				if _, fs := RedactValue(v); len(fs) != tc.found {
					b.Fatalf("%d findings, want %d", len(fs), tc.found)
				}
			}
		})
	}
}

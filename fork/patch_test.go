package fork

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stepfork/stepfork/trace"
)

// TestPatchPrompt: each edit lands in the field each API reads, keeping the
// structure the request gave it.
func TestPatchPrompt(t *testing.T) {
	t.Parallel()
	set := promptEdit{text: "NEW"}
	app := promptEdit{op: promptAppend, text: " MORE"}
	pre := promptEdit{op: promptPrepend, text: "FIRST "}
	rep := promptEdit{op: promptReplace, passage: "terse", text: "brief"}
	tests := []struct {
		name, provider, in string
		edit               promptEdit
		want               string // "" when the edit has nowhere to act
	}{
		{"chat system", "openai", `{"model":"m","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}]}`, set,
			`{"messages":[{"content":"NEW","role":"system"},{"content":"hi","role":"user"}],"model":"m"}`},
		{"chat developer is replaced, not doubled", "openai", `{"model":"m","messages":[{"role":"developer","content":"Be terse."},{"role":"user","content":"hi"}]}`, set,
			`{"messages":[{"content":"NEW","role":"developer"},{"content":"hi","role":"user"}],"model":"m"}`},
		{"chat developer parts", "openai", `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"Be terse."}]}]}`, app,
			`{"messages":[{"content":[{"text":"Be terse. MORE","type":"text"}],"role":"developer"}],"model":"m"}`},
		{"chat without a prompt", "openai", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, set,
			`{"messages":[{"content":"NEW","role":"system"},{"content":"hi","role":"user"}],"model":"m"}`},
		{"chat passage", "openai", `{"model":"m","messages":[{"role":"system","content":"Be terse, terse."}]}`, rep,
			`{"messages":[{"content":"Be brief, brief.","role":"system"}],"model":"m"}`},
		{"chat passage absent", "openai", `{"model":"m","messages":[{"role":"system","content":"Be kind."}]}`, rep, ""},
		{"responses instructions", "openai", `{"model":"m","instructions":"Be terse.","input":"hi"}`, pre,
			`{"input":"hi","instructions":"FIRST Be terse.","model":"m"}`},
		{"responses no system key", "openai", `{"model":"m","input":"hi"}`, set,
			`{"input":"hi","instructions":"NEW","model":"m"}`},
		{"responses developer item", "openai", `{"model":"m","input":[{"role":"developer","content":[{"type":"input_text","text":"Be terse."}]},{"role":"user","content":"hi"}]}`, app,
			`{"input":[{"content":[{"text":"Be terse. MORE","type":"input_text"}],"role":"developer"},{"content":"hi","role":"user"}],"model":"m"}`},
		{"anthropic string", "anthropic", `{"model":"m","max_tokens":5,"system":"Be terse.","messages":[]}`, app,
			`{"max_tokens":5,"messages":[],"model":"m","system":"Be terse. MORE"}`},
		{"anthropic blocks keep cache_control", "anthropic",
			`{"model":"m","system":[{"type":"text","text":"Be terse."},{"type":"text","text":"Policy.","cache_control":{"type":"ephemeral"}}],"messages":[]}`, set,
			`{"messages":[],"model":"m","system":[{"cache_control":{"type":"ephemeral"},"text":"NEW","type":"text"}]}`},
		{"anthropic blocks append to the last", "anthropic",
			`{"model":"m","system":[{"type":"text","text":"A"},{"type":"text","text":"B","cache_control":{"type":"ephemeral"}}],"messages":[]}`, app,
			`{"messages":[],"model":"m","system":[{"text":"A","type":"text"},{"cache_control":{"type":"ephemeral"},"text":"B MORE","type":"text"}]}`},
		{"anthropic without a prompt", "anthropic", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, set,
			`{"messages":[{"content":"hi","role":"user"}],"model":"m","system":"NEW"}`},
		{"gemini", "google", `{"systemInstruction":{"parts":[{"text":"Be terse."}]},"contents":[]}`, rep,
			`{"contents":[],"systemInstruction":{"parts":[{"text":"Be brief."}]}}`},
		{"gemini without a prompt", "google", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, set,
			`{"contents":[{"parts":[{"text":"hi"}],"role":"user"}],"systemInstruction":{"parts":[{"text":"NEW"}]}}`},
		{"replay.Request", "fake", `{"system":"Be terse.","messages":[{"role":"user","content":"hi"}]}`, set,
			`{"messages":[{"content":"hi","role":"user"}],"system":"NEW"}`},
		{"not an object", "openai", `"text"`, set, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := trace.MustParse(tt.in)
			out, ok := patchPrompt(in, tt.provider, tt.edit)
			if tt.want == "" {
				assert.False(t, ok)
				assert.Equal(t, in, out, "left as it is")
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tt.want, out.Canonical())
		})
	}
}

func TestPatchTemperature(t *testing.T) {
	t.Parallel()
	t7 := trace.MustParse(`0.7`)
	for in, want := range map[string]string{
		`{"model":"m","temperature":0.1}`:                                   `{"model":"m","temperature":0.7}`,
		`{"contents":[],"generationConfig":{"topK":3}}`:                     `{"contents":[],"generationConfig":{"temperature":0.7,"topK":3}}`,
		`{"contents":[]}`:                                                   `{"contents":[],"generationConfig":{"temperature":0.7}}`,
		`{"contents":[],"generation_config":{"seed":1}}`:                    `{"contents":[],"generation_config":{"seed":1,"temperature":0.7}}`,
		`{"config":{"temperature":0.2,"topK":3},"messages":[],"model":"m"}`: `{"config":{"temperature":0.7,"topK":3},"messages":[],"model":"m"}`,
		`{"config":{},"messages":[],"model":"m"}`:                           `{"config":{"temperature":0.7},"messages":[],"model":"m"}`,
	} {
		assert.Equal(t, want, patchTemperature(trace.MustParse(in), t7).Canonical(), in)
	}
}

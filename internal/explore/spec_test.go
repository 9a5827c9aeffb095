package explore

import (
	"go/parser"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/trace"
)

// Each kind of change is one fork constructor, written in Go as its call:
// the change that runs and the code offered for it are the same change.
func TestChangeSpecs(t *testing.T) {
	f := 0.3
	tests := []struct {
		spec changeSpec
		want fork.Change
		code string
	}{
		{changeSpec{Kind: "tool_result", Name: "get_refund_policy", Occurrence: 1, Value: `{"limit": 300.0, "rule": "RP-1"}`},
			fork.ToolResult(fork.OnCall("get_refund_policy", 1), trace.MustParse(`{"limit": 300.0, "rule": "RP-1"}`)),
			"fork.ToolResult(fork.OnCall(\"get_refund_policy\", 1), trace.MustParse(`{\"limit\":300.0,\"rule\":\"RP-1\"}`))"},
		{changeSpec{Kind: "llm_response", Name: "openai/gpt-4o-mini", Value: `"escalate"`, NewInTail: true},
			fork.NewInTail(fork.LLMResponse(fork.OnCall("openai/gpt-4o-mini", 0), "escalate")),
			`fork.NewInTail(fork.LLMResponse(fork.OnCall("openai/gpt-4o-mini", 0), "escalate"))`},
		{changeSpec{Kind: "prompt", Target: "decide", Text: "Line one.\nLine \"two\"."},
			fork.Prompt("decide", "Line one.\nLine \"two\"."), "fork.Prompt(\"decide\", `Line one.\nLine \"two\".`)"},
		{changeSpec{Kind: "prompt", Target: "*", Op: "append", Text: " Be brief."},
			fork.PromptAppend("*", " Be brief."), `fork.PromptAppend("*", " Be brief.")`},
		{changeSpec{Kind: "prompt", Target: "decide", Op: "prepend", Text: "Careful. "},
			fork.PromptPrepend("decide", "Careful. "), `fork.PromptPrepend("decide", "Careful. ")`},
		{changeSpec{Kind: "prompt", Target: "decide", Op: "replace", Passage: "refund", Text: "escalate\r"},
			fork.PromptReplace("decide", "refund", "escalate\r"), `fork.PromptReplace("decide", "refund", "escalate\r")`},
		{changeSpec{Kind: "model", Target: "openai/gpt-4o-mini", Model: "gpt-4.1"},
			fork.Model("openai/gpt-4o-mini", "gpt-4.1"), `fork.Model("openai/gpt-4o-mini", "gpt-4.1")`},
		{changeSpec{Kind: "temperature", Target: "decide", Temperature: &f},
			fork.Temperature("decide", 0.3), `fork.Temperature("decide", 0.3)`},
		{changeSpec{Kind: "state", Set: map[string]string{"b": "1", "a": `{"x": [1, 2.5]}`}, Delete: []string{"c"}},
			fork.State{Set: map[string]any{"a": trace.MustParse(`{"x":[1,2.5]}`), "b": 1}, Delete: []string{"c"}},
			"fork.State{Set: map[string]any{\"a\": trace.MustParse(`{\"x\":[1,2.5]}`), \"b\": 1}, Delete: []string{\"c\"}}"},
		{changeSpec{Kind: "decision", Name: "action", Value: `"escalate"`, Once: true},
			fork.DecisionOnce("action", "escalate"), `fork.DecisionOnce("action", "escalate")`},
		{changeSpec{Kind: "decision", Name: "action", Value: `null`},
			fork.Decision("action", nil), `fork.Decision("action", nil)`},
		{changeSpec{Kind: "param", Name: "limit", Value: `500.0`},
			fork.Param("limit", 500.0), `fork.Param("limit", 500.0)`},
		{changeSpec{Kind: "param", Name: "n", Value: `1e3`},
			fork.Param("n", 1000.0), `fork.Param("n", 1000.0)`},
		{changeSpec{Kind: "human_response", Name: "confirm", Value: `{"approved": true, "by": "dana"}`},
			fork.HumanResponse("confirm", map[string]any{"approved": true, "by": "dana"}),
			"fork.HumanResponse(\"confirm\", trace.MustParse(`{\"approved\":true,\"by\":\"dana\"}`))"},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Kind, func(t *testing.T) {
			b, err := tt.spec.build()
			if err != nil {
				t.Fatal(err)
			}
			if b.code != tt.code {
				t.Errorf("code\n got: %s\nwant: %s", b.code, tt.code)
			}
			if _, err := parser.ParseExpr(b.code); err != nil {
				t.Errorf("the code does not parse: %v", err)
			}
			if got, want := b.change.Wire(), tt.want.Wire(); got != want {
				t.Errorf("the change\n got: %s\nwant: %s", got.Canonical(), want.Canonical())
			}
		})
	}
}

func TestChangeSpecErrors(t *testing.T) {
	for _, tt := range []struct {
		spec changeSpec
		want string
	}{
		{changeSpec{Kind: "tool_result", Value: "1"}, "name the call's tool or model"},
		{changeSpec{Kind: "tool_result", Name: "x", Occurrence: -1, Value: "1"}, "1-based"},
		{changeSpec{Kind: "decision", Name: "x"}, "the value is missing"},
		{changeSpec{Kind: "param", Name: "x", Value: "NaN"}, "not valid JSON"},
		{changeSpec{Kind: "prompt", Op: "rewrite"}, `op "rewrite"`},
		{changeSpec{Kind: "temperature", Target: "x"}, "temperature is missing"},
		{changeSpec{Kind: "state", Set: map[string]string{"k": "{"}}, `value of "k" is not valid JSON`},
		{changeSpec{Kind: "teleport"}, `unknown change kind "teleport"`},
	} {
		if _, err := tt.spec.build(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.spec, err, tt.want)
		}
	}
}

// A value in the code is redacted: a secret in a change runs, but the code
// offered for it names none.
func TestChangeCodeRedacted(t *testing.T) {
	b, err := changeSpec{Kind: "param", Name: "creds", Value: `{"password": "` + canaryPassword + `", "key": "` + canaryToken + `"}`}.build()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.code, canaryPassword) || strings.Contains(b.code, "EXPLORECANARY") || !strings.Contains(b.code, "[REDACTED]") {
		t.Errorf("code %s", b.code)
	}
}

func TestGoString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                "\"plain\"",
		"two\nlines":           "`two\nlines`",
		"a `tick`\n":           "\"a `tick`\\n\"",
		"say \"hi\"":           "`say \"hi\"`",
		"bell\a\n":             "\"bell\\a\\n\"",
		"tab\there \"q\"":      "`tab\there \"q\"`",
		"\xff\"":               `"\xff\""`,
		"Decision:\n```json\n": "\"Decision:\\n```json\\n\"",
	} {
		if got := goString(in); got != want {
			t.Errorf("goString(%q) = %s, want %s", in, got, want)
		}
	}
}

package genkit

import (
	"context"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/stepfork/stepfork/trace"
)

// FuzzPatched: a patched request body of any shape decodes into a request
// or fails with an error, never a panic; the recorded body of a request
// decodes back into that request's messages.
func FuzzPatched(f *testing.F) {
	m := newModel(ai.NewModel("acme/m-1", nil, func(context.Context, *ai.ModelRequest, ai.ModelStreamCallback) (*ai.ModelResponse, error) {
		return nil, nil
	}), &options{})
	req := &ai.ModelRequest{
		Messages: []*ai.Message{ai.NewSystemTextMessage("Be terse."), ai.NewUserTextMessage("hi"),
			{Role: ai.RoleModel, Content: []*ai.Part{ai.NewToolRequestPart(&ai.ToolRequest{Name: "t", Ref: "r1", Input: map[string]any{"a": 1}})}},
			{Role: ai.RoleTool, Content: []*ai.Part{ai.NewToolResponsePart(&ai.ToolResponse{Name: "t", Ref: "r1", Output: "x"})}}},
		Config: &ai.GenerationCommonConfig{Temperature: 0.2},
		Tools:  []*ai.ToolDefinition{{Name: "t", InputSchema: map[string]any{"type": "object"}}},
	}
	body, err := m.body(req, true)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body.Bytes())
	for _, s := range []string{
		`{"model":"m-1","messages":[{"role":"system","content":"x"},{"role":"user","content":[{"text":"hi"}]}],"config":{}}`,
		`{"model":"m-2","system":"x","messages":[],"config":{"temperature":0.7}}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"config":[]}`,
		`{"messages":[{"content":7}],"config":"x","tools":{}}`,
		`[]`, `null`, `{"messages":null,"config":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := trace.ParseValue(b)
		if err != nil {
			return
		}
		r, target, id, err := m.patched(v, req)
		if err != nil {
			return
		}
		if r == nil || target == nil || id == "" {
			t.Fatalf("patched(%s) = %v, %v, %q and no error", b, r, target, id)
		}
		if v == body && len(r.Messages) != len(req.Messages) {
			t.Fatalf("the recorded body decodes into %d messages, want %d", len(r.Messages), len(req.Messages))
		}
	})
}

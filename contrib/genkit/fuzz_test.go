package genkit

import (
	"context"
	"encoding/json"
	"fmt"
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

// FuzzCustom: whatever custom data a plugin's response holds, the
// recording keeps only its scalar members, as they were, and the ids read
// from them are some of their string values, never a panic.
func FuzzCustom(f *testing.F) {
	for _, s := range []string{
		`{"id":"chatcmpl-AbC123xyz","model":"gpt-4o","systemFingerprint":"fp_0123456789"}`,
		`{"candidates":[{"content":{"parts":[{"text":"hi"}]},"avgLogprobs":-0.25}],"usageMetadata":{"promptTokenCount":3},"responseId":"r-1234567890"}`,
		`{"x-request-id":"req_abcdef012345","request_id":7,"Message_ID":"msg_01ABCDEFGH","fingerprint":null,"ok":true,"n":1.5}`,
		`[]`, `"s"`, `null`, `{}`, `{"":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c any
		if json.Unmarshal(b, &c) != nil {
			return
		}
		kept := scalarCustom(c)
		whole, _ := c.(map[string]any)
		for k, v := range kept {
			switch v.(type) {
			case string, float64, bool:
			default:
				t.Fatalf("custom %s: member %q kept as %T, want a scalar", b, k, v)
			}
			if fmt.Sprint(whole[k]) != fmt.Sprint(v) {
				t.Fatalf("custom %s: member %q kept as %v, was %v", b, k, v, whole[k])
			}
		}
		for _, id := range customIDs(kept) {
			found := false
			for _, v := range kept {
				found = found || v == id.id
			}
			if !found || id.id == "" || (id.kind != "response" && id.kind != "fingerprint") {
				t.Fatalf("custom %s: id %+v is not one of its string members", b, id)
			}
		}
	})
}

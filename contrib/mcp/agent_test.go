package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sfmcp "github.com/stepfork/stepfork/contrib/mcp"
	"github.com/stepfork/stepfork/replay"
)

// fakeModel is a local server speaking OpenAI's chat completions wire format
// the way the real one does: a fresh response id, created time and
// tool-call ids on every call, usage on every answer. Its answers depend
// only on the conversation, so a replayed or re-run conversation gets the
// same answer with new ids.
//
// The plan it follows: search the tracker for the report; then, unless the
// system prompt says "Close duplicates", label the issue and assign it (two
// tool calls in one answer), else close it; then answer in text.
type fakeModel struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests int
	systems  []string // the system message of every request, in order
	models   []string
}

func newFakeModel(t *testing.T) *fakeModel {
	t.Helper()
	f := &fakeModel{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeModel) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func (f *fakeModel) LastSystem() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.systems) == 0 {
		return ""
	}
	return f.systems[len(f.systems)-1]
}

type chatMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Tools    []any         `json:"tools,omitempty"`
}

type chatResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int         `json:"index"`
		Message      chatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	system := ""
	if len(req.Messages) > 0 && req.Messages[0].Role == "system" {
		system = req.Messages[0].Content
	}
	f.mu.Lock()
	f.requests++
	f.systems = append(f.systems, system)
	f.models = append(f.models, req.Model)
	f.mu.Unlock()

	var toolMsgs []chatMessage
	user := ""
	for _, m := range req.Messages {
		switch m.Role {
		case "tool":
			toolMsgs = append(toolMsgs, m)
		case "user":
			user = m.Content
		}
	}
	var msg chatMessage
	msg.Role = "assistant"
	finish := "tool_calls"
	call := func(name string, args any) {
		b, _ := json.Marshal(args)
		tc := toolCall{ID: fmt.Sprintf("call_%016x", rand.Uint64()), Type: "function"}
		tc.Function.Name, tc.Function.Arguments = name, string(b)
		msg.ToolCalls = append(msg.ToolCalls, tc)
	}
	switch {
	case len(toolMsgs) == 0:
		call("search_issues", map[string]any{"query": user})
	case len(toolMsgs) == 1 && strings.Contains(system, "Close duplicates"):
		call("close_issue", map[string]any{"issue": 42})
	case len(toolMsgs) == 1:
		call("add_label", map[string]any{"issue": 42, "label": "bug"})
		call("assign", map[string]any{"issue": 42})
	default:
		finish = "stop"
		msg.Content = "Issue 42 triaged."
		for _, m := range toolMsgs {
			if strings.Contains(m.Content, "disabled") {
				msg.Content += " Assignment is disabled."
			}
		}
	}
	var resp chatResponse
	resp.ID = fmt.Sprintf("chatcmpl-%016x", rand.Uint64())
	resp.Object, resp.Created, resp.Model = "chat.completion", time.Now().Unix(), req.Model
	resp.Choices = append(resp.Choices, struct {
		Index        int         `json:"index"`
		Message      chatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	}{Message: msg, FinishReason: finish})
	resp.Usage.PromptTokens = 20 * len(req.Messages)
	resp.Usage.CompletionTokens = 9
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_%016x", rand.Uint64()))
	json.NewEncoder(w).Encode(resp)
}

// prices are the fake model's, per million tokens.
var prices = replay.Prices{"gpt-4o-mini": {Input: 0.15, Output: 0.60}}

const systemPrompt = "You triage bug reports with the tracker's tools."

// triageAgent is an agent as a team writes it: it lists the server's tools,
// reads the tracker's policy resource, and loops model call → tool calls
// until the model answers in text. The model is reached over HTTP through
// replay.Transport, the tracker through contrib/mcp.
func triageAgent(model *fakeModel, tracker func() *sfmcp.Client) replay.Agent {
	return replay.Typed(func(ctx context.Context, report string) (string, error) {
		c := tracker()
		defer c.Close()
		httpc := &http.Client{Transport: replay.Transport(nil, prices)}

		list, err := c.ListTools(ctx, nil)
		if err != nil {
			return "", err
		}
		var tools []any
		for _, tl := range list.Tools {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
				"name": tl.Name, "description": tl.Description, "parameters": tl.InputSchema}})
		}
		policy, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: "tracker://policy"})
		if err != nil {
			return "", err
		}
		msgs := []chatMessage{
			{Role: "system", Content: systemPrompt + " Policy: " + policy.Contents[0].Text},
			{Role: "user", Content: report},
		}
		for range 5 {
			body, _ := json.Marshal(chatRequest{Model: "gpt-4o-mini", Messages: msgs, Tools: tools})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, model.srv.URL+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-test-not-a-real-key")
			resp, err := httpc.Do(req)
			if err != nil {
				return "", err
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return "", err
			}
			var out chatResponse
			if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
				return "", fmt.Errorf("model answered %d %s", resp.StatusCode, raw)
			}
			m := out.Choices[0].Message
			msgs = append(msgs, m)
			if len(m.ToolCalls) == 0 {
				return m.Content, nil
			}
			for _, tc := range m.ToolCalls {
				res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
				if err != nil {
					return "", err
				}
				text := ""
				for _, ct := range res.Content {
					if tx, ok := ct.(*mcp.TextContent); ok {
						text += tx.Text
					}
				}
				if res.IsError {
					text = "error: " + text
				}
				msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: tc.ID, Content: text})
			}
		}
		return "", fmt.Errorf("no answer after 5 model calls")
	})
}

package langchaingo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sflcg "github.com/stepfork/stepfork/contrib/langchaingo"
	"github.com/stepfork/stepfork/replay"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms/openai"
	"github.com/tmc/langchaingo/tools"
)

// fakeOpenAI speaks OpenAI's chat completions with tool calls as the real
// API does: fresh ids and tool-call ids, a created time, usage, a request id.
// Its plan: ask the weather tool about the city in the question; then, if
// the system prompt says "umbrella", buy one; then answer.
type fakeOpenAI struct {
	srv      *httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	systems  []string
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOpenAI) lastSystem() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.systems) == 0 {
		return ""
	}
	return f.systems[len(f.systems)-1]
}

type message struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

func text(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, p := range v {
			if m, ok := p.(map[string]any); ok {
				s, _ := m["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	var req struct {
		Model    string    `json:"model"`
		Messages []message `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var system, user string
	var toolResults []string
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			system = text(m.Content)
		case "user":
			user = text(m.Content)
		case "tool":
			toolResults = append(toolResults, text(m.Content))
		}
	}
	f.mu.Lock()
	f.systems = append(f.systems, system)
	f.mu.Unlock()

	msg := map[string]any{"role": "assistant", "content": nil}
	finish := "tool_calls"
	call := func(name, arg string) {
		args, _ := json.Marshal(map[string]string{"__arg1": arg})
		msg["tool_calls"] = []any{map[string]any{"id": fmt.Sprintf("call_%016x", rand.Uint64()), "type": "function",
			"function": map[string]any{"name": name, "arguments": string(args)}}}
	}
	city := "Pokhara"
	if i := strings.LastIndex(user, " in "); i >= 0 {
		city = strings.TrimRight(user[i+4:], "?. ")
	}
	switch {
	case len(toolResults) == 0:
		call("weather", city)
	case len(toolResults) == 1 && strings.Contains(system, "umbrella"):
		call("buy_umbrella", city)
	default:
		finish = "stop"
		msg["content"] = "Final: " + toolResults[len(toolResults)-1]
	}
	prompt := 25 * len(req.Messages)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_%016x", rand.Uint64()))
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%016x", rand.Uint64()), "object": "chat.completion", "created": time.Now().Unix(),
		"model": req.Model, "system_fingerprint": fmt.Sprintf("fp_%08x", rand.Uint32()),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7},
	})
}

// toolFunc is a langchaingo tool made of a function, counting its calls.
type toolFunc struct {
	name, desc string
	fn         func(string) string
	calls      *atomic.Int32
}

func (t toolFunc) Name() string        { return t.name }
func (t toolFunc) Description() string { return t.desc }
func (t toolFunc) Call(_ context.Context, in string) (string, error) {
	t.calls.Add(1)
	return t.fn(in), nil
}

// prices are the fake model's, per million tokens.
var prices = replay.Prices{"gpt-4o-mini": {Input: 0.15, Output: 0.60}}

type world struct {
	model           *fakeOpenAI
	weather, bought atomic.Int32
}

// agent is a langchaingo OpenAI-functions agent in an executor, its model
// reached through replay.Transport and its tools wrapped in one line.
func (w *world) agent() replay.Agent {
	return replay.Typed(func(ctx context.Context, question string) (string, error) {
		llm, err := openai.New(openai.WithBaseURL(w.model.srv.URL+"/v1"), openai.WithToken("sk-test-not-a-real-key"),
			openai.WithModel("gpt-4o-mini"), openai.WithHTTPClient(&http.Client{Transport: replay.Transport(nil, prices)}))
		if err != nil {
			return "", err
		}
		ts := sflcg.Tools(
			toolFunc{name: "weather", desc: "Weather in a city.", calls: &w.weather,
				fn: func(city string) string { return "rain in " + city }},
			toolFunc{name: "buy_umbrella", desc: "Buy an umbrella.", calls: &w.bought,
				fn: func(city string) string { return "umbrella bought in " + city }},
		)
		var _ []tools.Tool = ts
		ex := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(llm, ts,
			agents.NewOpenAIOption().WithSystemMessage("You answer travel questions.")), agents.WithMaxIterations(5))
		return chains.Run(ctx, ex, question)
	})
}

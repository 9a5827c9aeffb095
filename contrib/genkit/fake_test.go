package genkit_test

import (
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
)

// fakeOpenAI is an OpenAI-compatible chat completions server that behaves
// like a hosted one: a fresh completion id, tool-call ids, request id,
// fingerprint and creation time on every answer, a random delay, usage on
// every non-streamed answer (with as many cached prompt tokens as cached
// says), and server-sent events when asked to stream.
// Its answers depend only on the conversation. Its plan: search flights and
// the weather at once (two tool calls in one answer); then book SF100 — or
// SF050 when the system prompt says "cheapest", or nothing when it says
// "never book"; then answer "<final> <last tool result>".
type fakeOpenAI struct {
	srv    *httptest.Server
	final  string
	cached atomic.Int64 // prompt tokens the server says it had cached

	requests atomic.Int64
	mu       sync.Mutex
	bodies   []map[string]any
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{final: "Done:"}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// url is the base URL the openai plugin is given.
func (f *fakeOpenAI) url() string { return f.srv.URL + "/v1/" }

// last is the n-th last request body the server received.
func (f *fakeOpenAI) last(n int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) < n {
		return nil
	}
	return f.bodies[len(f.bodies)-n]
}

func (f *fakeOpenAI) all() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

func randHex(n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%016x", rand.Uint64())
	}
	return b.String()[:n]
}

// text is the text of an OpenAI message content: a string or text parts.
func text(c any) string {
	switch c := c.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if m, ok := p.(map[string]any); ok {
				s, _ := m["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}

type fakeCall struct {
	name string
	args map[string]string
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/embeddings" {
		f.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req_"+randHex(20))
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": "text-embedding-3-small",
			"data":  []any{map[string]any{"object": "embedding", "index": 0, "embedding": []float64{0.25, -0.5, 0.125}}},
			"usage": map[string]any{"prompt_tokens": 3, "total_tokens": 3}})
		return
	}
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	f.requests.Add(1)
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)

	msgs, _ := body["messages"].([]any)
	system := ""
	var results []string
	for _, m := range msgs {
		m, _ := m.(map[string]any)
		switch m["role"] {
		case "system":
			if system == "" {
				system = text(m["content"])
			}
		case "tool":
			results = append(results, text(m["content"]))
		}
	}
	var calls []fakeCall
	content, finish := "", "tool_calls"
	switch {
	case len(results) == 0:
		calls = []fakeCall{{"search_flights", map[string]string{"from": "KTM", "to": "DEL"}}, {"get_weather", map[string]string{"city": "DEL"}}}
	case len(results) == 2 && strings.Contains(system, "never book"):
		content, finish = "Not booking.", "stop"
	case len(results) == 2 && strings.Contains(system, "cheapest"):
		calls = []fakeCall{{"book_flight", map[string]string{"flight": "SF050"}}}
	case len(results) == 2:
		calls = []fakeCall{{"book_flight", map[string]string{"flight": "SF100"}}}
	default:
		content, finish = f.final+" "+strings.Trim(results[len(results)-1], `"`), "stop"
	}
	model, _ := body["model"].(string)
	id, created, fp := "chatcmpl-"+randHex(24), time.Now().Unix(), "fp_"+randHex(10)
	prompt := 20 * len(msgs)
	w.Header().Set("x-request-id", "req_"+randHex(20))
	if stream, _ := body["stream"].(bool); stream {
		f.stream(w, id, model, fp, created, content, finish, calls)
		return
	}
	var toolCalls []map[string]any
	for _, c := range calls {
		args, _ := json.Marshal(c.args)
		toolCalls = append(toolCalls, map[string]any{"id": "call_" + randHex(24), "type": "function",
			"function": map[string]any{"name": c.name, "arguments": string(args)}})
	}
	msg := map[string]any{"role": "assistant", "content": content}
	if len(toolCalls) > 0 {
		msg["tool_calls"] = toolCalls
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": model, "system_fingerprint": fp,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": 8, "total_tokens": prompt + 8,
			"prompt_tokens_details": map[string]any{"cached_tokens": f.cached.Load()}},
	})
}

// stream sends the answer as server-sent events: the text four characters
// at a time, each tool call as a first delta with its id and name and its
// arguments in two more, then the finish reason.
func (f *fakeOpenAI) stream(w http.ResponseWriter, id, model, fp string, created int64, content, finish string, calls []fakeCall) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"system_fingerprint": fp, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	send(map[string]any{"role": "assistant", "content": ""}, nil)
	for s := content; s != ""; {
		n := min(4, len(s))
		send(map[string]any{"content": s[:n]}, nil)
		s = s[n:]
	}
	for i, c := range calls {
		args, _ := json.Marshal(c.args)
		half := len(args) / 2
		send(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": "call_" + randHex(24), "type": "function",
			"function": map[string]any{"name": c.name, "arguments": ""}}}}, nil)
		for _, part := range []string{string(args[:half]), string(args[half:])} {
			send(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil)
		}
	}
	send(map[string]any{}, finish)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

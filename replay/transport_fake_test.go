package replay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// fakeLLM is an httptest server speaking the wire formats of OpenAI chat
// completions, OpenAI responses and Anthropic messages, JSON and SSE. What it
// does is chosen by the request body's "model":
//
//	fail-429    429 with a JSON error, retry-after and secret-looking headers
//	fail-500    500 with a text/plain body
//	text-body   200 with a text/plain body
//	pretty      200 with indented, unsorted JSON (non-streamed only)
//	slow        waits until the client gives up
//	break       streams 2 frames, then closes the connection (no final chunk)
//	reset       streams 2 frames, waits for release, then resets the connection
//	hold        streams 2 frames, waits for release or the client to leave, then the rest
//	reset-now   resets the connection without answering
//	odd         an event stream with comments, CRLF lines, multi-line data and a cut-off last frame
//	anything    a normal answer; SSE when the body has "stream": true
//
// Every JSON text it sends is canonical, so a replayed stream is byte for
// byte the recorded one. It counts the requests it gets and keeps the last
// body and headers.
type fakeLLM struct {
	srv      *httptest.Server
	requests atomic.Int64
	released chan struct{}
	once     sync.Once
	stop     chan struct{}

	mu      sync.Mutex
	lastReq []byte
	headers http.Header
}

func newFakeLLM(t *testing.T) *fakeLLM {
	t.Helper()
	f := &fakeLLM{released: make(chan struct{}), stop: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		close(f.stop)
		f.release()
		f.srv.Close()
	})
	return f
}

// release lets a "reset" stream go on to its reset.
func (f *fakeLLM) release() { f.once.Do(func() { close(f.released) }) }

func (f *fakeLLM) lastBody() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastReq
}

func canon(x any) string { return trace.MustValueOf(x).Canonical() }

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.lastReq, f.headers = body, r.Header.Clone()
	f.mu.Unlock()

	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, canon(map[string]any{"object": "list", "data": []any{map[string]any{"id": "gpt-4o", "object": "model"}}}))
		return
	case r.Method != http.MethodPost || !isModelPath(r.URL.Path):
		w.Header().Set("Content-Type", "text/plain")
		_, _ = fmt.Fprintf(w, "plain %s %s", r.Method, r.URL.Path)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	w.Header().Set("X-Request-Id", "req_"+req.Model)
	w.Header().Set("Openai-Organization", "org-SECRETORG")
	w.Header().Set("Set-Cookie", "session=COOKIEVALUE")
	switch req.Model {
	case "fail-429":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "0")
		w.Header().Set("X-Should-Retry", "false")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, canon(map[string]any{"error": map[string]any{"type": "rate_limit_error", "message": "slow down"}}))
		return
	case "fail-500":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "upstream exploded\n")
		return
	case "text-body":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "not json at all")
		return
	case "pretty":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{\n  \"z\": 1,\n  \"a\": [true, null, \"x\"]\n}\n")
		return
	case "reset-now":
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
		return
	case "odd":
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = io.WriteString(w, oddStream)
		return
	case "slow":
		select {
		case <-r.Context().Done():
		case <-f.stop:
		case <-time.After(10 * time.Second):
		}
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, jsonAnswer(r.URL.Path, req.Model))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	frames := sseFrames(r.URL.Path, req.Model)
	fl := w.(http.Flusher)
	for i, fr := range frames {
		if req.Model == "hold" && i == 2 {
			select {
			case <-f.released:
			case <-r.Context().Done():
				return
			case <-f.stop:
				return
			}
		}
		if (req.Model == "break" || req.Model == "reset") && i == 2 {
			if req.Model == "reset" {
				select {
				case <-f.released:
				case <-f.stop:
				}
			}
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			if tc, ok := conn.(*net.TCPConn); ok && req.Model == "reset" {
				_ = tc.SetLinger(0) // close with RST
			}
			_ = conn.Close()
			return
		}
		_, _ = io.WriteString(w, fr)
		fl.Flush()
	}
}

// oddStream exercises the corners of the event stream format.
const oddStream = ": keep-alive\r\n\r\nevent: note\r\nid: 7\r\ndata: line one\r\ndata: line two\r\n\r\n" +
	"data:{\"a\": 1}\n\nretry: 3000\n\ndata: {\"cut\""

func isModelPath(p string) bool {
	return strings.HasSuffix(p, "/chat/completions") || strings.HasSuffix(p, "/v1/responses") || strings.HasSuffix(p, "/v1/messages")
}

// jsonAnswer is the non-streamed answer of each API.
func jsonAnswer(path, model string) string {
	switch {
	case strings.HasSuffix(path, "/v1/responses"):
		return canon(map[string]any{"id": "resp_1", "object": "response", "status": "completed", "model": model,
			"output": []any{map[string]any{"type": "message", "id": "msg_1", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": "Hello from responses"}}}},
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}})
	case strings.HasSuffix(path, "/v1/messages"):
		return canon(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": model,
			"content": []any{map[string]any{"type": "text", "text": "Hello from Claude"}}, "stop_reason": "end_turn",
			"usage": map[string]any{"input_tokens": 11, "output_tokens": 4}})
	}
	return canon(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "Hello from chat"}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}})
}

// sseFrames is the streamed answer of each API, frame by frame.
func sseFrames(path, model string) []string {
	data := func(x any) string { return "data: " + canon(x) + "\n\n" }
	event := func(name string, x any) string { return "event: " + name + "\n" + data(x) }
	switch {
	case strings.HasSuffix(path, "/v1/responses"):
		resp := func(status string, usage any) map[string]any {
			return map[string]any{"id": "resp_1", "object": "response", "status": status, "model": model, "usage": usage}
		}
		return []string{
			event("response.created", map[string]any{"type": "response.created", "response": resp("in_progress", nil)}),
			event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hel"}),
			event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "delta": "lo"}),
			event("response.completed", map[string]any{"type": "response.completed",
				"response": resp("completed", map[string]any{"input_tokens": 10, "output_tokens": 2, "total_tokens": 12})}),
		}
	case strings.HasSuffix(path, "/v1/messages"):
		delta := func(s string) map[string]any {
			return map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": s}}
		}
		return []string{
			event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message",
				"role": "assistant", "model": model, "content": []any{}, "usage": map[string]any{"input_tokens": 11, "output_tokens": 1}}}),
			event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
			event("ping", map[string]any{"type": "ping"}),
			event("content_block_delta", delta("Hel")),
			event("content_block_delta", delta("lo")),
			event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
			event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"},
				"usage": map[string]any{"output_tokens": 2}}),
			event("message_stop", map[string]any{"type": "message_stop"}),
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	return []string{
		data(chunk(map[string]any{"role": "assistant", "content": ""}, nil)),
		data(chunk(map[string]any{"content": "Hel"}, nil)),
		data(chunk(map[string]any{"content": "lo"}, nil)),
		data(chunk(map[string]any{}, "stop")),
		data(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}),
		"data: [DONE]\n\n",
	}
}

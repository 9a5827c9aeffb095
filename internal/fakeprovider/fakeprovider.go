// Package fakeprovider is an HTTP server that speaks the wire formats of
// OpenAI chat completions, OpenAI Responses, Anthropic messages and Gemini
// generateContent, JSON and server-sent events, the way the real providers
// do: every response has fresh ids (chatcmpl-…, resp_…, msg_…, call_…,
// toolu_…, fc_…), a fresh created time and system fingerprint, and fresh
// request-id and rate-limit headers; streams repeat them in every frame.
// Its usage reports cached prompt tokens, as many as SetCachedTokens says
// (prompt caching).
//
// Its model is scripted: a request that carries no tool result is answered
// with a call of the tool "lookup" with arguments {"q": "weather"}; one that
// carries a tool result is answered with the text of Server.Answer (split
// over several frames when streamed). Tests of package replay, fork and the
// examples module use it; it is not part of the public API.
package fakeprovider

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a fake model provider.
type Server struct {
	*httptest.Server

	requests atomic.Int64
	answer   atomic.Value // string
	limit    atomic.Int64
	cached   atomic.Int64

	mu     sync.Mutex
	bodies []Request
}

// Request is a request the server received.
type Request struct {
	Path string
	Body []byte
}

// New starts a server; Close stops it.
func New() *Server {
	s := &Server{}
	s.answer.Store("It is sunny.")
	s.limit.Store(10000)
	s.cached.Store(CachedTokens)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// SetAnswer sets the text the model answers once it has a tool result.
func (s *Server) SetAnswer(text string) { s.answer.Store(text) }

// SetCachedTokens sets how many of the prompt's tokens the model reports as
// read from its prompt cache (CachedTokens until it is set): a provider's
// prompt caching, which changes the usage of an answer and nothing else.
func (s *Server) SetCachedTokens(n int64) { s.cached.Store(n) }

// Requests is the number of requests served.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Received is a copy of the requests served, in order.
func (s *Server) Received() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.bodies...)
}

// Last is the last request served (zero when none).
func (s *Server) Last() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		return Request{}
	}
	return s.bodies[len(s.bodies)-1]
}

// Fixed usage the model reports; tests price it.
const (
	PromptTokens     = 100
	CachedTokens     = 40
	CacheWriteTokens = 10 // Anthropic only
	CompletionTokens = 20
	ReasoningTokens  = 5
)

func fresh(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func canon(x any) string {
	b, err := json.Marshal(x)
	if err != nil {
		panic(err)
	}
	return string(b)
}

type obj = map[string]any

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, Request{Path: r.URL.RequestURI(), Body: body})
	s.mu.Unlock()
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	h := w.Header()
	h.Set("X-Request-Id", fresh("req_"))
	h.Set("Request-Id", fresh("req_"))
	left := strconv.FormatInt(s.limit.Add(-1), 10)
	h.Set("X-Ratelimit-Remaining-Requests", left)
	h.Set("X-Ratelimit-Reset-Requests", strconv.FormatInt(time.Now().UnixNano()%60000, 10)+"ms")
	h.Set("Anthropic-Ratelimit-Requests-Remaining", left)
	h.Set("Openai-Processing-Ms", strconv.FormatInt(time.Now().UnixNano()%997, 10))
	text := s.answer.Load().(string)
	cached := s.cached.Load()
	var frames []string
	var whole string
	path := r.URL.Path
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		done := strings.Contains(string(body), `"tool_call_id"`)
		if req.Stream {
			frames = chatFrames(req.Model, done, text, cached)
		} else {
			whole = chatJSON(req.Model, done, text, cached)
		}
	case strings.HasSuffix(path, "/responses"):
		done := strings.Contains(string(body), `"function_call_output"`)
		if req.Stream {
			frames = responsesFrames(req.Model, done, text, cached)
		} else {
			whole = canon(responsesObject(req.Model, done, text, cached))
		}
	case strings.HasSuffix(path, "/messages"):
		done := strings.Contains(string(body), `"tool_result"`)
		if req.Stream {
			frames = anthropicFrames(req.Model, done, text, cached)
		} else {
			whole = anthropicJSON(req.Model, done, text, cached)
		}
	case strings.Contains(path, ":generateContent") || strings.Contains(path, ":streamGenerateContent"):
		model := path[strings.LastIndex(path, "/models/")+len("/models/"):]
		model = model[:strings.IndexByte(model, ':')]
		done := strings.Contains(string(body), `"functionResponse"`)
		if strings.Contains(path, ":streamGenerateContent") {
			frames = geminiFrames(model, done, text, cached)
		} else {
			whole = canon(geminiChunk(model, fresh(""), done, text, true, cached))
		}
	default:
		http.Error(w, "no such endpoint", http.StatusNotFound)
		return
	}
	if frames == nil {
		h.Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, whole)
		return
	}
	h.Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	for _, f := range frames {
		_, _ = io.WriteString(w, f)
		if fl != nil {
			fl.Flush()
		}
	}
}

// pieces splits text in three.
func pieces(text string) []string {
	n := len(text) / 3
	if n == 0 {
		return []string{text}
	}
	return []string{text[:n], text[n : 2*n], text[2*n:]}
}

const args = `{"q": "weather"}`

func chatJSON(model string, done bool, text string, cached int64) string {
	msg := obj{"role": "assistant", "content": text, "refusal": nil}
	finish := "stop"
	if !done {
		msg["content"] = nil
		msg["tool_calls"] = []any{obj{"id": fresh("call_"), "type": "function", "function": obj{"name": "lookup", "arguments": args}}}
		finish = "tool_calls"
	}
	return canon(obj{"id": fresh("chatcmpl-"), "object": "chat.completion", "created": time.Now().UnixNano(),
		"model": model, "system_fingerprint": fresh("fp_"), "service_tier": "default",
		"choices": []any{obj{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":   chatUsage(cached)})
}

func chatUsage(cached int64) obj {
	return obj{"prompt_tokens": PromptTokens, "completion_tokens": CompletionTokens, "total_tokens": PromptTokens + CompletionTokens,
		"prompt_tokens_details":     obj{"cached_tokens": cached, "audio_tokens": 0},
		"completion_tokens_details": obj{"reasoning_tokens": ReasoningTokens, "audio_tokens": 0}}
}

func data(x any) string { return "data: " + canon(x) + "\n\n" }

func chatFrames(model string, done bool, text string, cached int64) []string {
	id, fp, created := fresh("chatcmpl-"), fresh("fp_"), time.Now().UnixNano()
	chunk := func(delta obj, finish any) string {
		return data(obj{"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "system_fingerprint": fp,
			"choices": []any{obj{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	out := []string{chunk(obj{"role": "assistant", "content": ""}, nil)}
	if done {
		for _, p := range pieces(text) {
			out = append(out, chunk(obj{"content": p}, nil))
		}
		out = append(out, chunk(obj{}, "stop"))
	} else {
		out = append(out, chunk(obj{"tool_calls": []any{obj{"index": 0, "id": fresh("call_"), "type": "function",
			"function": obj{"name": "lookup", "arguments": ""}}}}, nil))
		for _, p := range pieces(args) {
			out = append(out, chunk(obj{"tool_calls": []any{obj{"index": 0, "function": obj{"arguments": p}}}}, nil))
		}
		out = append(out, chunk(obj{}, "tool_calls"))
	}
	out = append(out, data(obj{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
		"system_fingerprint": fp, "choices": []any{}, "usage": chatUsage(cached)}))
	return append(out, "data: [DONE]\n\n")
}

func responsesItem(done bool, text string) obj {
	if done {
		return obj{"type": "message", "id": fresh("msg_"), "status": "completed", "role": "assistant",
			"content": []any{obj{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	return obj{"type": "function_call", "id": fresh("fc_"), "call_id": fresh("call_"), "name": "lookup", "arguments": args, "status": "completed"}
}

func responsesObject(model string, done bool, text string, cached int64) obj {
	return obj{"id": fresh("resp_"), "object": "response", "created_at": time.Now().Unix(), "status": "completed",
		"model": model, "output": []any{responsesItem(done, text)}, "parallel_tool_calls": true,
		"usage": obj{"input_tokens": PromptTokens, "output_tokens": CompletionTokens, "total_tokens": PromptTokens + CompletionTokens,
			"input_tokens_details":  obj{"cached_tokens": cached},
			"output_tokens_details": obj{"reasoning_tokens": ReasoningTokens}}}
}

func responsesFrames(model string, done bool, text string, cached int64) []string {
	final := responsesObject(model, done, text, cached)
	item := final["output"].([]any)[0].(obj)
	seq := 0
	ev := func(typ string, x obj) string {
		x["type"], x["sequence_number"] = typ, seq
		seq++
		return "event: " + typ + "\n" + data(x)
	}
	start := obj{"id": final["id"], "object": "response", "created_at": final["created_at"], "status": "in_progress", "model": model, "output": []any{}}
	out := []string{ev("response.created", obj{"response": start}), ev("response.in_progress", obj{"response": start})}
	out = append(out, ev("response.output_item.added", obj{"output_index": 0, "item": item}))
	if done {
		for _, p := range pieces(text) {
			out = append(out, ev("response.output_text.delta", obj{"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": p}))
		}
	} else {
		for _, p := range pieces(args) {
			out = append(out, ev("response.function_call_arguments.delta", obj{"item_id": item["id"], "output_index": 0, "delta": p}))
		}
	}
	out = append(out, ev("response.output_item.done", obj{"output_index": 0, "item": item}))
	return append(out, ev("response.completed", obj{"response": final}))
}

func anthropicUsage(output int, cached int64) obj {
	return obj{"input_tokens": PromptTokens - cached - CacheWriteTokens, "cache_read_input_tokens": cached,
		"cache_creation_input_tokens": CacheWriteTokens, "output_tokens": output, "service_tier": "standard"}
}

func anthropicJSON(model string, done bool, text string, cached int64) string {
	content := []any{obj{"type": "text", "text": text}}
	stop := "end_turn"
	if !done {
		content = []any{obj{"type": "tool_use", "id": fresh("toolu_"), "name": "lookup", "input": obj{"q": "weather"}}}
		stop = "tool_use"
	}
	return canon(obj{"id": fresh("msg_"), "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(CompletionTokens, cached)})
}

func anthropicFrames(model string, done bool, text string, cached int64) []string {
	ev := func(typ string, x obj) string {
		x["type"] = typ
		return "event: " + typ + "\n" + data(x)
	}
	out := []string{ev("message_start", obj{"message": obj{"id": fresh("msg_"), "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(1, cached)}})}
	stop := "end_turn"
	if done {
		out = append(out, ev("content_block_start", obj{"index": 0, "content_block": obj{"type": "text", "text": ""}}), ev("ping", obj{}))
		for _, p := range pieces(text) {
			out = append(out, ev("content_block_delta", obj{"index": 0, "delta": obj{"type": "text_delta", "text": p}}))
		}
	} else {
		stop = "tool_use"
		out = append(out, ev("content_block_start", obj{"index": 0, "content_block": obj{"type": "tool_use", "id": fresh("toolu_"), "name": "lookup", "input": obj{}}}))
		for _, p := range pieces(args) {
			out = append(out, ev("content_block_delta", obj{"index": 0, "delta": obj{"type": "input_json_delta", "partial_json": p}}))
		}
	}
	out = append(out, ev("content_block_stop", obj{"index": 0}),
		ev("message_delta", obj{"delta": obj{"stop_reason": stop, "stop_sequence": nil}, "usage": obj{"output_tokens": CompletionTokens}}),
		ev("message_stop", obj{}))
	return out
}

func geminiChunk(model, id string, done bool, text string, last bool, cached int64) obj {
	part := obj{"text": text}
	if !done {
		part = obj{"functionCall": obj{"name": "lookup", "args": obj{"q": "weather"}}}
	}
	cand := obj{"content": obj{"role": "model", "parts": []any{part}}, "index": 0}
	out := obj{"candidates": []any{cand}, "modelVersion": model, "responseId": id,
		"createTime": time.Now().UTC().Format(time.RFC3339Nano)}
	if last {
		cand["finishReason"] = "STOP"
		out["usageMetadata"] = obj{"promptTokenCount": PromptTokens, "cachedContentTokenCount": cached,
			"candidatesTokenCount": CompletionTokens - ReasoningTokens, "thoughtsTokenCount": ReasoningTokens,
			"totalTokenCount": PromptTokens + CompletionTokens}
	}
	return out
}

func geminiFrames(model string, done bool, text string, cached int64) []string {
	id := fresh("")
	if !done {
		return []string{"data: " + canon(geminiChunk(model, id, false, "", true, cached)) + "\r\n\r\n"}
	}
	ps := pieces(text)
	var out []string
	for i, p := range ps {
		out = append(out, "data: "+canon(geminiChunk(model, id, true, p, i == len(ps)-1, cached))+"\r\n\r\n")
	}
	return out
}

package refund_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeOpenAI is a local OpenAI-compatible chat-completions server: the wire
// format of POST /v1/chat/completions, JSON and streamed (server-sent
// events, with the usage chunk of stream_options.include_usage), answering
// deterministically from the system prompt and the messages, as a model at
// temperature 0 would if it were a function.
//
//   - Triage prompts ("You triage refund requests…") get a decision:
//     deny outside the refund window; escalate above the automatic limit when
//     the prompt says refunds above the policy limit need approval; refund at
//     most the limit when the prompt says so; otherwise refund the full amount.
//   - Reply prompts ("You write short, friendly replies…") get a reply
//     stating the outcome line of the user message.
//
// Requests without "Authorization: Bearer <apiKey>" get a 401, as the real
// API answers.
type fakeOpenAI struct {
	*httptest.Server
	apiKey   string
	requests atomic.Int64 // chat completions answered
	streams  atomic.Int64 // of which streamed
}

const fakeAPIKey = "sk-test-5f0c2a9d41e84b7c"

func newFakeOpenAI(t testing.TB) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{apiKey: fakeAPIKey}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", f.chatCompletions)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// BaseURL is the base URL an OpenAI client is configured with.
func (f *fakeOpenAI) BaseURL() string { return f.URL + "/v1/" }

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// text returns message i's content, a string or an array of text parts.
func (r *chatRequest) text(i int) string {
	raw := r.Messages[i].Content
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (f *fakeOpenAI) chatCompletions(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.apiKey {
		apiError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
		return
	}
	var req chatRequest
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || req.Model == "" || len(req.Messages) < 2 {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "expected a model and a system and a user message")
		return
	}
	answer, ok := answerFor(req.text(0), req.text(len(req.Messages)-1))
	if !ok {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "this fake model only triages refunds and writes replies")
		return
	}
	f.requests.Add(1)
	sum := sha256.Sum256(body)
	id := "chatcmpl-" + hex.EncodeToString(sum[:6])
	usage := map[string]int{"prompt_tokens": words(string(body)), "completion_tokens": words(answer)}
	usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
	const created = 1767225600
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_"+hex.EncodeToString(sum[6:12]))
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": answer, "refusal": nil}}},
			"usage": usage,
		})
		return
	}
	f.streams.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Request-Id", "req_"+hex.EncodeToString(sum[6:12]))
	flusher, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, piece := range pieces(answer, 24) {
		send(chunk(map[string]any{"content": piece}, nil))
	}
	send(chunk(map[string]any{}, "stop"))
	if req.StreamOptions.IncludeUsage {
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func apiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": code, "code": code}})
}

var (
	reAmount  = regexp.MustCompile(`, ([0-9.]+) USD, delivered ([0-9]+) days ago`)
	reLimit   = regexp.MustCompile(`window ([0-9]+) days, automatic refund limit ([0-9.]+) USD`)
	reOutcome = regexp.MustCompile(`(?m)^Outcome: (.*)$`)
)

// answerFor is the fake model.
func answerFor(system, user string) (string, bool) {
	switch {
	case strings.HasPrefix(system, "You triage refund requests"):
		a, l := reAmount.FindStringSubmatch(user), reLimit.FindStringSubmatch(user)
		if a == nil || l == nil {
			return "I need the order and the policy to decide.", true
		}
		amount, _ := strconv.ParseFloat(a[1], 64)
		days, _ := strconv.Atoi(a[2])
		window, _ := strconv.Atoi(l[1])
		limit, _ := strconv.ParseFloat(l[2], 64)
		decision := func(action string, amount float64, reason string) string {
			return fmt.Sprintf("Decision:\n```json\n{\"action\": %q, \"amount\": %.2f, \"reason\": %q}\n```", action, amount, reason)
		}
		switch {
		case days > window:
			return decision("deny", 0, fmt.Sprintf("Delivered %d days ago, outside the %d-day window.", days, window)), true
		case strings.Contains(system, "need approval") && amount > limit:
			return decision("escalate", amount, fmt.Sprintf("%.2f USD is above the automatic limit of %.2f USD.", amount, limit)), true
		case strings.Contains(system, "at most the automatic limit"):
			return decision("refund", math.Min(amount, limit), "Faulty item; refunded up to the automatic limit."), true
		default:
			return decision("refund", amount, "Faulty item within the refund window."), true
		}
	case strings.HasPrefix(system, "You write short, friendly replies"):
		m := reOutcome.FindStringSubmatch(user)
		if m == nil {
			return "Thank you for your message. We will get back to you shortly.", true
		}
		return fmt.Sprintf("Hello! About your order: %s. Thank you for your patience.", m[1]), true
	}
	return "", false
}

// pieces splits s into chunks of at most n bytes, as a stream delivers them.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func words(s string) int { return len(strings.Fields(s)) }

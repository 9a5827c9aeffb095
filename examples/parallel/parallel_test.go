// Package parallel_test checks the fidelity of an agent built the way teams
// build them: the official openai-go SDK through replay.Transport, a model
// that asks for several tool calls at once (fresh call ids, response ids,
// times, request ids and rate-limit headers on every call, as the real API
// sends), and the tools run on goroutines with random delays.
package parallel_test

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

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
)

var cities = []string{"Lisbon", "Oslo", "Quito"}

// fakeModel answers chat completions: without tool results in the
// conversation it asks for the weather of every city at once (parallel tool
// calls with freshly minted ids); with them it answers with a summary of the
// tool results, checking that every result names an id it minted.
func fakeModel(t testing.TB) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	var mu sync.Mutex
	minted := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role       string `json:"role"`
				Content    any    `json:"content"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req_"+uuid.NewString())
		w.Header().Set("x-ratelimit-remaining-requests", fmt.Sprint(rand.IntN(5000)))
		msg := map[string]any{"role": "assistant", "content": nil}
		finish := "tool_calls"
		var results []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				mu.Lock()
				ok := minted[m.ToolCallID]
				mu.Unlock()
				if !ok {
					http.Error(w, `{"error":{"message":"Invalid parameter: tool_call_id `+m.ToolCallID+` was not issued"}}`, http.StatusBadRequest)
					return
				}
				results = append(results, fmt.Sprint(m.Content))
			}
		}
		if results == nil {
			var tcs []map[string]any
			for _, c := range cities {
				id := "call_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:24]
				mu.Lock()
				minted[id] = true
				mu.Unlock()
				tcs = append(tcs, map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": "get_weather", "arguments": fmt.Sprintf(`{"city":%q}`, c)}})
			}
			msg["tool_calls"] = tcs
		} else {
			finish = "stop"
			msg["content"] = "Weather: " + strings.Join(results, "; ")
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-" + uuid.NewString(), "object": "chat.completion", "created": time.Now().Unix(),
			"model": req.Model, "system_fingerprint": "fp_" + uuid.NewString()[:8],
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 20 + len(results), "completion_tokens": 9, "total_tokens": 29 + len(results)},
		})
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

var getWeather = replay.Tool("get_weather", func(_ context.Context, city string) (string, error) {
	time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // who answers first varies from run to run
	return fmt.Sprintf("%s %d°C", city, len(city)*3), nil
})

// agent asks the model, runs the tool calls it asks for on goroutines, and
// sends the results back for the answer.
func agent(baseURL string) replay.Agent {
	client := openai.NewClient(
		option.WithBaseURL(baseURL), option.WithAPIKey("sk-test-parallel-0123456789"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: replay.Transport(nil)}))
	return replay.Typed(func(ctx context.Context, question string) (string, error) {
		msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}
		first, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4.1-mini", Messages: msgs})
		if err != nil {
			return "", err
		}
		m := first.Choices[0].Message
		msgs = append(msgs, m.ToParam())
		results := make([]string, len(m.ToolCalls))
		errs := make([]error, len(m.ToolCalls))
		var wg sync.WaitGroup
		for i, tc := range m.ToolCalls {
			wg.Go(func() {
				var args struct{ City string }
				if errs[i] = json.Unmarshal([]byte(tc.Function.Arguments), &args); errs[i] == nil {
					results[i], errs[i] = getWeather(ctx, args.City)
				}
			})
		}
		wg.Wait()
		for i, tc := range m.ToolCalls {
			if errs[i] != nil {
				return "", errs[i]
			}
			msgs = append(msgs, openai.ToolMessage(results[i], tc.ID))
		}
		final, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4.1-mini", Messages: msgs})
		if err != nil {
			return "", err
		}
		return final.Choices[0].Message.Content, nil
	})
}

// TestParallelToolCalls records a run, then checks that a frozen replay
// sends nothing and behaves like the recording, that a memoized null fork is
// equivalent, that a null fork at every point reproduces the run, and that a
// live tail whose model answers the same (with fresh ids) is equivalent.
func TestParallelToolCalls(t *testing.T) {
	srv, calls := fakeModel(t)
	a := agent(srv.URL + "/v1/")
	rec, err := replay.Record(t.Context(), "weather", "What is the weather in Lisbon, Oslo and Quito?", a)
	if err != nil || rec.Err != nil {
		t.Fatalf("recording: %v, %v", err, rec.Err)
	}
	recorded := calls.Load()

	res := sftest.Replay(t, rec.Trace, a)
	if calls.Load() != recorded {
		t.Fatalf("the frozen replay sent %d requests to the model", calls.Load()-recorded)
	}
	if res.Output != rec.Output {
		t.Fatalf("replayed output %v, recorded %v", res.Output, rec.Output)
	}

	memo := sftest.Fork(t, rec.Trace, fork.Start(), a, fork.Memoize())
	assert.Equivalent(t, memo)
	if calls.Load() != recorded {
		t.Errorf("the memoized null fork sent %d requests to the model", calls.Load()-recorded)
	}

	sftest.ForkCheck(t, rec.Trace, a)

	live := sftest.Fork(t, rec.Trace, fork.Start(), a, fork.Allow("get_weather"))
	assert.Equivalent(t, live)
	if calls.Load() == recorded {
		t.Errorf("the live tail sent no request to the model")
	}
}

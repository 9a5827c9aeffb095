package eino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/cloudwego/eino/schema"
	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
)

// The eino-ext OpenAI model recorded at the wire: its HTTPClient uses
// replay.Transport, so its calls are OpenAI chat completions in the trace,
// replayed without a request and patched where the API reads them.
func TestEinoExtOpenAIThroughTransport(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	var lastSystem atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		var req struct {
			Model    string `json:"model"`
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		lastSystem.Store(req.Messages[0].Content)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-%x","object":"chat.completion","created":%d,"model":%q,
			"choices":[{"index":0,"message":{"role":"assistant","content":"Namaste from %s"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":11,"completion_tokens":4,"total_tokens":15}}`, rand.Uint64(), rand.Int32(), req.Model, r.URL.Path)
	}))
	defer srv.Close()

	agent := replay.Typed(func(ctx context.Context, who string) (string, error) {
		m, err := openai.NewChatModel(ctx, &openai.ChatModelConfig{
			BaseURL: srv.URL + "/v1", APIKey: "sk-test-not-a-real-key", Model: "gpt-4o-mini",
			HTTPClient: &http.Client{Transport: replay.Transport(nil)},
		})
		if err != nil {
			return "", err
		}
		out, err := m.Generate(ctx, []*schema.Message{schema.SystemMessage("You greet people."), schema.UserMessage("Greet " + who)})
		if err != nil {
			return "", err
		}
		return out.Content, nil
	})
	ctx := context.Background()
	rec, err := replay.Record(ctx, "greeter", "Asha", agent)
	if err != nil {
		t.Fatal(err)
	}
	assert.ModelCallCount(t, rec.Trace, "openai/gpt-4o-mini", 1)
	if got := rec.Output; got != "Namaste from /v1/chat/completions" {
		t.Errorf("output %v", got)
	}
	if _, err := replay.Replay(ctx, rec.Trace, agent); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests after a frozen replay, want the recording's 1", n)
	}
	v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent, fork.Prompt(fork.All, "You greet people in Nepali."))
	if err != nil {
		t.Fatal(err)
	}
	assert.Completed(t, v)
	if got := lastSystem.Load(); got != "You greet people in Nepali." {
		t.Errorf("the API read system message %v", got)
	}
	if v.IncurredTokens != 15 {
		t.Errorf("incurred tokens %d, want the response's 15", v.IncurredTokens)
	}
}

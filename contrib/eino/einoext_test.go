package eino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/assert"
	sfeino "github.com/stepfork/stepfork/contrib/eino"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
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

// einoWeather is a two-turn agent on eino-ext's OpenAI model against the
// fake provider srv: the model calls "lookup", the agent sends the tool's
// result back with the call's id, the model answers. through says how the
// model is recorded: wrapped by sfeino.Model ("contrib/eino"), or at the
// wire by giving eino-ext an http.Client on replay.Transport.
func einoWeather(t *testing.T, srv *fakeprovider.Server, through string) replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, args string) (string, error) { return "sunny, 21C for " + args, nil })
	return replay.Typed(func(ctx context.Context, q string) (string, error) {
		cfg := &openai.ChatModelConfig{BaseURL: srv.URL + "/v1", APIKey: "sk-test-not-a-real-key", Model: "m-1"}
		if strings.HasPrefix(through, "transport") {
			cfg.HTTPClient = &http.Client{Transport: replay.Transport(nil)}
		}
		cm, err := openai.NewChatModel(ctx, cfg)
		if err != nil {
			return "", err
		}
		var m model.ToolCallingChatModel = cm
		if strings.HasPrefix(through, "contrib/eino") {
			m = sfeino.Model("openai", "m-1", cm)
		}
		m, err = m.WithTools([]*schema.ToolInfo{{Name: "lookup", Desc: "Looks the weather up.",
			ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{"q": {Type: schema.String}})}})
		if err != nil {
			return "", err
		}
		msgs := []*schema.Message{schema.SystemMessage("Be terse."), schema.UserMessage(q)}
		for range 4 {
			var out *schema.Message
			if strings.HasSuffix(through, "stream") {
				sr, err := m.Stream(ctx, msgs)
				if err != nil {
					return "", err
				}
				out, err = schema.ConcatMessageStream(sr)
				if err != nil {
					return "", err
				}
			} else if out, err = m.Generate(ctx, msgs); err != nil {
				return "", err
			}
			if len(out.ToolCalls) == 0 {
				return out.Content, nil
			}
			msgs = append(msgs, out)
			for _, tc := range out.ToolCalls {
				res, err := lookup(ctx, tc.Function.Arguments)
				if err != nil {
					return "", err
				}
				msgs = append(msgs, schema.ToolMessage(res, tc.ID))
			}
		}
		return "", fmt.Errorf("the model never answered")
	})
}

// TestEinoExtLiveTail: a fork's live tail whose eino-ext model answers the
// same thing, with fresh response ids (which eino-ext copies into each
// message's Extra["openai-request-id"]), fresh tool-call ids, request ids
// and more of its prompt cached, is equivalent to its base, whether the
// model is recorded through contrib/eino or at the wire through
// replay.Transport; one whose answer changed shows that change and its
// consequence only.
func TestEinoExtLiveTail(t *testing.T) {
	t.Parallel()
	for _, through := range []string{"contrib/eino", "contrib/eino/stream", "transport", "transport/stream"} {
		t.Run(through, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := fakeprovider.New()
			t.Cleanup(srv.Close)
			rec, err := replay.Record(ctx, "weather", "Pokhara", einoWeather(t, srv, through))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			require.Equal(t, "It is sunny.", rec.Output)
			require.NotEmpty(t, rec.Trace.Extras[trace.MintedFile], "the response ids are kept")

			same := fakeprovider.New()
			t.Cleanup(same.Close)
			same.SetCachedTokens(16)
			v, err := fork.Run(ctx, rec.Trace, fork.Start(), einoWeather(t, same, through))
			require.NoError(t, err)
			require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
			require.Equal(t, 2, v.LiveModelCalls)
			require.Len(t, v.Replayed, 1, "the tool's input is unchanged, and the guard serves it")
			require.True(t, v.Diff.Equivalent(), "%v", v.Diff.Explain())

			other := fakeprovider.New()
			t.Cleanup(other.Close)
			other.SetAnswer("It is raining.")
			changed, err := fork.Run(ctx, rec.Trace, fork.Start(), einoWeather(t, other, through))
			require.NoError(t, err)
			require.Equal(t, fork.StatusCompleted, changed.Status, "%v", changed.Err)
			var paths []string
			for _, s := range changed.Diff.Steps {
				for _, c := range s.Changes {
					paths = append(paths, string(s.Type)+" "+c.Path)
				}
				if s.Kind == diff.Added || s.Kind == diff.Removed {
					paths = append(paths, string(s.Kind)+" "+s.Label)
				}
			}
			want := map[string][]string{
				"contrib/eino":        {"llm output.content", "run output"},
				"contrib/eino/stream": {"llm output.stream[1].content", "llm output.stream[2].content", "run output"}, // the chunks that differ
				"transport":           {"llm output.message.content", "run output"},
				"transport/stream":    {"llm output.message.content", "run output"},
			}[through]
			require.Equal(t, want, paths)
		})
	}
}

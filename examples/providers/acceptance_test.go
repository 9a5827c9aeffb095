// Package providers_test runs agents on the official SDKs — openai-go (chat
// completions, streamed and not, and the Responses API),
// anthropic-sdk-go/v2, langchaingo's OpenAI client and google.golang.org/genai
// — through replay.Transport against a local fake of each provider's wire
// format that mints fresh ids, times and headers on every call, and checks
// what a team relies on: a frozen replay sends nothing, a memoized null fork
// and a live-tail fork whose model says the same are equivalent, a changed
// answer is the only difference, a prompt change reaches the field the API
// reads, and live calls cost what the prices say.
package providers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sfassert "github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// model is the model every agent asks for; prices are per million tokens.
const model = "m-1"

var prices = replay.Prices{model: {Input: 3, CachedInput: 1.5, CacheWrite: 3.75, Output: 15}}

// sdkAgent is a weather agent on one SDK: it asks the model, runs the
// "lookup" tool the model calls (through replay.Tool), sends its result
// back, and returns the model's answer.
type sdkAgent struct {
	// agent builds the agent against srv, with client as the SDK's HTTP client.
	agent func(t *testing.T, srv *fakeprovider.Server, client *http.Client) replay.Agent
	// prompt reads the system prompt from a request body, where the API
	// reads it.
	prompt func(t *testing.T, body map[string]any) string
}

// lookup is the agent's tool.
var lookup = replay.Tool("lookup", func(_ context.Context, q string) (string, error) { return "sunny, 21C in " + q, nil })

func changedPaths(d *diff.Result) []string {
	var out []string
	for _, s := range d.Steps {
		switch s.Kind {
		case diff.Changed:
			for _, c := range s.Changes {
				out = append(out, string(s.Type)+" "+c.Path)
			}
		case diff.Added, diff.Removed:
			out = append(out, string(s.Kind)+" "+s.Label)
		}
	}
	return out
}

// accept runs the acceptance of one SDK agent.
func accept(t *testing.T, a sdkAgent) {
	t.Helper()
	ctx := context.Background()
	srv := fakeprovider.New()
	t.Cleanup(srv.Close)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	agent := a.agent(t, srv, &http.Client{Transport: replay.Transport(base, prices)})

	rec, err := replay.Record(ctx, "weather", nil, agent)
	require.NoError(t, err)
	require.NoError(t, rec.Err)
	assert.Equal(t, "It is sunny.", rec.Output)
	assert.Equal(t, int64(2), srv.Requests())
	var messages int
	for _, ev := range rec.Trace.Events {
		if ev.Type == trace.LLMResponse {
			assert.Equal(t, trace.Object, ev.Output.Get("message").Kind(), "the response's message is recorded: %s", ev.Output)
			assert.NotNil(t, ev.CostUSD, "priced")
			messages++
		}
	}
	assert.Equal(t, 2, messages)

	t.Run("frozen replay sends nothing", func(t *testing.T) {
		before := srv.Requests()
		res, err := replay.Replay(ctx, rec.Trace, agent)
		require.NoError(t, err)
		require.NoError(t, res.Err)
		require.NoError(t, res.Divergence)
		assert.Equal(t, rec.Output, res.Output)
		assert.Equal(t, before, srv.Requests())
	})

	t.Run("memoized null fork", func(t *testing.T) {
		before := srv.Requests()
		v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent, fork.Memoize())
		require.NoError(t, err)
		require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
		assert.Equal(t, before, srv.Requests())
		assert.True(t, v.Diff.Equivalent(), "%v", changedPaths(v.Diff))
		sfassert.Equivalent(t, v)
	})

	t.Run("live tail, same answer", func(t *testing.T) {
		before := srv.Requests()
		v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent)
		require.NoError(t, err)
		require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
		assert.Equal(t, before+2, srv.Requests(), "fresh ids, times and headers on both calls")
		assert.Equal(t, 2, v.LiveModelCalls)
		assert.Len(t, v.Replayed, 1, "the second request carries the live tool-call id, and the tool call is replayed")
		assert.True(t, v.Diff.Equivalent(), "%v", changedPaths(v.Diff))
		assert.Positive(t, v.IncurredCost)
		sfassert.IncurredCostAtMost(t, v, 0.01)
	})

	t.Run("live tail, same answer, more of the prompt cached", func(t *testing.T) {
		cached := fakeprovider.New()
		t.Cleanup(cached.Close)
		cached.SetCachedTokens(16) // the recording's calls had 40 cached
		agent := a.agent(t, cached, &http.Client{Transport: replay.Transport(base, prices)})
		v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent)
		require.NoError(t, err)
		require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
		assert.Equal(t, 2, v.LiveModelCalls)
		assert.True(t, v.Diff.Equivalent(), "usage is cost, not behaviour: %v", changedPaths(v.Diff))
	})

	t.Run("prompt change", func(t *testing.T) {
		v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent, fork.PromptAppend(fork.All, " Cite the source."))
		require.NoError(t, err)
		require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
		assert.Empty(t, v.Unused())
		got := srv.Received()
		for _, r := range got[len(got)-2:] {
			var body map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &body), "%s", r.Body)
			assert.Equal(t, "Be terse. Cite the source.", a.prompt(t, body), "%s", r.Body)
		}
	})

	t.Run("live tail, another answer", func(t *testing.T) {
		other := fakeprovider.New()
		t.Cleanup(other.Close)
		other.SetAnswer("It is raining.")
		agent := a.agent(t, other, &http.Client{Transport: replay.Transport(base, prices)})
		v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent)
		require.NoError(t, err)
		require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
		assert.Equal(t, "It is raining.", v.Output)
		assert.Equal(t, []string{"llm output.message.content", "run output"}, changedPaths(v.Diff))
		// The base was recorded in this test, with ids the provider minted
		// afresh, and so was the tail: the golden shows them as
		// placeholders, and is the same run after run.
		sftest.Golden(t, v)
	})

	t.Run("unpriced", func(t *testing.T) {
		agent := a.agent(t, srv, &http.Client{Transport: replay.Transport(base)})
		v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent)
		require.NoError(t, err)
		err = sfassert.CheckIncurredCostAtMost(v, 1)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "replay.Prices")
	})
}

// str is body[keys[0]][keys[1]]…, walking objects and (for int keys)
// arrays.
func str(t *testing.T, v any, keys ...any) string {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "expected an object at %q, got %v", k, v)
			v = m[k]
		case int:
			a, ok := v.([]any)
			require.True(t, ok && len(a) > k, "expected an array of more than %d at %v", k, v)
			v = a[k]
		}
	}
	s, _ := v.(string)
	return s
}

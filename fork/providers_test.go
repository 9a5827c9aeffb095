package fork_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sfassert "github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// providerRun records the two-turn agent of one wire format against a fake
// provider that mints fresh ids, times and headers on every call.
func providerRun(t *testing.T, w fakeprovider.Wire, opts ...replay.TransportOption) (*fakeprovider.Server, replay.Agent, *trace.Trace) {
	t.Helper()
	srv := fakeprovider.New()
	t.Cleanup(srv.Close)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	agent := w.Agent(srv, &http.Client{Transport: replay.Transport(base, opts...)}, "m-1")
	rec, err := replay.Record(context.Background(), "weather", nil, agent)
	require.NoError(t, err)
	require.NoError(t, rec.Err)
	return srv, agent, rec.Trace
}

// changedPaths lists "label path" for every changed leaf of d, and
// "added label"/"removed label" for steps only one side has.
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

// TestLiveTailOnProviders: a fork whose tail calls the model live, against
// a provider that answers with fresh ids, created times, fingerprints,
// request ids and rate-limit headers, is equivalent when the model says the
// same; when it answers differently the diff shows that answer and its
// consequence, nothing else; Memoize sends nothing.
func TestLiveTailOnProviders(t *testing.T) {
	t.Parallel()
	for _, w := range fakeprovider.AllWires() {
		t.Run(w.Name, func(t *testing.T) {
			t.Parallel()
			srv, agent, base := providerRun(t, w)
			ctx := context.Background()

			before := srv.Requests()
			v, err := fork.Run(ctx, base, fork.Start(), agent)
			require.NoError(t, err)
			require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
			assert.Equal(t, 2, v.LiveModelCalls)
			assert.Equal(t, before+2, srv.Requests(), "both model calls ran live")
			assert.Len(t, v.Replayed, 1, "the tool call, whose input is unchanged, is replayed")
			assert.Empty(t, v.Suppressed)
			assert.True(t, v.Diff.Equivalent(), "%v", changedPaths(v.Diff))

			before = srv.Requests()
			m, err := fork.Run(ctx, base, fork.Start(), agent, fork.Memoize())
			require.NoError(t, err)
			assert.Equal(t, before, srv.Requests(), "a memoized null fork sends nothing")
			assert.Len(t, m.MemoHits, 2)
			assert.True(t, m.Diff.Equivalent(), "%v", changedPaths(m.Diff))

			// A fork of the fork (whose trace holds live ids bound to the
			// recorded ones) is equivalent to it as well.
			again, err := fork.Run(ctx, v.Trace, fork.Start(), agent)
			require.NoError(t, err)
			assert.True(t, again.Diff.Equivalent(), "%v", changedPaths(again.Diff))

			// Prompt caching changes the usage of the same answer: cost,
			// not behavior.
			srv.SetCachedTokens(fakeprovider.CachedTokens / 2)
			cached, err := fork.Run(ctx, base, fork.Start(), agent)
			require.NoError(t, err)
			assert.True(t, cached.Diff.Equivalent(), "%v", changedPaths(cached.Diff))

			srv.SetAnswer("It is raining.")
			changed, err := fork.Run(ctx, base, fork.Start(), agent)
			require.NoError(t, err)
			require.Equal(t, fork.StatusCompleted, changed.Status, "%v", changed.Err)
			assert.Equal(t, []string{"llm output.message.content", "run output"}, changedPaths(changed.Diff))
		})
	}
}

// TestPromptOnProviders: prompt changes reach each API in the field it
// reads, keeping the request's structure.
func TestPromptOnProviders(t *testing.T) {
	t.Parallel()
	type check func(t *testing.T, body map[string]any)
	text := func(t *testing.T, v any, want string) {
		t.Helper()
		assert.Equal(t, want, v)
	}
	checks := map[string]check{
		"chat": func(t *testing.T, b map[string]any) {
			msgs := b["messages"].([]any)
			first := msgs[0].(map[string]any)
			assert.Equal(t, "developer", first["role"], "the developer message is edited, not doubled")
			text(t, first["content"], "Be terse. Cite the source.")
			for _, m := range msgs[1:] {
				assert.NotContains(t, []string{"system", "developer"}, m.(map[string]any)["role"])
			}
		},
		"responses": func(t *testing.T, b map[string]any) {
			text(t, b["instructions"], "Be terse. Cite the source.")
			assert.NotContains(t, b, "system", "the Responses API has no 'system' parameter")
		},
		"anthropic": func(t *testing.T, b map[string]any) {
			blocks := b["system"].([]any)
			require.Len(t, blocks, 1)
			block := blocks[0].(map[string]any)
			text(t, block["text"], "Be terse. Cite the source.")
			assert.Equal(t, map[string]any{"type": "ephemeral"}, block["cache_control"])
		},
		"gemini": func(t *testing.T, b map[string]any) {
			parts := b["systemInstruction"].(map[string]any)["parts"].([]any)
			text(t, parts[0].(map[string]any)["text"], "Be terse. Cite the source.")
			assert.Equal(t, 0.9, b["generationConfig"].(map[string]any)["temperature"])
		},
	}
	for _, w := range fakeprovider.AllWires() {
		t.Run(w.Name, func(t *testing.T) {
			t.Parallel()
			srv, agent, base := providerRun(t, w)
			v, err := fork.Run(context.Background(), base, fork.Start(), agent,
				fork.PromptAppend(fork.All, " Cite the source."), fork.Temperature(fork.All, 0.9))
			require.NoError(t, err)
			require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
			assert.Empty(t, v.Unused())
			got := srv.Received()
			for _, r := range got[len(got)-2:] {
				var body map[string]any
				require.NoError(t, json.Unmarshal(r.Body, &body))
				checks[strings.TrimSuffix(w.Name, "/stream")](t, body)
				if !strings.HasPrefix(w.Name, "gemini") {
					assert.Equal(t, 0.9, body["temperature"])
				}
			}
			// Only the prompt (and the temperature) changed: the diff's
			// input changes are in those fields.
			for _, p := range changedPaths(v.Diff) {
				if strings.HasPrefix(p, "llm input.") {
					assert.True(t, strings.Contains(p, "temperature") || strings.Contains(p, "instructions") ||
						strings.Contains(p, "system") || strings.Contains(p, "messages[0].content"), p)
				}
			}
		})
	}
}

// TestCostOnProviders: live tail calls of a priced model have a cost; a
// cost assertion over unpriced calls fails, saying how to set prices.
func TestCostOnProviders(t *testing.T) {
	t.Parallel()
	for _, w := range fakeprovider.AllWires() {
		t.Run(w.Name, func(t *testing.T) {
			t.Parallel()
			_, agent, base := providerRun(t, w, replay.Prices{"m-1": {Input: 3, CachedInput: 1.5, CacheWrite: 3.75, Output: 15}})
			v, err := fork.Run(context.Background(), base, fork.Start(), agent)
			require.NoError(t, err)
			assert.Positive(t, v.IncurredCost)
			assert.Zero(t, v.UnpricedModelCalls)
			assert.NoError(t, sfassert.CheckIncurredCostAtMost(v, 1))
			assert.Error(t, sfassert.CheckIncurredCostAtMost(v, v.IncurredCost/2))

			_, unpriced, base2 := providerRun(t, w)
			u, err := fork.Run(context.Background(), base2, fork.Start(), unpriced)
			require.NoError(t, err)
			assert.Equal(t, 2, u.UnpricedModelCalls)
			err = sfassert.CheckIncurredCostAtMost(u, 1)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "2 of its 2 live model call(s) have no price")
			assert.Contains(t, err.Error(), `replay.Transport(base, replay.Prices{"<model>": {Input: …, Output: …}})`)
		})
	}
}

// TestHTTPCallsInTheTail: a request the transport does not recognise as a
// model call is an "http" tool call: served in the prefix, replayed by the
// guard when unchanged, and run only under fork.Allow("http").
func TestHTTPCallsInTheTail(t *testing.T) {
	t.Parallel()
	srv := fakeprovider.New()
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: replay.Transport(nil)}
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		for _, path := range []string{"/v1/embeddings", "/v1/other"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(`{"input":"x"}`))
			resp, err := client.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
		}
		return "ok", nil
	}
	rec, err := replay.Record(context.Background(), "http", nil, agent)
	require.NoError(t, err)
	require.NoError(t, rec.Err)
	before := srv.Requests()
	v, err := fork.Run(context.Background(), rec.Trace, fork.Step(3), agent)
	require.NoError(t, err)
	assert.Equal(t, before, srv.Requests(), "prefix served, tail replayed")
	assert.True(t, v.Diff.Equivalent(), "%v", changedPaths(v.Diff))
	assert.Len(t, v.Replayed, 1)
	assert.True(t, slices.ContainsFunc(rec.Trace.Events, func(ev trace.Event) bool { return ev.Name == "http" }))
}

// TestLiveTailUsageThroughLLM: through replay.LLM too, a live tail whose
// model answers the same with another usage (prompt caching) is
// equivalent; the token delta reports the usage.
func TestLiveTailUsageThroughLLM(t *testing.T) {
	t.Parallel()
	var cached atomic.Int64
	call := func(_ context.Context, req replay.Request) (replay.Response, error) {
		return replay.Response{Content: "It is sunny.", StopReason: "stop",
			Usage: replay.Usage{PromptTokens: 100, CompletionTokens: 5, TotalTokens: 105 + cached.Load(), CachedTokens: cached.Load()}}, nil
	}
	agent := replay.Typed(func(ctx context.Context, q string) (string, error) {
		resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m-1", Messages: []replay.Message{{Role: "user", Content: q}}}, call)
		return resp.Content, err
	})
	ctx := context.Background()
	rec, err := replay.Record(ctx, "weather", "Weather in Pokhara?", agent)
	require.NoError(t, err)
	cached.Store(16)
	v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent)
	require.NoError(t, err)
	assert.Equal(t, 1, v.LiveModelCalls)
	assert.True(t, v.Diff.Equivalent(), "%v", changedPaths(v.Diff))
	assert.Equal(t, int64(16), v.Diff.TokensDelta)
}

// rawChatAgent is a hand adapter on replay.LLMRaw: it posts chat
// completion bodies to srv with plain net/http, records the response body
// as the call's output, and reports the ids the provider minted in it
// (replay.ReportIDs); the agent sends the tool-call id back with the tool's
// result.
func rawChatAgent(srv *fakeprovider.Server) replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, q string) (string, error) { return "sunny in " + q, nil })
	chat := func(ctx context.Context, messages []any) (map[string]any, error) {
		body := trace.MustValueOf(map[string]any{"model": "m-1", "messages": messages})
		out, err := replay.LLMRaw(ctx, "openai", "m-1", body, func(ctx context.Context, body trace.Value) (trace.Value, error) {
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body.Canonical()))
			if err != nil {
				return trace.Value{}, err
			}
			defer resp.Body.Close()
			var v map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
				return trace.Value{}, err
			}
			replay.ReportIDs(ctx, "response", v["id"].(string))
			msg := v["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			calls, _ := msg["tool_calls"].([]any)
			for _, c := range calls {
				replay.ReportIDs(ctx, "call", c.(map[string]any)["id"].(string))
			}
			// What the adapter keeps: the answer, its id and its usage (not
			// the created time and fingerprint, which say nothing).
			return trace.ValueOf(map[string]any{"id": v["id"], "choices": v["choices"], "usage": v["usage"]})
		})
		if err != nil {
			return nil, err
		}
		var v map[string]any
		return v, out.Decode(&v)
	}
	return func(ctx context.Context, _ trace.Value) (any, error) {
		messages := []any{map[string]any{"role": "user", "content": "weather?"}}
		for range 4 {
			resp, err := chat(ctx, messages)
			if err != nil {
				return nil, err
			}
			msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			calls, _ := msg["tool_calls"].([]any)
			if len(calls) == 0 {
				return msg["content"], nil
			}
			messages = append(messages, msg)
			for _, c := range calls {
				call := c.(map[string]any)
				out, err := lookup(ctx, "Kathmandu")
				if err != nil {
					return nil, err
				}
				messages = append(messages, map[string]any{"role": "tool", "tool_call_id": call["id"], "content": out})
			}
		}
		return nil, errors.New("the model never answered")
	}
}

// TestLiveTailThroughLLMRaw: a hand adapter on replay.LLMRaw that reports
// the ids its provider mints gets what Transport gets: a live tail whose
// model says the same thing with fresh ids and more of its prompt cached
// is equivalent to its base (and a fork of that fork to it); a changed
// answer is the only change; the ids are kept for renderings.
func TestLiveTailThroughLLMRaw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := fakeprovider.New()
	t.Cleanup(srv.Close)
	rec, err := replay.Record(ctx, "weather", nil, rawChatAgent(srv))
	require.NoError(t, err)
	require.NoError(t, rec.Err)
	minted := trace.MintedIDs(rec.Trace)
	var kinds []string
	for _, k := range minted {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	assert.Equal(t, []string{"call", "response", "response"}, kinds, "two response ids and a tool call's")

	same := fakeprovider.New()
	t.Cleanup(same.Close)
	same.SetCachedTokens(16)
	v, err := fork.Run(ctx, rec.Trace, fork.Start(), rawChatAgent(same))
	require.NoError(t, err)
	require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
	assert.Equal(t, 2, v.LiveModelCalls)
	assert.Len(t, v.Replayed, 1, "the tool call is replayed by the guard")
	assert.True(t, v.Diff.Equivalent(), "%v", changedPaths(v.Diff))
	// The provider got its own tool-call id back; the trace records the
	// recorded one in its place.
	ids, err := trace.Minted(v.Trace.Extras[trace.MintedFile])
	require.NoError(t, err)
	bound := 0
	for _, call := range ids {
		for _, id := range call {
			if id.Kind == "call" && id.Live != "" {
				bound++
				assert.Contains(t, string(same.Last().Body), `"tool_call_id":"`+id.Live+`"`)
				assert.NotContains(t, string(same.Last().Body), id.ID)
				assert.Equal(t, "call", minted[id.ID], "bound to the base's id")
			}
		}
	}
	assert.Equal(t, 1, bound)

	again, err := fork.Run(ctx, v.Trace, fork.Start(), rawChatAgent(same))
	require.NoError(t, err)
	assert.True(t, again.Diff.Equivalent(), "a fork of the fork: %v", changedPaths(again.Diff))

	other := fakeprovider.New()
	t.Cleanup(other.Close)
	other.SetAnswer("It is raining.")
	changed, err := fork.Run(ctx, rec.Trace, fork.Start(), rawChatAgent(other))
	require.NoError(t, err)
	assert.Equal(t, []string{"llm output.choices[0].message.content", "run output"}, changedPaths(changed.Diff))
}

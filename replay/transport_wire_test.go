package replay_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

func newProvider(t *testing.T) *fakeprovider.Server {
	t.Helper()
	srv := fakeprovider.New()
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, opts ...replay.TransportOption) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: replay.Transport(base, opts...)}
}

func responses(tr *trace.Trace) []trace.Event {
	var out []trace.Event
	for _, ev := range tr.Events {
		if ev.Type == trace.LLMResponse {
			out = append(out, ev)
		}
	}
	return out
}

func requests(tr *trace.Trace) []trace.Event {
	var out []trace.Event
	for _, ev := range tr.Events {
		if ev.Type == trace.LLMRequest {
			out = append(out, ev)
		}
	}
	return out
}

// TestTransportMessage: every wire format, streamed or not, records the
// message its response says in one form, with the tokens of its usage.
func TestTransportMessage(t *testing.T) {
	t.Parallel()
	for _, c := range fakeprovider.AllWires() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.Agent(srv, newClient(t), "m-1"))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			rs := responses(rec.Trace)
			require.Len(t, rs, 2)

			first := rs[0].Output.Get("message")
			require.Equal(t, trace.Object, first.Kind(), "%s", rs[0].Output)
			tcs := first.Get("tool_calls")
			require.Equal(t, 1, tcs.Len(), "%s", first)
			var tc trace.Value
			for _, e := range tcs.Elems() {
				tc = e
			}
			assert.Equal(t, `"lookup"`, tc.Get("name").Canonical())
			assert.Equal(t, `{"q":"weather"}`, tc.Get("arguments").Canonical(), "arguments as JSON, however they were split")

			second := rs[1].Output.Get("message")
			assert.Equal(t, `"It is sunny."`, second.Get("content").Canonical())
			assert.True(t, second.Get("tool_calls").IsAbsent())
			assert.NotEmpty(t, mustStr(t, second.Get("finish_reason")))

			u := second.Get("usage")
			assert.Equal(t, `100`, u.Get("prompt_tokens").Canonical(), "%s", u)
			assert.Equal(t, `20`, u.Get("completion_tokens").Canonical(), "%s", u)
			assert.Equal(t, `40`, u.Get("cached_tokens").Canonical(), "%s", u)
			if strings.HasPrefix(c.Name, "anthropic") {
				assert.Equal(t, `10`, u.Get("cache_write_tokens").Canonical(), "%s", u)
			} else {
				assert.Equal(t, `5`, u.Get("reasoning_tokens").Canonical(), "%s", u)
			}
			require.NotNil(t, rs[1].PromptTokens)
			assert.Equal(t, int64(100), *rs[1].PromptTokens)
			assert.Equal(t, int64(20), *rs[1].CompletionTokens)
			assert.Equal(t, int64(120), *rs[1].TotalTokens)
			assert.Nil(t, rs[1].CostUSD, "no price was set")

			if strings.HasPrefix(c.Name, "gemini") {
				assert.Equal(t, "m-1", requests(rec.Trace)[0].Model, "the model comes from the URL path")
				assert.Equal(t, "google", requests(rec.Trace)[0].Provider)
			}
			assert.NotContains(t, string(mustSave(t, rec.Trace)), "SECRET0123456789")
		})
	}
}

// TestTransportFrozenSendsNothing: a frozen replay of every wire format
// serves the recording without a request, streams byte for byte.
func TestTransportFrozenSendsNothing(t *testing.T) {
	t.Parallel()
	for _, c := range fakeprovider.AllWires() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			client := newClient(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.Agent(srv, client, "m-1"))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			before := srv.Requests()
			res, err := replay.Replay(context.Background(), rec.Trace, c.Agent(srv, client, "m-1"))
			require.NoError(t, err)
			require.NoError(t, res.Err)
			require.NoError(t, res.Divergence)
			assert.Equal(t, before, srv.Requests())
			assert.Equal(t, 3, res.Served)
		})
	}
}

// TestTransportMintedIDs: in a live replay every response has fresh ids,
// and the second request carries them back; each live id stands for the
// recorded one, so the request matches the recording and is recorded as
// it, and the new trace's messages name the recorded ids.
func TestTransportMintedIDs(t *testing.T) {
	t.Parallel()
	for _, c := range fakeprovider.AllWires() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			client := newClient(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.Agent(srv, client, "m-1"))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			res, err := replay.Replay(context.Background(), rec.Trace, c.Agent(srv, client, "m-1"),
				replay.Live("lookup"))
			require.NoError(t, err)
			require.NoError(t, res.Err)
			require.NoError(t, res.Divergence, "the live ids stand for the recorded ones")
			assert.Equal(t, int64(4), srv.Requests())

			sent := srv.Received()[3].Body
			if id := fakeprovider.CallID(srv.Received()[2].Body); id != "" {
				assert.Contains(t, string(sent), id, "the server gets the ids it minted")
			}
			recReqs, liveReqs := requests(rec.Trace), requests(res.Trace)
			assert.Equal(t, recReqs[1].Input.Canonical(), liveReqs[1].Input.Canonical(), "recorded as the request it stands for")
			recMsg, liveMsg := responses(rec.Trace)[0].Output.Get("message"), responses(res.Trace)[0].Output.Get("message")
			assert.Equal(t, recMsg.Canonical(), liveMsg.Canonical())
			if !strings.HasPrefix(c.Name, "gemini") {
				assert.Equal(t, trace.Object, responses(res.Trace)[0].Output.Get("ids").Kind(), "the live ids are kept with the recorded ones they stand for")
			}

			// A frozen replay of the live run binds its live ids again.
			before := srv.Requests()
			again, err := replay.Replay(context.Background(), res.Trace, c.Agent(srv, client, "m-1"))
			require.NoError(t, err)
			require.NoError(t, again.Divergence)
			assert.Equal(t, before, srv.Requests())
		})
	}
}

// TestTransportPrices: a priced model's live calls record their cost, from
// every kind of token; an unpriced one records none; ReportUsage from the
// base RoundTripper wins.
func TestTransportPrices(t *testing.T) {
	t.Parallel()
	price := replay.Price{Input: 2, CachedInput: 1, CacheWrite: 4, Output: 8}
	for _, c := range fakeprovider.AllWires() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.Agent(srv, newClient(t, replay.Prices{"m-1": price}), "m-1"))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			r := responses(rec.Trace)[1]
			require.NotNil(t, r.CostUSD)
			fresh, cached, written := int64(60), int64(40), int64(0)
			if strings.HasPrefix(c.Name, "anthropic") {
				fresh, written = 50, 10
			}
			want := (float64(fresh)*2 + float64(cached)*1 + float64(written)*4 + 20*8) / 1e6
			assert.InDelta(t, want, *r.CostUSD, 1e-12)
		})
	}

	t.Run("label wins", func(t *testing.T) {
		t.Parallel()
		srv := newProvider(t)
		c := fakeprovider.AllWires()[0]
		client := newClient(t, replay.Prices{"m-1": {Input: 1}, "openai/m-1": {Input: 1000}})
		rec, err := replay.Record(context.Background(), "wire", nil, c.Agent(srv, client, "m-1"))
		require.NoError(t, err)
		assert.InDelta(t, 100*1000/1e6, *responses(rec.Trace)[0].CostUSD, 1e-12)
	})

	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		srv := newProvider(t)
		c := fakeprovider.AllWires()[0]
		client := newClient(t, replay.Prices{"m-1": {Input: -1}})
		rec, err := replay.Record(context.Background(), "wire", nil, c.Agent(srv, client, "m-1"))
		require.NoError(t, err)
		require.Error(t, rec.Err)
		assert.Contains(t, rec.Err.Error(), `replay.Transport: Prices["m-1"].Input is not a non-negative number`)
		assert.Zero(t, srv.Requests())
	})

	t.Run("ReportUsage from base", func(t *testing.T) {
		t.Parallel()
		srv := newProvider(t)
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := http.DefaultTransport.RoundTrip(req)
			replay.ReportUsage(req.Context(), replay.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10, CostUSD: 0.5})
			return resp, err
		})
		client := &http.Client{Transport: replay.Transport(base)}
		rec, err := replay.Record(context.Background(), "wire", nil, fakeprovider.AllWires()[0].Agent(srv, client, "m-1"))
		require.NoError(t, err)
		require.NoError(t, rec.Err)
		r := responses(rec.Trace)[0]
		require.NotNil(t, r.CostUSD)
		assert.Equal(t, 0.5, *r.CostUSD)
		assert.Equal(t, int64(7), *r.PromptTokens)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTransportGeminiModelInURL: a Director's model change reaches a
// Gemini call in its URL path.
func TestTransportGeminiModelInURL(t *testing.T) {
	t.Parallel()
	for _, c := range fakeprovider.AllWires() {
		if !strings.HasPrefix(c.Name, "gemini") {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			client := newClient(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.Agent(srv, client, "gemini-2.5-flash"))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			d := replay.DirectorFunc(func(call *replay.Call) replay.Action {
				if call.Kind == replay.KindLLM {
					return replay.Execute().WithModel("gemini-2.5-pro")
				}
				return replay.ServeMatch()
			})
			res, err := replay.Replay(context.Background(), rec.Trace, c.Agent(srv, client, "gemini-2.5-flash"), replay.WithDirector(d))
			require.NoError(t, err)
			require.NoError(t, res.Err)
			last := srv.Last()
			assert.Contains(t, last.Path, "/models/gemini-2.5-pro:")
			assert.Equal(t, strings.Contains(c.Name, "stream"), strings.Contains(last.Path, "alt=sse"), "the query is kept")
			assert.Equal(t, "gemini-2.5-pro", requests(res.Trace)[1].Model)
			assert.True(t, bytes.Contains(last.Body, []byte(`"functionResponse"`)))
		})
	}
}

// TestTransportStreamClosedAtItsEnd: an SDK that closes a stream once it has
// read its last frame (openai-go after [DONE]) read the whole stream, so it
// is not recorded as closed early; one that closes before is.
func TestTransportStreamClosedAtItsEnd(t *testing.T) {
	t.Parallel()
	srv := newProvider(t)
	client := newClient(t)
	post := func(ctx context.Context, stopAt string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m-1","stream":true,"messages":[{"role":"user","content":"weather?"}]}`))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		var seen []byte
		buf := make([]byte, 16)
		for !bytes.Contains(seen, []byte(stopAt)) {
			n, err := resp.Body.Read(buf)
			seen = append(seen, buf[:n]...)
			if err != nil {
				break
			}
		}
		return resp.Body.Close()
	}
	for stopAt, early := range map[string]bool{"data: [DONE]\n\n": false, `"tool_calls"`: true} {
		rec, err := replay.Record(context.Background(), "close", nil, func(ctx context.Context, _ trace.Value) (any, error) {
			return nil, post(ctx, stopAt)
		})
		require.NoError(t, err)
		require.NoError(t, rec.Err)
		out := responses(rec.Trace)[0].Output
		assert.Equal(t, early, !out.Get("closed_early").IsAbsent(), "closed after %q: %s", stopAt, out.Get("closed_early"))
	}
}

// TestTransportMintedIDsInToolInputs: a tool called with an id the model
// minted (a live one in a live replay) is matched as if called with the
// recorded id.
func TestTransportMintedIDsInToolInputs(t *testing.T) {
	t.Parallel()
	srv := newProvider(t)
	client := newClient(t)
	ack := replay.Tool("ack", func(_ context.Context, id string) (string, error) { return "ok " + id[:5], nil })
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m-1","messages":[{"role":"user","content":"weather?"}]}`))
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		return ack(ctx, fakeprovider.CallID(b))
	}
	rec, err := replay.Record(context.Background(), "ids", nil, agent)
	require.NoError(t, err)
	require.NoError(t, rec.Err)
	res, err := replay.Replay(context.Background(), rec.Trace, agent, replay.Live("ack"))
	require.NoError(t, err)
	require.NoError(t, res.Err)
	require.NoError(t, res.Divergence)
	var inputs []string
	for _, tr := range []*trace.Trace{rec.Trace, res.Trace} {
		for _, ev := range tr.Events {
			if ev.Type == trace.ToolCall {
				inputs = append(inputs, ev.Input.Canonical())
			}
		}
	}
	require.Len(t, inputs, 2)
	assert.Equal(t, inputs[0], inputs[1], "recorded as the id it stands for")
}

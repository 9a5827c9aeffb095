package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// wireCase is an agent of one wire format: a first request the model
// answers with a tool call, and a second that carries the tool's result
// back under the id the model minted.
type wireCase struct {
	name   string
	stream bool
	path   func(model string) string
	first  func(model string, stream bool) string
	second func(model string, stream bool, resp []byte, result string) string
}

var (
	callID = regexp.MustCompile(`"((?:call|toolu)_[0-9a-f]+)"`)
	respID = regexp.MustCompile(`"(resp_[0-9a-f]+)"`)
)

func match(re *regexp.Regexp, b []byte) string {
	m := re.FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

func streamKey(stream bool) string {
	if stream {
		return `,"stream":true`
	}
	return ""
}

var wireCases = []wireCase{
	{
		name: "chat",
		path: func(string) string { return "/v1/chat/completions" },
		first: func(m string, st bool) string {
			return fmt.Sprintf(`{"model":%q,"messages":[{"role":"developer","content":"Be terse."},{"role":"user","content":"weather?"}]%s}`, m, streamKey(st))
		},
		second: func(m string, st bool, resp []byte, result string) string {
			id := match(callID, resp)
			return fmt.Sprintf(`{"model":%q,"messages":[{"role":"developer","content":"Be terse."},{"role":"user","content":"weather?"},`+
				`{"role":"assistant","tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":"{\"q\":\"weather\"}"}}]},`+
				`{"role":"tool","tool_call_id":%q,"content":%q}]%s}`, m, id, id, result, streamKey(st))
		},
	},
	{
		name: "responses",
		path: func(string) string { return "/v1/responses" },
		first: func(m string, st bool) string {
			return fmt.Sprintf(`{"model":%q,"instructions":"Be terse.","input":"weather?"%s}`, m, streamKey(st))
		},
		second: func(m string, st bool, resp []byte, result string) string {
			return fmt.Sprintf(`{"model":%q,"instructions":"Be terse.","previous_response_id":%q,"input":[{"type":"function_call_output","call_id":%q,"output":%q}]%s}`,
				m, match(respID, resp), match(callID, resp), result, streamKey(st))
		},
	},
	{
		name: "anthropic",
		path: func(string) string { return "/v1/messages" },
		first: func(m string, st bool) string {
			return fmt.Sprintf(`{"model":%q,"max_tokens":256,"system":[{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"weather?"}]%s}`, m, streamKey(st))
		},
		second: func(m string, st bool, resp []byte, result string) string {
			id := match(callID, resp)
			return fmt.Sprintf(`{"model":%q,"max_tokens":256,"system":[{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"weather?"},`+
				`{"role":"assistant","content":[{"type":"tool_use","id":%q,"name":"lookup","input":{"q":"weather"}}]},`+
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":%q}]}]%s}`, m, id, id, result, streamKey(st))
		},
	},
	{
		name: "gemini",
		path: func(m string) string { return "/v1beta/models/" + m + ":generateContent" },
		first: func(string, bool) string {
			return `{"systemInstruction":{"parts":[{"text":"Be terse."}]},"contents":[{"role":"user","parts":[{"text":"weather?"}]}],"generationConfig":{"temperature":0.2}}`
		},
		second: func(_ string, _ bool, _ []byte, result string) string {
			return fmt.Sprintf(`{"systemInstruction":{"parts":[{"text":"Be terse."}]},"contents":[{"role":"user","parts":[{"text":"weather?"}]},`+
				`{"role":"model","parts":[{"functionCall":{"name":"lookup","args":{"q":"weather"}}}]},`+
				`{"role":"user","parts":[{"functionResponse":{"name":"lookup","response":{"result":%q}}}]}],"generationConfig":{"temperature":0.2}}`, result)
		},
	},
}

// allWireCases is every wire format, streamed and not.
func allWireCases() []wireCase {
	var out []wireCase
	for _, c := range wireCases {
		out = append(out, c)
		st := c
		st.name, st.stream = c.name+"/stream", true
		if c.name == "gemini" {
			st.path = func(m string) string { return "/v1beta/models/" + m + ":streamGenerateContent?alt=sse" }
		}
		out = append(out, st)
	}
	return out
}

// agent is the two-turn agent of c against srv, through client; the tool
// runs through replay.Tool.
func (c wireCase) agent(srv *fakeprovider.Server, client *http.Client, model string) replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, q string) (string, error) { return "sunny, 21C", nil })
	post := func(ctx context.Context, body string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+c.path(model), strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-live-SECRET0123456789abcdef")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return b, err
	}
	return func(ctx context.Context, _ trace.Value) (any, error) {
		first, err := post(ctx, c.first(model, c.stream))
		if err != nil {
			return nil, err
		}
		result, err := lookup(ctx, "weather")
		if err != nil {
			return nil, err
		}
		second, err := post(ctx, c.second(model, c.stream, first, result))
		if err != nil {
			return nil, err
		}
		return len(second) > 0, nil
	}
}

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
	for _, c := range allWireCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.agent(srv, newClient(t), "m-1"))
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
			if strings.HasPrefix(c.name, "anthropic") {
				assert.Equal(t, `10`, u.Get("cache_write_tokens").Canonical(), "%s", u)
			} else {
				assert.Equal(t, `5`, u.Get("reasoning_tokens").Canonical(), "%s", u)
			}
			require.NotNil(t, rs[1].PromptTokens)
			assert.Equal(t, int64(100), *rs[1].PromptTokens)
			assert.Equal(t, int64(20), *rs[1].CompletionTokens)
			assert.Equal(t, int64(120), *rs[1].TotalTokens)
			assert.Nil(t, rs[1].CostUSD, "no price was set")

			if strings.HasPrefix(c.name, "gemini") {
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
	for _, c := range allWireCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			client := newClient(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.agent(srv, client, "m-1"))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			before := srv.Requests()
			res, err := replay.Replay(context.Background(), rec.Trace, c.agent(srv, client, "m-1"))
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
	for _, c := range allWireCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			client := newClient(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.agent(srv, client, "m-1"))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			res, err := replay.Replay(context.Background(), rec.Trace, c.agent(srv, client, "m-1"),
				replay.Live("lookup"))
			require.NoError(t, err)
			require.NoError(t, res.Err)
			require.NoError(t, res.Divergence, "the live ids stand for the recorded ones")
			assert.Equal(t, int64(4), srv.Requests())

			sent := srv.Received()[3].Body
			if id := match(callID, srv.Received()[2].Body); id != "" {
				assert.Contains(t, string(sent), id, "the server gets the ids it minted")
			}
			recReqs, liveReqs := requests(rec.Trace), requests(res.Trace)
			assert.Equal(t, recReqs[1].Input.Canonical(), liveReqs[1].Input.Canonical(), "recorded as the request it stands for")
			recMsg, liveMsg := responses(rec.Trace)[0].Output.Get("message"), responses(res.Trace)[0].Output.Get("message")
			assert.Equal(t, recMsg.Canonical(), liveMsg.Canonical())
			if !strings.HasPrefix(c.name, "gemini") {
				assert.Equal(t, trace.Object, responses(res.Trace)[0].Output.Get("ids").Kind(), "the live ids are kept with the recorded ones they stand for")
			}

			// A frozen replay of the live run binds its live ids again.
			before := srv.Requests()
			again, err := replay.Replay(context.Background(), res.Trace, c.agent(srv, client, "m-1"))
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
	for _, c := range allWireCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.agent(srv, newClient(t, replay.Prices{"m-1": price}), "m-1"))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			r := responses(rec.Trace)[1]
			require.NotNil(t, r.CostUSD)
			fresh, cached, written := int64(60), int64(40), int64(0)
			if strings.HasPrefix(c.name, "anthropic") {
				fresh, written = 50, 10
			}
			want := (float64(fresh)*2 + float64(cached)*1 + float64(written)*4 + 20*8) / 1e6
			assert.InDelta(t, want, *r.CostUSD, 1e-12)
		})
	}

	t.Run("label wins", func(t *testing.T) {
		t.Parallel()
		srv := newProvider(t)
		c := wireCases[0]
		client := newClient(t, replay.Prices{"m-1": {Input: 1}, "openai/m-1": {Input: 1000}})
		rec, err := replay.Record(context.Background(), "wire", nil, c.agent(srv, client, "m-1"))
		require.NoError(t, err)
		assert.InDelta(t, 100*1000/1e6, *responses(rec.Trace)[0].CostUSD, 1e-12)
	})

	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		srv := newProvider(t)
		c := wireCases[0]
		client := newClient(t, replay.Prices{"m-1": {Input: -1}})
		rec, err := replay.Record(context.Background(), "wire", nil, c.agent(srv, client, "m-1"))
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
		rec, err := replay.Record(context.Background(), "wire", nil, wireCases[0].agent(srv, client, "m-1"))
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
	for _, c := range allWireCases() {
		if !strings.HasPrefix(c.name, "gemini") {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := newProvider(t)
			client := newClient(t)
			rec, err := replay.Record(context.Background(), "wire", nil, c.agent(srv, client, "gemini-2.5-flash"))
			require.NoError(t, err)
			require.NoError(t, rec.Err)
			d := replay.DirectorFunc(func(call *replay.Call) replay.Action {
				if call.Kind == replay.KindLLM {
					return replay.Execute().WithModel("gemini-2.5-pro")
				}
				return replay.ServeMatch()
			})
			res, err := replay.Replay(context.Background(), rec.Trace, c.agent(srv, client, "gemini-2.5-flash"), replay.WithDirector(d))
			require.NoError(t, err)
			require.NoError(t, res.Err)
			last := srv.Last()
			assert.Contains(t, last.Path, "/models/gemini-2.5-pro:")
			assert.Equal(t, strings.Contains(c.name, "stream"), strings.Contains(last.Path, "alt=sse"), "the query is kept")
			assert.Equal(t, "gemini-2.5-pro", requests(res.Trace)[1].Model)
			assert.True(t, bytes.Contains(last.Body, []byte(`"functionResponse"`)))
		})
	}
}

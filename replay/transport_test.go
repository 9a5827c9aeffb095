package replay_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Credentials the agent sends with every request; none may reach a bundle.
var sentSecrets = map[string]string{
	"Authorization":       "Bearer AUTHZ-TOKEN-4711",
	"X-Api-Key":           "XAPIKEY-4711",
	"Api-Key":             "APIKEY-4711",
	"Openai-Organization": "ORG-4711",
	"Cookie":              "sid=COOKIE-4711",
}

// httpCall is one request an agent makes, the way an SDK makes it.
type httpCall struct {
	method, path, body string
	stream             bool          // Accept: text/event-stream
	clientTimeout      time.Duration // http.Client.Timeout
	ctxTimeout         time.Duration // a context deadline
	releaseAfter       int           // release a "reset" stream after reading this many frames
	closeAfter         int           // close the body after this many frames
}

// exchange is what the agent saw of one call.
type exchange struct {
	Status  int    `json:"status"`
	CT      string `json:"content_type"`
	Body    string `json:"body"`     // the bytes read
	ReadErr string `json:"read_err"` // class of the error reading the body
	Err     string `json:"err"`      // class of the error of the request
}

// errClass names an error by what an SDK checks.
func errClass(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, replay.ErrDiverged):
		return "diverged"
	case errors.As(err, &ne) && ne.Timeout() && errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	}
	return "other: " + err.Error()
}

func do(ctx context.Context, t testing.TB, base http.RoundTripper, f *fakeLLM, c httpCall) (exchange, error) {
	client := &http.Client{Transport: replay.Transport(base), Timeout: c.clientTimeout}
	if c.ctxTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.ctxTimeout)
		defer cancel()
	}
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.srv.URL+c.path, body)
	require.NoError(t, err)
	for k, v := range sentSecrets {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := client.Do(req)
	if err != nil {
		return exchange{Err: errClass(err)}, err
	}
	defer resp.Body.Close()
	ex := exchange{Status: resp.StatusCode, CT: resp.Header.Get("Content-Type")}
	var got []byte
	buf := make([]byte, 512)
	for {
		frames := bytes.Count(got, []byte("\n\n"))
		if c.releaseAfter > 0 && frames >= c.releaseAfter {
			f.release()
		}
		if c.closeAfter > 0 && frames >= c.closeAfter {
			break
		}
		n, rerr := resp.Body.Read(buf)
		got = append(got, buf[:n]...)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			ex.ReadErr = errClass(rerr)
			err = rerr
			break
		}
	}
	if c.closeAfter > 0 { // what the agent used: the frames it parsed before closing
		got = got[:frameEnd(got, c.closeAfter)]
	}
	ex.Body = string(got)
	return ex, err
}

// httpAgent makes calls in order and returns what it saw.
func httpAgent(t testing.TB, base http.RoundTripper, f *fakeLLM, calls ...httpCall) replay.Agent {
	return func(ctx context.Context, _ trace.Value) (any, error) {
		var out []exchange
		for _, c := range calls {
			ex, _ := do(ctx, t, base, f, c)
			out = append(out, ex)
		}
		return out, nil
	}
}

func newBase(t *testing.T) *http.Transport {
	t.Helper()
	b := &http.Transport{}
	t.Cleanup(b.CloseIdleConnections)
	return b
}

// assertNoSecrets reads every file of a bundle: no credential the agent sent
// and no secret response header may be there.
func assertNoSecrets(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		text := strings.ToLower(string(b))
		for k, v := range sentSecrets {
			assert.NotContains(t, text, strings.ToLower(v), e.Name())
			assert.NotContains(t, text, `"`+strings.ToLower(k)+`"`, e.Name())
		}
		for _, s := range []string{"org-secretorg", "cookievalue", "set-cookie"} {
			assert.NotContains(t, text, s, e.Name())
		}
	}
}

// recordAndReplay records agent, saves and checks the bundle, and replays it
// frozen: same output, the server not contacted.
func recordAndReplay(t *testing.T, f *fakeLLM, agent replay.Agent) (*trace.Trace, *replay.Result) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "http.sftrace")
	rec, err := replay.Record(context.Background(), "http-agent", nil, agent, replay.SaveTo(path))
	require.NoError(t, err)
	report := trace.ValidateBundle(context.Background(), path, trace.CheckIntegrity(), trace.Pedantic())
	require.True(t, report.Valid(), "%v", report.Issues)
	assertNoSecrets(t, path)
	tr, err := trace.Load(path)
	require.NoError(t, err)

	before := f.requests.Load()
	res, err := replay.Replay(context.Background(), tr, agent)
	require.NoError(t, err)
	assert.Equal(t, before, f.requests.Load(), "requests to the server during the frozen replay")
	assert.Equal(t, rec.Output, res.Output, "what the agent saw on replay")
	assert.Equal(t, tr.Totals.LLMCalls+tr.Totals.ToolCalls, res.Served)
	assert.Zero(t, res.Executed)
	assertEquivalent(t, tr, res.Trace)
	return tr, res
}

func frames(t *testing.T, path, model string, n int) string {
	t.Helper()
	fr := sseFrames(path, model)
	if n < 0 || n > len(fr) {
		n = len(fr)
	}
	return strings.Join(fr[:n], "")
}

func TestTransportRecordsAndReplaysTheWireFormats(t *testing.T) {
	t.Parallel()
	const (
		chat      = "/v1/chat/completions"
		responses = "/v1/responses"
		messages  = "/v1/messages"
	)
	tests := []struct {
		name     string
		call     httpCall
		provider string
		model    string
		want     func(t *testing.T) exchange
		check    func(t *testing.T, out trace.Value)
		usage    []int64 // prompt, completion, total tokens of the llm_response
	}{
		{
			name: "chat json", provider: "openai", model: "gpt-4o", usage: []int64{12, 4, 16},
			call: httpCall{path: chat, body: `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"temperature":0.2}`},
			want: func(*testing.T) exchange {
				return exchange{Status: 200, CT: "application/json", Body: jsonAnswer(chat, "gpt-4o")}
			},
			check: func(t *testing.T, out trace.Value) {
				assert.Equal(t, trace.MustParse(jsonAnswer(chat, "gpt-4o")), out.Get("body"))
				assert.Equal(t, `{"content-type":"application/json","x-request-id":"req_gpt-4o"}`, out.Get("headers").Canonical())
			},
		},
		{
			name: "chat stream", provider: "openai", model: "gpt-4o", usage: []int64{9, 2, 11},
			call: httpCall{path: chat, stream: true, body: `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
			want: func(t *testing.T) exchange {
				return exchange{Status: 200, CT: "text/event-stream", Body: frames(t, chat, "gpt-4o", -1)}
			},
			check: func(t *testing.T, out trace.Value) {
				st := out.Get("stream")
				require.Equal(t, 6, st.Len())
				assert.Equal(t, `{"data":"[DONE]"}`, elem(st, 5).Canonical())
				assert.Equal(t, `"Hel"`, elem(elem(st, 1).Get("data").Get("choices"), 0).Get("delta").Get("content").Canonical())
				assert.True(t, out.Get("body_error").IsAbsent())
			},
		},
		{
			name: "responses json", provider: "openai", model: "gpt-4.1", usage: []int64{10, 3, 13},
			call: httpCall{path: responses, body: `{"model":"gpt-4.1","input":"hi"}`},
			want: func(*testing.T) exchange {
				return exchange{Status: 200, CT: "application/json", Body: jsonAnswer(responses, "gpt-4.1")}
			},
		},
		{
			name: "responses stream", provider: "openai", model: "gpt-4.1", usage: []int64{10, 2, 12},
			call: httpCall{path: responses, stream: true, body: `{"model":"gpt-4.1","input":"hi","stream":true}`},
			want: func(t *testing.T) exchange {
				return exchange{Status: 200, CT: "text/event-stream", Body: frames(t, responses, "gpt-4.1", -1)}
			},
			check: func(t *testing.T, out trace.Value) {
				assert.Equal(t, `"response.completed"`, elem(out.Get("stream"), 3).Get("event").Canonical())
			},
		},
		{
			name: "anthropic json", provider: "anthropic", model: "claude-sonnet-4-5", usage: []int64{11, 4, 15},
			call: httpCall{path: messages, body: `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`},
			want: func(*testing.T) exchange {
				return exchange{Status: 200, CT: "application/json", Body: jsonAnswer(messages, "claude-sonnet-4-5")}
			},
		},
		{
			name: "anthropic stream", provider: "anthropic", model: "claude-sonnet-4-5", usage: []int64{11, 2, 13},
			call: httpCall{path: messages, stream: true, body: `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[]}`},
			want: func(t *testing.T) exchange {
				return exchange{Status: 200, CT: "text/event-stream", Body: frames(t, messages, "claude-sonnet-4-5", -1)}
			},
			check: func(t *testing.T, out trace.Value) {
				st := out.Get("stream")
				require.Equal(t, 8, st.Len())
				assert.Equal(t, `"message_start"`, elem(st, 0).Get("event").Canonical())
				assert.Equal(t, `"ping"`, elem(st, 2).Get("event").Canonical())
			},
		},
		{
			name: "prefixed base URL", provider: "openai", model: "llama3", usage: []int64{9, 2, 11},
			call: httpCall{path: "/ollama" + chat, stream: true, body: `{"model":"llama3","stream":true,"messages":[]}`},
			want: func(t *testing.T) exchange {
				return exchange{Status: 200, CT: "text/event-stream", Body: frames(t, chat, "llama3", -1)}
			},
		},
		{
			name: "429 is a response", provider: "openai", model: "fail-429",
			call: httpCall{path: chat, body: `{"model":"fail-429","messages":[]}`},
			want: func(*testing.T) exchange {
				return exchange{Status: 429, CT: "application/json", Body: `{"error":{"message":"slow down","type":"rate_limit_error"}}`}
			},
			check: func(t *testing.T, out trace.Value) {
				assert.Equal(t, `{"content-type":"application/json","retry-after":"0","x-request-id":"req_fail-429","x-should-retry":"false"}`,
					out.Get("headers").Canonical())
			},
		},
		{
			name: "500 with a text body", provider: "anthropic", model: "fail-500",
			call: httpCall{path: messages, body: `{"model":"fail-500","messages":[]}`},
			want: func(*testing.T) exchange {
				return exchange{Status: 500, CT: "text/plain; charset=utf-8", Body: "upstream exploded\n"}
			},
			check: func(t *testing.T, out trace.Value) {
				assert.Equal(t, `"upstream exploded\n"`, out.Get("body_text").Canonical())
				assert.True(t, out.Get("body").IsAbsent())
			},
		},
		{
			name: "200 with a body that is not JSON", provider: "openai", model: "text-body",
			call: httpCall{path: chat, body: `{"model":"text-body","messages":[]}`},
			want: func(*testing.T) exchange {
				return exchange{Status: 200, CT: "text/plain", Body: "not json at all"}
			},
		},
		{
			name: "stream closed by the server after two frames", provider: "openai", model: "break",
			call: httpCall{path: chat, stream: true, body: `{"model":"break","stream":true,"messages":[]}`},
			want: func(t *testing.T) exchange {
				return exchange{Status: 200, CT: "text/event-stream", Body: frames(t, chat, "break", 2), ReadErr: "unexpected EOF"}
			},
			check: func(t *testing.T, out trace.Value) {
				assert.Equal(t, 2, out.Get("stream").Len())
				assert.Equal(t, `"UnexpectedEOF"`, out.Get("body_error").Get("type").Canonical())
			},
		},
		{
			name: "stream reset after two frames", provider: "anthropic", model: "reset", usage: []int64{11, 1, 12},
			call: httpCall{path: messages, stream: true, releaseAfter: 2, body: `{"model":"reset","stream":true,"messages":[]}`},
			want: func(t *testing.T) exchange {
				return exchange{Status: 200, CT: "text/event-stream", Body: frames(t, messages, "reset", 2), ReadErr: "reset"}
			},
			check: func(t *testing.T, out trace.Value) {
				assert.Equal(t, 2, out.Get("stream").Len())
				assert.Equal(t, `"ConnectionReset"`, out.Get("body_error").Get("type").Canonical())
			},
		},
		{
			name: "stream closed early by the agent", provider: "openai", model: "hold",
			call: httpCall{path: responses, stream: true, closeAfter: 2, body: `{"model":"hold","stream":true,"input":"x"}`},
			want: func(t *testing.T) exchange {
				return exchange{Status: 200, CT: "text/event-stream", Body: frames(t, responses, "hold", 2)}
			},
			check: func(t *testing.T, out trace.Value) {
				assert.Equal(t, "true", out.Get("closed_early").Canonical())
			},
		},
		{
			name: "client timeout", provider: "openai", model: "slow",
			call: httpCall{path: chat, clientTimeout: time.Second, body: `{"model":"slow","messages":[]}`},
			want: func(*testing.T) exchange { return exchange{Err: "timeout"} },
			check: func(t *testing.T, errEv trace.Value) {
				assert.Equal(t, `"Timeout"`, errEv.Canonical())
			},
		},
		{
			name: "context deadline", provider: "anthropic", model: "slow",
			call: httpCall{path: messages, ctxTimeout: time.Second, body: `{"model":"slow","messages":[]}`},
			want: func(*testing.T) exchange { return exchange{Err: "timeout"} },
			check: func(t *testing.T, errEv trace.Value) {
				assert.Equal(t, `"Timeout"`, errEv.Canonical())
			},
		},
		{
			name: "connection reset before a response", provider: "openai", model: "reset-now",
			call: httpCall{path: chat, body: `{"model":"reset-now","messages":[]}`},
			want: func(*testing.T) exchange { return exchange{Err: "reset"} },
			check: func(t *testing.T, errEv trace.Value) {
				assert.Equal(t, `"ConnectionReset"`, errEv.Canonical())
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeLLM(t)
			base := newBase(t)
			tr, res := recordAndReplay(t, f, httpAgent(t, base, f, tc.call))
			assert.Equal(t, []exchange{tc.want(t)}, res.Output)
			assert.Equal(t, int64(1), f.requests.Load())

			req := find(t, tr, trace.LLMRequest, tc.model)
			assert.Equal(t, tc.provider, req.Provider)
			assert.Equal(t, trace.MustParse(tc.call.body), req.Input, "the request body is the input")
			if tc.want(t).Err != "" { // a failed call: an error event under the request
				errEv := childOf(t, tr, req.ID, trace.ErrorEvent)
				tc.check(t, trace.StringValue(errEv.ErrorType))
				assert.NotEmpty(t, errEv.Message)
				return
			}
			resp := childOf(t, tr, req.ID, trace.LLMResponse)
			assert.Equal(t, tc.model, resp.Model)
			st, _ := resp.Output.Get("status").Int()
			assert.Equal(t, int64(tc.want(t).Status), st)
			if tc.check != nil {
				tc.check(t, resp.Output)
			}
			if tc.usage != nil {
				assert.Equal(t, tc.usage, []int64{deref(resp.PromptTokens), deref(resp.CompletionTokens), deref(resp.TotalTokens)})
			} else {
				assert.Nil(t, resp.TotalTokens)
			}
		})
	}
}

func elem(v trace.Value, i int) trace.Value {
	for j, e := range v.Elems() {
		if j == i {
			return e
		}
	}
	return trace.Value{}
}

func childOf(t *testing.T, tr *trace.Trace, parent string, typ trace.EventType) *trace.Event {
	t.Helper()
	for i := range tr.Events {
		if ev := &tr.Events[i]; ev.ParentID == parent && ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("no %s under %s", typ, parent)
	return nil
}

// frameEnd is the offset just after the n-th frame of an event stream.
func frameEnd(b []byte, n int) int {
	end := 0
	for range n {
		i := bytes.Index(b[end:], []byte("\n\n"))
		if i < 0 {
			return len(b)
		}
		end += i + 2
	}
	return end
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

func TestTransportRecordsOtherRequestsAsHTTPCalls(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	calls := []httpCall{
		{method: http.MethodGet, path: "/v1/models"},
		{path: "/v1/embeddings", body: `{"model":"text-embedding-3-small","input":"x"}`},
		{path: "/v1/messages/count_tokens", body: `{"model":"claude","messages":[]}`},
		{method: http.MethodGet, path: "/v1/chat/completions"},
		{path: "/other?key=GOOGLEKEY123&alt=json"},
	}
	want := []exchange{
		{Status: 200, CT: "application/json", Body: `{"data":[{"id":"gpt-4o","object":"model"}],"object":"list"}`},
		{Status: 200, CT: "text/plain", Body: "plain POST /v1/embeddings"},
		{Status: 200, CT: "text/plain", Body: "plain POST /v1/messages/count_tokens"},
		{Status: 200, CT: "text/plain", Body: "plain GET /v1/chat/completions"},
		{Status: 200, CT: "text/plain", Body: "plain POST /other"},
	}
	agent := httpAgent(t, base, f, calls...)

	// No session: Transport is its base.
	out, err := agent(context.Background(), trace.Value{})
	require.NoError(t, err)
	assert.Equal(t, want, out)
	assert.Equal(t, int64(5), f.requests.Load())
	assert.Equal(t, "Bearer AUTHZ-TOKEN-4711", f.headers.Get("Authorization"), "headers reach the server untouched")

	// A nil base is http.DefaultTransport.
	client := &http.Client{Transport: replay.Transport(nil)}
	resp, err := client.Get(f.srv.URL + "/v1/models")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, 200, resp.StatusCode)
	client.CloseIdleConnections()

	// In a session: recorded as "http" tool calls, served by a frozen
	// replay without a request.
	rec, err := replay.Record(context.Background(), "pass", nil, agent)
	require.NoError(t, err)
	assert.Equal(t, want, rec.Output)
	var tools []trace.Event
	for _, ev := range rec.Trace.Events {
		if ev.Type == trace.ToolCall {
			tools = append(tools, ev)
		}
	}
	require.Len(t, tools, 5)
	for _, ev := range tools {
		assert.Equal(t, "http", ev.Name)
	}
	assert.Equal(t, "POST", mustStr(t, tools[1].Input.Get("method")))
	assert.Equal(t, `{"alt":["json"],"key":["[REDACTED]"]}`, tools[4].Input.Get("query").Canonical())
	assert.NotContains(t, string(mustSave(t, rec.Trace)), "GOOGLEKEY123")
	before := f.requests.Load()
	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	require.NoError(t, err)
	assert.Equal(t, want, res.Output)
	assert.Equal(t, before, f.requests.Load(), "a frozen replay sends nothing")
	assert.Equal(t, 5, res.Served)
}

func mustStr(t *testing.T, v trace.Value) string {
	t.Helper()
	s, ok := v.Str()
	require.True(t, ok, "%s is not a string", v)
	return s
}

// mustSave is the bytes of tr's saved bundle files, concatenated.
func mustSave(t *testing.T, tr *trace.Trace) []byte {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "b.sftrace")
	require.NoError(t, tr.Save(dir))
	var all []byte
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		all = append(all, b...)
	}
	return all
}

func types(tr *trace.Trace) []trace.EventType {
	var out []trace.EventType
	for _, ev := range tr.Events {
		out = append(out, ev.Type)
	}
	return out
}

func TestTransportChangedRequestBodyDiverges(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	ask := func(prompt string) replay.Agent {
		return httpAgent(t, base, f, httpCall{path: "/v1/chat/completions",
			body: `{"model":"gpt-4o","messages":[{"role":"user","content":"` + prompt + `"}]}`})
	}
	rec, err := replay.Record(context.Background(), "ask", nil, ask("book a flight"))
	require.NoError(t, err)
	before := f.requests.Load()

	// The SDK sends the same JSON with other spacing and key order: still a match.
	same := httpAgent(t, base, f, httpCall{path: "/v1/chat/completions",
		body: `{ "messages": [ {"content": "book a flight", "role": "user"} ], "model": "gpt-4o" }`})
	_, err = replay.Replay(context.Background(), rec.Trace, same)
	require.NoError(t, err)

	res, err := replay.Replay(context.Background(), rec.Trace, ask("book a hotel"))
	require.ErrorIs(t, err, replay.ErrDiverged)
	assert.Equal(t, before, f.requests.Load(), "a divergence never reaches the server")
	var m *replay.MismatchError
	require.ErrorAs(t, err, &m)
	assert.Contains(t, m.Error(), "call #1: llm 'openai/gpt-4o' input diverged from the recording")
	assert.Contains(t, m.Diff(), `-`)
	assert.Contains(t, m.Diff(), `"book a flight"`)
	assert.Contains(t, m.Diff(), `"book a hotel"`)
	assert.Contains(t, m.Error(), "diff (-recorded +actual):")
	assert.Equal(t, []exchange{{Err: "diverged"}}, res.Output, "the agent's client got the divergence")
	assert.ErrorIs(t, res.Divergence, replay.ErrDiverged)
}

func TestTransportEventStreamCorners(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	agent := httpAgent(t, base, f, httpCall{path: "/v1/chat/completions", stream: true, body: `{"model":"odd","stream":true}`})
	rec, err := replay.Record(context.Background(), "odd", nil, agent)
	require.NoError(t, err)
	assert.Equal(t, oddStream, rec.Output.([]exchange)[0].Body, "while recording the agent reads the bytes as sent")

	resp := find(t, rec.Trace, trace.LLMResponse, "odd")
	assert.Equal(t, `[{"data":"line one\nline two","event":"note","id":"7"},{"data":{"a":1}},{"retry":"3000"}]`,
		resp.Output.Get("stream").Canonical(), "comments dropped, CRLF and multi-line data parsed")
	assert.Equal(t, `"data: {\"cut\""`, resp.Output.Get("stream_tail").Canonical())

	res, err := replay.Replay(context.Background(), rec.Trace, agent, replay.WithDirector(replay.DirectorFunc(
		func(*replay.Call) replay.Action { return replay.Strict() })))
	require.NoError(t, err)
	assert.Equal(t, "event: note\nid: 7\ndata: line one\ndata: line two\n\ndata: {\"a\":1}\n\nretry: 3000\n\ndata: {\"cut\"",
		res.Output.([]exchange)[0].Body)
}

func TestTransportServesJSONAsCanonicalJSON(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	agent := httpAgent(t, base, f, httpCall{path: "/v1/chat/completions", body: `{"model":"pretty"}`})
	rec, err := replay.Record(context.Background(), "pretty", nil, agent)
	require.NoError(t, err)
	res, err := replay.Replay(context.Background(), rec.Trace, agent, replay.WithDirector(replay.DirectorFunc(
		func(*replay.Call) replay.Action { return replay.Strict() })))
	require.NoError(t, err)
	recorded, replayed := rec.Output.([]exchange)[0].Body, res.Output.([]exchange)[0].Body
	assert.NotEqual(t, recorded, replayed)
	assert.Equal(t, `{"a":[true,null,"x"],"z":1}`, replayed)
	assert.Equal(t, trace.MustParse(recorded), trace.MustParse(replayed), "same JSON value")
}

func TestTransportDirectorPatchesTheBody(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	agent := httpAgent(t, base, f, httpCall{path: "/v1/chat/completions", stream: true,
		body: `{"model":"gpt-4o","stream":true,"temperature":0,"messages":[{"role":"user","content":"hi"}]}`})
	rec, err := replay.Record(context.Background(), "patch", nil, agent)
	require.NoError(t, err)

	patched := trace.MustParse(`{"model":"gpt-4.1","stream":true,"temperature":0.7,"messages":[{"role":"user","content":"hi"}]}`)
	var seen *replay.Call
	res, err := replay.Replay(context.Background(), rec.Trace, agent, replay.WithDirector(replay.DirectorFunc(
		func(c *replay.Call) replay.Action {
			cp := *c
			seen = &cp
			return replay.Execute().WithInput(patched).WithModel("gpt-4.1")
		})))
	require.NoError(t, err)
	require.NotNil(t, seen)
	assert.Equal(t, replay.KindLLM, seen.Kind)
	assert.Equal(t, "openai/gpt-4o", seen.Name)
	assert.Equal(t, find(t, rec.Trace, trace.LLMRequest, "gpt-4o").Input, seen.Input)
	assert.Equal(t, int64(2), f.requests.Load())
	assert.Equal(t, patched, trace.MustParse(string(f.lastBody())), "the patched body was sent")
	assert.Equal(t, 1, res.Executed)
	req := find(t, res.Trace, trace.LLMRequest, "gpt-4.1")
	assert.Equal(t, patched, req.Input)
	resp := childOf(t, res.Trace, req.ID, trace.LLMResponse)
	assert.Equal(t, 6, resp.Output.Get("stream").Len(), "the live stream was recorded in the fork's trace")
}

func TestTransportServedValueMustBeAnHTTPResponse(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	agent := httpAgent(t, base, f, httpCall{path: "/v1/messages", body: `{"model":"claude","messages":[]}`})
	rec, err := replay.Record(context.Background(), "serve", nil, agent)
	require.NoError(t, err)
	res, err := replay.Replay(context.Background(), rec.Trace, agent, replay.WithDirector(replay.DirectorFunc(
		func(*replay.Call) replay.Action { return replay.Serve(trace.MustParse(`{"content":"hi"}`)) })))
	require.ErrorIs(t, err, replay.ErrDiverged)
	assert.Contains(t, err.Error(), `recorded output of llm 'anthropic/claude' is not an HTTP response recorded by replay.Transport: "status" must be an HTTP status code, got <missing>`)
	assert.Equal(t, []exchange{{Err: "diverged"}}, res.Output)

	// A Director may serve a response in the recorded shape.
	res, err = replay.Replay(context.Background(), rec.Trace, agent, replay.WithDirector(replay.DirectorFunc(
		func(*replay.Call) replay.Action {
			return replay.Serve(trace.MustParse(`{"status":201,"headers":{"content-type":"application/json"},"body":{"content":"hi"}}`))
		})))
	require.NoError(t, err)
	assert.Equal(t, []exchange{{Status: 201, CT: "application/json", Body: `{"content":"hi"}`}}, res.Output)
}

func TestTransportHybridRunsNamedModelsLive(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	agent := httpAgent(t, base, f,
		httpCall{path: "/v1/chat/completions", stream: true, body: `{"model":"gpt-4o","stream":true,"messages":[]}`},
		httpCall{path: "/v1/messages", stream: true, body: `{"model":"claude","stream":true,"messages":[]}`})
	rec, err := replay.Record(context.Background(), "hybrid", nil, agent)
	require.NoError(t, err)
	require.Equal(t, int64(2), f.requests.Load())

	res, err := replay.Replay(context.Background(), rec.Trace, agent,
		replay.Hybrid("anthropic/claude"))
	require.NoError(t, err)
	assert.Equal(t, int64(3), f.requests.Load(), "only the live model reached the server")
	assert.Equal(t, rec.Output, res.Output)
	assert.Equal(t, 1, res.Served)
	assert.Equal(t, 1, res.Executed)
	assertEquivalent(t, rec.Trace, res.Trace)
}

func TestTransportConcurrentStreams(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	const n = 6
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		out := make([]exchange, n)
		done := make(chan struct{})
		for i := range n {
			go func() {
				defer func() { done <- struct{}{} }()
				path := []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"}[i%3]
				out[i], _ = do(ctx, t, base, f, httpCall{path: path, stream: true,
					body: `{"model":"m` + string(rune('a'+i)) + `","stream":true}`})
			}()
		}
		for range n {
			<-done
		}
		return out, nil
	}
	rec, err := replay.Record(context.Background(), "fanout", nil, agent)
	require.NoError(t, err)
	require.Equal(t, n, rec.Trace.Totals.LLMCalls)
	for i, ex := range rec.Output.([]exchange) {
		require.Empty(t, ex.ReadErr, i)
		require.Equal(t, 200, ex.Status, i)
	}
	before := f.requests.Load()
	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	require.NoError(t, err)
	assert.Equal(t, before, f.requests.Load())
	assert.Equal(t, rec.Output, res.Output)
	assert.Equal(t, n, res.Served)
}

// TestTransportLeavesNoGoroutines runs record and replay of every kind of
// exchange, then checks that the goroutine count settles back. Not parallel:
// it counts the process's goroutines.
func TestTransportLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		f := newFakeLLM(t)
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		agent := httpAgent(t, base, f,
			httpCall{path: "/v1/chat/completions", stream: true, body: `{"model":"gpt-4o","stream":true}`},
			httpCall{path: "/v1/messages", body: `{"model":"claude"}`},
			httpCall{path: "/v1/responses", stream: true, closeAfter: 2, body: `{"model":"hold","stream":true}`},
			httpCall{path: "/v1/chat/completions", stream: true, body: `{"model":"break","stream":true}`},
			httpCall{path: "/v1/chat/completions", clientTimeout: 50 * time.Millisecond, body: `{"model":"slow"}`},
			httpCall{method: http.MethodGet, path: "/v1/models"})
		rec, err := replay.Record(context.Background(), "leak", nil, agent)
		require.NoError(t, err)
		_, err = replay.Replay(context.Background(), rec.Trace, agent)
		require.NoError(t, err)
		base.CloseIdleConnections()
		f.srv.Close()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left behind")
}

func TestTransportStreamLeftOpenWhenTheRunEnds(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	var open io.ReadCloser
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		client := &http.Client{Transport: replay.Transport(base)}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"hold","stream":true}`))
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		open = resp.Body // the agent forgets to read and close it
		return "done", nil
	}
	path := filepath.Join(t.TempDir(), "open.sftrace")
	rec, err := replay.Record(context.Background(), "open", nil, agent, replay.SaveTo(path))
	require.NoError(t, err)
	n := len(rec.Trace.Events)
	_, _ = io.ReadAll(io.LimitReader(open, 1))
	require.NoError(t, open.Close()) // after the run: the late response is dropped, not appended
	assert.Len(t, rec.Trace.Events, n)
	assert.Equal(t, []trace.EventType{trace.RunStart, trace.LLMRequest, trace.RunEnd}, types(rec.Trace))
	report := trace.ValidateBundle(context.Background(), path, trace.CheckIntegrity())
	require.True(t, report.Valid(), "%v", report.Issues)

	_, err = replay.Replay(context.Background(), rec.Trace, agent)
	require.ErrorIs(t, err, replay.ErrDiverged)
	assert.Contains(t, err.Error(), "no captured result for recorded llm call 'openai/hold' at position 1")
}

// cannedRT answers every request in memory, for benchmarks.
type cannedRT struct {
	ct   string
	body []byte
}

func (c cannedRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {c.ct}}, Body: io.NopCloser(bytes.NewReader(c.body)),
		ContentLength: int64(len(c.body)), Request: req}, nil
}

func benchTransport(b *testing.B, stream bool) {
	rt := cannedRT{ct: "application/json", body: []byte(jsonAnswer("/v1/chat/completions", "gpt-4o"))}
	if stream {
		rt = cannedRT{ct: "text/event-stream", body: []byte(strings.Join(sseFrames("/v1/chat/completions", "gpt-4o"), ""))}
	}
	body := `{"model":"gpt-4o","stream":` + map[bool]string{true: "true", false: "false"}[stream] +
		`,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"hi"}]}`
	tr := replay.Transport(rt)
	// call makes one call and checks its answer: 200 and the canned body
	// (recorded, then replayed), whole.
	call := func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://llm.local/v1/chat/completions", strings.NewReader(body))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || n != int64(len(rt.body)) {
			b.Fatalf("status %d, %d bytes of %d read: %v", resp.StatusCode, n, len(rt.body), err)
		}
	}
	loop := func(n int) replay.Agent {
		return func(ctx context.Context, _ trace.Value) (any, error) {
			for range n {
				call(ctx)
			}
			return nil, nil
		}
	}
	b.Run("no-session", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			call(context.Background())
		}
	})
	b.Run("record", func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		res, err := replay.Record(context.Background(), "bench", nil, loop(b.N))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if res.Executed != b.N || res.Served != 0 || len(res.Trace.Calls()) != b.N {
			b.Fatalf("%d calls executed, %d served, %d recorded, want %d executed", res.Executed, res.Served,
				len(res.Trace.Calls()), b.N)
		}
	})
	b.Run("frozen", func(b *testing.B) {
		rec, err := replay.Record(context.Background(), "bench", nil, loop(b.N))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		res, err := replay.Replay(context.Background(), rec.Trace, loop(b.N))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if res.Served != b.N || res.Executed != 0 {
			b.Fatalf("%d calls served, %d executed, want %d served", res.Served, res.Executed, b.N)
		}
	})
}

// BenchmarkTransportJSON is the cost per model call of a non-streamed chat
// completion through Transport (in-memory base, request building and body
// reading included): no session, recording, frozen replay. Every call's
// answer is checked (status, the whole body), and the recording and the
// replay for their calls executed and served.
func BenchmarkTransportJSON(b *testing.B) { benchTransport(b, false) }

// BenchmarkTransportStream is BenchmarkTransportJSON for a 6-frame stream.
func BenchmarkTransportStream(b *testing.B) { benchTransport(b, true) }

// TestTransportInAMultiStepAgent records an agent that mixes tools (one
// failing), replay.LLM, a streamed Anthropic call and a JSON OpenAI call
// through the transport, state writes and a decision; the saved bundle is
// strictly valid and replays frozen with nothing executed.
func TestTransportInAMultiStepAgent(t *testing.T) {
	t.Parallel()
	f := newFakeLLM(t)
	base := newBase(t)
	var tools, models atomic.Int64
	lookup := replay.Tool("lookup", func(_ context.Context, city string) (string, error) {
		tools.Add(1)
		return "weather in " + city + ": sunny", nil
	})
	charge := replay.Tool("charge", func(_ context.Context, cents int) (string, error) {
		tools.Add(1)
		return "", errors.New("card declined")
	})
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		w, err := lookup(ctx, "Kathmandu")
		if err != nil {
			return nil, err
		}
		if err := replay.Set(ctx, "weather", w); err != nil {
			return nil, err
		}
		plan, err := replay.LLM(ctx, replay.Request{Provider: "local", Model: "planner",
			Messages: []replay.Message{{Role: "user", Content: w}}},
			func(context.Context, replay.Request) (replay.Response, error) {
				models.Add(1)
				return replay.Response{Content: "stream a summary"}, nil
			})
		if err != nil {
			return nil, err
		}
		streamed, err := do(ctx, t, base, f, httpCall{path: "/v1/messages", stream: true,
			body: `{"model":"claude-sonnet-4-5","stream":true,"messages":[{"role":"user","content":"` + plan.Content + `"}]}`})
		if err != nil {
			return nil, err
		}
		_, chargeErr := charge(ctx, 1299)
		route := replay.Decide(ctx, "after-charge", map[bool]string{true: "apologise", false: "confirm"}[chargeErr != nil])
		final, err := do(ctx, t, base, f, httpCall{path: "/v1/chat/completions",
			body: `{"model":"gpt-4o","messages":[{"role":"user","content":"` + route + `"}]}`})
		if err != nil {
			return nil, err
		}
		if err := replay.Set(ctx, "route", route); err != nil {
			return nil, err
		}
		return map[string]any{"stream": streamed, "final": final, "route": route, "charge": chargeErr.Error()}, nil
	}
	tr, res := recordAndReplay(t, f, agent)
	assert.Equal(t, int64(2), tools.Load(), "tool executions: only while recording")
	assert.Equal(t, int64(1), models.Load(), "replay.LLM executions: only while recording")
	assert.Equal(t, int64(2), f.requests.Load(), "HTTP model calls: only while recording")
	assert.Equal(t, 3, tr.Totals.LLMCalls)
	assert.Equal(t, 2, tr.Totals.ToolCalls)
	assert.Equal(t, 5, res.Served)
	out := res.Output.(map[string]any)
	assert.Equal(t, "apologise", out["route"])
	assert.Equal(t, "card declined", out["charge"])
	assert.Equal(t, frames(t, "/v1/messages", "claude-sonnet-4-5", -1), out["stream"].(exchange).Body)
}

func TestTransportNamesProviderAndModel(t *testing.T) {
	t.Parallel()
	rt := cannedRT{ct: "application/json", body: []byte(`{"ok":true}`)}
	tests := []struct {
		url, body  string
		provider   string
		model      string
		recordedIn string
	}{
		{"https://api.openai.com/v1/chat/completions", `{"model":"gpt-4o"}`, "openai", "gpt-4o", `{"model":"gpt-4o"}`},
		{"https://api.openai.com/v1/responses", `{"model":"o3"}`, "openai", "o3", `{"model":"o3"}`},
		{"https://api.anthropic.com/v1/messages", `{"model":"claude-opus-4"}`, "anthropic", "claude-opus-4", `{"model":"claude-opus-4"}`},
		{"https://api.groq.com/openai/v1/chat/completions", `{"model":"llama-3.3-70b"}`, "groq", "llama-3.3-70b", `{"model":"llama-3.3-70b"}`},
		{"https://openrouter.ai/api/v1/chat/completions", `{"model":"x/y"}`, "openrouter", "x/y", `{"model":"x/y"}`},
		{"https://generativelanguage.googleapis.com/v1beta/openai/chat/completions", `{"model":"gemini-2.5-flash"}`, "google", "gemini-2.5-flash", `{"model":"gemini-2.5-flash"}`},
		{"https://acme.openai.azure.com/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21", `{"messages":[]}`, "azure", "prod-4o", `{"messages":[]}`},
		{"http://localhost:11434/v1/chat/completions", `{"model":"qwen3"}`, "openai", "qwen3", `{"model":"qwen3"}`},
		{"http://localhost:8080/v1/messages", `{"model":"local-claude"}`, "anthropic", "local-claude", `{"model":"local-claude"}`},
		{"http://localhost:8080/v1/chat/completions", `hello, not JSON`, "openai", "unknown", `"hello, not JSON"`},
		{"http://localhost:8080/v1/chat/completions", ``, "openai", "unknown", `null`},
	}
	for _, tc := range tests {
		t.Run(tc.url+" "+tc.body, func(t *testing.T) {
			t.Parallel()
			agent := func(ctx context.Context, _ trace.Value) (any, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, tc.url, strings.NewReader(tc.body))
				if err != nil {
					return nil, err
				}
				resp, err := (&http.Client{Transport: replay.Transport(rt)}).Do(req)
				if err != nil {
					return nil, err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				return string(b), err
			}
			rec, err := replay.Record(context.Background(), "names", nil, agent)
			require.NoError(t, err)
			req := find(t, rec.Trace, trace.LLMRequest, tc.model)
			assert.Equal(t, tc.provider, req.Provider)
			assert.Equal(t, tc.recordedIn, req.Input.Canonical())
			res, err := replay.Replay(context.Background(), rec.Trace, agent)
			require.NoError(t, err)
			assert.Equal(t, `{"ok":true}`, res.Output)
		})
	}
}

func TestTransportErrorBehavesLikeTheRecordedError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ       string
		is        error
		timeout   bool
		temporary bool
	}{
		{"Timeout", context.DeadlineExceeded, true, true},
		{"Canceled", context.Canceled, false, false},
		{"ConnectionReset", syscall.ECONNRESET, false, true},
		{"ConnectionRefused", syscall.ECONNREFUSED, false, false},
		{"UnexpectedEOF", io.ErrUnexpectedEOF, false, false},
		{"TransportError", nil, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			var err error = &replay.TransportError{Type: tc.typ, Message: "recorded text"}
			assert.Equal(t, "recorded text", err.Error())
			assert.ErrorIs(t, err, replay.ErrRecordedFailure)
			assert.NotErrorIs(t, err, replay.ErrDiverged)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			for _, other := range []error{context.DeadlineExceeded, context.Canceled, syscall.ECONNRESET, syscall.ECONNREFUSED, io.ErrUnexpectedEOF, io.EOF} {
				if other != tc.is {
					assert.NotErrorIs(t, err, other)
				}
			}
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			assert.Equal(t, tc.timeout, ne.Timeout())
			assert.Equal(t, tc.temporary, ne.Temporary()) //nolint:staticcheck // part of net.Error
		})
	}
}

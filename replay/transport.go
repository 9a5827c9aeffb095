package replay

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/stepfork/stepfork/trace"
)

// Transport returns an http.RoundTripper that records and replays the model
// calls an agent makes over HTTP, so that an agent built on an official SDK
// (openai-go, anthropic-sdk-go, google.golang.org/genai, or any
// OpenAI-compatible client) is recorded by giving the SDK an http.Client
// that uses it:
//
//	httpClient := &http.Client{Transport: replay.Transport(nil)}
//	client := openai.NewClient(option.WithHTTPClient(httpClient))
//
// base sends the requests that run live (nil: http.DefaultTransport); opts
// are TransportOptions (Prices). The session is the one in the request's
// context (SDKs pass the context of the call on as the request's); with no
// session there, Transport is base: the request passes through untouched,
// unrecorded and never blocked.
//
// # Model calls
//
// A POST whose URL path ends in one of these is a model call:
//
//	/chat/completions                 OpenAI chat completions (also Azure, Ollama, vLLM, Gemini's OpenAI endpoint…)
//	/v1/responses                     OpenAI Responses
//	/v1/messages                      Anthropic messages
//	/models/<model>:generateContent   Gemini (also :streamGenerateContent?alt=sse; Vertex AI paths)
//
// Base URLs with prefixes work (http://localhost:11434/v1/chat/completions,
// https://api.groq.com/openai/v1/chat/completions).
//
// The provider is named after the host for known hosts (api.openai.com
// "openai", api.anthropic.com "anthropic", *.openai.azure.com "azure",
// api.groq.com "groq", api.mistral.ai "mistral", api.deepseek.com
// "deepseek", openrouter.ai "openrouter", api.together.xyz "together",
// api.fireworks.ai "fireworks", api.x.ai "xai",
// generativelanguage.googleapis.com "google", *aiplatform.googleapis.com
// "vertex"); otherwise it is "anthropic" for /v1/messages, "google" for
// Gemini paths and "openai" for the OpenAI-compatible paths. The model is
// the one in a Gemini path, else the request body's "model"; without one,
// an Azure deployment name from the path (/deployments/<name>/), else
// "unknown". [Hybrid] names these calls as "provider/model".
//
// # Other requests
//
// Every other request made with a session in the context (GET /v1/models,
// an embeddings call, a webhook) is an HTTP call: a tool call named "http"
// whose input is {"method", "url" (without its query), "query" (values of
// credential parameters such as key and token redacted), "body"} and whose
// result is the response, recorded like a model call's. A replay serves it
// like any tool call: a frozen replay sends no request at all, and a fork's
// tail runs it only under fork.Allow("http").
//
// # What is recorded
//
// The llm_request input is the request body: its JSON, or a JSON string for
// a body that is not JSON. No request header is recorded, so
// Authorization, x-api-key, api-key, x-goog-api-key, OpenAI-Organization,
// cookies and the like never reach a trace; redaction (package trace)
// applies to the bodies as to every payload.
//
// The llm_response output is the HTTP response, whatever its status (a 429
// or a 500 is a response like any other), and, for a 2xx response of a
// known wire format, the message it says:
//
//	{"status": 200,
//	 "headers": {"content-type": "application/json", "x-request-id": "…"},
//	 "body": {…}}                 the body when it is a JSON object or array
//	 "body_text": "…"             otherwise, when it is UTF-8 text
//	 "body_base64": "…"           otherwise
//	 "stream": [{"event": "message_start", "data": {…}}, {"data": "[DONE]"}, …]
//	                              a text/event-stream body, frame by frame
//	                              (event, id, retry as recorded; data as JSON
//	                              when it is a JSON object or array, else text;
//	                              comment lines are not kept)
//	 "stream_tail": "data: {\"cho"  bytes after the last complete frame
//	 "body_error": {"type": "ConnectionReset", "message": "…"}
//	                              reading the body failed after what is recorded
//	 "closed_early": true         the agent closed a stream before its end
//	 "message": {"content": "…", "reasoning": "…",
//	             "tool_calls": [{"id": "call_…", "name": "…", "arguments": {…}}],
//	             "finish_reason": "stop", "usage": {"prompt_tokens": 100, …}}
//	                              what the model said, the same for every wire
//	                              format, streamed or not (a stream as the
//	                              message its frames assemble)
//	 "ids": {"call_live…": "call_recorded…"}}
//	                              live ids the provider minted that stand for
//	                              ids of the recording (see below)
//
// The message is the call's behaviour: the diff (package trace) compares it
// in place of the raw response, so response ids, created times, system
// fingerprints, request ids and rate-limit headers, which change on every
// call, are not differences. Only these response headers are recorded:
// content-type, retry-after, retry-after-ms, x-should-retry, x-request-id,
// request-id and the x-ratelimit-* and anthropic-ratelimit-* families
// (values joined with ", ").
//
// The event's token counts come from the response's usage (OpenAI usage,
// Anthropic usage with its cache reads and writes, Gemini usageMetadata with
// its cached and thoughts tokens; for a stream, the usage its frames
// report), or from ReportUsage called in base with the request's context;
// its cost from Prices.
//
// # Ids the provider mints
//
// A response carries ids the provider minted (chatcmpl-…, resp_…, msg_…,
// call_…, toolu_…, fc_…) and the agent sends some back (tool_call_id,
// tool_use_id, call_id, previous_response_id). When a call runs live in a
// replay or a fork, each id its response mints is bound, kind by kind in
// order, to the id of the recorded response it stands in for (the call
// matched, else the recorded call of the same label and occurrence); the
// output's "ids" keeps the bindings. From then on a request (or a tool's
// input) that carries a live id is matched, memoized, guarded and recorded
// as if it carried the recorded id (the server and the tool still get the
// live one), and the message names the recorded id. A served response binds
// the ids its recording kept, so a replay of a fork's trace reads the same.
// This is [ReportIDs]' binding, which Transport does for every wire format
// it knows; the ids are kept in the run's [trace.MintedFile] too, so that
// renderings show them as placeholders.
//
// A request that fails without a response (a timeout, a reset connection, a
// refused connection, a canceled context) is a failed model call: an error
// event under the llm_request, with error_type Timeout, Canceled,
// ConnectionReset, ConnectionRefused, UnexpectedEOF, EOF or TransportError
// and the error's text as message. While recording, the agent gets the
// original error and body unchanged.
//
// # What is served
//
// On replay (ModeFrozen, and ModeHybrid for the models not named live), the
// call is matched like any model call (the request body is the input that
// must equal the recorded one; a changed body is a divergence whose report
// shows the JSON diff), and the recorded response is served without
// contacting the server: the same status, the recorded headers, the body
// (a JSON body as canonical JSON: same values, not necessarily the same
// bytes), a stream frame by frame (one frame per Read), then the recorded
// stream tail, then the recorded body error. A recorded failure is returned by
// RoundTrip, and a recorded body error by the body's Read, as a
// *TransportError of the recorded type and text: a Timeout is a net.Error
// whose Timeout() is true, a ConnectionReset matches syscall.ECONNRESET (the
// text is what base returned; http.Client may wrap it differently, adding
// "(Client.Timeout exceeded …)" only when its own timer fired). A
// divergence is returned by RoundTrip (the SDK wraps it in a *url.Error;
// errors.Is(err, ErrDiverged) still holds).
//
// Directors see these calls as model calls whose Input is the request body:
// a fork patches the prompt, the model or the temperature by patching that
// JSON (Action.WithInput, with WithModel for the event's model; a Gemini
// call's model is patched in its URL path), and the patched body is what is
// sent.
//
// While recording (and for live calls), a stream reaches the agent as it
// arrives; its llm_response is written when the agent reads it to the end
// (or to an error) or closes it, so close response bodies before the agent
// returns: a stream still open when the run ends has no llm_response. The
// Accept-Encoding header is left off live requests, so that net/http
// negotiates compression itself and the recorded body is plain.
func Transport(base http.RoundTripper, opts ...TransportOption) http.RoundTripper {
	t := &transport{base: base}
	for _, o := range opts {
		if o != nil {
			o.applyTransport(t)
		}
	}
	return t
}

type transport struct {
	base   http.RoundTripper
	prices Prices
	scrub  []trace.Scrubber // installed on the session of every request (Scrubbers)
	err    error            // an invalid option, returned by every call made with a session
}

func (s Scrubbers) applyTransport(t *transport) { t.scrub = append(t.scrub, s...) }

func (t *transport) next() http.RoundTripper {
	if t.base == nil {
		return http.DefaultTransport
	}
	return t.base
}

// RoundTrip records, serves, or passes req through.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	sc := fromContext(req.Context())
	if sc == nil {
		if activeSessions.Load() != 0 {
			u := *req.URL
			u.RawQuery, u.Fragment, u.User = "", "", nil
			if err := sessionless("Transport", "request", req.Method+" "+u.String()); err != nil {
				if req.Body != nil {
					req.Body.Close() // as a RoundTripper must, even on error
				}
				return nil, err
			}
		}
		return t.next().RoundTrip(req)
	}
	if t.err != nil {
		return nil, t.err
	}
	return t.call(sc, req, endpointOf(req))
}

// CloseIdleConnections closes the idle connections of base, when it has any.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.next().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// knownHosts names the providers of well-known API hosts.
var knownHosts = map[string]string{
	"api.openai.com":                    "openai",
	"api.anthropic.com":                 "anthropic",
	"api.groq.com":                      "groq",
	"api.mistral.ai":                    "mistral",
	"api.deepseek.com":                  "deepseek",
	"openrouter.ai":                     "openrouter",
	"api.together.xyz":                  "together",
	"api.fireworks.ai":                  "fireworks",
	"api.x.ai":                          "xai",
	"generativelanguage.googleapis.com": "google",
}

// endpoint is what a request is: a model call of a wire format and
// provider, or (wire 0) an HTTP call.
type endpoint struct {
	wire     wire
	provider string
	model    string // from the URL path (Gemini), else ""
}

// endpointOf classifies req.
func endpointOf(req *http.Request) endpoint {
	if req.Method != http.MethodPost || req.URL == nil {
		return endpoint{}
	}
	var e endpoint
	switch p := req.URL.Path; {
	case strings.HasSuffix(p, "/chat/completions"):
		e = endpoint{wire: wireChat, provider: "openai"}
	case strings.HasSuffix(p, "/v1/responses"):
		e = endpoint{wire: wireResponses, provider: "openai"}
	case strings.HasSuffix(p, "/v1/messages"):
		e = endpoint{wire: wireAnthropic, provider: "anthropic"}
	default:
		model, _ := geminiMethod(p)
		if model == "" {
			return endpoint{}
		}
		e = endpoint{wire: wireGemini, provider: "google", model: model}
	}
	host := strings.ToLower(req.URL.Hostname())
	if p, ok := knownHosts[host]; ok {
		e.provider = p
	} else if strings.HasSuffix(host, ".openai.azure.com") {
		e.provider = "azure"
	} else if strings.HasSuffix(host, "aiplatform.googleapis.com") {
		e.provider = "vertex"
	}
	return e
}

// requestInput is the llm_request input for a request body.
func requestInput(body []byte) trace.Value {
	if len(bytes.TrimSpace(body)) == 0 {
		return trace.NullValue
	}
	if v, err := trace.ParseValue(body); err == nil {
		return v
	}
	return textValue(body, "body_base64")
}

// textValue is b as a JSON string, or as {key: base64} when b is not UTF-8.
func textValue(b []byte, key string) trace.Value {
	if utf8.Valid(b) {
		return trace.StringValue(string(b))
	}
	v, _ := trace.ObjectValue(trace.Member{Key: key, Value: trace.StringValue(base64.StdEncoding.EncodeToString(b))})
	return v
}

// modelOf is the model of a request: the model in a Gemini path, the body's
// "model", an Azure deployment, or "unknown".
func (e endpoint) modelOf(input trace.Value, path string) string {
	if e.model != "" {
		return e.model
	}
	if m, ok := input.Get("model").Str(); ok && m != "" {
		return m
	}
	if _, rest, ok := strings.Cut(path, "/deployments/"); ok {
		if name, _, _ := strings.Cut(rest, "/"); name != "" {
			return name
		}
	}
	return "unknown"
}

// httpTool is the tool name of the requests Transport does not recognise
// as model calls.
const httpTool = "http"

// secretParams are query parameters whose values are credentials.
var secretParams = map[string]bool{"key": true, "api_key": true, "apikey": true, "token": true,
	"access_token": true, "sig": true, "signature": true, "code": true, "password": true, "secret": true}

// httpInput is the tool_call input of an HTTP call: its method, URL without
// query, query parameters (credentials redacted) and body.
func httpInput(req *http.Request, body []byte) trace.Value {
	u := *req.URL
	u.RawQuery, u.Fragment, u.User = "", "", nil
	ms := []trace.Member{
		{Key: "method", Value: trace.StringValue(req.Method)},
		{Key: "url", Value: trace.StringValue(u.String())},
	}
	if q := req.URL.Query(); len(q) > 0 {
		var ps []trace.Member
		for k, vs := range q {
			es := make([]trace.Value, len(vs))
			for i, v := range vs {
				if secretParams[strings.ToLower(k)] {
					v = trace.Redacted
				}
				es[i] = trace.StringValue(v)
			}
			a, _ := trace.ArrayValue(es...)
			ps = append(ps, trace.Member{Key: k, Value: a})
		}
		qv, _ := trace.ObjectValue(ps...)
		ms = append(ms, trace.Member{Key: "query", Value: qv})
	}
	if len(body) > 0 {
		ms = append(ms, trace.Member{Key: "body", Value: requestInput(body)})
	}
	v, _ := trace.ObjectValue(ms...)
	return v
}

// call handles a request made with a session in the context: the dispatch
// and events of Session.dependency, split in two so that a stream reaches
// the agent while it arrives and its response is recorded when it ends.
func (t *transport) call(sc *scope, req *http.Request, e endpoint) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, fmt.Errorf("replay.Transport: %s %s: the request body cannot be read: %w", req.Method, req.URL.Redacted(), err)
	}
	s := sc.s
	var ic intercept
	var raw trace.Value
	if e.wire == 0 {
		raw = httpInput(req, body)
		ic = intercept{kind: KindTool, name: httpTool}
	} else {
		raw = requestInput(body)
		ic = intercept{kind: KindLLM, provider: e.provider, model: e.modelOf(raw, req.URL.Path)}
	}

	var gid uint64
	if s.tracksLanes() {
		gid = goid()
	}
	s.mu.Lock()
	s.addScrubbersLocked(t)
	raw = s.minted.canonical(raw)
	ic.input, ic.parent, ic.node, ic.sc, ic.gid = s.redacted(raw), sc.parent, sc.node, sc, gid
	ic.lane = s.laneLocked(sc, gid)
	d := s.dispatchLocked(&ic)
	input, model := raw, ic.model
	if !d.input.IsAbsent() {
		input, body = d.input, s.minted.toLive(d.input).Bytes()
	}
	if d.model != "" {
		model = d.model
	}
	callID := s.appendCallLocked(&ic, input, model, d.rec, d.input.IsAbsent() && ic.input == raw)
	s.noteLaneLocked(callID, ic.lane)
	s.noteCPLocked(s.log.n-1, ic.cp)
	s.noteDirectedLocked(ic.seq, s.log.n-1)
	switch d.act {
	case actServe:
		s.appendServedLocked(&ic, callID, model, d)
		cr := s.noteCallLocked(&ic, callID, Served, d.rec, d.by)
		s.minted.bindServed(d.value)
		if d.rec != nil && ic.kind == KindLLM {
			s.minted.keep(callID, s.plan.minted[d.rec.Call.ID])
		}
		s.mu.Unlock()
		if d.failure != nil {
			err := &TransportError{Type: d.failure.Type, Message: d.failure.Message}
			s.observeAnswered(req.Context(), &ic, cr, model, err)
			return nil, err
		}
		resp, err := servedResponse(req, d.value)
		if err != nil {
			e := &MismatchError{Kind: ic.kind, Label: ic.label(), Step: -1,
				msg: fmt.Sprintf("recorded output of %s '%s' is not an HTTP response recorded by replay.Transport: %v", ic.kind, ic.label(), err)}
			s.note(e)
			s.observeAnswered(req.Context(), &ic, cr, model, e)
			return nil, e
		}
		s.observeAnswered(req.Context(), &ic, cr, model, nil)
		return resp, nil
	case actBlock:
		reason := d.reason
		if reason == "" {
			reason = "blocked by the director"
		}
		s.appendResultLocked(&ic, callID, model, trace.StatusSkipped, failureOutput("Blocked", reason), nil, nil)
		cr := s.noteCallLocked(&ic, callID, Blocked, nil, "")
		s.mu.Unlock()
		err := &BlockedError{Kind: ic.kind, Label: ic.label(), Reason: reason}
		s.scrubErr(err)
		s.observeAnswered(req.Context(), &ic, cr, model, err)
		return nil, err
	case actFail:
		s.scrubErr(d.err)
		s.noteLocked(d.err)
		s.appendFailureLocked(&ic, callID, model, d.err)
		cr := s.noteCallLocked(&ic, callID, Failed, d.rec, "")
		s.mu.Unlock()
		s.observeAnswered(req.Context(), &ic, cr, model, d.err)
		return nil, d.err
	}
	cr := s.noteCallLocked(&ic, callID, Executed, d.rec, d.by)
	if gid == 0 {
		gid = goid()
		ic.gid, ic.lane = gid, s.laneLocked(sc, gid)
		s.noteLaneLocked(callID, ic.lane)
	}
	var corr *Recorded
	if e.wire != 0 {
		corr = s.correspondingLocked(&ic, &d)
	}
	s.mu.Unlock()

	ctx, slot := sc.child(req.Context(), callID, sc.node, string(ic.kind), ic.label(), gid, ic.free(), e.wire != 0, ic.cp)
	var ci *CallInfo
	if s.obs != nil {
		ci = observed(&ic, cr, model)
		ctx = s.obs.StartCall(ctx, ci)
	}
	pc := &pendingCall{s: s, t: t, ic: ic, callID: callID, model: model, wire: e.wire, corr: corr,
		slot: slot, start: time.Now(), ctx: ctx, ci: ci}
	u := req.URL
	if e.wire == wireGemini && model != ic.model {
		u = withGeminiModel(u, model)
	}
	return t.live(req.WithContext(ctx), u, body, pc)
}

func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	return io.ReadAll(req.Body)
}

// live sends the request through base and records the response.
func (t *transport) live(req *http.Request, u *url.URL, body []byte, pc *pendingCall) (resp *http.Response, err error) {
	out := req.Clone(req.Context())
	out.URL = u
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.Header.Del("Accept-Encoding")
	done := false
	defer func() {
		if done {
			return
		}
		p := recover()
		if p == nil { // runtime.Goexit in base
			pc.fail(errors.New("replay.Transport: the base RoundTripper did not return"))
			return
		}
		pc.fail(panicError{p})
		panic(p)
	}()
	resp, err = t.next().RoundTrip(out)
	done = true
	if err != nil {
		pc.fail(err)
		return nil, err
	}
	head := responseHead(resp)
	if isEventStream(resp.Header) {
		resp.Body = &recordingStream{rc: resp.Body, pc: pc, head: head}
		return resp, nil
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	pc.succeed(withBody(head, b, pc.bodyError(rerr)))
	resp.Body = &bodyReader{data: b, err: rerr}
	return resp, nil
}

// pendingCall is a live model call whose llm_response (or failure) is not
// written yet.
type pendingCall struct {
	s      *session
	t      *transport
	ic     intercept
	callID string
	model  string
	wire   wire       // 0 for an HTTP call
	corr   *Recorded  // the recorded call this one stands in for, if any
	slot   *usageSlot // where the base RoundTripper's ReportUsage writes
	start  time.Time
	ctx    context.Context // the request's
	once   sync.Once
	ci     *CallInfo // for the session's Observer, nil without one
}

// observeEnd reports the end of the call to the session's Observer.
func (pc *pendingCall) observeEnd(err error, u *Usage) {
	if pc.ci == nil {
		return
	}
	pc.ci.Err = err
	if u != nil {
		pc.ci.Usage = *u
	}
	pc.s.obs.EndCall(pc.ctx, pc.ci)
}

// errorType classifies a transport error of the call. An error returned
// once the request's deadline has passed is a Timeout whatever its text
// (http.Client.Timeout cancels a request to a custom RoundTripper with
// "net/http: request canceled").
func (pc *pendingCall) errorType(err error) string {
	if dl, ok := pc.ctx.Deadline(); ok && !time.Now().Before(dl) {
		return "Timeout"
	}
	return transportErrorType(err)
}

// bodyError is the body_error member for an error reading a body (absent
// for a body read to its end).
func (pc *pendingCall) bodyError(err error) trace.Member {
	if err == nil || err == io.EOF {
		return trace.Member{Key: "body_error"}
	}
	v, _ := trace.ObjectValue(trace.Member{Key: "type", Value: trace.StringValue(pc.errorType(err))},
		trace.Member{Key: "message", Value: trace.StringValue(err.Error())})
	return trace.Member{Key: "body_error", Value: v}
}

// succeed writes the llm_response (the tool_result of an HTTP call), unless
// the run has already ended. The output of a model call gets the message
// it assembles ("message") and the live ids it minted that stand for
// recorded ones ("ids"); its usage is read from the response, or is what the
// base RoundTripper reported, and is priced with the transport's Prices.
func (pc *pendingCall) succeed(out trace.Value) {
	pc.once.Do(func() {
		var u *Usage
		defer func() { pc.observeEnd(nil, u) }() // after the lock is released
		ms := time.Since(pc.start).Milliseconds()
		var a assembled
		var rec []mintedID
		if pc.wire != 0 {
			a = assemble(pc.wire, out)
			if pc.corr != nil && a.ok {
				rec = recordedIDs(pc.wire, pc.corr.Output)
			}
		}
		s := pc.s
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.tr.Status != trace.RunRunning {
			return
		}
		if pc.wire == 0 {
			s.appendResultLocked(&pc.ic, pc.callID, pc.model, trace.StatusOK, out, &ms, nil)
			return
		}
		u = a.msg.Usage
		if a.ok {
			made := s.minted.pairIDs(a.minted, rec)
			s.minted.note(pc.callID, a.minted)
			for i, tc := range a.msg.ToolCalls {
				if r, ok := s.minted.canon[tc.ID]; ok {
					a.msg.ToolCalls[i].ID = r
				}
			}
			extra := []trace.Member{{Key: "message", Value: trace.MustValueOf(a.msg)}}
			if len(made) > 0 {
				ids, _ := trace.ObjectValue(made...)
				extra = append(extra, trace.Member{Key: "ids", Value: ids})
			}
			out = withMembers(out, extra...)
		}
		if pc.slot != nil && pc.slot.set {
			u = &pc.slot.usage
		}
		cost := pc.cost(u)
		s.appendResponseLocked(&pc.ic, pc.callID, pc.model, out, &ms, u, cost)
		if u != nil && cost != nil {
			priced := *u
			priced.CostUSD = *cost
			u = &priced
		}
	})
}

// cost is the cost of a call's usage: reported, or from the price of its
// model; nil when neither is known.
func (pc *pendingCall) cost(u *Usage) *float64 {
	if u == nil {
		return nil
	}
	if u.CostUSD > 0 {
		c := u.CostUSD
		return &c
	}
	p, ok := pc.t.price(trace.LLMLabel(pc.ic.provider, pc.model), pc.model)
	if !ok {
		return nil
	}
	c := p.cost(*u)
	return &c
}

// withMembers is the object o with ms added (replacing members of the same
// keys).
func withMembers(o trace.Value, ms ...trace.Member) trace.Value {
	all := make([]trace.Member, 0, o.Len()+len(ms))
	for k, v := range o.Members() {
		if !slices.ContainsFunc(ms, func(m trace.Member) bool { return m.Key == k }) {
			all = append(all, trace.Member{Key: k, Value: v})
		}
	}
	out, err := trace.ObjectValue(append(all, ms...)...)
	if err != nil {
		return o
	}
	return out
}

// appendResponseLocked writes the llm_response of a live model call.
func (s *session) appendResponseLocked(ic *intercept, callID, model string, out trace.Value, ms *int64, u *Usage, cost *float64) {
	ev := trace.Event{Type: trace.LLMResponse, ParentID: callID, Model: model, Status: trace.StatusOK, Output: out, DurationMS: ms, CostUSD: cost}
	if u != nil {
		ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens = nonZero(u.PromptTokens), nonZero(u.CompletionTokens), nonZero(u.TotalTokens)
	}
	s.appendLocked(&ev)
}

// fail writes the error event of a call that got no response.
func (pc *pendingCall) fail(err error) {
	pc.once.Do(func() {
		te := &TransportError{Type: pc.errorType(err), Message: err.Error()}
		defer pc.observeEnd(te, nil)
		s := pc.s
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.tr.Status != trace.RunRunning {
			return
		}
		s.appendFailureLocked(&pc.ic, pc.callID, pc.model, te)
	})
}

// recordedHeaders are the response headers a recording keeps.
var recordedHeaders = map[string]bool{
	"content-type": true, "retry-after": true, "retry-after-ms": true,
	"x-should-retry": true, "x-request-id": true, "request-id": true,
}

func recordedHeader(name string) bool {
	return recordedHeaders[name] || strings.HasPrefix(name, "x-ratelimit-") || strings.HasPrefix(name, "anthropic-ratelimit-")
}

// responseHead is the status and the recorded headers of resp.
func responseHead(resp *http.Response) []trace.Member {
	var hs []trace.Member
	for k, vs := range resp.Header {
		if name := strings.ToLower(k); recordedHeader(name) {
			hs = append(hs, trace.Member{Key: name, Value: trace.StringValue(strings.Join(vs, ", "))})
		}
	}
	headers, err := trace.ObjectValue(hs...)
	if err != nil { // two spellings of one header name
		headers, _ = trace.ObjectValue()
	}
	return []trace.Member{
		{Key: "status", Value: trace.IntValue(int64(resp.StatusCode))},
		{Key: "headers", Value: headers},
	}
}

func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// withBody is the output of a response with a plain body b, read up to the
// error recorded in berr.
func withBody(head []trace.Member, b []byte, berr trace.Member) trace.Value {
	ms := append([]trace.Member(nil), head...)
	if len(b) > 0 {
		body := trace.Value{}
		if t := bytes.TrimSpace(b); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			body, _ = trace.ParseValue(b)
		}
		switch {
		case !body.IsAbsent():
			ms = append(ms, trace.Member{Key: "body", Value: body})
		case utf8.Valid(b):
			ms = append(ms, trace.Member{Key: "body_text", Value: trace.StringValue(string(b))})
		default:
			ms = append(ms, trace.Member{Key: "body_base64", Value: trace.StringValue(base64.StdEncoding.EncodeToString(b))})
		}
	}
	ms = append(ms, berr)
	v, _ := trace.ObjectValue(ms...)
	return v
}

// recordingStream is the body of a live event stream: the agent reads the
// upstream bytes unchanged while the frames are parsed, and the response is
// recorded when the stream ends, fails or is closed.
type recordingStream struct {
	rc   io.ReadCloser
	pc   *pendingCall
	head []trace.Member

	mu   sync.Mutex
	sse  sseParser
	done bool
}

func (r *recordingStream) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.sse.feed(p[:n])
		if err != nil {
			r.finishLocked(err, false)
		}
	}
	return n, err
}

func (r *recordingStream) Close() error {
	r.mu.Lock()
	if !r.done {
		r.finishLocked(nil, true)
	}
	r.mu.Unlock()
	return r.rc.Close()
}

func (r *recordingStream) finishLocked(err error, closed bool) {
	r.done = true
	if closed && r.sse.tail() == "" && streamEnded(r.pc.wire, r.sse.frames) {
		// An SDK that closes the body once it has read the stream's last
		// frame (openai-go after [DONE]) has read the whole stream; whether
		// its last Read also saw io.EOF is timing, not behavior.
		closed = false
	}
	frames, _ := trace.ArrayValue(r.sse.frames...)
	ms := append(append([]trace.Member(nil), r.head...), trace.Member{Key: "stream", Value: frames}, r.pc.bodyError(err))
	if t := r.sse.tail(); t != "" {
		ms = append(ms, trace.Member{Key: "stream_tail", Value: trace.StringValue(strings.ToValidUTF8(t, "\uFFFD"))})
	}
	if closed {
		ms = append(ms, trace.Member{Key: "closed_early", Value: trace.BoolValue(true)})
	}
	out, _ := trace.ObjectValue(ms...)
	r.pc.succeed(out)
}

// bodyReader is a response body of known bytes followed by err (io.EOF when
// nil).
type bodyReader struct {
	mu     sync.Mutex
	data   []byte
	err    error
	closed bool
}

func (b *bodyReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errReadClosed
	}
	if len(b.data) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		return 0, io.EOF
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *bodyReader) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// errReadClosed is net/http's error for a read after Close.
var errReadClosed = errors.New("http: read on closed response body")

// servedStream serves a recorded event stream one frame per Read, then the
// recorded tail, then the recorded error (or io.EOF).
type servedStream struct {
	mu     sync.Mutex
	frames []trace.Value
	tail   []byte
	cur    []byte
	err    error
	closed bool
}

func (s *servedStream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errReadClosed
	}
	if len(s.cur) == 0 {
		switch {
		case len(s.frames) > 0:
			s.cur, s.frames = renderFrame(s.frames[0]), s.frames[1:]
		case len(s.tail) > 0:
			s.cur, s.tail = s.tail, nil
		case s.err != nil:
			return 0, s.err
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

func (s *servedStream) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// servedResponse rebuilds the response recorded in v.
func servedResponse(req *http.Request, v trace.Value) (*http.Response, error) {
	if v.Kind() != trace.Object {
		return nil, fmt.Errorf("expected an object with \"status\", got %s", preview(v))
	}
	var f struct{ status, headers, body, text, b64, stream, tail, bodyErr, closed trace.Value }
	for k, m := range v.Members() { // one pass: Get would scan the stream once per key
		switch k {
		case "status":
			f.status = m
		case "headers":
			f.headers = m
		case "body":
			f.body = m
		case "body_text":
			f.text = m
		case "body_base64":
			f.b64 = m
		case "stream":
			f.stream = m
		case "stream_tail":
			f.tail = m
		case "body_error":
			f.bodyErr = m
		case "closed_early":
			f.closed = m
		}
	}
	status, ok := f.status.Int()
	if !ok || status < 100 || status > 999 {
		return nil, fmt.Errorf("\"status\" must be an HTTP status code, got %s", previewOrMissing(f.status))
	}
	h := http.Header{}
	for k, hv := range f.headers.Members() {
		s, ok := hv.Str()
		if !ok {
			return nil, fmt.Errorf("header %q must be a string, got %s", k, preview(hv))
		}
		h.Set(k, s)
	}
	var berr error
	if !f.bodyErr.IsAbsent() {
		typ, _ := f.bodyErr.Get("type").Str()
		msg, _ := f.bodyErr.Get("message").Str()
		berr = &TransportError{Type: typ, Message: msg}
	}
	resp := &http.Response{
		Status:     strconv.Itoa(int(status)) + " " + http.StatusText(int(status)),
		StatusCode: int(status),
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		ContentLength: -1,
		Request:       req,
	}
	if !f.stream.IsAbsent() {
		if f.stream.Kind() != trace.Array {
			return nil, fmt.Errorf("\"stream\" must be an array of frames, got %s", preview(f.stream))
		}
		ss := &servedStream{err: berr}
		for _, fr := range f.stream.Elems() {
			if fr.Kind() != trace.Object {
				return nil, fmt.Errorf("a stream frame must be an object, got %s", preview(fr))
			}
			ss.frames = append(ss.frames, fr)
		}
		if tail, ok := f.tail.Str(); ok {
			ss.tail = []byte(tail)
		}
		if closed, _ := f.closed.BoolOf(); closed && berr == nil {
			ss.err = &TransportError{Type: "UnexpectedEOF", Message: "replay: the recording ends here: the agent closed the response body before the end of the stream when it was recorded"}
		}
		resp.Body = ss
		return resp, nil
	}
	var b []byte
	if !f.body.IsAbsent() {
		b = f.body.Bytes()
	} else if text, ok := f.text.Str(); ok {
		b = []byte(text)
	} else if enc, ok := f.b64.Str(); ok {
		dec, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("\"body_base64\" is not base64: %w", err)
		}
		b = dec
	}
	if berr == nil {
		resp.ContentLength = int64(len(b))
	}
	resp.Body = &bodyReader{data: b, err: berr}
	return resp, nil
}

// TransportError is a failure of a model call made through Transport, served
// on replay: RoundTrip returns it for a call that failed without a response
// when it was recorded, and a body's Read returns it where reading the body
// failed. Type is the recorded error type; Message the recorded text.
//
// It behaves like the original error for the checks SDKs and agents make: for
// Type "Timeout" it is a net.Error whose Timeout() is true and it matches
// context.DeadlineExceeded; "Canceled" matches context.Canceled;
// "ConnectionReset" syscall.ECONNRESET; "ConnectionRefused"
// syscall.ECONNREFUSED; "UnexpectedEOF" io.ErrUnexpectedEOF. Every
// TransportError matches ErrRecordedFailure.
type TransportError struct {
	Type    string
	Message string
}

// Error returns the recorded message.
func (e *TransportError) Error() string { return e.Message }

// ErrorType returns Type, so that re-recording a served failure writes the
// same error_type.
func (e *TransportError) ErrorType() string { return e.Type }

// Timeout reports whether the recorded failure was a timeout.
func (e *TransportError) Timeout() bool { return e.Type == "Timeout" }

// Temporary reports whether the recorded failure was a timeout or a reset
// connection (net.Error).
func (e *TransportError) Temporary() bool { return e.Type == "Timeout" || e.Type == "ConnectionReset" }

// Is matches ErrRecordedFailure and the sentinel of the recorded type.
func (e *TransportError) Is(target error) bool {
	if target == ErrRecordedFailure {
		return true
	}
	switch e.Type {
	case "Timeout":
		return target == context.DeadlineExceeded
	case "Canceled":
		return target == context.Canceled
	case "ConnectionReset":
		return target == syscall.ECONNRESET
	case "ConnectionRefused":
		return target == syscall.ECONNREFUSED
	case "UnexpectedEOF":
		return target == io.ErrUnexpectedEOF
	}
	return false
}

var _ net.Error = (*TransportError)(nil)

// transportErrorType classifies a transport error for the recording.
func transportErrorType(err error) string {
	var ne net.Error
	var typed interface{ ErrorType() string }
	switch {
	case errors.As(err, &typed) && typed.ErrorType() != "":
		return typed.ErrorType()
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "Timeout"
	case errors.Is(err, syscall.ECONNRESET), strings.Contains(err.Error(), "connection reset"):
		return "ConnectionReset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "ConnectionRefused"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "UnexpectedEOF"
	case errors.Is(err, io.EOF):
		return "EOF"
	}
	return "TransportError"
}

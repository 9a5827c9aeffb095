package genkit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core"
	"github.com/firebase/genkit/go/core/api"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// model is a Genkit model whose calls are recorded and replayed as model
// calls (replay.LLMRaw). It is a model action of the inner model's name,
// metadata and input schema, so that Genkit finds it where it found the
// inner model (ai.Generate looks models up by name) and treats it the same
// way (capabilities, constrained output).
type model struct {
	*core.ActionDef[*ai.ModelRequest, *ai.ModelResponse, *ai.ModelResponseChunk]
	inner        ai.Model
	provider, id string // the Genkit name "provider/id"
	cfg          *options

	mu  sync.Mutex
	reg api.Registry // where the model is registered: where fork.Model looks other models up
}

// Model returns m recorded: a Genkit model of m's name, capabilities and
// configuration schema whose every call is a stepfork model call, recorded
// under m's name ("googleai/gemini-2.5-flash" is provider "googleai", model
// "gemini-2.5-flash") and served from the recording on replay without
// calling m. Register it in place of m, for a model made with ai.NewModel:
//
//	genkit.RegisterAction(g, sfgenkit.Model(ai.NewModel("acme/m-1", opts, fn)))
//
// The models a plugin provides are recorded by wrapping the plugin
// ([Plugin]). Recording an already recorded model returns it unchanged.
//
// The recorded request is Genkit's own ModelRequest as JSON — "messages"
// (role system, user, model or tool, each with its parts), "config" (an
// object, {} when the call has none), "tools" (sorted by name), "toolChoice",
// "output", "docs" — with the model's "model" and, for a streamed call,
// "stream": true. The tool responses of a tool message are put in the order
// of the tool requests they answer (Genkit runs tools on goroutines and
// collects their answers as they finish), in the request recorded and the
// one the model gets. So fork.Prompt and its edits change the first system
// message's text parts (a request without one gets one), fork.Temperature
// sets config.temperature, and fork.Model calls the model of that name in
// the registry the recorded model is registered in ("provider/model", or
// the name as given), each reaching the model as Genkit would have sent it.
//
// The recorded response is the answer's "message", "finishReason" and
// "finishMessage", and the "usage" Genkit reports, whose tokens are the
// call's tokens (and, with [WithPrices], its cost), and "custom": the
// members of the plugin's ModelResponse.Custom that are strings, numbers
// or booleans (compat_oai's completion "id", "model" and
// "systemFingerprint"; structured members, such as Gemini's raw
// candidates, and ModelResponse.Raw are not recorded). The agent gets the
// response as the recording keeps it, live or served: the same Go values
// either way.
//
// The ids the provider minted — the refs of the tool requests, the
// completion id and fingerprint in custom — are recorded as the provider
// sent them and reported with replay.ReportIDs: when a fork's tail runs the
// model live, each is bound to the one the recorded answer had, and the run
// records the recorded one wherever the live one appears (the answer, the
// tool responses of the next request), while the agent and the provider
// keep the live ones. So a tail whose model says the same thing is
// equivalent to its base, and goldens show the ids as placeholders
// (<call-1>). A tool request without a ref gets one derived from the
// conversation, so that its response is told apart from another of the
// same tool. A streamed call is recorded chunk by chunk with the final
// response and served back through Genkit's streaming callback (see
// [StreamError]).
func Model(m ai.Model, opts ...Option) ai.Model {
	return newModel(m, newOptions(opts))
}

func newModel(inner ai.Model, cfg *options) *model {
	if inner == nil {
		panic("contrib/genkit: Model(nil): pass the model to record")
	}
	if m, ok := inner.(*model); ok {
		return m
	}
	var desc api.ActionDesc
	if a, ok := inner.(api.Action); ok {
		desc = a.Desc()
	}
	m := &model{inner: inner, cfg: cfg}
	m.provider, m.id = api.ParseName(inner.Name())
	m.ActionDef = core.NewStreamingAction(inner.Name(), api.ActionTypeModel, maps.Clone(desc.Metadata), desc.InputSchema, m.generate)
	return m
}

// Generate runs the model action, as the inner model's Generate does.
func (m *model) Generate(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	return m.Run(ctx, req, cb)
}

// Register registers the model action with r, and notes r: fork.Model looks
// the model it names up there.
func (m *model) Register(r api.Registry) {
	m.mu.Lock()
	m.reg = r
	m.mu.Unlock()
	m.ActionDef.Register(r)
}

// insideKey marks the context of a recorded model call's body: a recorded
// model called there (the model fork.Model switched to, found in the
// registry as recorded) is its body, not a call of its own.
type insideKey struct{}

// request is the recorded llm_request input: Genkit's ModelRequest as JSON,
// with the model and whether the call streams.
type request struct {
	Model      string                `json:"model"`
	Messages   []*ai.Message         `json:"messages"`
	Config     json.RawMessage       `json:"config"`
	Tools      []*ai.ToolDefinition  `json:"tools,omitempty"`
	ToolChoice ai.ToolChoice         `json:"toolChoice,omitempty"`
	Output     *ai.ModelOutputConfig `json:"output,omitempty"`
	Docs       []*ai.Document        `json:"docs,omitempty"`
	Stream     bool                  `json:"stream,omitempty"`
}

// response is the recorded llm_response output of a call that did not
// stream: what the model answered, and its usage.
type response struct {
	Message       *ai.Message         `json:"message,omitempty"`
	FinishReason  ai.FinishReason     `json:"finishReason,omitempty"`
	FinishMessage string              `json:"finishMessage,omitempty"`
	Usage         *ai.GenerationUsage `json:"usage,omitempty"`
	Custom        map[string]any      `json:"custom,omitempty"` // scalarCustom
}

// responseOf is what the recording keeps of r. Its usage keeps the tokens
// and the model's own counts, not the character and media counts Genkit
// derives from the request and the answer: a served response gets them
// derived again (ai.CalculateInputOutputUsage), and an answer that changed
// shows as the change of its message alone. Of r.Custom it keeps the
// scalar members (scalarCustom).
func responseOf(r *ai.ModelResponse) *response {
	out := &response{Message: r.Message, FinishReason: r.FinishReason, FinishMessage: r.FinishMessage, Custom: scalarCustom(r.Custom)}
	if u := r.Usage; u != nil {
		out.Usage = &ai.GenerationUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
			CachedContentTokens: u.CachedContentTokens, ThoughtsTokens: u.ThoughtsTokens, Custom: u.Custom}
	}
	return out
}

// modelResponse is the response served for req.
func (r *response) modelResponse(req *ai.ModelRequest) *ai.ModelResponse {
	resp := &ai.ModelResponse{Message: r.Message, FinishReason: r.FinishReason, FinishMessage: r.FinishMessage, Usage: r.Usage, Request: req}
	if r.Custom != nil {
		resp.Custom = r.Custom
	}
	ai.CalculateInputOutputUsage(req, resp)
	return resp
}

// streamed is the recorded llm_response output of a streamed call: every
// chunk as the model sent it, then the final response, or the error the
// stream ended with ("closed_early" when the streaming callback stopped it).
type streamed struct {
	Stream      []json.RawMessage `json:"stream"`
	Response    *response         `json:"response,omitempty"`
	Error       string            `json:"error,omitempty"`
	ClosedEarly bool              `json:"closed_early,omitempty"`
}

// StreamError is the error a served stream ends with when the recorded
// stream ended with one after some chunks: the recorded error's text. (A
// call that failed before its first chunk is a recorded failure, served as
// a *replay.RecordedError.)
type StreamError struct{ Message string }

func (e *StreamError) Error() string { return e.Message }

// configValue is the recorded "config": the config's JSON when it is an
// object, else {} (Genkit's plugins read a missing config as the defaults),
// so that fork.Temperature has an object to set the temperature in.
func configValue(c any) (json.RawMessage, error) {
	if c == nil {
		return json.RawMessage("{}"), nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("the config (%T) cannot be recorded: %w", c, err)
	}
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		if string(t) == "null" {
			return json.RawMessage("{}"), nil
		}
		return nil, fmt.Errorf("the config (%T) is %s, not a JSON object", c, clip(t))
	}
	return b, nil
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// canonicalRequest is req as the model gets it and the recording holds it:
// the tools sorted by name (Genkit lists them from a map) and the tool
// responses of each tool message in the order of the requests they answer.
// req itself is not changed.
func canonicalRequest(req *ai.ModelRequest) *ai.ModelRequest {
	r := *req
	if len(r.Tools) > 1 {
		r.Tools = slices.Clone(r.Tools)
		slices.SortStableFunc(r.Tools, func(a, b *ai.ToolDefinition) int { return cmp.Compare(toolName(a), toolName(b)) })
	}
	var asked []*ai.Part // the tool requests of the last model message
	cloned := false
	for i, msg := range r.Messages {
		if msg == nil {
			continue
		}
		switch msg.Role {
		case ai.RoleModel:
			asked = asked[:0]
			for _, p := range msg.Content {
				if p != nil && p.IsToolRequest() {
					asked = append(asked, p)
				}
			}
		case ai.RoleTool:
			if len(asked) < 2 || len(msg.Content) < 2 {
				continue
			}
			order := func(p *ai.Part) int {
				if p == nil || !p.IsToolResponse() {
					return len(asked)
				}
				for j, q := range asked {
					if q.ToolRequest.Ref == p.ToolResponse.Ref && q.ToolRequest.Name == p.ToolResponse.Name {
						return j
					}
				}
				return len(asked)
			}
			parts := slices.Clone(msg.Content)
			slices.SortStableFunc(parts, func(a, b *ai.Part) int { return cmp.Compare(order(a), order(b)) })
			if !slices.Equal(parts, msg.Content) {
				if !cloned {
					r.Messages, cloned = slices.Clone(req.Messages), true
				}
				c := *msg
				c.Content = parts
				r.Messages[i] = &c
			}
		}
	}
	return &r
}

func toolName(t *ai.ToolDefinition) string {
	if t == nil {
		return ""
	}
	return t.Name
}

func (m *model) body(r *ai.ModelRequest, stream bool) (trace.Value, error) {
	cfg, err := configValue(r.Config)
	if err != nil {
		return trace.Value{}, err
	}
	b, err := json.Marshal(request{Model: m.id, Messages: r.Messages, Config: cfg, Tools: r.Tools, ToolChoice: r.ToolChoice,
		Output: r.Output, Docs: r.Docs, Stream: stream})
	if err != nil {
		return trace.Value{}, err
	}
	return trace.ParseValue(b)
}

// patched is the request a call runs with when a fork patched its recorded
// body, and the model it goes to: the patched messages (a system message a
// fork added, with its text as a string, or as the "system" it gives a
// request to an Anthropic model, becomes a system message of one text part),
// config (decoded into the type of the config the call was given, or into
// a map when it had none or the type does not take it: Genkit's plugins
// accept a map), tools, tool choice, output and docs; and the model the
// patched "model" names.
func (m *model) patched(b trace.Value, r *ai.ModelRequest) (*ai.ModelRequest, ai.Model, string, error) {
	var p struct {
		Model      string                `json:"model"`
		System     *string               `json:"system"`
		Messages   []lenientMessage      `json:"messages"`
		Config     json.RawMessage       `json:"config"`
		Tools      []*ai.ToolDefinition  `json:"tools"`
		ToolChoice ai.ToolChoice         `json:"toolChoice"`
		Output     *ai.ModelOutputConfig `json:"output"`
		Docs       []*ai.Document        `json:"docs"`
	}
	if err := json.Unmarshal(b.Bytes(), &p); err != nil {
		return nil, nil, "", fmt.Errorf("the patched request does not decode into a Genkit ModelRequest: %w", err)
	}
	out := &ai.ModelRequest{Config: r.Config, Tools: p.Tools, ToolChoice: p.ToolChoice, Output: p.Output, Docs: p.Docs}
	if p.System != nil {
		out.Messages = append(out.Messages, ai.NewSystemTextMessage(*p.System))
	}
	for _, msg := range p.Messages {
		out.Messages = append(out.Messages, msg.Message)
	}
	was, err := configValue(r.Config)
	if err != nil {
		return nil, nil, "", err
	}
	if cfg := p.Config; len(cfg) > 0 && !equalJSON(cfg, was) {
		out.Config = decodeConfig(cfg, r.Config)
	}
	target, id := m.inner, m.id
	if p.Model != "" && p.Model != m.id {
		var err error
		if target, err = m.lookup(p.Model); err != nil {
			return nil, nil, "", err
		}
		id = p.Model
	}
	return out, target, id, nil
}

// lenientMessage is a message of a patched request: a Genkit message, or
// one whose content is a string (the system message a fork prepends to a
// request without one).
type lenientMessage struct{ *ai.Message }

func (l *lenientMessage) UnmarshalJSON(b []byte) error {
	var s struct {
		Role    ai.Role         `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &s); err == nil {
		var text string
		if json.Unmarshal(s.Content, &text) == nil {
			l.Message = &ai.Message{Role: s.Role, Content: []*ai.Part{ai.NewTextPart(text)}}
			return nil
		}
	}
	l.Message = new(ai.Message)
	return json.Unmarshal(b, l.Message)
}

func equalJSON(a, b []byte) bool {
	va, err1 := trace.ParseValue(a)
	vb, err2 := trace.ParseValue(b)
	return err1 == nil && err2 == nil && va == vb
}

// decodeConfig is cfg decoded into a new value of was's type (a pointer to
// a new value for a pointer), or into a map[string]any when was is nil or
// its type does not take cfg.
func decodeConfig(cfg json.RawMessage, was any) any {
	if t := reflect.TypeOf(was); t != nil {
		ptr := t.Kind() == reflect.Pointer
		if ptr {
			t = t.Elem()
		}
		v := reflect.New(t)
		if json.Unmarshal(cfg, v.Interface()) == nil {
			if ptr {
				return v.Interface()
			}
			return v.Elem().Interface()
		}
	}
	var m map[string]any
	if json.Unmarshal(cfg, &m) != nil {
		return was
	}
	return m
}

// lookup is the model fork.Model names, in the registry the recorded model
// is registered in: "provider/name" when name has no provider of its own in
// the registry, else name as given.
func (m *model) lookup(name string) (ai.Model, error) {
	m.mu.Lock()
	reg := m.reg
	m.mu.Unlock()
	if reg == nil {
		return nil, fmt.Errorf("contrib/genkit: model %q is asked to call %q (fork.Model), but it is not registered with Genkit, so there is no registry to find %q in: register the recorded model (genkit.RegisterAction, or through sfgenkit.Plugin)", m.Name(), name, name)
	}
	names := []string{name}
	if m.provider != "" {
		names = []string{m.provider + "/" + name, name}
	}
	for _, n := range names {
		if t := ai.LookupModel(reg, n); t != nil {
			return t, nil
		}
	}
	return nil, fmt.Errorf("contrib/genkit: model %q is asked to call %q (fork.Model), which the Genkit registry does not resolve (tried %q): name a model the registry has, as \"model\" of the same provider or as \"provider/model\"", m.Name(), name, names)
}

func valueOf(v any) (trace.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return trace.Value{}, err
	}
	return trace.ParseValue(b)
}

// generate is the model action's function: the call recorded with
// replay.LLMRaw, the inner model (or the one a fork switched to) its body.
func (m *model) generate(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	if ctx.Value(insideKey{}) != nil || req == nil {
		return m.inner.Generate(ctx, req, cb)
	}
	if m.cfg.err != nil {
		return nil, m.cfg.err
	}
	sent := canonicalRequest(req)
	body, err := m.body(sent, cb != nil)
	if err != nil {
		return nil, fmt.Errorf("contrib/genkit: model %q: the request cannot be recorded: %w", m.Name(), err)
	}
	var live bool
	var after error // a live stream's error, returned once the stream is recorded
	out, err := replay.LLMRaw(ctx, m.provider, m.id, body, func(ctx context.Context, b trace.Value) (trace.Value, error) {
		live = true
		r, target, id := sent, m.inner, m.id
		if b != body {
			var err error
			if r, target, id, err = m.patched(b, sent); err != nil {
				return trace.Value{}, fmt.Errorf("contrib/genkit: model %q: %w", m.Name(), err)
			}
		}
		ctx = context.WithValue(ctx, insideKey{}, true)
		if cb == nil {
			resp, err := target.Generate(ctx, r, nil)
			if err != nil {
				return trace.Value{}, err
			}
			if resp == nil {
				return trace.Value{}, fmt.Errorf("contrib/genkit: model %q answered nothing (a nil response and no error)", target.Name())
			}
			rec := responseOf(resp)
			var ids minted
			ids.answer(ctx, len(r.Messages), rec.Message, rec.Custom)
			m.report(ctx, id, resp.Usage)
			return valueOf(rec)
		}
		v, err, streamErr := m.stream(ctx, target, id, r, cb)
		after = streamErr
		return v, err
	})
	if err != nil {
		return nil, err
	}
	if after != nil {
		return nil, after
	}
	if cb == nil {
		var r response
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("contrib/genkit: the recorded response of %q is not a Genkit response: %w", m.Name(), err)
		}
		return r.modelResponse(req), nil
	}
	var s streamed
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return nil, fmt.Errorf("contrib/genkit: the recorded response of %q is not a recorded stream: %w", m.Name(), err)
	}
	if !live {
		for i, raw := range s.Stream {
			var c ai.ModelResponseChunk
			if err := json.Unmarshal(raw, &c); err != nil {
				return nil, fmt.Errorf("contrib/genkit: chunk %d of the recorded stream of %q is not a Genkit chunk: %w", i, m.Name(), err)
			}
			if err := cb(ctx, &c); err != nil {
				return nil, err
			}
		}
		if s.Error != "" {
			return nil, &StreamError{Message: s.Error}
		}
	}
	if s.Response == nil {
		return nil, fmt.Errorf("contrib/genkit: the recorded stream of %q has no response", m.Name())
	}
	return s.Response.modelResponse(req), nil
}

// stream makes a streamed call: each chunk is recorded, then handed to cb.
// It returns the recorded value, the body's error (a stream that failed
// before its first chunk is a failed call) and the error a stream ended
// with after some chunks (recorded in the value, returned to the caller
// after the recording).
func (m *model) stream(ctx context.Context, target ai.Model, id string, r *ai.ModelRequest, cb ai.ModelStreamCallback) (trace.Value, error, error) {
	var mu sync.Mutex
	var rec streamed
	var ids minted
	body := ctx // where the ids are reported: the model call's body
	resp, err := target.Generate(ctx, r, func(ctx context.Context, c *ai.ModelResponseChunk) error {
		if c == nil {
			return cb(ctx, c)
		}
		mu.Lock()
		ids.chunk(body, c)
		raw, err := json.Marshal(c) // before cb, which numbers and labels the chunk in place
		if err == nil {
			rec.Stream = append(rec.Stream, raw)
		}
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("contrib/genkit: a chunk of %q cannot be recorded: %w", target.Name(), err)
		}
		if err := cb(ctx, c); err != nil {
			mu.Lock()
			rec.ClosedEarly = true
			mu.Unlock()
			return err
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		if len(rec.Stream) == 0 && !rec.ClosedEarly {
			return trace.Value{}, err, nil
		}
		rec.Error = err.Error()
		v, verr := valueOf(rec)
		if verr != nil {
			return trace.Value{}, verr, nil
		}
		return v, nil, err
	}
	if resp == nil {
		return trace.Value{}, fmt.Errorf("contrib/genkit: model %q answered nothing (a nil response and no error)", target.Name()), nil
	}
	rec.Response = responseOf(resp)
	ids.answer(ctx, len(r.Messages), rec.Response.Message, rec.Response.Custom)
	m.report(ctx, id, resp.Usage)
	v, err := valueOf(rec)
	return v, err, nil
}

// report reports the usage of a live call of model id.
func (m *model) report(ctx context.Context, id string, u *ai.GenerationUsage) {
	if usage, ok := m.cfg.usage(m.provider, id, u); ok {
		replay.ReportUsage(ctx, usage)
	}
}

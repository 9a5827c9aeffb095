package eino

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// ChatModel is an Eino chat model whose Generate and Stream calls are
// recorded and replayed as model calls (replay.LLMRaw). It implements
// [model.ToolCallingChatModel], and [model.ChatModel] when the model it wraps
// does.
type ChatModel struct {
	inner         model.BaseChatModel
	provider, mdl string
	tools         []*schema.ToolInfo // bound with WithTools or BindTools
	price         *replay.Price
}

var (
	_ model.ToolCallingChatModel = (*ChatModel)(nil)
	_ model.ChatModel            = (*ChatModel)(nil)
)

// Model wraps m. provider and name are the recorded model call's provider
// and model ("openai", "gpt-4o"), what replay.LiveModels, fork.Model and the
// assertions name it by ("openai/gpt-4o"); a model.WithModel option given to
// a call overrides name for that call.
func Model(provider, name string, m model.BaseChatModel) *ChatModel {
	return &ChatModel{inner: m, provider: provider, mdl: name}
}

// WithPrice returns a copy of the model whose live calls record a cost:
// the response's tokens at p (US dollars per million tokens; cached input
// tokens at p.CachedInput, or p.Input when it is zero). Without a price a
// call records its tokens and no cost.
func (m *ChatModel) WithPrice(p replay.Price) *ChatModel {
	c := *m
	c.price = &p
	return &c
}

// WithTools returns a copy of the model with tools bound, the wrapped
// model's WithTools when it is a [model.ToolCallingChatModel]. The tools'
// [schema.ToolInfo] (name, description, parameters as JSON Schema, extra)
// are recorded in every request.
func (m *ChatModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	c := *m
	c.tools = tools
	if tc, ok := m.inner.(model.ToolCallingChatModel); ok {
		inner, err := tc.WithTools(tools)
		if err != nil {
			return nil, err
		}
		c.inner = inner
	}
	return &c, nil
}

// BindTools binds tools in place, through the wrapped model's BindTools; it
// fails when the wrapped model is not a [model.ChatModel].
func (m *ChatModel) BindTools(tools []*schema.ToolInfo) error {
	cm, ok := m.inner.(model.ChatModel)
	if !ok {
		return fmt.Errorf("contrib/eino: BindTools: %T is not a model.ChatModel; use WithTools", m.inner)
	}
	if err := cm.BindTools(tools); err != nil {
		return err
	}
	m.tools = tools
	return nil
}

// request is the recorded llm_request input: OpenAI-shaped, so that fork
// changes patch it where they patch an OpenAI body (the system message of
// "messages", "temperature", "model").
type request struct {
	Model       string             `json:"model"`
	Messages    []*schema.Message  `json:"messages"`
	Temperature *float32           `json:"temperature,omitempty"`
	MaxTokens   *int               `json:"max_tokens,omitempty"`
	TopP        *float32           `json:"top_p,omitempty"`
	Stop        []string           `json:"stop,omitempty"`
	Tools       []toolSpec         `json:"tools,omitempty"`
	ToolChoice  *schema.ToolChoice `json:"tool_choice,omitempty"`
	Allowed     []string           `json:"allowed_tool_names,omitempty"`
	Stream      bool               `json:"stream,omitempty"`
	// Options lists the implementation-specific options by type (their
	// values are functions and cannot be recorded).
	Options []string `json:"impl_options,omitempty"`
}

// toolSpec is a schema.ToolInfo as recorded: its parameters as JSON Schema.
type toolSpec struct {
	Name       string          `json:"name"`
	Desc       string          `json:"description,omitempty"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Extra      map[string]any  `json:"extra,omitempty"`
}

func specsOf(tools []*schema.ToolInfo) ([]toolSpec, error) {
	out := make([]toolSpec, 0, len(tools))
	for _, t := range tools {
		if t == nil {
			continue
		}
		s := toolSpec{Name: t.Name, Desc: t.Desc, Extra: t.Extra}
		js, err := t.ParamsOneOf.ToJSONSchema()
		if err != nil {
			return nil, fmt.Errorf("contrib/eino: tool %q: its parameters have no JSON Schema: %w", t.Name, err)
		}
		if js != nil {
			if s.Parameters, err = json.Marshal(js); err != nil {
				return nil, fmt.Errorf("contrib/eino: tool %q: %w", t.Name, err)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// implTypes names the implementation-specific options among opts by their
// function types (the field of model.Option and tool.Option that holds them).
func implTypes[O any](opts []O) []string {
	var out []string
	for _, o := range opts {
		v := reflect.ValueOf(o)
		if v.Kind() != reflect.Struct {
			continue
		}
		f := v.FieldByName("implSpecificOptFn")
		if f.IsValid() && f.Kind() == reflect.Interface && !f.IsNil() {
			out = append(out, f.Elem().Type().String())
		}
	}
	sort.Strings(out)
	return out
}

func (m *ChatModel) request(input []*schema.Message, opts []model.Option, stream bool) (request, error) {
	o := model.GetCommonOptions(&model.Options{}, opts...)
	req := request{Model: m.mdl, Messages: input, Temperature: o.Temperature, MaxTokens: o.MaxTokens, TopP: o.TopP,
		Stop: o.Stop, ToolChoice: o.ToolChoice, Allowed: o.AllowedToolNames, Stream: stream, Options: implTypes(opts)}
	if o.Model != nil {
		req.Model = *o.Model
	}
	tools := m.tools
	if o.Tools != nil {
		tools = o.Tools
	}
	var err error
	if req.Tools, err = specsOf(tools); err != nil {
		return request{}, err
	}
	return req, nil
}

// patched returns the input and options a call runs with when a fork
// patched its request: the patched messages, temperature and model, with
// the caller's other options.
func patched(body trace.Value, input []*schema.Message, opts []model.Option, orig request) ([]*schema.Message, []model.Option, error) {
	var p request
	if err := json.Unmarshal(body.Bytes(), &p); err != nil {
		return nil, nil, fmt.Errorf("contrib/eino: the patched request does not decode: %w", err)
	}
	out := append([]model.Option(nil), opts...)
	if !reflect.DeepEqual(p.Temperature, orig.Temperature) && p.Temperature != nil {
		out = append(out, model.WithTemperature(*p.Temperature))
	}
	if p.Model != orig.Model {
		out = append(out, model.WithModel(p.Model))
	}
	return p.Messages, out, nil
}

// usageOf is the usage a response reports, priced with the model's price.
func (m *ChatModel) usageOf(msg *schema.Message) (replay.Usage, bool) {
	if msg == nil || msg.ResponseMeta == nil || msg.ResponseMeta.Usage == nil {
		return replay.Usage{}, false
	}
	u := msg.ResponseMeta.Usage
	out := replay.Usage{PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens),
		TotalTokens: int64(u.TotalTokens), CachedTokens: int64(u.PromptTokenDetails.CachedTokens)}
	if p := m.price; p != nil {
		cached := float64(u.PromptTokenDetails.CachedTokens)
		cachedPrice := p.CachedInput
		if cachedPrice == 0 {
			cachedPrice = p.Input
		}
		out.CostUSD = ((float64(u.PromptTokens)-cached)*p.Input + cached*cachedPrice + float64(u.CompletionTokens)*p.Output) / 1e6
	}
	return out, true
}

func valueOf(v any) (trace.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return trace.Value{}, err
	}
	return trace.ParseValue(b)
}

// Generate makes the model call, recorded with the request (messages,
// common options, bound tools) as input and the response message as output;
// its token usage is reported. The tool-call ids of the answer are replaced
// by ids derived from the conversation and the calls (stable: a model that
// answers the same way yields the same ids), and the ids the provider
// minted that the message carries in its Extra (the response id eino-ext's
// OpenAI model keeps as "openai-request-id": every key that names a request,
// response or message id) are reported to the session as provider-minted
// (replay.ReportIDs), so that a fork's live tail whose model says the same
// thing is equivalent to its base, and goldens show them as placeholders.
// On replay the recorded message is returned without calling the model.
func (m *ChatModel) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	req, err := m.request(input, opts, false)
	if err != nil {
		return nil, err
	}
	body, err := valueOf(req)
	if err != nil {
		return nil, fmt.Errorf("contrib/eino: the request cannot be recorded: %w", err)
	}
	out, err := replay.LLMRaw(ctx, m.provider, req.Model, body, func(ctx context.Context, b trace.Value) (trace.Value, error) {
		in, o := input, opts
		if b != body {
			if in, o, err = patched(b, input, opts, req); err != nil {
				return trace.Value{}, err
			}
		}
		msg, err := m.inner.Generate(ctx, in, o...)
		if err != nil {
			return trace.Value{}, err
		}
		stableIDs(len(in), msg)
		reportIDs(ctx, msg, nil)
		if u, ok := m.usageOf(msg); ok {
			replay.ReportUsage(ctx, u)
		}
		return valueOf(msg)
	})
	if err != nil {
		return nil, err
	}
	var msg schema.Message
	if err := json.Unmarshal(out.Bytes(), &msg); err != nil {
		return nil, fmt.Errorf("contrib/eino: the recorded response of %s/%s is not a schema.Message: %w", m.provider, req.Model, err)
	}
	return &msg, nil
}

// streamOutput is a recorded stream: every chunk as it came, then how the
// stream ended.
type streamOutput struct {
	Stream      []*schema.Message `json:"stream"`
	Error       string            `json:"error,omitempty"`
	ClosedEarly bool              `json:"closed_early,omitempty"`
}

// StreamError is the error a served stream ends with when the recorded
// stream ended with one: the recorded error's text.
type StreamError struct{ Message string }

func (e *StreamError) Error() string { return e.Message }

// Stream makes the model call as a stream. The chunks reach the caller as
// the model sends them and are recorded one by one; the llm_response is
// written when the model's stream ends, before the caller's Recv returns
// io.EOF or the stream's error, so read streams to the end (a stream the
// caller closes early is recorded as closed_early, possibly after the run
// has moved on). An error in the middle of a stream is recorded after the
// chunks before it. On replay
// the recorded chunks are served as a [schema.StreamReader], one per Recv,
// then the recorded error, if any. Usage is reported from the last chunk
// that carries it.
func (m *ChatModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	req, err := m.request(input, opts, true)
	if err != nil {
		return nil, err
	}
	body, err := valueOf(req)
	if err != nil {
		return nil, fmt.Errorf("contrib/eino: the request cannot be recorded: %w", err)
	}
	sr, sw := schema.Pipe[*schema.Message](1)
	started := make(chan error, 1) // nil once the call is dispatched and the stream open, else why not
	live := false
	var streamErr error // the live stream's error, sent once the response is recorded
	go func() {
		defer sw.Close()
		out, err := replay.LLMRaw(ctx, m.provider, req.Model, body, func(ctx context.Context, b trace.Value) (trace.Value, error) {
			live = true
			in, o := input, opts
			if b != body {
				var perr error
				if in, o, perr = patched(b, input, opts, req); perr != nil {
					started <- perr
					return trace.Value{}, perr
				}
			}
			inner, err := m.inner.Stream(ctx, in, o...)
			if err != nil {
				started <- err
				return trace.Value{}, err
			}
			started <- nil
			defer inner.Close()
			var rec streamOutput
			var usage *replay.Usage
			minted := 0
			reported := map[string]bool{}
			for {
				chunk, err := inner.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					rec.Error, streamErr = err.Error(), err
					break
				}
				stableStreamIDs(len(in), chunk, &minted)
				reportIDs(ctx, chunk, reported)
				rec.Stream = append(rec.Stream, chunk)
				if u, ok := m.usageOf(chunk); ok {
					usage = &u
				}
				if closed := sw.Send(chunk, nil); closed {
					rec.ClosedEarly = true
					break
				}
			}
			if usage != nil {
				replay.ReportUsage(ctx, *usage)
			}
			return valueOf(rec)
		})
		if live {
			// The chunks went to the caller as they came; the end (EOF or
			// the error) reaches it only now that the response is recorded,
			// so a caller reading to the end never outruns the recording.
			if streamErr != nil {
				sw.Send(nil, streamErr)
			}
			return
		}
		if err != nil {
			started <- err
			return
		}
		var rec streamOutput
		if derr := json.Unmarshal(out.Bytes(), &rec); derr != nil {
			started <- fmt.Errorf("contrib/eino: the recorded response of %s/%s is not a recorded stream: %w", m.provider, req.Model, derr)
			return
		}
		started <- nil
		for _, c := range rec.Stream {
			if sw.Send(c, nil) {
				return
			}
		}
		if rec.Error != "" {
			sw.Send(nil, &StreamError{Message: rec.Error})
		}
	}()
	if err := <-started; err != nil {
		sr.Close()
		return nil, err
	}
	return sr, nil
}

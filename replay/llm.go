package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stepfork/stepfork/trace"
)

// Request is a provider-neutral model request. Provider and Model go to the
// llm_request event's fields; everything else is recorded as the event's
// input, a JSON object with these keys (empty ones left out):
//
//	{"system": "...", "messages": [{"role": "user", "content": "..."}],
//	 "temperature": 0.2, "max_tokens": 512, "tools": [...], "extra": {...}}
//
// A Director (package fork) patches a call by changing that object: the
// prompt ("system" or a message's "content"), the temperature; and the model
// with Action.WithModel.
type Request struct {
	Provider    string         `json:"-"`
	Model       string         `json:"-"`
	System      string         `json:"system,omitempty"`
	Messages    []Message      `json:"messages"`
	Temperature *float64       `json:"temperature,omitempty"`
	MaxTokens   int            `json:"max_tokens,omitempty"`
	Tools       []ToolSpec     `json:"tools,omitempty"`
	Extra       map[string]any `json:"extra,omitempty"` // provider-specific fields, recorded as given
}

// Message is one message of a conversation.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is a tool invocation requested by a model.
type ToolCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ToolSpec describes a tool offered to a model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Response is a provider-neutral model response, recorded as the
// llm_response output (the JSON of this struct).
type Response struct {
	Model      string         `json:"model,omitempty"`
	Content    string         `json:"content"`
	ToolCalls  []ToolCall     `json:"tool_calls,omitempty"`
	StopReason string         `json:"stop_reason,omitempty"`
	Usage      Usage          `json:"usage,omitzero"`
	Extra      map[string]any `json:"extra,omitempty"`
}

// Usage is the token count and cost of a model call. Recorded calls carry it
// in llm_response's prompt_tokens, completion_tokens, total_tokens and
// cost_usd (zero values are recorded as null).
//
// PromptTokens counts every input token, the cached and cache-written ones
// included (CachedTokens were read from the provider's prompt cache,
// CacheWriteTokens written to it); CompletionTokens counts every output
// token, ReasoningTokens (a model's hidden thinking) included. Transport
// fills all of them from each wire format's usage, and prices them with
// Prices.
type Usage struct {
	PromptTokens     int64   `json:"prompt_tokens,omitempty"`
	CompletionTokens int64   `json:"completion_tokens,omitempty"`
	TotalTokens      int64   `json:"total_tokens,omitempty"`
	CachedTokens     int64   `json:"cached_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64   `json:"reasoning_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}

// LLM makes a model call through call, recorded and replayed like a tool
// call: the request is recorded in an llm_request event (provider, model, and
// the rest as input), the response in the llm_response, a failure as an error
// event under the request. resp.Usage fills the response's token and cost
// fields. On replay the recorded response is decoded and returned without
// calling (ModeFrozen), or call runs (ModeLive, and ModeHybrid for the models
// named with [Hybrid]). As with [Tool], a live response reaches the agent
// as the recording keeps it (Extra's values as JSON decodes them, tool-call
// arguments compacted), the same Go values a replay serves. With no
// session in the context it is call(ctx, req).
func LLM(ctx context.Context, req Request, call func(context.Context, Request) (Response, error)) (Response, error) {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			if err := sessionless("LLM", "model call", trace.LLMLabel(req.Provider, req.Model)); err != nil {
				return Response{}, err
			}
		}
		return call(ctx, req)
	}
	if req.Model == "" {
		return Response{}, errors.New("replay.LLM: the request has no model; set Request.Model so that the call can be matched on replay")
	}
	raw, err := valueOf(req)
	if err != nil {
		return Response{}, fmt.Errorf("replay: model call '%s': the request cannot be recorded: %w", trace.LLMLabel(req.Provider, req.Model), err)
	}
	var live Response
	ic := intercept{kind: KindLLM, provider: req.Provider, model: req.Model}
	out, served, err := sc.s.dependency(ctx, sc, &ic, raw, func(ctx context.Context, input trace.Value, model string, patched bool) (trace.Value, error) {
		r := req
		if patched {
			r = Request{Provider: req.Provider, Model: model}
			if err := input.Decode(&r); err != nil {
				return trace.Value{}, fmt.Errorf("replay: model call '%s': the patched request %s does not decode into a Request: %w", ic.label(), preview(input), err)
			}
		}
		resp, err := call(ctx, r)
		if err != nil {
			return trace.Value{}, err
		}
		ReportUsage(ctx, resp.Usage)
		for _, tc := range resp.ToolCalls {
			ReportIDs(ctx, mintedCall, tc.ID)
		}
		v, err := valueOf(resp)
		if err == nil {
			live, err = asRecorded(resp, v)
		}
		if err != nil {
			return trace.Value{}, fmt.Errorf("replay: model call '%s': the response cannot be recorded: %w", ic.label(), err)
		}
		return v, nil
	})
	if err != nil {
		return Response{}, err
	}
	if !served {
		return live, nil
	}
	return decodeServed[Response](sc, KindLLM, ic.label(), out)
}

// LLMRaw makes a model call whose request and response are raw JSON: body is
// recorded as the llm_request input, the Value call returns as the
// llm_response output. It is the form for provider-specific requests (an
// OpenAI chat completion body, an Anthropic messages body); the HTTP
// transport builds on it. A Director may patch body (Action.WithInput) and
// the model (Action.WithModel); call then receives the patched body, and the
// model recorded is the patched one. Token counts and cost go in with
// [ReportUsage] from inside call, and the ids the provider minted in the
// response with [ReportIDs]: call receives body with the live ids the
// agent holds, and returns the response as the provider sent it (the run
// records it with each bound id replaced by the recorded one, see
// ReportIDs). With no session in the context it is call(ctx, body).
func LLMRaw(ctx context.Context, provider, model string, body trace.Value, call func(context.Context, trace.Value) (trace.Value, error)) (trace.Value, error) {
	sc := fromContext(ctx)
	if sc == nil {
		if activeSessions.Load() != 0 {
			if err := sessionless("LLMRaw", "model call", trace.LLMLabel(provider, model)); err != nil {
				return trace.Value{}, err
			}
		}
		return call(ctx, body)
	}
	if model == "" {
		return trace.Value{}, errors.New("replay.LLMRaw: the model is empty; pass the model so that the call can be matched on replay")
	}
	if body.IsAbsent() {
		body = trace.NullValue
	}
	ic := intercept{kind: KindLLM, provider: provider, model: model}
	out, _, err := sc.s.dependency(ctx, sc, &ic, body, func(ctx context.Context, input trace.Value, _ string, _ bool) (trace.Value, error) {
		v, err := call(ctx, input)
		if err == nil && v.IsAbsent() {
			v = trace.NullValue
		}
		return v, err
	})
	return out, err
}

// ReportUsage records the token counts and cost of the model call whose
// body is running in ctx: inside the call function of LLM or LLMRaw, or in
// the base RoundTripper of Transport (the request's context), where what it
// reports replaces the usage read from the response. LLM reports
// Response.Usage itself. Outside a model call's body it does nothing.
func ReportUsage(ctx context.Context, u Usage) {
	sc := fromContext(ctx)
	if sc == nil || sc.usage == nil {
		return
	}
	sc.s.mu.Lock()
	sc.usage.set, sc.usage.usage = true, u
	sc.s.mu.Unlock()
}

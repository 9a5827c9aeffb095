package genkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/api"
	"github.com/firebase/genkit/go/genkit"
	"github.com/stepfork/stepfork/replay"
)

// DefineTool is genkit.DefineTool with the tool's runs recorded and
// replayed as tool calls named after the tool, so that assertions, fork
// targets and the side-effect guard (fork.Allow) name it as the model
// does. A run's input is the tool's input and its output the tool's output,
// as JSON; on replay the recorded output is returned without running fn.
// Genkit runs the tools a model asks for on goroutines, and so are the
// recorded calls: matched on replay by name and input, whatever order they
// arrive in.
//
// A tool that interrupts (ToolContext.Interrupt) is a failed call whose
// error type is "genkit.ToolInterrupt" and whose message is the interrupt's
// metadata as JSON; on replay the interrupt is raised again, so that Genkit
// returns the interrupted response as it did. A resumed run (a tool
// restarted with ToolDef.Restart, where ToolContext.Resumed is set) is
// recorded with the input {"input": …, "resumed": …, "original_input": …}.
func DefineTool[In, Out any](g *genkit.Genkit, name, description string, fn ai.ToolFunc[In, Out], opts ...ai.ToolOption) *ai.ToolDef[In, Out] {
	return genkit.DefineTool(g, name, description, recordedFunc(name, fn), opts...)
}

// resumed is the recorded input of a resumed tool run.
type resumed[In any] struct {
	Input         In             `json:"input"`
	Resumed       map[string]any `json:"resumed,omitempty"`
	OriginalInput any            `json:"original_input,omitempty"`
}

func recordedFunc[In, Out any](name string, fn ai.ToolFunc[In, Out]) ai.ToolFunc[In, Out] {
	return func(tc *ai.ToolContext, in In) (Out, error) {
		run := func(ctx context.Context, in In) (Out, error) {
			out, err := fn(&ai.ToolContext{Context: ctx, Resumed: tc.Resumed, OriginalInput: tc.OriginalInput}, in)
			return out, interrupted(err)
		}
		var out Out
		var err error
		if tc.Resumed == nil && tc.OriginalInput == nil {
			out, err = replay.Tool(name, run)(tc, in)
		} else {
			out, err = replay.Tool(name, func(ctx context.Context, r resumed[In]) (Out, error) {
				return run(ctx, r.Input)
			})(tc, resumed[In]{Input: in, Resumed: tc.Resumed, OriginalInput: tc.OriginalInput})
		}
		return out, genkitError(err)
	}
}

// interruptType is the recorded error type of a tool run that interrupted.
const interruptType = "genkit.ToolInterrupt"

// interruptError carries a tool's interrupt through a recorded call: its
// error type and message are what the recording keeps.
type interruptError struct {
	meta map[string]any
	err  error // Genkit's interrupt, returned to Genkit
}

func interrupted(err error) error {
	if ok, meta := ai.IsToolInterruptError(err); ok {
		return &interruptError{meta: meta, err: err}
	}
	return err
}

func (e *interruptError) Error() string {
	b, err := json.Marshal(e.meta)
	if err != nil {
		return "{}"
	}
	return string(b)
}

func (e *interruptError) ErrorType() string { return interruptType }
func (e *interruptError) Unwrap() error     { return e.err }

// genkitError is the error a recorded tool call returns to Genkit: a live
// interrupt as Genkit raised it, a served one raised again with its
// recorded metadata, any other error as it is.
func genkitError(err error) error {
	if err == nil {
		return nil
	}
	var ie *interruptError
	if errors.As(err, &ie) {
		return ie.err
	}
	var rec *replay.RecordedError
	if errors.As(err, &rec) && rec.Type == interruptType {
		var meta map[string]any
		if err := json.Unmarshal([]byte(rec.Message), &meta); err != nil {
			return fmt.Errorf("contrib/genkit: tool %q: the recorded interrupt's metadata %q is not a JSON object: %w", rec.Label, rec.Message, err)
		}
		return (&ai.ToolContext{Context: context.Background()}).Interrupt(&ai.InterruptOptions{Metadata: meta})
	}
	return err
}

// Tool returns t recorded, for a tool made with ai.NewTool or
// ai.NewMultipartTool, or one a library hands over (the tools of an MCP
// server): pass it to ai.WithTools, or register it with
// genkit.RegisterAction. Its runs are recorded as for [DefineTool], with
// the tool's input and output as JSON (a multipart tool's output is
// {"output": …, "content": […]}). Recording an already recorded tool
// returns it unchanged.
func Tool(t ai.Tool) ai.Tool {
	if t == nil {
		panic("contrib/genkit: Tool(nil): pass the tool to record")
	}
	if r, ok := t.(*tool); ok {
		return r
	}
	def := t.Definition()
	multipart, _ := def.Metadata["multipart"].(bool)
	meta := map[string]any{"type": api.ActionTypeToolV2, "name": def.Name, "description": def.Description,
		"tool": map[string]any{"multipart": multipart}}
	if def.OutputSchema != nil {
		meta["originalOutputSchema"] = def.OutputSchema
	}
	a := &toolAction{
		desc: api.ActionDesc{Type: api.ActionTypeToolV2, Key: api.KeyFromName(api.ActionTypeToolV2, def.Name), Name: def.Name,
			Description: def.Description, InputSchema: def.InputSchema, OutputSchema: def.OutputSchema, Metadata: meta},
		multipart: multipart,
		legacy:    !multipart,
		run: func(ctx context.Context, input json.RawMessage, _ func(context.Context, json.RawMessage) error) (*api.ActionRunResult[json.RawMessage], error) {
			var in any
			if len(input) > 0 {
				if err := json.Unmarshal(input, &in); err != nil {
					return nil, err
				}
			}
			resp, err := t.RunRawMultipart(ctx, in)
			if err != nil {
				return nil, err
			}
			out, err := json.Marshal(resp)
			if err != nil {
				return nil, err
			}
			return &api.ActionRunResult[json.RawMessage]{Result: out}, nil
		},
	}
	return &tool{Tool: t, action: a}
}

// tool is an ai.Tool whose runs go through its recorded action.
type tool struct {
	ai.Tool // Name, Definition, Respond and Restart
	action  *toolAction
}

func (t *tool) Register(r api.Registry) { t.action.Register(r) }

func (t *tool) RunRaw(ctx context.Context, input any) (any, error) {
	resp, err := t.RunRawMultipart(ctx, input)
	if err != nil {
		return nil, err
	}
	return resp.Output, nil
}

func (t *tool) RunRawMultipart(ctx context.Context, input any) (*ai.MultipartToolResponse, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("contrib/genkit: tool %q: the input cannot be recorded: %w", t.action.desc.Name, err)
	}
	out, err := t.action.RunJSON(ctx, in, nil)
	if err != nil {
		return nil, err
	}
	var resp ai.MultipartToolResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("contrib/genkit: tool %q: the output is not a tool response: %w", t.action.desc.Name, err)
	}
	return &resp, nil
}

// toolAction is a tool action whose runs are recorded as tool calls: the
// action Genkit finds by the tool's name and runs with JSON.
type toolAction struct {
	desc      api.ActionDesc
	multipart bool // the recorded output is the whole tool response, not its "output"
	legacy    bool // registered under the "tool" key too, as ai.ToolDef registers itself
	run       func(context.Context, json.RawMessage, func(context.Context, json.RawMessage) error) (*api.ActionRunResult[json.RawMessage], error)
}

// toolActionOf records the tool action a a plugin provides.
func toolActionOf(a api.Action) *toolAction {
	desc := a.Desc()
	multipart := false
	if m, ok := desc.Metadata["tool"].(map[string]any); ok {
		multipart, _ = m["multipart"].(bool)
	}
	return &toolAction{desc: desc, multipart: multipart, run: a.RunJSONWithTelemetry}
}

func (t *toolAction) Name() string         { return t.desc.Name }
func (t *toolAction) Desc() api.ActionDesc { return t.desc }

func (t *toolAction) Register(r api.Registry) {
	r.RegisterAction(t.desc.Key, t)
	if t.legacy {
		provider, id := api.ParseName(t.desc.Name)
		r.RegisterAction(api.NewKey(api.ActionTypeTool, provider, id), t)
	}
}

func (t *toolAction) RunJSON(ctx context.Context, input json.RawMessage, cb func(context.Context, json.RawMessage) error) (json.RawMessage, error) {
	r, err := t.RunJSONWithTelemetry(ctx, input, cb)
	if err != nil {
		return nil, err
	}
	return r.Result, nil
}

// RunJSONWithTelemetry runs the tool as a recorded tool call; a served run
// has no trace or span id.
func (t *toolAction) RunJSONWithTelemetry(ctx context.Context, input json.RawMessage, cb func(context.Context, json.RawMessage) error) (*api.ActionRunResult[json.RawMessage], error) {
	if len(strings.TrimSpace(string(input))) == 0 {
		input = json.RawMessage("null")
	}
	var tele api.ActionRunResult[json.RawMessage]
	out, err := replay.Tool(t.desc.Name, func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		r, err := t.run(ctx, in, cb)
		if err != nil {
			return nil, interrupted(err)
		}
		if r == nil {
			return nil, fmt.Errorf("contrib/genkit: tool %q returned no result", t.desc.Name)
		}
		tele = *r
		if t.multipart {
			return r.Result, nil
		}
		var resp struct {
			Output json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(r.Result, &resp); err != nil {
			return nil, fmt.Errorf("contrib/genkit: tool %q: the output is not a tool response: %w", t.desc.Name, err)
		}
		if len(resp.Output) == 0 {
			return json.RawMessage("null"), nil
		}
		return resp.Output, nil
	})(ctx, input)
	if err != nil {
		return nil, genkitError(err)
	}
	if !t.multipart {
		if out, err = json.Marshal(struct {
			Output json.RawMessage `json:"output"`
		}{out}); err != nil {
			return nil, err
		}
	}
	return &api.ActionRunResult[json.RawMessage]{Result: out, TraceId: tele.TraceId, SpanId: tele.SpanId}, nil
}

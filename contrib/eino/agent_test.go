package eino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
	sfeino "github.com/stepfork/stepfork/contrib/eino"
	"github.com/stepfork/stepfork/replay"
)

// fakeModel behaves like a hosted chat model behind an Eino component:
// fresh tool-call ids and usage on every answer, answers that depend only
// on the conversation. Its plan: search flights; then book SF100 — or
// SF050 when the system prompt says "cheapest", or nothing when it says
// "never book"; then answer in text.
type fakeModel struct {
	calls   *atomic.Int32
	mu      *sync.Mutex
	systems *[]string
	temps   *[]float32
	tools   []*schema.ToolInfo
}

func newFakeModel() *fakeModel {
	return &fakeModel{calls: new(atomic.Int32), mu: new(sync.Mutex), systems: new([]string), temps: new([]float32)}
}

func (f *fakeModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	c := *f
	c.tools = tools
	return &c, nil
}

func (f *fakeModel) lastSystem() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(*f.systems) == 0 {
		return ""
	}
	return (*f.systems)[len(*f.systems)-1]
}

func (f *fakeModel) answer(input []*schema.Message, opts []model.Option) *schema.Message {
	f.calls.Add(1)
	o := model.GetCommonOptions(&model.Options{}, opts...)
	system := ""
	if len(input) > 0 && input[0].Role == schema.System {
		system = input[0].Content
	}
	f.mu.Lock()
	*f.systems = append(*f.systems, system)
	if o.Temperature != nil {
		*f.temps = append(*f.temps, *o.Temperature)
	}
	f.mu.Unlock()
	var tools []string
	for _, m := range input {
		if m.Role == schema.Tool {
			tools = append(tools, m.Content)
		}
	}
	msg := &schema.Message{Role: schema.Assistant, ResponseMeta: &schema.ResponseMeta{
		FinishReason: "tool_calls",
		Usage:        &schema.TokenUsage{PromptTokens: 30 * len(input), CompletionTokens: 8, TotalTokens: 30*len(input) + 8}}}
	call := func(name string, args any) {
		b, _ := json.Marshal(args)
		msg.ToolCalls = append(msg.ToolCalls, schema.ToolCall{ID: fmt.Sprintf("call_%016x", rand.Uint64()), Type: "function",
			Function: schema.FunctionCall{Name: name, Arguments: string(b)}})
	}
	switch {
	case len(tools) == 0:
		call("search_flights", map[string]string{"from": "KTM", "to": "DEL"})
	case len(tools) == 1 && strings.Contains(system, "never book"):
		msg.Content, msg.ResponseMeta.FinishReason = "Not booking.", "stop"
	case len(tools) == 1 && strings.Contains(system, "cheapest"):
		call("book_flight", map[string]string{"flight": "SF050"})
	case len(tools) == 1:
		call("book_flight", map[string]string{"flight": "SF100"})
	default:
		msg.Content, msg.ResponseMeta.FinishReason = "Done: "+tools[len(tools)-1], "stop"
	}
	return msg
}

func (f *fakeModel) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	return f.answer(input, opts), nil
}

// Stream sends the answer in chunks of a few characters, usage on the last.
func (f *fakeModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg := f.answer(input, opts)
	var chunks []*schema.Message
	for s := msg.Content; s != ""; {
		n := min(4, len(s))
		chunks = append(chunks, &schema.Message{Role: schema.Assistant, Content: s[:n]})
		s = s[n:]
	}
	chunks = append(chunks, &schema.Message{Role: schema.Assistant, ToolCalls: msg.ToolCalls, ResponseMeta: msg.ResponseMeta})
	return schema.StreamReaderFromArray(chunks), nil
}

// flightTool is a tool with a JSON Schema, counting its runs.
type flightTool struct {
	name, desc string
	params     map[string]*schema.ParameterInfo
	run        func(args map[string]string) string
	runs       *atomic.Int32
}

func (t *flightTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: t.name, Desc: t.desc, ParamsOneOf: schema.NewParamsOneOfByParams(t.params)}, nil
}

func (t *flightTool) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	t.runs.Add(1)
	var a map[string]string
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		return "", err
	}
	return t.run(a), nil
}

// world is one test's model and tools.
type world struct {
	model          *fakeModel
	search, booked *atomic.Int32
}

func newWorld() *world {
	return &world{model: newFakeModel(), search: new(atomic.Int32), booked: new(atomic.Int32)}
}

func (w *world) tools() []tool.InvokableTool {
	return []tool.InvokableTool{
		&flightTool{name: "search_flights", desc: "Search flights.", runs: w.search,
			params: map[string]*schema.ParameterInfo{"from": {Type: schema.String, Required: true}, "to": {Type: schema.String, Required: true}},
			run: func(a map[string]string) string {
				return fmt.Sprintf("SF100 %s-%s 120 USD; SF050 %s-%s 80 USD", a["from"], a["to"], a["from"], a["to"])
			}},
		&flightTool{name: "book_flight", desc: "Book a flight.", runs: w.booked,
			params: map[string]*schema.ParameterInfo{"flight": {Type: schema.String, Required: true}},
			run:    func(a map[string]string) string { return "booked " + a["flight"] }},
	}
}

const systemPrompt = "You book flights for travellers."

// agent is an Eino ReAct agent (a compose graph of the chat model and a
// tools node) with both components wrapped.
func (w *world) agent() replay.Agent {
	return replay.Typed(func(ctx context.Context, ask string) (string, error) {
		a, err := react.NewAgent(ctx, &react.AgentConfig{
			ToolCallingModel: sfeino.Model("fake", "flights-1", w.model).WithPrice(replay.Price{Input: 0.5, Output: 1.5}),
			ToolsConfig:      compose.ToolsNodeConfig{Tools: sfeino.Tools(w.tools()...), ExecuteSequentially: true},
			MaxStep:          12,
		})
		if err != nil {
			return "", err
		}
		out, err := a.Generate(ctx, []*schema.Message{schema.SystemMessage(systemPrompt), schema.UserMessage(ask)})
		if err != nil {
			return "", err
		}
		return out.Content, nil
	})
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package genkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/stepfork/stepfork/assert"
	sfgenkit "github.com/stepfork/stepfork/contrib/genkit"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// fakeModel is a Genkit model made with ai.NewModel: it asks for the
// "lookup" tool, then for the "confirm" tool, then answers with what they
// returned. It notes the config of every call, mints a fresh ref for
// every tool request, and streams its answer two characters at a time,
// failing the stream after the first chunk when the prompt says "break".
type fakeModel struct {
	calls   atomic.Int32
	mu      sync.Mutex
	configs []any
}

func (f *fakeModel) generate(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	n := f.calls.Add(1)
	f.mu.Lock()
	f.configs = append(f.configs, req.Config)
	f.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	var outs []string
	for _, m := range req.Messages {
		for _, p := range m.Content {
			if p.IsToolResponse() {
				outs = append(outs, fmt.Sprint(p.ToolResponse.Output))
			}
		}
	}
	msg := &ai.Message{Role: ai.RoleModel}
	switch {
	case last.Role == ai.RoleUser:
		msg.Content = []*ai.Part{ai.NewToolRequestPart(&ai.ToolRequest{Name: "lookup", Input: map[string]any{"q": last.Text()}, Ref: fmt.Sprintf("minted-%d", n)})}
	case len(outs) == 1:
		msg.Content = []*ai.Part{ai.NewToolRequestPart(&ai.ToolRequest{Name: "confirm", Input: map[string]any{"amount": 120}, Ref: fmt.Sprintf("minted-%d", n)})}
	default:
		msg.Content = []*ai.Part{ai.NewTextPart(strings.Join(outs, " / "))}
	}
	if cb != nil {
		text := msg.Text()
		for i := 0; i < len(text); i += 2 {
			if err := cb(ctx, &ai.ModelResponseChunk{Content: []*ai.Part{ai.NewTextPart(text[i:min(i+2, len(text))])}}); err != nil {
				return nil, err
			}
			if strings.Contains(req.Messages[0].Text(), "break") {
				return nil, errors.New("stream reset by peer")
			}
		}
	}
	return &ai.ModelResponse{Message: msg, FinishReason: ai.FinishReasonStop,
		Usage: &ai.GenerationUsage{InputTokens: 10 * len(req.Messages), OutputTokens: 5, TotalTokens: 10*len(req.Messages) + 5}}, nil
}

func (f *fakeModel) lastConfig() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.configs[len(f.configs)-1]
}

// interruptWorld is a Genkit instance with the fake model recorded through
// Model, a dynamic tool recorded through Tool and a tool that interrupts
// until it is resumed.
type interruptWorld struct {
	g       *genkit.Genkit
	model   *fakeModel
	lookup  ai.Tool
	confirm *ai.ToolDef[map[string]any, string]
	runs    atomic.Int32
}

func newInterruptWorld(t *testing.T) *interruptWorld {
	t.Helper()
	w := &interruptWorld{model: &fakeModel{}}
	w.g = genkit.Init(context.Background())
	genkit.RegisterAction(w.g, sfgenkit.Model(ai.NewModel("acme/m-1", &ai.ModelOptions{
		Supports: &ai.ModelSupports{Multiturn: true, Tools: true, SystemRole: true}}, w.model.generate), sfgenkit.WithPrices(replay.Prices{"m-1": {Input: 1, Output: 2}})))
	w.lookup = sfgenkit.Tool(ai.NewTool("lookup", "Look something up.", func(tc *ai.ToolContext, in map[string]any) (string, error) {
		jitter()
		w.runs.Add(1)
		return fmt.Sprintf("found %v", in["q"]), nil
	}))
	w.confirm = sfgenkit.DefineTool(w.g, "confirm", "Ask the user to confirm a payment.", func(tc *ai.ToolContext, in map[string]any) (string, error) {
		jitter()
		w.runs.Add(1)
		if !tc.IsResumed() {
			return "", tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{"question": fmt.Sprintf("pay %v?", in["amount"])}})
		}
		return fmt.Sprintf("confirmed: %v", tc.Resumed["answer"]), nil
	})
	return w
}

// agent asks the model; when a tool interrupts, it answers the interrupt
// by restarting the tool with the user's answer, as a Genkit app does.
func (w *interruptWorld) agent() replay.Agent {
	return replay.Typed(func(ctx context.Context, in string) (string, error) {
		opts := []ai.GenerateOption{ai.WithModelName("acme/m-1"), ai.WithTools(w.lookup, w.confirm),
			ai.WithConfig(&ai.GenerationCommonConfig{Temperature: 0.3})}
		resp, err := genkit.Generate(ctx, w.g, append(opts, ai.WithSystem("Pay bills."), ai.WithPrompt(in))...)
		if err != nil {
			return "", err
		}
		if resp.FinishReason != "interrupted" {
			return "", fmt.Errorf("finished %q without the interrupt", resp.FinishReason)
		}
		var restarts []*ai.Part
		for _, p := range resp.Interrupts() {
			q, _ := p.Metadata["interrupt"].(map[string]any)
			if q["question"] != "pay 120?" {
				return "", fmt.Errorf("interrupt metadata %v", p.Metadata)
			}
			r, err := w.confirm.RestartWith(p, ai.WithResumedMetadata[map[string]any](map[string]any{"answer": "yes"}))
			if err != nil {
				return "", err
			}
			restarts = append(restarts, r)
		}
		resp, err = genkit.Generate(ctx, w.g, append(opts, ai.WithMessages(resp.History()...), ai.WithToolRestarts(restarts...))...)
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

// A tool's interrupt is recorded and raised again on replay; the resumed
// run is recorded with its resume metadata; a dynamic tool made with
// ai.NewTool is recorded through Tool; a model made with ai.NewModel
// through Model.
func TestInterruptsAndDynamicTools(t *testing.T) {
	t.Parallel()
	w := newInterruptWorld(t)
	rec, err := replay.Record(context.Background(), "pay", "electricity", w.agent())
	if err != nil || rec.Err != nil {
		t.Fatalf("Record: %v, %v", err, rec.Err)
	}
	if rec.Output != "found electricity / confirmed: yes" {
		t.Errorf("recorded output %v", rec.Output)
	}
	var interrupted, resumed bool
	for _, c := range rec.Trace.Calls() {
		e := rec.Trace.Events[c.Event]
		if e.Name == "confirm" && c.ErrorType == "genkit.ToolInterrupt" && c.Message == `{"question":"pay 120?"}` {
			interrupted = true
		}
		if e.Name == "confirm" && c.Status == trace.StatusOK && e.Input.Get("resumed").Get("answer") == trace.StringValue("yes") {
			resumed = true
		}
	}
	if !interrupted || !resumed {
		t.Errorf("the interrupt (%v) and the resumed run (%v) should both be recorded", interrupted, resumed)
	}
	assert.ToolCalled(t, rec.Trace, "lookup")
	assert.ModelCallCount(t, rec.Trace, "acme/m-1", 3)

	calls, runs := w.model.calls.Load(), w.runs.Load()
	res, err := replay.Replay(context.Background(), rec.Trace, w.agent())
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil || res.Output != rec.Output {
		t.Errorf("replayed %v, %v; want %v", res.Output, res.Err, rec.Output)
	}
	if w.model.calls.Load() != calls || w.runs.Load() != runs {
		t.Error("frozen replay called the model or ran a tool")
	}

	v, err := fork.Run(context.Background(), rec.Trace, fork.Start(), w.agent(), fork.Memoize())
	if err != nil {
		t.Fatal(err)
	}
	assert.Equivalent(t, v)

	// The model mints fresh refs: a live tail is equivalent all the same.
	v, err = fork.Run(context.Background(), rec.Trace, fork.Start(), w.agent())
	if err != nil {
		t.Fatal(err)
	}
	assert.Equivalent(t, v)
	if v.IncurredCost <= 0 {
		t.Errorf("incurred cost %v, want > 0", v.IncurredCost)
	}
}

// A typed config is patched in its own type; fork.Model names a model the
// registry does not have, and the call fails saying so.
func TestConfigAndModelChanges(t *testing.T) {
	t.Parallel()
	w := newInterruptWorld(t)
	rec, err := replay.Record(context.Background(), "pay", "electricity", w.agent())
	if err != nil || rec.Err != nil {
		t.Fatalf("Record: %v, %v", err, rec.Err)
	}
	if _, err := fork.Run(context.Background(), rec.Trace, fork.Start(), w.agent(), fork.Temperature(fork.All, 1.5)); err != nil {
		t.Fatal(err)
	}
	if c, ok := w.model.lastConfig().(*ai.GenerationCommonConfig); !ok || c.Temperature != 1.5 {
		t.Errorf("the model got config %#v, want *ai.GenerationCommonConfig with temperature 1.5", w.model.lastConfig())
	}

	v, err := fork.Run(context.Background(), rec.Trace, fork.Start(), w.agent(), fork.Model("acme/m-1", "m-404"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Err == nil || !strings.Contains(v.Err.Error(), `"acme/m-404"`) {
		t.Errorf("fork to an unknown model: %v, want the names tried", v.Err)
	}
}

// A stream that fails after its first chunk is recorded with the chunk and
// the error, and served back the same way.
func TestStreamError(t *testing.T) {
	t.Parallel()
	w := newInterruptWorld(t)
	agent := replay.Typed(func(ctx context.Context, in string) ([]string, error) {
		var got []string
		_, err := genkit.Generate(ctx, w.g, ai.WithModelName("acme/m-1"), ai.WithSystem("break"), ai.WithMessages(
			ai.NewUserTextMessage(in), ai.NewModelTextMessage("ok"), &ai.Message{Role: ai.RoleTool, Content: []*ai.Part{
				ai.NewToolResponsePart(&ai.ToolResponse{Name: "lookup", Ref: "r1", Output: "a result"}),
				ai.NewToolResponsePart(&ai.ToolResponse{Name: "confirm", Ref: "r2", Output: "yes"})}}),
			ai.WithStreaming(func(ctx context.Context, c *ai.ModelResponseChunk) error {
				got = append(got, c.Text())
				return nil
			}))
		return append(got, fmt.Sprint(err)), nil
	})
	rec, err := replay.Record(context.Background(), "broken", "hi", agent)
	if err != nil || rec.Err != nil {
		t.Fatalf("Record: %v, %v", err, rec.Err)
	}
	out := jsonOf(t, rec.Output)
	if !strings.Contains(out, `"a "`) || !strings.Contains(out, "stream reset by peer") {
		t.Errorf("recorded %s: want the first chunk and the error", out)
	}
	calls := w.model.calls.Load()
	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	if err != nil {
		t.Fatal(err)
	}
	if w.model.calls.Load() != calls {
		t.Error("frozen replay called the model")
	}
	if got := jsonOf(t, res.Output); got != out {
		t.Errorf("served %s, want %s", got, out)
	}
}

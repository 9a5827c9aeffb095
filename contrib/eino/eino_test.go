package eino_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"github.com/stepfork/stepfork/assert"
	sfeino "github.com/stepfork/stepfork/contrib/eino"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

const ask = "Book me a flight from Kathmandu to Delhi."

func record(t *testing.T, w *world) *trace.Trace {
	t.Helper()
	rec, err := replay.Record(context.Background(), "flights", ask, w.agent())
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	return rec.Trace
}

func TestRecordAndFrozenReplay(t *testing.T) {
	t.Parallel()
	w := newWorld()
	base := record(t, w)
	assert.Trajectory(t, base, []string{"search_flights", "book_flight"}, assert.Strict)
	assert.ToolArguments(t, base, "book_flight", map[string]any{"flight": "SF100"})
	assert.ModelCallCount(t, base, "fake/flights-1", 3)

	var req map[string]any
	var tokens int64
	for _, e := range base.Events {
		if e.Type == trace.LLMRequest && req == nil {
			if err := e.Input.Decode(&req); err != nil {
				t.Fatal(err)
			}
		}
		if e.Type == trace.LLMResponse && e.TotalTokens != nil {
			tokens += *e.TotalTokens
		}
	}
	if tokens == 0 {
		t.Error("no token counts recorded")
	}
	tools, _ := req["tools"].([]any)
	if len(tools) != 2 || !strings.Contains(jsonOf(t, tools), `"required":["from","to"]`) {
		t.Errorf("recorded tools %s: want both ToolInfos with their parameters' JSON Schema", jsonOf(t, tools))
	}

	calls, search, booked := w.model.calls.Load(), w.search.Load(), w.booked.Load()
	res, err := replay.Replay(context.Background(), base, w.agent())
	if err != nil {
		t.Fatalf("frozen Replay: %v", err)
	}
	if w.model.calls.Load() != calls || w.search.Load() != search || w.booked.Load() != booked {
		t.Errorf("frozen replay reached the model or the tools (model %d→%d, search %d→%d, book %d→%d)",
			calls, w.model.calls.Load(), search, w.search.Load(), booked, w.booked.Load())
	}
	if res.Output != "Done: booked SF100" {
		t.Errorf("replayed output %v", res.Output)
	}
	assert.TraceEqual(t, base, res, assert.TraceOptions())
}

func TestMemoizedNullFork(t *testing.T) {
	t.Parallel()
	w := newWorld()
	base := record(t, w)
	calls := w.model.calls.Load()
	for _, p := range fork.Points(base) {
		v, err := fork.Run(context.Background(), base, p.At(), w.agent(), fork.Memoize())
		if err != nil {
			t.Fatalf("%s: %v", p.At(), err)
		}
		assert.Equivalent(t, v, p.At().String())
	}
	if w.model.calls.Load() != calls || w.booked.Load() != 1 {
		t.Errorf("memoized null forks called the model %d times and booked %d times more", w.model.calls.Load()-calls, w.booked.Load()-1)
	}
}

// The tail runs the model live: it mints fresh tool-call ids, which the
// wrapper makes stable, so a model that answers the same makes the fork
// equivalent; the tail's tool calls are served by the guard, and the live
// calls have a cost from the model's price.
func TestLiveTailIsEquivalent(t *testing.T) {
	t.Parallel()
	w := newWorld()
	base := record(t, w)
	if base.Totals.CostUSD == nil || *base.Totals.CostUSD <= 0 {
		t.Errorf("the recording has no cost: %v", base.Totals.CostUSD)
	}
	calls := w.model.calls.Load()
	v, err := fork.Run(context.Background(), base, fork.BeforeCall(replay.KindLLM, "fake/flights-1", 2), w.agent())
	if err != nil {
		t.Fatal(err)
	}
	if n := w.model.calls.Load() - calls; n != 2 {
		t.Fatalf("the tail called the model %d times, want 2", n)
	}
	assert.Equivalent(t, v)
	assert.NoSuppressedEffects(t, v)
	if w.booked.Load() != 1 {
		t.Errorf("%d bookings in all; the guard should serve the tail's", w.booked.Load())
	}
	if v.IncurredCost <= 0 {
		t.Errorf("incurred cost %v, want > 0", v.IncurredCost)
	}
	assert.IncurredCostAtMost(t, v, 0.001)
}

func TestPromptAndTemperatureReachTheModel(t *testing.T) {
	t.Parallel()
	w := newWorld()
	base := record(t, w)
	const prompt = "You book flights; never book without asking."
	v, err := fork.Run(context.Background(), base, fork.BeforeCall(replay.KindLLM, "fake/flights-1", 2), w.agent(),
		fork.Prompt(fork.All, prompt), fork.Temperature(fork.All, 0.25))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.model.lastSystem(); got != prompt {
		t.Errorf("the model got system message %q, want %q", got, prompt)
	}
	if temps := *w.model.temps; len(temps) == 0 || temps[len(temps)-1] != 0.25 {
		t.Errorf("the model got temperatures %v, want the fork's 0.25 last", temps)
	}
	assert.Completed(t, v)
	assert.OutputEqual(t, v, "Not booking.")
	assert.ToolNotCalled(t, v, "book_flight")
	if v.IncurredTokens == 0 {
		t.Error("the live tail incurred no tokens")
	}
}

func TestGuardBlocksUnrecordedBooking(t *testing.T) {
	t.Parallel()
	w := newWorld()
	base := record(t, w)
	at := fork.BeforeCall(replay.KindLLM, "fake/flights-1", 2)
	change := fork.Prompt(fork.All, "Book the cheapest flight.")
	v, err := fork.Run(context.Background(), base, at, w.agent(), change)
	if err != nil {
		t.Fatal(err)
	}
	assert.Status(t, v, fork.StatusBlocked)
	if len(v.Suppressed) != 1 || v.Suppressed[0].Tool != "book_flight" {
		t.Errorf("suppressed %+v, want book_flight", v.Suppressed)
	}
	if w.booked.Load() != 1 {
		t.Errorf("the blocked booking ran: %d bookings, want the recording's 1", w.booked.Load())
	}
	v, err = fork.Run(context.Background(), base, at, w.agent(), change, fork.Allow("book_flight"))
	if err != nil {
		t.Fatal(err)
	}
	assert.OutputEqual(t, v, "Done: booked SF050")
	if w.booked.Load() != 2 {
		t.Errorf("the allowed booking ran %d times in all, want 2", w.booked.Load()-1)
	}
}

// A stream is recorded chunk by chunk and served back as a stream, error
// included; options and their types are in the request.
func TestStreamAndOptions(t *testing.T) {
	t.Parallel()
	type vendorOpts struct{ reasoning string }
	withReasoning := func(r string) model.Option {
		return model.WrapImplSpecificOptFn(func(o *vendorOpts) { o.reasoning = r })
	}
	inner := &brokenStream{chunks: []string{"Hel", "lo, ", "trave", "ller"}, err: errors.New("connection reset by peer")}
	chat := sfeino.Model("fake", "stream-1", inner)
	agent := replay.Typed(func(ctx context.Context, _ any) ([]string, error) {
		sr, err := chat.Stream(ctx, []*schema.Message{schema.UserMessage("hi")}, model.WithTemperature(0.5), withReasoning("high"))
		if err != nil {
			return nil, err
		}
		defer sr.Close()
		var got []string
		for {
			c, err := sr.Recv()
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			if err != nil {
				return append(got, "error: "+err.Error()), nil
			}
			got = append(got, c.Content)
		}
	})
	rec, err := replay.Record(context.Background(), "stream", nil, agent)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Hel", "lo, ", "trave", "ller", "error: connection reset by peer"}
	if jsonOf(t, rec.Output) != jsonOf(t, want) {
		t.Errorf("recorded stream %v, want %v", rec.Output, want)
	}
	req := rec.Trace.Events[1].Input
	if s := string(req.Bytes()); !strings.Contains(s, `"temperature":0.5`) || !strings.Contains(s, `"impl_options":["func(*eino_test.vendorOpts)"]`) ||
		!strings.Contains(s, `"stream":true`) {
		t.Errorf("recorded request %s: want the temperature, the option's type and stream", s)
	}
	out := string(rec.Trace.Events[2].Output.Bytes())
	if strings.Count(out, `"content"`) != 4 || !strings.Contains(out, "connection reset") {
		t.Errorf("recorded response %s: want 4 chunks and the error", out)
	}
	n := inner.calls
	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	if err != nil {
		t.Fatal(err)
	}
	if inner.calls != n {
		t.Error("frozen replay called the model")
	}
	if got := res.Output; jsonOf(t, got) != jsonOf(t, want) {
		t.Errorf("served stream %v, want %v", got, want)
	}
}

type brokenStream struct {
	chunks []string
	err    error
	calls  int
}

func (b *brokenStream) Generate(context.Context, []*schema.Message, ...model.Option) (*schema.Message, error) {
	return nil, errors.New("not used")
}

func (b *brokenStream) Stream(ctx context.Context, _ []*schema.Message, _ ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	b.calls++
	sr, sw := schema.Pipe[*schema.Message](0)
	go func() {
		defer sw.Close()
		for _, c := range b.chunks {
			if sw.Send(&schema.Message{Role: schema.Assistant, Content: c}, nil) {
				return
			}
		}
		sw.Send(nil, b.err)
	}()
	return sr, nil
}

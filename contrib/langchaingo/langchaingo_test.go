package langchaingo_test

import (
	"context"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

const question = "What is the weather in Pokhara?"

func record(t *testing.T, w *world) *trace.Trace {
	t.Helper()
	rec, err := replay.Record(context.Background(), "travel", question, w.agent())
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	return rec.Trace
}

func TestRecordAndFrozenReplay(t *testing.T) {
	t.Parallel()
	w := &world{model: newFakeOpenAI(t)}
	base := record(t, w)
	assert.Trajectory(t, base, []string{"weather"}, assert.Strict)
	assert.ToolArguments(t, base, "weather", "Pokhara")
	assert.ModelCallCount(t, base, "openai/gpt-4o-mini", 2)
	var tokens int64
	for _, e := range base.Events {
		if e.Type == trace.LLMResponse && e.TotalTokens != nil {
			tokens += *e.TotalTokens
		}
	}
	if tokens == 0 {
		t.Error("no token counts recorded")
	}

	requests, weather := w.model.requests.Load(), w.weather.Load()
	res, err := replay.Replay(context.Background(), base, w.agent())
	if err != nil {
		t.Fatalf("frozen Replay: %v", err)
	}
	if w.model.requests.Load() != requests || w.weather.Load() != weather {
		t.Errorf("frozen replay sent %d requests and ran the tool %d times", w.model.requests.Load()-requests, w.weather.Load()-weather)
	}
	if res.Output != "Final: rain in Pokhara" {
		t.Errorf("replayed output %v", res.Output)
	}
}

func TestMemoizedNullFork(t *testing.T) {
	t.Parallel()
	w := &world{model: newFakeOpenAI(t)}
	base := record(t, w)
	requests := w.model.requests.Load()
	for _, p := range fork.Points(base) {
		v, err := fork.Run(context.Background(), base, p.At(), w.agent(), fork.Memoize())
		if err != nil {
			t.Fatalf("%s: %v", p.At(), err)
		}
		assert.Equivalent(t, v, p.At().String())
	}
	if n := w.model.requests.Load() - requests; n != 0 {
		t.Errorf("memoized null forks sent %d requests", n)
	}
}

func TestPromptChangeAndGuard(t *testing.T) {
	t.Parallel()
	w := &world{model: newFakeOpenAI(t)}
	base := record(t, w)
	at := fork.BeforeCall(replay.KindLLM, "openai/gpt-4o-mini", 2)
	const prompt = "You answer travel questions; buy an umbrella when it rains."

	v, err := fork.Run(context.Background(), base, at, w.agent(), fork.Prompt(fork.All, prompt))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.model.lastSystem(); got != prompt {
		t.Errorf("the API read system message %q, want %q", got, prompt)
	}
	assert.Status(t, v, fork.StatusBlocked)
	if len(v.Suppressed) != 1 || v.Suppressed[0].Tool != "buy_umbrella" || w.bought.Load() != 0 {
		t.Errorf("suppressed %+v with %d purchases, want buy_umbrella held back", v.Suppressed, w.bought.Load())
	}
	if v.IncurredTokens == 0 {
		t.Error("the live tail incurred no tokens")
	}

	v, err = fork.Run(context.Background(), base, at, w.agent(), fork.Prompt(fork.All, prompt), fork.Allow("buy_umbrella"))
	if err != nil {
		t.Fatal(err)
	}
	assert.Completed(t, v)
	assert.OutputEqual(t, v, "Final: umbrella bought in Pokhara")
	if w.bought.Load() != 1 {
		t.Errorf("%d purchases, want the allowed 1", w.bought.Load())
	}
}

// The tail's model calls run live and answer with fresh ids, which the agent
// sends back; the model says the same, so the fork is equivalent, with a
// cost from the transport's prices.
func TestLiveTailWithFreshIDsIsEquivalent(t *testing.T) {
	t.Parallel()
	w := &world{model: newFakeOpenAI(t)}
	base := record(t, w)
	if base.Totals.CostUSD == nil || *base.Totals.CostUSD <= 0 {
		t.Errorf("the recording has no cost: %v", base.Totals.CostUSD)
	}
	before := w.model.requests.Load()
	v, err := fork.Run(context.Background(), base, fork.BeforeCall(replay.KindLLM, "openai/gpt-4o-mini", 1), w.agent())
	if err != nil {
		t.Fatal(err)
	}
	if n := w.model.requests.Load() - before; n != 2 {
		t.Fatalf("the tail sent %d requests, want 2", n)
	}
	assert.Equivalent(t, v)
	assert.NoSuppressedEffects(t, v)
	if w.weather.Load() != 1 {
		t.Errorf("the weather tool ran %d times in all; the guard should serve the tail's call", w.weather.Load())
	}
	if v.IncurredCost <= 0 {
		t.Errorf("the live tail incurred cost %v, want > 0", v.IncurredCost)
	}
	assert.IncurredCostAtMost(t, v, 0.001)
}

package genkit_test

import (
	"context"
	"fmt"
	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	sfgenkit "github.com/stepfork/stepfork/contrib/genkit"
	"slices"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

func record(t *testing.T, w *world, agent replay.Agent) *trace.Trace {
	t.Helper()
	rec, err := replay.Record(context.Background(), "flights", ask, agent)
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	if rec.Err != nil {
		t.Fatalf("the recorded agent failed: %v", rec.Err)
	}
	return rec.Trace
}

// The recording has every model call (provider, model, Genkit's request
// with the tools it offers) and every tool call, the two tools of one
// answer from two goroutines, tokens and a cost; a frozen replay sends
// nothing, runs no tool and reproduces it.
func TestRecordAndFrozenReplay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, sfgenkit.WithPrices(prices))
	base := record(t, w, w.agent())
	assert.ToolCalled(t, base, "search_flights")
	assert.ToolCalled(t, base, "get_weather")
	assert.ToolArguments(t, base, "book_flight", map[string]any{"flight": "SF100"})
	assert.ModelCallCount(t, base, modelName, 3)
	var tokens int64
	for _, e := range base.Events {
		if e.Type == trace.LLMResponse && e.TotalTokens != nil {
			tokens += *e.TotalTokens
		}
	}
	if tokens == 0 {
		t.Error("no tokens recorded")
	}
	if base.Totals.CostUSD == nil || *base.Totals.CostUSD <= 0 {
		t.Errorf("no cost recorded with prices set: %v", base.Totals.CostUSD)
	}
	lanes := map[int]bool{}
	for _, c := range base.Calls() {
		if e := base.Events[c.Event]; e.Type == trace.ToolCall && e.Name != "book_flight" {
			lanes[c.Lane] = true
		}
	}
	if len(lanes) != 2 {
		t.Errorf("the two tools of one answer ran on lanes %v, want two goroutines", lanes)
	}
	var first trace.Value
	for _, e := range base.Events {
		if e.Type == trace.LLMRequest {
			if e.Provider != "openai" || e.Model != "gpt-4o" {
				t.Errorf("model call recorded as %q/%q, want openai/gpt-4o", e.Provider, e.Model)
			}
			if first.IsAbsent() {
				first = e.Input
			}
		}
	}
	if s := first.Canonical(); !strings.Contains(s, `"config":{"temperature":0.2}`) || !strings.Contains(s, `"role":"system"`) ||
		!strings.Contains(s, `"name":"search_flights"`) || !strings.Contains(s, `"required":["from","to"]`) {
		t.Errorf("recorded request %s: want Genkit's request with its config, system message and tools", s)
	}

	requests, runs := w.api.requests.Load(), w.runs()
	res, err := replay.Replay(context.Background(), base, w.agent())
	if err != nil {
		t.Fatalf("frozen Replay: %v", err)
	}
	if w.api.requests.Load() != requests || w.runs() != runs {
		t.Errorf("frozen replay reached the model or the tools (requests %d→%d, runs %v→%v)", requests, w.api.requests.Load(), runs, w.runs())
	}
	if res.Output != "Done: booked SF100" {
		t.Errorf("replayed output %v", res.Output)
	}
	assert.TraceEqual(t, base, res, assert.TraceOptions(), assert.SortConcurrentCalls(), assert.IgnoreIDs(), assert.IgnoreTimestamps())
}

// A fork with no changes, memoized, serves every call at every point and is
// equivalent to its base.
func TestMemoizedNullFork(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := record(t, w, w.agent())
	requests, runs := w.api.requests.Load(), w.runs()
	for _, p := range fork.Points(base) {
		v, err := fork.Run(context.Background(), base, p.At(), w.agent(), fork.Memoize())
		if err != nil {
			t.Fatalf("%s: %v", p.At(), err)
		}
		assert.Equivalent(t, v, p.At().String())
	}
	if w.api.requests.Load() != requests || w.runs() != runs {
		t.Errorf("memoized null forks reached the model %d times and the tools %v→%v", w.api.requests.Load()-requests, runs, w.runs())
	}
}

// The tail runs the model live: the server mints fresh completion ids,
// tool-call ids, request ids and fingerprints, and says more of the prompt
// was cached, none of which is behaviour, so a model that answers the same
// makes the fork equivalent; the tail's tool
// calls are served by the guard, and the live calls cost what the prices
// say.
func TestLiveTailIsEquivalent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, sfgenkit.WithPrices(prices))
	base := record(t, w, w.agent())
	requests, runs := w.api.requests.Load(), w.runs()
	w.api.cached.Store(16)
	v, err := fork.Run(context.Background(), base, fork.Start(), w.agent())
	if err != nil {
		t.Fatal(err)
	}
	if n := w.api.requests.Load() - requests; n != 3 {
		t.Fatalf("the tail called the model %d times, want 3", n)
	}
	assert.Equivalent(t, v)
	assert.NoSuppressedEffects(t, v)
	for _, e := range v.Trace.Events {
		if e.Type == trace.LLMResponse && e.Output.Get("usage").Get("cachedContentTokens").Canonical() != "16" {
			t.Errorf("the tail's response at step %d records usage %s, want 16 cached tokens", e.Step, e.Output.Get("usage").Canonical())
		}
	}
	if w.runs() != runs {
		t.Errorf("the tail ran tools (%v→%v); the guard should serve them", runs, w.runs())
	}
	if v.IncurredCost <= 0 || v.IncurredTokens <= 0 {
		t.Errorf("incurred cost %v and tokens %v, want > 0", v.IncurredCost, v.IncurredTokens)
	}
	assert.IncurredCostAtMost(t, v, 0.01)
}

// A live tail whose model answers differently shows that answer and the
// run's output, nothing else.
func TestLiveTailShowsOnlyTheChange(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := record(t, w, w.agent())
	w.api.final = "All set:"
	v, err := fork.Run(context.Background(), base, fork.Start(), w.agent())
	if err != nil {
		t.Fatal(err)
	}
	assert.Completed(t, v)
	assert.OutputEqual(t, v, "All set: booked SF100")
	if got, want := jsonOf(t, changedPaths(v.Diff)), `["llm output.message.content[0].text","run output"]`; got != want {
		t.Errorf("changed %s, want %s", got, want)
	}
}

// fork.Prompt, PromptAppend, Temperature and Model reach the request the
// model gets, in the fields Genkit's plugin sends.
func TestRequestChangesReachTheModel(t *testing.T) {
	t.Parallel()
	w := newWorld(t, sfgenkit.WithPrices(prices))
	base := record(t, w, w.agent())
	at := fork.Start()

	v, err := fork.Run(context.Background(), base, at, w.agent(),
		fork.PromptAppend(fork.All, " You never book without asking."), fork.Temperature(fork.All, 0.9), fork.Model(modelName, "gpt-4o-mini"))
	if err != nil {
		t.Fatal(err)
	}
	assert.Completed(t, v)
	assert.OutputEqual(t, v, "Not booking.")
	assert.ToolNotCalled(t, v, "book_flight")
	if len(v.Unused()) > 0 {
		t.Errorf("unused changes: %v", v.Unused())
	}
	body := w.api.last(1)
	msgs, _ := body["messages"].([]any)
	first, _ := msgs[0].(map[string]any)
	if got := text(first["content"]); first["role"] != "system" || got != systemPrompt+" You never book without asking." {
		t.Errorf("the model got first message %v, want the edited system prompt", first)
	}
	if body["temperature"] != 0.9 || body["model"] != "gpt-4o-mini" {
		t.Errorf("the model got temperature %v and model %v, want 0.9 and gpt-4o-mini", body["temperature"], body["model"])
	}
	for _, e := range v.Trace.Events {
		if e.Type == trace.LLMRequest && e.Model != "gpt-4o-mini" {
			t.Errorf("the tail's model call at step %d is recorded as %q, want gpt-4o-mini", e.Step, e.Model)
		}
	}
	if v.IncurredCost <= 0 {
		t.Errorf("the tail on gpt-4o-mini incurred %v, want its price", v.IncurredCost)
	}

	// A prompt that replaces the system prompt.
	if _, err := fork.Run(context.Background(), base, at, w.agent(), fork.Prompt(modelName, "Be brief.")); err != nil {
		t.Fatal(err)
	}
	msgs, _ = w.api.last(1)["messages"].([]any)
	if first, _ := msgs[0].(map[string]any); text(first["content"]) != "Be brief." {
		t.Errorf("the model got first message %v, want the new system prompt", first)
	}
}

// A request without a system prompt gets one from fork.Prompt.
func TestPromptWithoutSystemMessage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	agent := replay.Typed(func(ctx context.Context, in string) (string, error) {
		resp, err := genkit.Generate(ctx, w.g, ai.WithModelName(modelName), ai.WithPrompt(in), ai.WithTools(w.tools...))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	base := record(t, w, agent)
	v, err := fork.Run(context.Background(), base, fork.Start(), agent, fork.Prompt(fork.All, "You never book without asking."))
	if err != nil {
		t.Fatal(err)
	}
	assert.OutputEqual(t, v, "Not booking.")
	msgs, _ := w.api.last(1)["messages"].([]any)
	if first, _ := msgs[0].(map[string]any); first["role"] != "system" || text(first["content"]) != "You never book without asking." {
		t.Errorf("the model got first message %v, want the fork's system prompt", first)
	}
}

// The guard blocks a booking the recording does not have, and fork.Allow
// lets it run.
func TestGuardBlocksUnrecordedBooking(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := record(t, w, w.agent())
	at := fork.Start()
	change := fork.Prompt(fork.All, "Book the cheapest flight.")
	v, err := fork.Run(context.Background(), base, at, w.agent(), change)
	if err != nil {
		t.Fatal(err)
	}
	assert.Status(t, v, fork.StatusBlocked)
	if len(v.Suppressed) != 1 || v.Suppressed[0].Tool != "book_flight" {
		t.Errorf("suppressed %+v, want book_flight", v.Suppressed)
	}
	if w.book.Load() != 1 {
		t.Errorf("the blocked booking ran: %d bookings, want the recording's 1", w.book.Load())
	}
	v, err = fork.Run(context.Background(), base, at, w.agent(), change, fork.Allow("book_flight"))
	if err != nil {
		t.Fatal(err)
	}
	assert.OutputEqual(t, v, "Done: booked SF050")
	if w.book.Load() != 2 {
		t.Errorf("the allowed booking ran %d times in all, want 2", w.book.Load())
	}
}

// A tool result and a model response can be changed.
func TestOutputChanges(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := record(t, w, w.agent())
	v, err := fork.Run(context.Background(), base, fork.Start(), w.agent(),
		fork.ToolResult(fork.OnCall("book_flight", 1), "booked SF999"))
	if err != nil {
		t.Fatal(err)
	}
	assert.OutputEqual(t, v, "Done: booked SF999")

	calls := base.Calls()
	last := base.Events[calls[len(calls)-1].Event].ID
	answer := trace.MustParse(`{"finishReason":"stop","message":{"role":"model","content":[{"text":"Sorry, no flights."}]}}`)
	v, err = fork.Run(context.Background(), base, fork.Event(last), w.agent(), fork.LLMResponse(fork.OnEvent(last), answer))
	if err != nil {
		t.Fatal(err)
	}
	assert.OutputEqual(t, v, "Sorry, no flights.")
}

// A streamed call is recorded chunk by chunk, with its final response, and
// served back through Genkit's streaming callback; a live tail with fresh
// ids is equivalent.
func TestStreaming(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rec, err := replay.Record(context.Background(), "flights", ask, w.streamingAgent())
	if err != nil || rec.Err != nil {
		t.Fatalf("Record: %v, %v", err, rec.Err)
	}
	got := jsonOf(t, rec.Output)
	for _, want := range []string{`"model#0:[call search_flights]"`, `"tool#1:[result get_weather][result search_flights]"`,
		`"model#4:Done"`, `"model#4:: bo"`, `"answer:Done: booked SF100"`} {
		if !strings.Contains(got, want) {
			t.Errorf("recorded stream %s: want %s", got, want)
		}
	}
	var streams int
	for _, e := range rec.Trace.Events {
		if e.Type == trace.LLMRequest && e.Input.Get("stream") != trace.MustParse("true") {
			t.Errorf("a streamed request is recorded without stream: %s", e.Input.Canonical())
		}
		if e.Type == trace.LLMResponse {
			if n := e.Output.Get("stream").Len(); n < 2 || e.Output.Get("response").Kind() != trace.Object {
				t.Errorf("recorded response %s: want the chunks and the final response", e.Output.Canonical())
			}
			streams++
		}
	}
	if streams != 3 {
		t.Errorf("%d streamed responses recorded, want 3", streams)
	}

	requests := w.api.requests.Load()
	res, err := replay.Replay(context.Background(), rec.Trace, w.streamingAgent())
	if err != nil {
		t.Fatal(err)
	}
	if w.api.requests.Load() != requests {
		t.Error("frozen replay called the model")
	}
	if jsonOf(t, res.Output) != got {
		t.Errorf("served stream %s, want the recorded %s", jsonOf(t, res.Output), got)
	}

	v, err := fork.Run(context.Background(), rec.Trace, fork.Start(), w.streamingAgent())
	if err != nil {
		t.Fatal(err)
	}
	assert.Equivalent(t, v)
}

// A plugin's embedder is recorded as a tool call named after it: a frozen
// replay does not reach it.
func TestEmbedder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	agent := replay.Typed(func(ctx context.Context, in string) ([]float32, error) {
		resp, err := genkit.Embed(ctx, w.g, ai.WithEmbedderName("openai/text-embedding-3-small"), ai.WithTextDocs(in))
		if err != nil {
			return nil, err
		}
		return resp.Embeddings[0].Embedding, nil
	})
	rec := record(t, w, agent)
	assert.ToolCalled(t, rec, "openai/text-embedding-3-small")
	requests := w.api.requests.Load()
	res, err := replay.Replay(context.Background(), rec, agent)
	if err != nil {
		t.Fatal(err)
	}
	if w.api.requests.Load() != requests {
		t.Error("frozen replay reached the embedder")
	}
	if got := jsonOf(t, res.Output); got != "[0.25,-0.5,0.125]" {
		t.Errorf("served embedding %s", got)
	}
}

// A prompt defined with genkit.DefinePrompt, run inside a flow, reaches the
// recorded model and tools: Genkit looks them up by name.
func TestPromptInFlow(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	prompt := genkit.DefinePrompt(w.g, "book", ai.WithModelName(modelName), ai.WithSystem(systemPrompt),
		ai.WithPrompt("Book me a flight to {{city}}."), ai.WithTools(w.tools...), ai.WithMaxTurns(6))
	flow := genkit.DefineFlow(w.g, "bookFlow", func(ctx context.Context, city string) (string, error) {
		resp, err := prompt.Execute(ctx, ai.WithInput(map[string]any{"city": city}))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	agent := replay.Typed(func(ctx context.Context, city string) (string, error) { return flow.Run(ctx, city) })
	rec, err := replay.Record(context.Background(), "book", "Delhi", agent)
	if err != nil || rec.Err != nil {
		t.Fatalf("Record: %v, %v", err, rec.Err)
	}
	assert.ModelCallCount(t, rec.Trace, modelName, 3)
	assert.ToolCalled(t, rec.Trace, "book_flight")
	requests, runs := w.api.requests.Load(), w.runs()
	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "Done: booked SF100" || w.api.requests.Load() != requests || w.runs() != runs {
		t.Errorf("frozen replay: %v, requests %d→%d, runs %v→%v", res.Output, requests, w.api.requests.Load(), runs, w.runs())
	}
}

// Genkit runs the tools of an answer on goroutines and asks the model again
// once they have all returned: that model call ends the turn (a join), so a
// fork may start there, between two turns of tools, with the first turn
// served as recorded. Inside a turn, between the tools of one answer, a
// fork is still refused.
func TestForkBetweenToolTurns(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := record(t, w, w.agent())
	second := fork.BeforeCall(replay.KindLLM, modelName, 2)
	var points []string
	for _, p := range fork.Points(base) {
		points = append(points, p.Description)
	}
	for _, want := range []string{"before model 'openai/gpt-4o' call 2", "before model 'openai/gpt-4o' call 3"} {
		if !slices.Contains(points, want) {
			t.Fatalf("fork points %q lack %q", points, want)
		}
	}
	requests, runs := w.api.requests.Load(), w.runs()

	v, err := fork.Run(context.Background(), base, second, w.agent(), fork.Memoize())
	if err != nil {
		t.Fatal(err)
	}
	assert.Equivalent(t, v)
	if w.api.requests.Load() != requests || w.runs() != runs {
		t.Fatalf("a memoized null fork at the second model call reached the model or the tools")
	}

	// The tail asks the model again with another prompt: it sees the first
	// turn's results as recorded, which are served, not run again, and
	// books the cheapest flight.
	v, err = fork.Run(context.Background(), base, second, w.agent(),
		fork.Prompt(fork.All, "Book the cheapest flight."), fork.Allow("book_flight"))
	if err != nil {
		t.Fatal(err)
	}
	assert.OutputEqual(t, v, "Done: booked SF050")
	if got := w.runs(); got != [3]int32{runs[0], runs[1], runs[2] + 1} {
		t.Errorf("tool runs %v → %v, want only one more booking", runs, got)
	}
	if n := w.api.requests.Load() - requests; n != 2 {
		t.Errorf("the tail called the model %d times, want 2", n)
	}
	var results []string
	msgs, _ := w.api.all()[requests]["messages"].([]any)
	for _, m := range msgs {
		if m, _ := m.(map[string]any); m["role"] == "tool" {
			results = append(results, text(m["content"]))
		}
	}
	slices.Sort(results)
	if got := strings.Join(results, " | "); !strings.Contains(got, "SF050 KTM-DEL 80 USD") || !strings.Contains(got, "sunny in DEL") {
		t.Errorf("the tail's first model call got the tool results %q, want the first turn's", got)
	}

	// Step 5 is the second tool of the first answer (the group's members
	// are written in one order: get_weather, then search_flights).
	if _, err := fork.Run(context.Background(), base, fork.Step(5), w.agent()); err == nil || !strings.Contains(err.Error(), "a fork must not split it") {
		t.Errorf("a fork between the tools of one answer: %v, want the group refused", err)
	}
}

// A golden of a fork of a run recorded in the test (the README's pattern)
// is the same text run after run, although the server mints fresh
// completion ids, tool-call refs and fingerprints on every call: the
// rendering shows them as placeholders, in the base's served prefix and in
// the live tail alike (a fork before the second model call: the first
// answer and its tools served, the rest live, the last answer changed).
func TestGoldenOfForkIsStable(t *testing.T) {
	t.Parallel()
	texts := map[string]bool{}
	for range 3 {
		w := newWorld(t)
		base := record(t, w, w.agent())
		w.api.final = "All set:"
		v, err := fork.Run(context.Background(), base, fork.BeforeCall(replay.KindLLM, modelName, 2), w.agent(),
			fork.PromptAppend(fork.All, " Be brief."))
		if err != nil {
			t.Fatal(err)
		}
		assert.OutputEqual(t, v, "All set: booked SF100")
		s, err := sftest.Render(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, minted := range []string{"chatcmpl-", "fp_", `"call_`} {
			if strings.Contains(s, minted) {
				t.Errorf("the rendering shows a minted id (%s):\n%s", minted, s)
			}
		}
		if !strings.Contains(s, `"id":"<response-3>"`) {
			t.Errorf("the rendering shows no placeholder for the live tail's completion id:\n%s", s)
		}
		texts[s] = true
	}
	if len(texts) != 1 {
		for s := range texts {
			t.Log(s)
		}
		t.Fatalf("%d distinct renderings of the same fork, want 1", len(texts))
	}
}

// The agent gets the completion's custom data (compat_oai keeps the
// completion id, model and fingerprint there) with the same Go types live
// and served, and the served one is the recorded one.
func TestCustomServedAsLive(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	agent := replay.Typed(func(ctx context.Context, in string) ([]string, error) {
		resp, err := genkit.Generate(ctx, w.g, ai.WithModelName(modelName), ai.WithPrompt(in))
		if err != nil {
			return nil, err
		}
		c, ok := resp.Custom.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("custom %T, want map[string]any", resp.Custom)
		}
		var out []string
		for _, k := range []string{"id", "model", "systemFingerprint"} {
			s, ok := c[k].(string)
			if !ok {
				return nil, fmt.Errorf("custom[%q] is %T, want a string", k, c[k])
			}
			out = append(out, s)
		}
		return out, nil
	})
	rec, err := replay.Record(context.Background(), "custom", "hi", agent)
	if err != nil || rec.Err != nil {
		t.Fatalf("Record: %v, %v", err, rec.Err)
	}
	live := jsonOf(t, rec.Output)
	if !strings.Contains(live, `"chatcmpl-`) || !strings.Contains(live, `"fp_`) {
		t.Fatalf("live custom %s: want the completion id and fingerprint", live)
	}
	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, res.Output); got != live {
		t.Errorf("served custom %s, want the recorded %s", got, live)
	}
}

package fork_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/shapes"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// both calls tools a and b on two goroutines, a delay deciding who goes
// first (b when bFirst), then runs the node "after".
func both(bFirst bool) replay.Agent {
	a := replay.Tool("a", func(context.Context, int) (string, error) { return "A", nil })
	b := replay.Tool("b", func(context.Context, int) (string, error) { return "B", nil })
	after := replay.Tool("after", func(_ context.Context, in string) (string, error) { return in + "!", nil })
	return func(ctx context.Context, _ trace.Value) (any, error) {
		var wg sync.WaitGroup
		var ra, rb string
		var ea, eb error
		delay := func(first bool) {
			if !first {
				time.Sleep(5 * time.Millisecond)
			}
		}
		wg.Go(func() { delay(!bFirst); ra, ea = a(ctx, 1) })
		wg.Go(func() { delay(bFirst); rb, eb = b(ctx, 2) })
		wg.Wait()
		if err := errors.Join(ea, eb); err != nil {
			return nil, err
		}
		var out string
		err := replay.Node(ctx, "after", func(ctx context.Context) error {
			var err error
			out, err = after(ctx, ra+rb)
			return err
		})
		return out, err
	}
}

// The reproduction: a fork after two goroutines whose order is
// swapped serves the prefix instead of reporting a divergence.
func TestForkAfterTwoGoroutinesInAnotherOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec, err := replay.Record(ctx, "both", 0, both(false))
	require.NoError(t, err)
	_, err = replay.Replay(ctx, rec.Trace, both(true))
	require.NoError(t, err)
	v, err := fork.Run(ctx, rec.Trace, fork.BeforeNode("after", 1), both(true))
	require.NoError(t, err)
	require.Equal(t, fork.StatusCompleted, v.Status)
	require.Equal(t, "AB!", v.Output)
}

// parallelModel is a fake chat model that asks for n parallel tool calls,
// minting fresh ids as a real provider does, then answers with what the
// tools returned.
func parallelModel(n int) func(context.Context, replay.Request) (replay.Response, error) {
	return func(_ context.Context, r replay.Request) (replay.Response, error) {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "user" {
			resp := replay.Response{StopReason: "tool_calls"}
			for i := range n {
				resp.ToolCalls = append(resp.ToolCalls, replay.ToolCall{
					ID: fmt.Sprintf("call_%016x", rand.Uint64()), Name: "lookup",
					Arguments: json.RawMessage(fmt.Sprintf(`{"city":%q}`, []string{"Oslo", "Lima", "Pune", "Kiev"}[i%4]+fmt.Sprint(i)))})
			}
			return resp, nil
		}
		var parts []string
		for _, m := range r.Messages {
			if m.Role == "tool" {
				parts = append(parts, m.Content)
			}
		}
		return replay.Response{Content: strings.Join(parts, "; "), StopReason: "stop"}, nil
	}
}

// parallelAgent sends a question, runs the model's tool calls on one
// goroutine each after a random delay, sends the results back in the
// model's order and records the answer in the node "report".
func parallelAgent(n int) replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, args json.RawMessage) (string, error) {
		var in struct{ City string }
		if err := json.Unmarshal(args, &in); err != nil {
			return "", err
		}
		return "weather in " + in.City + ": fine", nil
	})
	store := replay.Tool("store", func(_ context.Context, s string) (int, error) { return len(s), nil })
	model := parallelModel(n)
	return func(ctx context.Context, _ trace.Value) (any, error) {
		msgs := []replay.Message{{Role: "user", Content: "weather?"}}
		resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m", Messages: msgs}, model)
		if err != nil {
			return nil, err
		}
		results := make([]string, len(resp.ToolCalls))
		errs := make([]error, len(resp.ToolCalls))
		var wg sync.WaitGroup
		for i, tc := range resp.ToolCalls {
			wg.Go(func() {
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				results[i], errs[i] = lookup(ctx, tc.Arguments)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		msgs = append(msgs, replay.Message{Role: "assistant", ToolCalls: resp.ToolCalls})
		for i, tc := range resp.ToolCalls {
			msgs = append(msgs, replay.Message{Role: "tool", ToolCallID: tc.ID, Content: results[i]})
		}
		final, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m", Messages: msgs}, model)
		if err != nil {
			return nil, err
		}
		var stored int
		err = replay.Node(ctx, "report", func(ctx context.Context) error {
			stored, err = store(ctx, final.Content)
			return err
		})
		return stored, err
	}
}

// TestParallelToolCallsOnGoroutines is the fidelity promise on the most
// common shape of a real agent: the model's parallel tool calls run on
// goroutines in a random order. Run it many times under -race:
//
//	go test -race ./fork -run TestParallelToolCallsOnGoroutines -count=200
func TestParallelToolCallsOnGoroutines(t *testing.T) {
	ctx := context.Background()
	agent := parallelAgent(4)
	rec, err := replay.Record(ctx, "parallel", nil, agent)
	require.NoError(t, err)
	require.Contains(t, rec.Trace.Extras, trace.LanesFile)

	res, err := replay.Replay(ctx, rec.Trace, agent)
	require.NoError(t, err)
	require.Zero(t, res.Executed)
	assert.Equivalent(t, diff.Runs(rec.Trace, res.Trace))
	assert.TraceEqual(t, rec, res, assert.SortConcurrentCalls())

	v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent, fork.Memoize())
	require.NoError(t, err)
	assert.Equivalent(t, v)
	require.Zero(t, v.LiveModelCalls)

	sftest.ForkCheck(t, rec.Trace, agent)
}

func TestForkPointsDoNotSplitAConcurrentGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec, err := replay.Record(ctx, "both", 0, both(false))
	require.NoError(t, err)
	// run_start, a (call, result), b (call, result), the node "after".
	var second trace.Event
	for _, c := range rec.Trace.Calls() {
		if c.Index == 1 {
			second = rec.Trace.Events[c.Event]
		}
	}
	require.Equal(t, 3, second.Step)
	_, err = fork.Run(ctx, rec.Trace, fork.Step(second.Step), both(false))
	require.Error(t, err)
	require.Contains(t, err.Error(), "step 3 is inside a group of concurrent calls (steps 1..4, made on several goroutines, in an order that is not behavior); a fork must not split it. Fork before the group (fork.Step(1)) or after it (fork.Step(5)).")
	_, err = fork.Run(ctx, rec.Trace, fork.BeforeCall(replay.KindTool, second.Name, 1), both(false))
	require.ErrorContains(t, err, "a fork must not split it")
	for _, p := range fork.Points(rec.Trace) {
		require.NotContains(t, []int{2, 3, 4}, p.Step, "point %s splits the group", p.Description)
	}
	// The points before and after the group are forks like any other.
	for _, at := range []fork.At{fork.Step(1), fork.Step(5)} {
		v, err := fork.Run(ctx, rec.Trace, at, both(true), fork.Memoize())
		require.NoError(t, err, at)
		assert.Equivalent(t, v)
	}
}

func TestStaticForkKeepsTheLanesOfKeptEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec, err := replay.Record(ctx, "both", 0, both(false))
	require.NoError(t, err)
	for _, tc := range []struct {
		at    fork.Cut
		lanes int
	}{{fork.ThroughStep(0), 0}, {fork.ThroughStep(2), 1}, {fork.ThroughStep(5), 2}} {
		res, err := fork.Trace(rec.Trace, tc.at)
		require.NoError(t, err, tc.at)
		got, err := trace.Lanes(res.Trace.Extras[trace.LanesFile])
		if tc.lanes == 0 {
			require.NotContains(t, res.Trace.Extras, trace.LanesFile, tc.at)
			continue
		}
		require.NoError(t, err)
		require.Len(t, got, tc.lanes, tc.at)
	}
}

// A static fork keeps the joins of the events it keeps, in memory and
// saved, so its turns stay parts: the model call between them is still a
// fork point.
func TestStaticForkKeepsTheJoinsOfKeptEvents(t *testing.T) {
	t.Parallel()
	sh := shape(t, "turns")
	rec, err := replay.Record(context.Background(), "turns", sh.Input, sh.Agent(shapes.Delays{Max: time.Millisecond}))
	require.NoError(t, err)
	joins, err := trace.Joins(rec.Trace.Extras[trace.JoinsFile])
	require.NoError(t, err)
	require.Len(t, joins, 2, "the second and third model calls")
	third := -1
	for _, ev := range rec.Trace.Events {
		if ev.ID == joins[1] {
			third = ev.Step
		}
	}
	path := filepath.Join(t.TempDir(), "turns.sftrace")
	require.NoError(t, rec.Trace.Save(path))
	for _, tc := range []struct {
		at    fork.Cut
		joins []string
	}{{fork.ThroughStep(third - 1), joins[:1]}, {fork.ThroughStep(third), joins}, {fork.ThroughStep(2), nil}} {
		mem, err := fork.Trace(rec.Trace, tc.at)
		require.NoError(t, err, tc.at)
		saved, err := fork.Trace(path, tc.at, fork.SaveTo(filepath.Join(t.TempDir(), "cut.sftrace")))
		require.NoError(t, err, tc.at)
		loaded, err := trace.Load(saved.Path)
		require.NoError(t, err, tc.at)
		for _, tr := range []*trace.Trace{mem.Trace, loaded} {
			data, ok := tr.Extras[trace.JoinsFile]
			if tc.joins == nil {
				require.False(t, ok, "%v: joins %s", tc.at, data)
				continue
			}
			got, err := trace.Joins(data)
			require.NoError(t, err, tc.at)
			require.Equal(t, tc.joins, got, tc.at)
		}
	}
	mem, err := fork.Trace(rec.Trace, fork.ThroughStep(third))
	require.NoError(t, err)
	var points []string
	for _, p := range fork.Points(mem.Trace) {
		points = append(points, p.Description)
	}
	require.Contains(t, points, "before model 'fake/m' call 2")
}

// The reproduction of a change aimed at one concurrent call: a
// worker pool of 3 goroutines processing 6 tasks, forked with the result of
// the call for task "audit-9" changed. Whichever worker takes that task in
// the fork, and whenever, the new result is that call's and only that
// call's, in every fork.
func TestChangeAimedAtOneCallOfAWorkerPool(t *testing.T) {
	t.Parallel()
	var pool shapes.Shape
	for _, sh := range shapes.All() {
		if sh.Name == "pool" {
			pool = sh
		}
	}
	ctx := context.Background()
	rec, err := replay.Record(ctx, "pool", pool.Input, pool.Agent(shapes.Delays{Max: time.Millisecond}))
	require.NoError(t, err)
	id, _, out, err := pool.Target(rec.Trace)
	require.NoError(t, err)
	base := rec.Trace.Events[len(rec.Trace.Events)-1].Output
	for range 20 {
		v, err := fork.Run(ctx, rec.Trace, fork.Start(), pool.Agent(shapes.Delays{Max: 200 * time.Microsecond}),
			fork.ToolResult(fork.OnEvent(id), out), fork.Memoize())
		require.NoError(t, err)
		require.Equal(t, 1, v.Changes[0].Applied)
		require.NoError(t, pool.Check(base, v.Trace.Events[len(v.Trace.Events)-1].Output))
	}
}

// A patched state key reads as patched until the agent writes it, so
// goroutines that read it concurrently all see the patch, whichever reads
// first.
func TestPatchedStateReadOnGoroutines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	agent := func(order []int) replay.Agent {
		return func(ctx context.Context, _ trace.Value) (any, error) {
			tones := make([]string, 3)
			done := make([]chan struct{}, 3)
			for i := range done {
				done[i] = make(chan struct{})
			}
			var wg sync.WaitGroup
			for k, i := range order {
				wg.Go(func() {
					defer close(done[k])
					if k > 0 {
						<-done[k-1]
					}
					tones[i] = replay.Read(ctx, "tone", "casual")
				})
			}
			wg.Wait()
			return tones, replay.Set(ctx, "tone", tones[0])
		}
	}
	rec, err := replay.Record(ctx, "tones", nil, agent([]int{0, 1, 2}))
	require.NoError(t, err)
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}} {
		v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent(order), fork.State{Set: map[string]any{"tone": "formal"}})
		require.NoError(t, err)
		require.Equal(t, []any{"formal", "formal", "formal"}, decodeAny(t, v.Trace.Events[len(v.Trace.Events)-1].Output), "order %v", order)
	}
}

func decodeAny(t *testing.T, v trace.Value) any {
	t.Helper()
	var out any
	require.NoError(t, v.Decode(&out))
	return out
}

// shape is the shape of package shapes with the given name.
func shape(t *testing.T, name string) shapes.Shape {
	t.Helper()
	for _, sh := range shapes.All() {
		if sh.Name == name {
			return sh
		}
	}
	t.Fatalf("no shape %q", name)
	return shapes.Shape{}
}

// An agent that runs each tool call of a model's answer on its own
// goroutine and waits for them all before it asks the model again (Genkit,
// Eino, openai-go agents) forks between its turns: the model call after a
// turn is a join, which the turn's group does not span.
func TestForkBetweenTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := shape(t, "turns")
	rec, err := replay.Record(ctx, "turns", sh.Input, sh.Agent(shapes.Delays{Max: time.Millisecond}))
	require.NoError(t, err)
	agent := sh.Agent(shapes.Delays{Max: 300 * time.Microsecond, Reverse: true})

	var steps []int
	for _, p := range fork.Points(rec.Trace) {
		steps = append(steps, p.Step)
	}
	second := fork.BeforeCall(replay.KindLLM, "fake/m", 2)
	v, err := fork.Run(ctx, rec.Trace, second, agent, fork.Memoize())
	require.NoError(t, err, "points %v", steps)
	assert.Equivalent(t, v)
	require.Zero(t, v.LiveModelCalls+v.LiveToolCalls)

	// The second model call asks for other tools: the second turn runs
	// them, the first is served as recorded.
	answer := replay.Response{StopReason: "tool_calls", ToolCalls: []replay.ToolCall{
		{ID: "call-x", Name: "book", Arguments: json.RawMessage(`{"q":"SF050"}`)}}}
	v, err = fork.Run(ctx, rec.Trace, second, agent, fork.LLMResponse(fork.OnCall("fake/m", 2), answer), fork.Memoize(), fork.Allow("book"))
	require.NoError(t, err)
	require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
	require.Equal(t, "done: search(KTM-DEL) | weather(DEL) | book(SF050)", v.Output)
	require.Equal(t, 1, v.LiveToolCalls)

	// Inside a turn a fork is still refused.
	_, err = fork.Run(ctx, rec.Trace, fork.BeforeCall(replay.KindTool, "book", 1), agent)
	if err == nil {
		_, err = fork.Run(ctx, rec.Trace, fork.BeforeCall(replay.KindTool, "notify", 1), agent)
	}
	require.ErrorContains(t, err, "a fork must not split it")
}

package replay_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// ordered runs n goroutines, each doing work(ctx, i), one after the other
// in the order given (each waits for the one before it to finish).
func ordered(ctx context.Context, order []int, work func(ctx context.Context, i int) error) error {
	done := make([]chan struct{}, len(order))
	for i := range done {
		done[i] = make(chan struct{})
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for k, i := range order {
		wg.Go(func() {
			defer close(done[k])
			if k > 0 {
				<-done[k-1]
			}
			errs[i] = work(ctx, i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// markersAgent runs three goroutines in the order given; each looks its
// task up (a call that identifies it), then reads an id, a side effect and
// a time, decides a route, and writes its state. The output says what each
// goroutine read.
func markersAgent(order []int) replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, i int) (string, error) { return "task-" + strconv.Itoa(i), nil })
	return func(ctx context.Context, _ trace.Value) (any, error) {
		var mu sync.Mutex
		out := map[string]string{}
		err := ordered(ctx, order, func(ctx context.Context, i int) error {
			task, err := lookup(ctx, i)
			if err != nil {
				return err
			}
			id := replay.NewID(ctx)
			roll, err := replay.SideEffect(ctx, "roll", func() (int, error) { return 10 * i, nil })
			if err != nil {
				return err
			}
			route := replay.Decide(ctx, "route", map[bool]string{true: "express", false: "standard"}[i == 1])
			if err := replay.Set(ctx, "route:"+task, route); err != nil {
				return err
			}
			mu.Lock()
			out[task] = fmt.Sprintf("%s %d %s", id, roll, route)
			mu.Unlock()
			return nil
		})
		return out, err
	}
}

// Markers and state written on goroutines are matched in their goroutine's
// concurrent group: by what identifies them (a decision's value, a state
// write's key and value), and, for what identifies nothing (an id, a side
// effect), by what their goroutine did before. Served in the other order,
// every goroutine gets what it read when the run was recorded.
func TestMarkersFollowTheirGoroutine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec, err := replay.Record(ctx, "markers", nil, markersAgent([]int{0, 1, 2}))
	require.NoError(t, err)
	lanes, err := trace.Lanes(rec.Trace.Extras[trace.LanesFile])
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, ev := range rec.Trace.Events {
		if lanes[ev.ID] > 0 {
			kinds[ev.Key+string(ev.Type)]++
		}
	}
	assert.Equal(t, map[string]int{"tool_call": 3, "@id" + "state_change": 3, "@effect" + "state_change": 3,
		"@decision" + "state_change": 3, "route:task-0state_change": 1, "route:task-1state_change": 1, "route:task-2state_change": 1}, kinds,
		"every operation made on a goroutine has its lane")

	for _, order := range [][]int{{2, 1, 0}, {1, 2, 0}, {0, 1, 2}} {
		res, err := replay.Replay(ctx, rec.Trace, markersAgent(order))
		require.NoError(t, err, "order %v", order)
		assert.Equal(t, rec.Output, res.Output, "order %v", order)
		assert.Equal(t, ids(rec.Trace), ids(res.Trace), "order %v: the replay's trace is its base's, event for event", order)
	}
}

func ids(tr *trace.Trace) []string {
	out := make([]string, len(tr.Events))
	for i, ev := range tr.Events {
		out[i] = ev.ID
	}
	return out
}

// shape strips a trace of what differs between two runs of the same
// behaviour (ids, run ids, times, durations): parents become positions.
func shape(tr *trace.Trace) []string {
	pos := map[string]int{}
	var out []string
	for i, ev := range tr.Events {
		pos[ev.ID] = i
		parent := -1
		if p, ok := pos[ev.ParentID]; ok {
			parent = p
		}
		out = append(out, fmt.Sprintf("%d %s parent=%d %s %s %s in=%s out=%s before=%s after=%s", ev.Step, ev.Type, parent, ev.Name, ev.Key, ev.Status,
			ev.Input.Canonical(), ev.Output.Canonical(), ev.Before.Canonical(), ev.After.Canonical()))
	}
	return out
}

// Two recordings of the same behaviour whose goroutines ran in other
// orders write one trace: the same events in the same order, steps, state
// writes (the "before" of a key two goroutines wrote) and lanes.
func TestRecordingsInAnyOrderWriteOneTrace(t *testing.T) {
	t.Parallel()
	agent := func(order []int) replay.Agent {
		fetch := replay.Tool("fetch", func(_ context.Context, i int) (int, error) { return i * i, nil })
		return func(ctx context.Context, _ trace.Value) (any, error) {
			err := ordered(ctx, order, func(ctx context.Context, i int) error {
				return replay.Node(ctx, "worker", func(ctx context.Context) error {
					v, err := fetch(ctx, i)
					if err != nil {
						return err
					}
					if err := replay.Set(ctx, "last", i); err != nil { // one key, every goroutine
						return err
					}
					return replay.Set(ctx, "v"+strconv.Itoa(i), v)
				})
			})
			return "done", err
		}
	}
	var first []string
	var firstLanes []int
	for _, order := range [][]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}} {
		rec, err := replay.Record(context.Background(), "workers", nil, agent(order))
		require.NoError(t, err)
		got := shape(rec.Trace)
		var lanes []int
		for _, l := range rec.Trace.EventLanes() {
			lanes = append(lanes, l.Number)
		}
		// The key every goroutine wrote: each write's "before" is what the
		// write before it in the trace left.
		var writes []trace.Event
		for _, ev := range rec.Trace.Events {
			if ev.Type == trace.StateChange && ev.Key == "last" {
				writes = append(writes, ev)
			}
		}
		require.Len(t, writes, 3)
		assert.Equal(t, trace.NullValue, writes[0].Before, "order %v", order)
		for k := 1; k < len(writes); k++ {
			assert.Equal(t, writes[k-1].After, writes[k].Before, "order %v: write %d", order, k)
		}
		if first == nil {
			first, firstLanes = got, lanes
			continue
		}
		assert.Equal(t, first, got, "order %v", order)
		assert.Equal(t, firstLanes, lanes, "order %v", order)
	}
	assert.True(t, slices.ContainsFunc(firstLanes, func(l int) bool { return l > 0 }))
}

// A substituted result stands in for the recorded call it replaces
// (Action.Instead): that call is consumed, so an identical call is served
// the other recording.
func TestInsteadConsumesTheRecordedCall(t *testing.T) {
	t.Parallel()
	n := 0
	next := replay.Tool("next", func(context.Context, struct{}) (int, error) { n++; return n, nil })
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		a, err := next(ctx, struct{}{})
		if err != nil {
			return nil, err
		}
		b, err := next(ctx, struct{}{})
		return []int{a, b}, err
	}
	rec, err := replay.Record(context.Background(), "next", nil, agent)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, rec.Output)
	for _, instead := range []bool{false, true} {
		d := replay.DirectorFunc(func(c *replay.Call) replay.Action {
			if c.Kind == replay.KindTool && c.Position == 1 {
				a := replay.Serve(trace.MustValueOf(42))
				if instead {
					a = a.Instead(c.Match)
				}
				return a
			}
			return replay.ServeMatch()
		})
		res, err := replay.Replay(context.Background(), rec.Trace, agent, replay.WithDirector(d))
		require.NoError(t, err)
		want := []any{42.0, 1.0} // the second call is served the first recorded result
		if instead {
			want = []any{42.0, 2.0} // the first recorded call was replaced: the second is served its own
		}
		var got []any
		require.NoError(t, res.Trace.Events[len(res.Trace.Events)-1].Output.Decode(&got))
		assert.Equal(t, want, got, "Instead: %v", instead)
	}
}

// joinsOf is the event ids a trace's joins.json names, as step numbers.
func joinsOf(t *testing.T, tr *trace.Trace) []int {
	t.Helper()
	data, ok := tr.Extras[trace.JoinsFile]
	if !ok {
		return nil
	}
	ids, err := trace.Joins(data)
	require.NoError(t, err)
	var steps []int
	for _, id := range ids {
		i := slices.IndexFunc(tr.Events, func(ev trace.Event) bool { return ev.ID == id })
		require.GreaterOrEqual(t, i, 0, "join %s names no event", id)
		steps = append(steps, tr.Events[i].Step)
	}
	return steps
}

// An operation of a scope's own goroutine made once everything its other
// goroutines did was over is a join (trace.JoinsFile): each turn of tool
// calls on goroutines, waited for before the next call, is a part of the
// group of its own. An operation that a goroutine's work overlaps is none.
// A replay under another schedule writes the base's joins.
func TestJoinsCloseTurns(t *testing.T) {
	t.Parallel()
	tool := replay.Tool("work", func(_ context.Context, s string) (string, error) { return s + "!", nil })
	plan := replay.Tool("plan", func(_ context.Context, n int) (int, error) { return n, nil })
	turns := func(order []int) replay.Agent {
		return func(ctx context.Context, _ trace.Value) (any, error) {
			for turn := range 2 {
				if _, err := plan(ctx, turn); err != nil {
					return nil, err
				}
				if err := ordered(ctx, order, func(ctx context.Context, i int) error {
					_, err := tool(ctx, fmt.Sprintf("t%d-%d", turn, i))
					return err
				}); err != nil {
					return nil, err
				}
			}
			return plan(ctx, 2)
		}
	}
	rec, err := replay.Record(context.Background(), "turns", nil, turns([]int{0, 1}))
	require.NoError(t, err)
	// run_start, plan 0 (1–2), two calls (3–6), plan 1 (7–8), two calls
	// (9–12), plan 2 (13–14): the second and third plans are joins.
	assert.Equal(t, []int{7, 13}, joinsOf(t, rec.Trace))
	var parts []int
	for i, l := range rec.Trace.EventLanes() {
		if l.Number > 0 {
			parts = append(parts, l.Part)
		} else if rec.Trace.Events[i].Type == trace.ToolCall {
			parts = append(parts, -1)
		}
	}
	assert.Equal(t, []int{-1, 0, 0, -1, 1, 1, -1}, parts)

	res, err := replay.Replay(context.Background(), rec.Trace, turns([]int{1, 0}))
	require.NoError(t, err)
	assert.Equal(t, joinsOf(t, rec.Trace), joinsOf(t, res.Trace))
	assert.Equal(t, rec.Trace.Extras[trace.JoinsFile], res.Trace.Extras[trace.JoinsFile], "a frozen replay keeps the base's ids")

	// The scope's own goroutine works while a goroutine does: no join.
	overlap := func(ctx context.Context, _ trace.Value) (any, error) {
		started, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		var gerr error
		wg.Go(func() {
			gerr = replay.Node(ctx, "bg", func(ctx context.Context) error {
				close(started)
				<-release
				_, err := tool(ctx, "bg")
				return err
			})
		})
		<-started
		if _, err := plan(ctx, 0); err != nil {
			return nil, err
		}
		close(release)
		wg.Wait()
		return nil, gerr
	}
	rec, err = replay.Record(context.Background(), "overlap", nil, overlap)
	require.NoError(t, err)
	assert.Nil(t, joinsOf(t, rec.Trace), "plan ran while the node on a goroutine was open")
}

package fork

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// TestTargetsThatNeverOccur: a change whose target the base run never
// reaches is refused before anything runs, naming the target and what the
// run offers instead — in Run, in Each (no variant runs as a silent copy of
// the base) and in Estimate — unless the change is marked NewInTail.
func TestTargetsThatNeverOccur(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "research")
	tests := []struct {
		name   string
		at     At
		change Change
		want   string
	}{
		{"misspelt node in Prompt", Start(), Prompt("wrtie", "x"),
			"prompt of 'wrtie': no node or model 'wrtie' in the base run. Nodes that ran: research, title, write; models called: fake-1, fake/fake-1, gpt-4o-mini, openai/gpt-4o-mini. If the changed tail reaches it for the first time, wrap the change in fork.NewInTail."},
		{"misspelt node in Model", Start(), Model("titel", "gpt-4o"),
			"model of 'titel' → gpt-4o: no node or model 'titel' in the base run. Nodes that ran: research, title, write; models called: fake-1, fake/fake-1, gpt-4o-mini, openai/gpt-4o-mini. If the changed tail reaches it for the first time, wrap the change in fork.NewInTail."},
		{"misspelt node in Temperature", Start(), Temperature("rite", 0.2),
			"temperature of 'rite' → 0.2: no node or model 'rite' in the base run. Nodes that ran: research, title, write; models called: fake-1, fake/fake-1, gpt-4o-mini, openai/gpt-4o-mini. If the changed tail reaches it for the first time, wrap the change in fork.NewInTail."},
		{"a tool that never ran", Start(), ToolResult(OnCall("nope", 1), 1),
			"tool result of 'nope' call 1: the base run made no tool call 'nope'. Tools it called: search, publish. If the changed tail makes it for the first time, wrap the change in fork.NewInTail."},
		{"an occurrence past the count", Start(), LLMResponse(OnCall("fake/fake-1", 7), 1),
			"model response of 'fake/fake-1' call 7: the base run made 2 model call(s) 'fake/fake-1', so there is no call 7. If the changed tail makes more, wrap the change in fork.NewInTail."},
		{"a call in the served prefix", BeforeNode("write", 1), ToolResult(OnCall("search", 2), 1),
			"tool result of 'search' call 2: 'search' call 2 (step 6) is in the served prefix (the fork starts at step 14), and a change only acts on the tail. Fork at or before it (fork.Step(6)) to change it."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &world{}
			_, err := Run(context.Background(), base, tt.at, c.agent(w), tt.change)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.ErrorIs(t, err, ErrInvalidChange)

			sw, err := Each(context.Background(), base, tt.at, c.agent(w), []Named{
				{Name: "fine", Changes: []Change{Param("max_words", 5)}},
				{Name: "bad", Changes: []Change{tt.change}},
			})
			require.Error(t, err)
			assert.Nil(t, sw)
			assert.ErrorIs(t, err, ErrInvalidChange)
			assert.Contains(t, err.Error(), "variant 'bad': "+tt.want)
			assert.Zero(t, w.tools.Load()+w.models.Load(), "nothing runs before the changes are checked")

			_, err = Estimate(base, tt.at, []Named{{Name: "bad", Changes: []Change{tt.change}}})
			assert.ErrorIs(t, err, ErrInvalidChange)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestNewInTail: a change marked NewInTail is bound without its target
// having occurred, reported unused when the tail does not reach it either,
// and keeps the mark through its wire form.
func TestNewInTail(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "research")
	w := &world{}
	change := NewInTail(Prompt("summarize", "Be brief."))
	v, err := Run(context.Background(), base, Start(), c.agent(w), change, Memoize())
	require.NoError(t, err)
	require.Len(t, v.Changes, 1)
	assert.Zero(t, v.Changes[0].Applied)
	assert.Equal(t, `{"kind":"prompt","new_in_tail":true,"system_prompt":"Be brief.","target":"summarize"}`, change.Wire().Canonical())

	back, err := parseChanges(wireChanges([]Change{change}))
	require.NoError(t, err)
	require.Len(t, back, 1)
	assert.Equal(t, change.Wire(), back[0].Wire())
	_, err = Estimate(base, Start(), []Named{{Name: "new", Changes: back}})
	assert.NoError(t, err)
	if _, err := Run(context.Background(), base, Start(), c.agent(w), NewInTail(NewInTail(Prompt("x", "y")))); err == nil ||
		!errors.Is(err, ErrInvalidChange) || !strings.Contains(err.Error(), "marked NewInTail twice") {
		t.Errorf("NewInTail of NewInTail: %v", err)
	}
}

// TestStateDeleteIsAnAbsence: a State change that deletes a key records the
// deletion as an absence, so the diff shows the key removed (-k), not
// changed to null.
func TestStateDeleteIsAnAbsence(t *testing.T) {
	t.Parallel()
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		if err := replay.Set(ctx, "plan", "draft"); err != nil {
			return nil, err
		}
		return replay.Read(ctx, "plan", "draft"), nil
	}
	rec, err := replay.Record(context.Background(), "state-agent", nil, agent)
	require.NoError(t, err)
	v, err := Run(context.Background(), rec.Trace, Start(), agent, State{Delete: []string{"plan"}})
	require.NoError(t, err)
	require.Len(t, v.Diff.State, 1)
	d := v.Diff.State[0]
	assert.Equal(t, "plan", d.Key)
	assert.Equal(t, diff.Removed, d.Change, "the deleted key: %+v", d)
	assert.True(t, d.After.IsAbsent(), "after: %v", d.After)
}

// TestBeforeFirstReadOf: the fork point before the node whose read of a
// state key (replay.Read) decides what follows — the seed's "before the
// node whose read injected a given fact" — so a State change reaches that
// read and the node runs again with it.
func TestBeforeFirstReadOf(t *testing.T) {
	t.Parallel()
	reply := replay.Tool("reply", func(ctx context.Context, text string) (string, error) { return text, nil })
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		if err := replay.Set(ctx, "customer_tier", "basic"); err != nil {
			return nil, err
		}
		var out string
		err := replay.Node(ctx, "greet", func(ctx context.Context) error {
			tier := replay.Read(ctx, "customer_tier", "basic")
			var err error
			out, err = reply(ctx, "Hello, "+tier+" customer.")
			return err
		})
		return out, err
	}
	rec, err := replay.Record(context.Background(), "tier-agent", nil, agent)
	require.NoError(t, err)

	at := BeforeFirstReadOf("customer_tier")
	v, err := Run(context.Background(), rec.Trace, at, agent, State{Set: map[string]any{"customer_tier": "gold"}}, Allow("reply"))
	require.NoError(t, err)
	assert.Equal(t, "before 'greet' first read 'customer_tier'", v.At.Description)
	assert.Equal(t, "greet", v.At.Node)
	assert.Equal(t, "Hello, gold customer.", v.Output)
	assert.Equal(t, 1, v.Changes[0].Applied)

	// The reads recorded keep a fork with no change its base's twin, at
	// every point (the fidelity invariant), the read's own point included.
	for _, p := range Points(rec.Trace) {
		v, err := Run(context.Background(), rec.Trace, p.At(), agent, Allow("reply"))
		require.NoError(t, err, p.Description)
		assert.True(t, v.Diff.Equivalent(), "%s: %v", p.Description, v.Diff.Divergence)
		assert.Len(t, v.Trace.Events, len(rec.Trace.Events), p.Description)
	}

	// A key no one read, and a run recorded before reads were recorded.
	_, err = Run(context.Background(), rec.Trace, BeforeFirstReadOf("nope"), agent)
	assert.EqualError(t, err, `BeforeFirstReadOf("nope"): no state read of 'nope' in this run. Keys read: customer_tier.`)
	assert.ErrorIs(t, err, ErrUnresolved)
	old := rec.Trace.Clone()
	old.Events = slices.DeleteFunc(old.Events, func(ev trace.Event) bool { return ev.Key == trace.MarkerRead })
	_, err = Run(context.Background(), old, BeforeFirstReadOf("customer_tier"), agent)
	assert.ErrorContains(t, err, "it records no read at all (replay.Read records where it reads; a run recorded before it did has none: record it again)")
}

// Reads made on goroutines in another order than recorded are matched as
// the rest of a concurrent group is: a fork with no change reproduces the
// base, and BeforeFirstReadOf resolves outside the group.
func TestReadsOnGoroutinesInAnotherOrder(t *testing.T) {
	t.Parallel()
	agent := func(reverse bool) replay.Agent {
		return func(ctx context.Context, _ trace.Value) (any, error) {
			keys := []string{"a", "b", "c"}
			if reverse {
				slices.Reverse(keys)
			}
			got := make([]string, len(keys))
			var wg sync.WaitGroup
			prev := make(chan struct{})
			close(prev)
			for i, k := range keys {
				wait, next := prev, make(chan struct{})
				wg.Go(func() {
					defer close(next)
					<-wait
					got[i] = replay.Read(ctx, k, k)
				})
				prev = next
			}
			wg.Wait()
			slices.Sort(got)
			return got, nil
		}
	}
	rec, err := replay.Record(context.Background(), "reads", nil, agent(false))
	require.NoError(t, err)
	for _, p := range Points(rec.Trace) {
		v, err := Run(context.Background(), rec.Trace, p.At(), agent(true))
		require.NoError(t, err, p.Description)
		assert.True(t, v.Diff.Equivalent(), "%s: %v", p.Description, v.Diff.Divergence)
	}
}

package fork

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/trace"
)

// The fidelity invariant: for every recorded trace with an agent and every
// point Points lists, a fork with no changes reproduces the base exactly.
// (testdata/booking-agent.sftrace is built with trace.Builder and has no
// agent, so it is not forked here.)

func runEnd(tr *trace.Trace) *trace.Event {
	for i := len(tr.Events) - 1; i >= 0; i-- {
		if tr.Events[i].Type == trace.RunEnd {
			return &tr.Events[i]
		}
	}
	return nil
}

// samePrefix checks that the variant's first n events are the base's: ids,
// types, parents, payloads and hashes, as saved (trace.Prepared: an absent
// payload is written as null).
func samePrefix(t *testing.T, base, variant *trace.Trace, n int, msg string) {
	t.Helper()
	base, err := base.Prepared()
	require.NoError(t, err)
	variant, err = variant.Prepared()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(variant.Events), n, msg)
	for i := 0; i < n; i++ {
		b, v := &base.Events[i], &variant.Events[i]
		if b.ID != v.ID || b.Type != v.Type || b.ParentID != v.ParentID || b.InputHash != v.InputHash ||
			b.OutputHash != v.OutputHash || b.Input != v.Input || b.Output != v.Output || b.Before != v.Before || b.After != v.After {
			t.Fatalf("%s: event %d differs from the base's:\n  base    %+v\n  variant %+v", msg, i, *b, *v)
		}
	}
}

func TestFidelityNullForkEveryPoint(t *testing.T) {
	t.Parallel()
	for _, c := range agentCases {
		base := loadCase(t, c)
		points := Points(base)
		require.NotEmpty(t, points, c.path)
		for _, memo := range []bool{true, false} {
			for _, p := range points {
				name := fmt.Sprintf("%s/step%d/memo=%v", c.name, p.Step, memo)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					w := &world{}
					opts := []RunOption{}
					if memo {
						opts = append(opts, Memoize())
					}
					v, err := Run(context.Background(), base, p.At(), c.agent(w), opts...)
					require.NoError(t, err)
					assert.True(t, v.Diff.Equivalent(), "null fork at %s is not equivalent:\n%s", p.Description, v.Diff.Explain())
					assert.Equal(t, base.Status, v.Trace.Status)
					assert.Equal(t, runEnd(base).Output, runEnd(v.Trace).Output)
					assert.Empty(t, v.Suppressed)
					assert.Zero(t, w.tools.Load(), "a null fork executes no tool")
					samePrefix(t, base, v.Trace, p.Step, name)
					if memo {
						assert.Zero(t, w.models.Load(), "a memoized null fork makes no live model call")
						assert.Zero(t, v.LiveModelCalls)
						assert.Zero(t, v.IncurredCost, "served calls are never incurred (H5)")
						// Every event is served, so every id is the base's.
						samePrefix(t, base, v.Trace, len(base.Events), name)
					} else {
						assert.Equal(t, int64(v.LiveModelCalls), w.models.Load())
					}
				})
			}
		}
	}
}

func TestFidelityForkOfForkKeepsChain(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "research")
	w := &world{}
	ctx := context.Background()
	v1, err := Run(ctx, base, BeforeNode("write", 1), c.agent(w), Prompt("write", "Be terse."), Memoize())
	require.NoError(t, err)
	require.Equal(t, StatusBlocked, v1.Status, v1.Explain()) // publish's input changed: the guard holds it back
	dir := t.TempDir()
	path := dir + "/v1.sftrace"
	require.NoError(t, v1.Trace.Save(path))
	loaded, err := trace.Load(path)
	require.NoError(t, err)

	v2, err := Run(ctx, loaded, BeforeNode("write", 1), c.agent(w), Model("write", "fake-2"), Allow("publish"))
	require.NoError(t, err)
	info, err := ReadInfo(v2.Trace)
	require.NoError(t, err)
	assert.Equal(t, []string{v2.Trace.RunID, v1.Trace.RunID, base.RunID}, info.Chain())
	require.Len(t, info.Ancestors, 1)
	assert.Equal(t, KindCounterfactual, info.Ancestors[0].Kind)
	assert.Equal(t, path, info.ParentTracePath)
	// The second fork's prefix is the first fork's, which is the base's.
	samePrefix(t, base, v2.Trace, v2.At.Step, "fork of fork")
}

package fork

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// unlinkedAgent is the agent of ../testdata/unlinked-results.sftrace, a
// bundle without parent links: tool_call lookup_order (step 1), tool_call
// check_policy (step 2), tool_result lookup_order (step 3), tool_result
// check_policy (step 4). It returns what the two tools answered.
func unlinkedAgent() replay.Agent {
	executed := errors.New("the tool ran: it should have been served")
	lookup := replay.Tool("lookup_order", func(context.Context, map[string]any) (map[string]any, error) { return nil, executed })
	policy := replay.Tool("check_policy", func(context.Context, map[string]any) (map[string]any, error) { return nil, executed })
	return replay.Typed(func(ctx context.Context, in map[string]any) (map[string]any, error) {
		o, err := lookup(ctx, map[string]any{"order": in["order"]})
		if err != nil {
			return nil, err
		}
		p, err := policy(ctx, map[string]any{"region": "EU"})
		if err != nil {
			return nil, err
		}
		return map[string]any{"total": o["total"], "limit": p["limit"]}, nil
	})
}

// TestToolResultOnUnlinkedStep changes the result of step 3 of a bundle
// without parent links. Step 3 answers the call of step 1 (lookup_order), as
// trace.Trace.Calls pairs them, so the change replaces lookup_order's result
// and check_policy keeps its own.
func TestToolResultOnUnlinkedStep(t *testing.T) {
	t.Parallel()
	base, err := trace.Load("../testdata/unlinked-results.sftrace")
	require.NoError(t, err)

	ix := newIndex(base)
	for step, call := range map[int]int{3: 1, 4: 2} {
		assert.Equal(t, call, base.Events[ix.splits(step)].Step, "step %d splits the call of step %d", step, call)
	}

	v, err := Run(t.Context(), base, Start(), unlinkedAgent(), ToolResult(OnStep(3), map[string]any{"total": 999}))
	require.NoError(t, err)
	require.NoError(t, v.Err)
	// The agent's map holds the JSON numbers it was served as float64.
	assert.Equal(t, map[string]any{"total": 999.0, "limit": 100.0}, v.Output)
}

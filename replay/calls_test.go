package replay_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// TestReplayUnlinkedResults replays, frozen, a bundle without parent links
// whose two tool calls come before their two results (steps 1, 2 and 3, 4):
// each call is served the result trace.Trace.Calls pairs it with, step 3 to
// the call of step 1.
func TestReplayUnlinkedResults(t *testing.T) {
	t.Parallel()
	tr, err := trace.Load("../testdata/unlinked-results.sftrace")
	require.NoError(t, err)
	executed := errors.New("a frozen replay executed a tool")
	lookup := replay.Tool("lookup_order", func(context.Context, map[string]any) (map[string]any, error) { return nil, executed })
	policy := replay.Tool("check_policy", func(context.Context, map[string]any) (map[string]any, error) { return nil, executed })
	var order, limit any
	agent := replay.Typed(func(ctx context.Context, in map[string]any) (map[string]any, error) {
		o, err := lookup(ctx, map[string]any{"order": in["order"]})
		if err != nil {
			return nil, err
		}
		p, err := policy(ctx, map[string]any{"region": "EU"})
		if err != nil {
			return nil, err
		}
		order, limit = o["total"], p["limit"]
		return map[string]any{"refund": "needs approval"}, nil
	})
	res, err := replay.Replay(t.Context(), tr, agent)
	require.NoError(t, err)
	require.NoError(t, res.Err)
	require.NoError(t, res.Divergence)
	assert.EqualValues(t, 120, order, "lookup_order (step 1) is answered by step 3")
	assert.EqualValues(t, 100, limit, "check_policy (step 2) is answered by step 4")
	assert.Equal(t, 2, res.Served)
}

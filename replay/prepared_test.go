package replay_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// TestPreparedSharedAcrossReplays replays one trace from one Prepared in
// several goroutines at once: each replay is faithful, executes nothing,
// and the shared plan is left as it was (race-clean under -race).
func TestPreparedSharedAcrossReplays(t *testing.T) {
	t.Parallel()
	rec, _ := record(t)
	p := replay.Prepare(rec.Trace)
	want, err := replay.Replay(context.Background(), rec.Trace, newWorld().agent())
	require.NoError(t, err)

	const n = 8
	results := make([]*replay.Result, n)
	errs := make([]error, n)
	worlds := make([]*world, n)
	var wg sync.WaitGroup
	for i := range n {
		worlds[i] = newWorld()
		wg.Go(func() {
			results[i], errs[i] = p.Replay(context.Background(), worlds[i].agent())
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "replay %d", i)
		res := results[i]
		assert.Equal(t, want.Served, res.Served, "replay %d", i)
		assert.Zero(t, res.Executed, "replay %d", i)
		assert.Zero(t, worlds[i].tools.Load()+worlds[i].models.Load(), "replay %d executed a dependency", i)
		assertEquivalent(t, rec.Trace, res.Trace)
		require.NoError(t, res.VerifyComplete())
	}
}

// TestPreparedDivergenceIsPerSession checks that what one session consumes
// is not consumed for the next: a replay that stops early leaves the plan
// whole for a faithful one.
func TestPreparedDivergenceIsPerSession(t *testing.T) {
	t.Parallel()
	rec, _ := record(t)
	p := replay.Prepare(rec.Trace)
	early := func(ctx context.Context, _ trace.Value) (any, error) { return nil, nil }
	res, err := p.Replay(context.Background(), early)
	require.Error(t, err)
	require.Error(t, res.VerifyComplete(), "the early replay leaves calls unconsumed")

	res, err = p.Replay(context.Background(), newWorld().agent())
	require.NoError(t, err)
	require.NoError(t, res.VerifyComplete())
}

func TestPreparedRefusals(t *testing.T) {
	t.Parallel()
	_, err := replay.Prepare(nil).Replay(context.Background(), newWorld().agent())
	require.ErrorIs(t, err, replay.ErrInvalidOptions)
	assert.EqualError(t, err, "replay.Replay: the trace is nil")
	_, err = replay.Replay(context.Background(), nil, newWorld().agent())
	require.ErrorIs(t, err, replay.ErrInvalidOptions)

	a, _ := record(t)
	_, err = replay.Prepare(a.Trace).Replay(context.Background(), nil)
	require.ErrorIs(t, err, replay.ErrInvalidOptions)
	assert.EqualError(t, err, "replay.Replay: the agent is nil")
}

package fork_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
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

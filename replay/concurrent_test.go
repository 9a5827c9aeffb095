package replay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// fanOut is an agent that runs n workers in goroutines, each in a node of
// the same name, each calling a tool and a model, with randomized scheduling.
type fanOut struct {
	n         int
	rng       *rand.Rand
	mu        sync.Mutex
	execs     atomic.Int64
	jitterMax int
}

func (f *fanOut) jitter() {
	f.mu.Lock()
	k := f.rng.IntN(f.jitterMax + 1)
	f.mu.Unlock()
	for range k {
		runtime.Gosched()
	}
	if k%3 == 0 {
		time.Sleep(time.Duration(k) * time.Microsecond)
	}
}

func (f *fanOut) agent() replay.Agent {
	fetch := replay.Tool("fetch", func(_ context.Context, i int) (string, error) {
		f.execs.Add(1)
		return fmt.Sprintf("page %d", i), nil
	})
	return func(ctx context.Context, _ trace.Value) (any, error) {
		out := make([]string, f.n)
		errs := make([]error, f.n)
		var wg sync.WaitGroup
		for i := range f.n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.jitter()
				errs[i] = replay.Node(ctx, "worker", func(ctx context.Context) error {
					page, err := fetch(ctx, i)
					if err != nil {
						return err
					}
					f.jitter()
					resp, err := replay.LLM(ctx, replay.Request{Model: "m", Messages: []replay.Message{{Role: "user", Content: page}}},
						func(_ context.Context, r replay.Request) (replay.Response, error) {
							f.execs.Add(1)
							return replay.Response{Content: "summary of " + r.Messages[0].Content}, nil
						})
					out[i] = resp.Content
					return err
				})
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// checkNoLeak fails when goroutines started during the test outlive it.
func checkNoLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines leaked")
	})
}

func TestConcurrentMatchingWithRandomScheduling(t *testing.T) {
	checkNoLeak(t) // not parallel: counts goroutines
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rec := &fanOut{n: 24, rng: rand.New(rand.NewPCG(seed, 1)), jitterMax: 6}
			recorded, err := replay.Record(context.Background(), "fan-out", nil, rec.agent())
			require.NoError(t, err)
			require.Equal(t, int64(48), rec.execs.Load())

			for run := range uint64(3) {
				rep := &fanOut{n: 24, rng: rand.New(rand.NewPCG(seed, 100+run)), jitterMax: 6}
				res, err := replay.Replay(context.Background(), recorded.Trace, rep.agent(), replay.Concurrent())
				require.NoError(t, err)
				assert.Equal(t, int64(0), rep.execs.Load())
				assert.Equal(t, recorded.Output, res.Output)
				assert.Equal(t, 48, res.Served)
				assert.NoError(t, res.VerifyComplete())
				report := trace.Validate(context.Background(), res.Trace)
				require.True(t, report.Valid(), "%v", report.Issues)
			}
		})
	}
}

func TestConcurrentModeToleratesOrderStrictDoesNot(t *testing.T) {
	t.Parallel()
	calls := func(order []int) replay.Agent {
		fetch := replay.Tool("fetch", func(_ context.Context, i int) (int, error) { return i * i, nil })
		return func(ctx context.Context, _ trace.Value) (any, error) {
			sum := 0
			for _, i := range order {
				v, err := fetch(ctx, i)
				if err != nil {
					return nil, err
				}
				sum += v
			}
			return sum, nil
		}
	}
	rec, err := replay.Record(context.Background(), "order", nil, calls([]int{1, 2, 3, 4}))
	require.NoError(t, err)
	_, err = replay.Replay(context.Background(), rec.Trace, calls([]int{4, 3, 2, 1}))
	require.ErrorIs(t, err, replay.ErrDiverged)
	res, err := replay.Replay(context.Background(), rec.Trace, calls([]int{4, 3, 2, 1}), replay.Concurrent())
	require.NoError(t, err)
	assert.Equal(t, 30, res.Output)

	// A call no pending recorded call matches says what is pending.
	_, err = replay.Replay(context.Background(), rec.Trace, calls([]int{4, 3, 2, 9}), replay.Concurrent())
	require.ErrorIs(t, err, replay.ErrDiverged)
	assert.Contains(t, err.Error(), "call #4: tool 'fetch' matches no pending recorded call in its scope (concurrent matching)\n  actual: tool name='fetch'\n  actual input fingerprint: "+fp(9))
	assert.Contains(t, err.Error(), "\n  pending in scope: #1 tool fetch\n  recorded event: "+rec.Trace.Events[1].ID+" (step 1)\n  diff (-recorded +actual):")
}

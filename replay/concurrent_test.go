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
				res, err := replay.Replay(context.Background(), recorded.Trace, rep.agent())
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

func TestSequentialReorderStaysADivergence(t *testing.T) {
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
	// Calls made on one goroutine are strictly ordered: no lanes file, and
	// another order is a divergence.
	rec, err := replay.Record(context.Background(), "order", nil, calls([]int{1, 2, 3, 4}))
	require.NoError(t, err)
	assert.NotContains(t, rec.Trace.Extras, trace.LanesFile)
	_, err = replay.Replay(context.Background(), rec.Trace, calls([]int{4, 3, 2, 1}))
	require.ErrorIs(t, err, replay.ErrDiverged)
}

// parallel calls fetch on one goroutine per input, in the order given
// (each goroutine waits for the one before it in order to finish its
// call), and sums the results; order nil lets them race.
func parallel(order []int) replay.Agent {
	fetch := replay.Tool("fetch", func(_ context.Context, i int) (int, error) { return i * i, nil })
	return func(ctx context.Context, in trace.Value) (any, error) {
		var inputs []int
		if err := in.Decode(&inputs); err != nil {
			return nil, err
		}
		done := map[int]chan struct{}{}
		for _, i := range inputs {
			done[i] = make(chan struct{})
		}
		after := map[int]int{}
		for k := 1; k < len(order); k++ {
			after[order[k]] = order[k-1]
		}
		out := make([]int, len(inputs))
		errs := make([]error, len(inputs))
		var wg sync.WaitGroup
		for k, i := range inputs {
			wg.Go(func() {
				defer close(done[i])
				if prev, ok := after[i]; ok {
					<-done[prev]
				}
				out[k], errs[k] = fetch(ctx, i)
			})
		}
		wg.Wait()
		sum := 0
		for k := range out {
			if errs[k] != nil {
				return nil, errs[k]
			}
			sum += out[k]
		}
		return sum, nil
	}
}

func TestConcurrentGroupMatchedAsASet(t *testing.T) {
	t.Parallel()
	rec, err := replay.Record(context.Background(), "group", []int{1, 2, 3}, parallel([]int{1, 2, 3}))
	require.NoError(t, err)
	lanes, err := trace.Lanes(rec.Trace.Extras[trace.LanesFile])
	require.NoError(t, err)
	assert.Len(t, lanes, 3, "three calls on three goroutines other than the run's")
	for _, c := range rec.Trace.Calls() {
		assert.True(t, c.Concurrent(), "call %d", c.Index)
	}

	// The reverse order is served without a divergence, and the replay's
	// own trace records its lanes.
	res, err := replay.Replay(context.Background(), rec.Trace, parallel([]int{3, 2, 1}))
	require.NoError(t, err)
	assert.Equal(t, 14, res.Output)
	assert.Equal(t, 3, res.Served)
	assert.Contains(t, res.Trace.Extras, trace.LanesFile)

	// A call matching none of the group's pending calls says what is
	// pending and where the closest differs. The agent is told when its
	// call arrives (first, here: everything is pending); the run's
	// divergence names what no goroutine matched by the end of the run, so
	// it is the same text whichever order the goroutines arrive in.
	for _, order := range [][]int{{9, 2, 3}, {2, 3, 9}} {
		var agentErr error
		other := replay.Agent(func(ctx context.Context, _ trace.Value) (any, error) {
			out, err := parallel(order)(ctx, trace.MustValueOf([]int{9, 2, 3}))
			agentErr = err
			return out, err
		})
		_, err = replay.Replay(context.Background(), rec.Trace, other)
		require.ErrorIs(t, err, replay.ErrDiverged)
		assert.Contains(t, err.Error(), "call #1: tool 'fetch', made on a concurrent goroutine in the run, matches no pending call of that scope's concurrent group\n  actual: tool name='fetch'\n  actual input fingerprint: "+fp(9)+"\n  pending in the group: #1 tool fetch\n")
		assert.Contains(t, err.Error(), "closest: #1 tool 'fetch' (step 1), whose input differs at '$': recorded 1, actual 9")
		if order[0] == 9 {
			assert.Contains(t, agentErr.Error(), "pending in the group: #1 tool fetch, #2 tool fetch, #3 tool fetch")
		}
	}
}

func TestBundleWithoutLanesKeepsTheStrictCursor(t *testing.T) {
	t.Parallel()
	rec, err := replay.Record(context.Background(), "group", []int{1, 2}, parallel([]int{1, 2}))
	require.NoError(t, err)
	require.Contains(t, rec.Trace.Extras, trace.LanesFile)
	// A bundle without lanes (every bundle Python stepfork writes) keeps
	// stepfork's strict cursor: the same calls in another order diverge.
	python := rec.Trace.Clone()
	delete(python.Extras, trace.LanesFile)
	for _, c := range python.Calls() {
		require.Zero(t, c.Lane)
	}
	_, err = replay.Replay(context.Background(), python, parallel([]int{2, 1}))
	require.ErrorIs(t, err, replay.ErrDiverged)
	assert.Contains(t, err.Error(), "call #1: tool 'fetch' input diverged from the recording")
	_, err = replay.Replay(context.Background(), python, parallel([]int{1, 2}))
	require.NoError(t, err)
}

package fork

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// randomRun builds a recorder-shaped run of random tool calls, model calls and
// state writes, and returns it with the ids of its tool and model calls.
func randomRun(t *testing.T, rng *rand.Rand) (*trace.Trace, []string) {
	t.Helper()
	b := trace.NewBuilder("prop")
	b.RunStart(map[string]any{"seed": rng.IntN(1000)})
	var calls []string
	n := 1 + rng.IntN(12)
	for i := range n {
		switch rng.IntN(3) {
		case 0:
			calls = append(calls, b.Tool(fmt.Sprintf("tool_%d", rng.IntN(3)),
				map[string]any{"i": i, "q": rng.IntN(5)}, map[string]any{"v": rng.Float64()}))
		case 1:
			calls = append(calls, b.LLM("fake", "model-"+fmt.Sprint(rng.IntN(2)),
				map[string]any{"prompt": fmt.Sprint("p", i)}, map[string]any{"text": fmt.Sprint("t", rng.IntN(9))}))
		default:
			b.State(fmt.Sprint("k", rng.IntN(3)), nil, rng.IntN(100))
		}
	}
	if len(calls) == 0 {
		calls = append(calls, b.Tool("tool_0", map[string]any{"i": n}, map[string]any{"v": 1}))
	}
	b.RunEnd(trace.RunCompleted, map[string]any{"done": true})
	return b.MustTrace(), calls
}

// TestDiffOfForkProperty checks the two properties of issue 4 on random runs:
// a run is equivalent to itself and to a fork of itself at its last step
// without overrides, and a fork at a call's result with that result
// overridden diverges from the base exactly at that call.
func TestDiffOfForkProperty(t *testing.T) {
	t.Parallel()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tr, calls := randomRun(t, rng)
		if d := diff.Runs(tr, tr); !d.Equivalent() {
			t.Fatalf("seed %d: Diff(t, t) not equivalent:\n%s", seed, d.Explain())
		}
		last := tr.Events[len(tr.Events)-1].Step
		same, err := Trace(tr, ThroughStep(last), testOpts{}.list()...)
		if err != nil {
			t.Fatalf("seed %d: null fork: %v", seed, err)
		}
		if d := diff.Runs(tr, same.Trace); !d.Equivalent() {
			t.Fatalf("seed %d: null fork at the last step not equivalent:\n%s", seed, d.Explain())
		}

		call := calls[rng.IntN(len(calls))]
		_, ci := tr.Event(call)
		result := tr.Events[ci+1] // the builder writes a call's result right after it
		out := map[string]any{"overridden": seed}
		res, err := Trace(tr, ThroughStep(result.Step), testOpts{Overrides: []TraceOption{Override(OnStep(result.Step), out)}}.list()...)
		if err != nil {
			t.Fatalf("seed %d: fork at step %d: %v", seed, result.Step, err)
		}
		for _, mode := range []struct {
			name string
			opts []diff.Option
		}{{"lcs", nil}, {"position", []diff.Option{diff.AlignPosition()}}} {
			d := diff.Runs(tr, res.Trace, mode.opts...)
			dv := d.Divergence
			if dv == nil {
				t.Fatalf("seed %d %s: fork with an override at step %d is equivalent", seed, mode.name, result.Step)
			}
			if dv.Kind != diff.Changed || dv.Base == nil || dv.Base.EventID != call || dv.Variant == nil || dv.Variant.EventID != call {
				t.Fatalf("seed %d %s: diverged at %+v, want a change of call %s (override at step %d)\n%s",
					seed, mode.name, dv, call, result.Step, d.Explain())
			}
		}
	}
}

package fork

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepfork/stepfork/internal/cputime"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Benchmarks on a recorded run of 1,000 tool steps (the shape cycgraph was
// measured on): ten "batch" nodes of 100 tool calls each, then one model
// call.
//
//	go test ./fork/ -run '^$' -bench 'Run|Each|Index' -benchtime 20x -cpu 1,2

type longWorld struct{ tools, models atomic.Int64 }

type stepIn struct {
	I int `json:"i"`
}

type stepOut struct {
	I     int `json:"i"`
	Value int `json:"value"`
}

func (w *longWorld) agent() replay.Agent {
	step := replay.Tool("step", func(_ context.Context, in stepIn) (stepOut, error) {
		w.tools.Add(1)
		return stepOut{I: in.I, Value: in.I * 7 % 13}, nil
	})
	return replay.Typed(func(ctx context.Context, n int) (int, error) {
		sum := 0
		for b := 0; b < n/100; b++ {
			err := replay.Node(ctx, "batch", func(ctx context.Context) error {
				for i := b * 100; i < (b+1)*100; i++ {
					out, err := step(ctx, stepIn{I: i})
					if err != nil {
						return err
					}
					sum += out.Value
				}
				return nil
			})
			if err != nil {
				return 0, err
			}
		}
		resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "fake-1",
			Messages: []replay.Message{{Role: "user", Content: fmt.Sprint("sum ", sum)}}},
			func(context.Context, replay.Request) (replay.Response, error) {
				w.models.Add(1)
				return replay.Response{Content: "ok", Usage: replay.Usage{TotalTokens: 10, CostUSD: 0.001}}, nil
			})
		if err != nil {
			return 0, err
		}
		return sum + len(resp.Content), nil
	})
}

var (
	longOnce sync.Once
	longBase *trace.Trace
	// longOutput is the output of longBase's run: a fork that completes as
	// the base did returns it too.
	longOutput any
)

func longRun(b *testing.B) *trace.Trace {
	b.Helper()
	longOnce.Do(func() {
		res, err := replay.Record(context.Background(), "long", 1000, (&longWorld{}).agent())
		if err != nil {
			panic(err)
		}
		longBase, longOutput = res.Trace, res.Output
	})
	return longBase
}

// checkMiddleVariant fails b unless v is a fork of the 1,000-step run
// before tool call 500 that completed as the base did: the 501 tool calls
// of the tail served from the recording, the model call live, the same
// output.
func checkMiddleVariant(b *testing.B, v *Variant) {
	b.Helper()
	if v.Status != StatusCompleted || v.LiveModelCalls != 1 || v.LiveToolCalls != 0 || len(v.Replayed) != 501 ||
		v.Output != longOutput {
		b.Fatalf("%v, %d live model and %d live tool calls, %d replayed, output %v", v.Status,
			v.LiveModelCalls, v.LiveToolCalls, len(v.Replayed), v.Output)
	}
}

// checkLiveCalls fails b unless w's tools never ran and its model ran
// models times.
func checkLiveCalls(b *testing.B, w *longWorld, models int) {
	b.Helper()
	if t, m := w.tools.Load(), w.models.Load(); t != 0 || m != int64(models) {
		b.Fatalf("%d tool and %d model calls ran, want 0 and %d", t, m, models)
	}
}

// BenchmarkRunMiddleLiveTail forks the 1,000-step run before tool call 500,
// the tail's tools served from the recording and its model call live. It
// checks each variant (status, live and served calls, output) and that the
// world saw one model call per fork.
func BenchmarkRunMiddleLiveTail(b *testing.B) {
	base := longRun(b)
	w := &longWorld{}
	agent := w.agent()
	at := BeforeCall(replay.KindTool, "step", 500)
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	for b.Loop() {
		v, err := Run(context.Background(), base, at, agent)
		if err != nil {
			b.Fatal(err)
		}
		checkMiddleVariant(b, v)
	}
	checkLiveCalls(b, w, b.N)
}

// BenchmarkRunMemoizedNullForkFromStart null-forks the 1,000-step run from
// its start with Memoize. It checks that each variant is equivalent to the
// base and that nothing ran live.
func BenchmarkRunMemoizedNullForkFromStart(b *testing.B) {
	base := longRun(b)
	w := &longWorld{}
	agent := w.agent()
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	for b.Loop() {
		v, err := Run(context.Background(), base, Start(), agent, Memoize())
		if err != nil || !v.Diff.Equivalent() {
			b.Fatal(err)
		}
	}
	if n := w.models.Load() + w.tools.Load(); n != 0 {
		b.Fatalf("%d live calls", n)
	}
}

func sweepVariants(n int) []Named {
	vs := make([]Named, n)
	for i := range vs {
		vs[i] = Named{Name: fmt.Sprintf("v%02d", i), Changes: []Change{Prompt(All, fmt.Sprintf("variant %d", i))}}
	}
	return vs
}

// checkSweep fails b unless s holds one entry per variant of vs, in order,
// each a completed fork before tool call 500 (checkMiddleVariant) that
// differs from the base in the one model call its prompt changed.
func checkSweep(b *testing.B, s *Sweep, vs []Named) {
	b.Helper()
	if len(s.Entries) != len(vs) {
		b.Fatalf("%d entries, want %d", len(s.Entries), len(vs))
	}
	for i := range s.Entries {
		e := &s.Entries[i]
		if e.Name != vs[i].Name || e.Err != nil || e.Variant == nil {
			b.Fatalf("entry %d %s: %v", i, e.Name, e.Err)
		}
		checkMiddleVariant(b, e.Variant)
		if e.Variant.Changes[0].Applied != 1 || e.Variant.Diff.Changed != 1 {
			b.Fatalf("entry %s: the prompt applied %d times, %d steps changed, want 1 and 1", e.Name,
				e.Variant.Changes[0].Applied, e.Variant.Diff.Changed)
		}
	}
}

// BenchmarkEach3Middle runs a sweep of 3 variants of the prompt, forked
// before tool call 500. It checks every entry (checkSweep) and that the
// world saw one model call per variant.
func BenchmarkEach3Middle(b *testing.B) {
	base := longRun(b)
	w := &longWorld{}
	agent := w.agent()
	at := BeforeCall(replay.KindTool, "step", 500)
	vs := sweepVariants(3)
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	for b.Loop() {
		s, err := Each(context.Background(), base, at, agent, vs)
		if err != nil {
			b.Fatal(err)
		}
		checkSweep(b, s, vs)
	}
	checkLiveCalls(b, w, len(vs)*b.N)
}

// BenchmarkEach64 runs a sweep of 64 variants; run it with -cpu 1,2 to see
// it scale. cores is the CPU time over the wall time: how many cores the
// sweep kept busy (near GOMAXPROCS when the machine has them to give). It
// checks what BenchmarkEach3Middle checks.
func BenchmarkEach64(b *testing.B) {
	base := longRun(b)
	w := &longWorld{}
	agent := w.agent()
	at := BeforeCall(replay.KindTool, "step", 500)
	vs := sweepVariants(64)
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	defer func(cpu time.Duration, wall time.Time) {
		b.ReportMetric(float64(cputime.Used()-cpu)/float64(time.Since(wall)), "cores")
	}(cputime.Used(), time.Now())
	for b.Loop() {
		s, err := Each(context.Background(), base, at, agent, vs)
		if err != nil {
			b.Fatal(err)
		}
		checkSweep(b, s, vs)
	}
	checkLiveCalls(b, w, len(vs)*b.N)
}

// BenchmarkIndex builds the base index of runs of 1k, 10k and 100k steps:
// linear in the trace size. It checks the fork points listed: one per
// event but the run's start and the tools' results, the last the run's
// end.
func BenchmarkIndex(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		bl := trace.NewBuilder("big")
		bl.RunStart(map[string]any{"n": n})
		for i, events := 0, 1; events < n-3; i++ {
			if i%100 == 0 {
				bl.State("batch", nil, i)
				events++
			}
			bl.Tool("step", map[string]any{"i": i}, map[string]any{"v": i})
			events += 2
		}
		bl.RunEnd(trace.RunCompleted, 1)
		tr := bl.MustTrace()
		want := 0
		for i := range tr.Events {
			if t := tr.Events[i].Type; t != trace.RunStart && t != trace.ToolResult {
				want++
			}
		}
		last := tr.Events[len(tr.Events)-1].Step
		b.Run(fmt.Sprintf("steps=%d", len(tr.Events)), func(b *testing.B) {
			b.ReportAllocs()
			defer cputime.Report(b, cputime.Used())
			for b.Loop() {
				ix := newIndex(tr)
				if ps := ix.points(); len(ps) != want || ps[len(ps)-1].Step != last {
					b.Fatalf("%d fork points, want %d ending at step %d", len(ps), want, last)
				}
			}
		})
	}
}

// BenchmarkReplayFrozen is the floor the fork benchmarks stand on: a frozen
// replay of the same 1,000-step run by package replay, without a fork. It
// checks that each replay served all 1,001 calls, executed none and
// returned the recorded output.
func BenchmarkReplayFrozen(b *testing.B) {
	base := longRun(b)
	w := &longWorld{}
	agent := w.agent()
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	for b.Loop() {
		res, err := replay.Replay(context.Background(), base, agent)
		if err != nil {
			b.Fatal(err)
		}
		if res.Served != 1001 || res.Executed != 0 || res.Divergence != nil || res.Output != longOutput {
			b.Fatalf("%d served, %d executed, divergence %v, output %v", res.Served, res.Executed, res.Divergence, res.Output)
		}
	}
	checkLiveCalls(b, w, 0)
}

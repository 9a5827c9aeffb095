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
)

func longRun(b *testing.B) *trace.Trace {
	b.Helper()
	longOnce.Do(func() {
		res, err := replay.Record(context.Background(), "long", 1000, (&longWorld{}).agent())
		if err != nil {
			panic(err)
		}
		longBase = res.Trace
	})
	return longBase
}

func BenchmarkRunMiddleLiveTail(b *testing.B) {
	base := longRun(b)
	w := &longWorld{}
	agent := w.agent()
	at := BeforeCall(replay.KindTool, "step", 500)
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	for b.Loop() {
		v, err := Run(context.Background(), base, at, agent)
		if err != nil || v.Status != StatusCompleted || v.LiveModelCalls != 1 {
			b.Fatalf("%v %v", err, v.Status)
		}
	}
}

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

func BenchmarkEach3Middle(b *testing.B) {
	base := longRun(b)
	agent := (&longWorld{}).agent()
	at := BeforeCall(replay.KindTool, "step", 500)
	vs := sweepVariants(3)
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	for b.Loop() {
		if _, err := Each(context.Background(), base, at, agent, vs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEach64 runs a sweep of 64 variants; run it with -cpu 1,2 to see
// it scale. cores is the CPU time over the wall time: how many cores the
// sweep kept busy (near GOMAXPROCS when the machine has them to give).
func BenchmarkEach64(b *testing.B) {
	base := longRun(b)
	agent := (&longWorld{}).agent()
	at := BeforeCall(replay.KindTool, "step", 500)
	vs := sweepVariants(64)
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	defer func(cpu time.Duration, wall time.Time) {
		b.ReportMetric(float64(cputime.Used()-cpu)/float64(time.Since(wall)), "cores")
	}(cputime.Used(), time.Now())
	for b.Loop() {
		if _, err := Each(context.Background(), base, at, agent, vs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIndex builds the base index of runs of 1k, 10k and 100k steps:
// linear in the trace size.
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
		b.Run(fmt.Sprintf("steps=%d", len(tr.Events)), func(b *testing.B) {
			b.ReportAllocs()
			defer cputime.Report(b, cputime.Used())
			for b.Loop() {
				ix := newIndex(tr)
				if len(ix.points()) == 0 {
					b.Fatal("no points")
				}
			}
		})
	}
}

// BenchmarkReplayFrozen is the floor the fork benchmarks stand on: a frozen
// replay of the same 1,000-step run by package replay, without a fork.
func BenchmarkReplayFrozen(b *testing.B) {
	base := longRun(b)
	agent := (&longWorld{}).agent()
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	for b.Loop() {
		if _, err := replay.Replay(context.Background(), base, agent); err != nil {
			b.Fatal(err)
		}
	}
}

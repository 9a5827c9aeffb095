package fork

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stepfork/stepfork/internal/cputime"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Workload A of BENCHMARKS.md: a linear chain of N nodes n0 … n{N-1}, the
// shape cycgraph's counterfactual engine is measured on. Node i calls the
// tool "step" with node i−1's output {v, tag}, which returns {v+1, tag}, and
// writes it to the state key "n{i}_result": five events per node.
//
//	go test ./fork -run '^$' -bench 'Chain$' -benchtime 20x -cpu 1,2
//	go test ./fork -run '^$' -bench 'ChainScaling' -benchtime 3x

type chainValue struct {
	V   int    `json:"v"`
	Tag string `json:"tag"`
}

// chainAgent is the workload's agent; live counts the tool calls that ran.
type chainAgent struct {
	live  int64
	mu    sync.Mutex
	agent replay.Agent
}

func newChainAgent() *chainAgent {
	c := &chainAgent{}
	step := replay.Tool("step", func(_ context.Context, in chainValue) (chainValue, error) {
		c.mu.Lock()
		c.live++
		c.mu.Unlock()
		return chainValue{V: in.V + 1, Tag: in.Tag}, nil
	})
	c.agent = replay.Typed(func(ctx context.Context, n int) (chainValue, error) {
		cur := chainValue{V: 0, Tag: "chain"}
		for i := range n {
			err := replay.Node(ctx, chainNodeName(i), func(ctx context.Context) error {
				out, err := step(ctx, cur)
				if err != nil {
					return err
				}
				cur = out
				return replay.Set(ctx, chainNodeName(i)+"_result", out)
			})
			if err != nil {
				return chainValue{}, err
			}
		}
		return cur, nil
	})
	return c
}

func chainNodeName(i int) string { return "n" + strconv.Itoa(i) }

var chainRuns sync.Map // int → *trace.Trace

// chainRun records the chain of n nodes once per process.
func chainRun(b *testing.B, n int) *trace.Trace {
	b.Helper()
	if tr, ok := chainRuns.Load(n); ok {
		return tr.(*trace.Trace)
	}
	res, err := replay.Record(context.Background(), "chain", n, newChainAgent().agent)
	if err != nil {
		b.Fatal(err)
	}
	if got, want := len(res.Trace.Events), 5*n+2; got != want {
		b.Fatalf("chain of %d nodes: %d events, want %d", n, got, want)
	}
	chainRuns.Store(n, res.Trace)
	return res.Trace
}

// chainOps are the four operations of workload A, each checked for the
// result it must give so that a faster wrong answer cannot pass.
var chainOps = []struct {
	name string
	run  func(b *testing.B, base *trace.Trace, n int)
}{
	{"replay", func(b *testing.B, base *trace.Trace, n int) {
		c := newChainAgent()
		res, err := replay.Replay(context.Background(), base, c.agent)
		if err != nil || c.live != 0 || len(res.Trace.Events) != len(base.Events) {
			b.Fatalf("frozen replay: %v, %d live calls", err, c.live)
		}
	}},
	{"fork", func(b *testing.B, base *trace.Trace, n int) {
		c := newChainAgent()
		v, err := Run(context.Background(), base, BeforeNode(chainNodeName(n/2), 1), c.agent,
			ToolResult(OnCall("step", n/2+1), chainValue{V: -1, Tag: "changed"}), Allow("step"))
		if err != nil {
			b.Fatal(err)
		}
		if v.Status != StatusCompleted || c.live != int64(n-n/2-1) {
			b.Fatalf("fork: %v %v, %d live calls, want %d", err, v.Status, c.live, n-n/2-1)
		}
	}},
	{"sweep3", func(b *testing.B, base *trace.Trace, n int) {
		c := newChainAgent()
		vs := make([]Named, 3)
		for i := range vs {
			vs[i] = Named{Name: fmt.Sprintf("v%d", i), Changes: []Change{
				ToolResult(OnCall("step", n/2+1), chainValue{V: -1 - i, Tag: "changed"})}}
		}
		s, err := Each(context.Background(), base, BeforeNode(chainNodeName(n/2), 1), c.agent, vs, Allow("step"))
		if err != nil || len(s.Entries) != 3 || c.live != int64(3*(n-n/2-1)) {
			b.Fatalf("sweep: %v, %d live calls", err, c.live)
		}
		for _, e := range s.Entries {
			if e.Variant == nil || e.Variant.Status != StatusCompleted {
				b.Fatalf("sweep entry %s: %+v", e.Name, e)
			}
		}
	}},
	{"null", func(b *testing.B, base *trace.Trace, n int) {
		c := newChainAgent()
		v, err := Run(context.Background(), base, Start(), c.agent, Memoize())
		if err != nil {
			b.Fatal(err)
		}
		if !v.Diff.Equivalent() || c.live != 0 {
			b.Fatalf("memoized null fork: %v, %d live calls", err, c.live)
		}
	}},
}

// BenchmarkChain measures workload A at N = 100, 1,000 and 10,000 nodes.
func BenchmarkChain(b *testing.B) {
	benchChain(b, []int{100, 1_000, 10_000})
}

// BenchmarkChainScaling runs workload A up to N = 100,000 nodes (500,002
// events): each decade should cost at most 11× the one before, and
// maxrss-B/event (the process's peak resident set over the base run's
// events; run one size per process for a clean figure) should stay under
// 1 KB.
func BenchmarkChainScaling(b *testing.B) {
	benchChain(b, []int{1_000, 10_000, 100_000})
}

func benchChain(b *testing.B, sizes []int) {
	for _, op := range chainOps {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/N=%d", op.name, n), func(b *testing.B) {
				base := chainRun(b, n)
				op.run(b, base, n) // the steady state: the base was replayed or forked before
				measureChain(b, n, len(base.Events), func() { op.run(b, base, n) })
			})
		}
	}
}

// BenchmarkChainFirst measures the first operation on a base run, which
// prepares what later ones share (the replay plan, the fork index, the
// payload hashes, the memo of plain values): each iteration works on a
// trace never seen before, a shallow copy of the recorded one, as a test
// that records its fixture and forks it once does.
//
//	go test ./fork -run '^$' -bench 'ChainFirst' -benchtime 10x
func BenchmarkChainFirst(b *testing.B) {
	benchChainFirst(b, func(base *trace.Trace) *trace.Trace {
		fresh := *base
		return &fresh
	})
}

// BenchmarkChainFirstLoaded is BenchmarkChainFirst on a base this process
// did not record, as a test that loads its fixture from disk has: each
// iteration works on a copy of the recorded trace with its own events
// array (the copy, ~2 MB at N = 1,000, is part of the time measured).
//
//	go test ./fork -run '^$' -bench 'ChainFirstLoaded' -benchtime 10x
func BenchmarkChainFirstLoaded(b *testing.B) {
	benchChainFirst(b, func(base *trace.Trace) *trace.Trace {
		fresh := *base
		fresh.Events = slices.Clone(base.Events)
		return &fresh
	})
}

func benchChainFirst(b *testing.B, fresh func(*trace.Trace) *trace.Trace) {
	for _, op := range chainOps {
		for _, n := range []int{100, 1_000, 10_000} {
			b.Run(fmt.Sprintf("%s/N=%d", op.name, n), func(b *testing.B) {
				base := chainRun(b, n)
				measureChain(b, n, len(base.Events), func() { op.run(b, fresh(base), n) })
			})
		}
	}
}

// measureChain runs op in the benchmark loop and reports CPU time,
// allocations per node and the peak resident set per event.
func measureChain(b *testing.B, n, events int, op func()) {
	b.Helper()
	b.ReportAllocs()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := cputime.Used()
	for b.Loop() {
		op()
	}
	cputime.Report(b, start)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N)/float64(n), "allocs/node")
	b.ReportMetric(float64(cputime.MaxRSS())/float64(events), "maxrss-B/event")
}

package replay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/internal/cputime"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

type smallIn struct {
	City  string `json:"city"`
	Limit int    `json:"limit"`
}

type smallOut struct {
	Price float64 `json:"price"`
	ID    string  `json:"id"`
}

func smallTool(_ context.Context, in smallIn) (smallOut, error) {
	return smallOut{Price: 320.5, ID: in.City}, nil
}

var sink smallOut

// BenchmarkToolPassThrough is the cost of a wrapped tool called outside a
// session. It checks every call's result.
func BenchmarkToolPassThrough(b *testing.B) {
	search := replay.Tool("search", smallTool)
	ctx := context.Background()
	in := smallIn{City: "LIS", Limit: 3}
	want, _ := smallTool(ctx, in)
	b.ReportAllocs()
	var err error
	for b.Loop() {
		if sink, err = search(ctx, in); err != nil || sink != want {
			b.Fatalf("search = %+v, %v; want %+v", sink, err, want)
		}
	}
}

// loopAgent makes n small tool calls and returns "done".
func loopAgent(n int) replay.Agent {
	search := replay.Tool("search", smallTool)
	return func(ctx context.Context, _ trace.Value) (any, error) {
		for i := range n {
			if _, err := search(ctx, smallIn{City: "LIS", Limit: i % 7}); err != nil {
				return nil, err
			}
		}
		return "done", nil
	}
}

// checkRecorded fails b unless res is the recording of a loopAgent of n
// calls: every call executed, the agent's output, two events a call.
func checkRecorded(b *testing.B, res *replay.Result, n int) {
	b.Helper()
	if res.Executed != n || res.Served != 0 || res.Output != "done" || len(res.Trace.Events) != 2*n+2 {
		b.Fatalf("%d calls executed, %d served, output %v, %d events; want %d executed", res.Executed, res.Served,
			res.Output, len(res.Trace.Events), n)
	}
}

// checkServed fails b unless res is a frozen replay of a run of n calls
// that served them all, executed none and returned "done".
func checkServed(b *testing.B, res *replay.Result, n int) {
	b.Helper()
	if res.Served != n || res.Executed != 0 || res.Divergence != nil || res.Output != "done" {
		b.Fatalf("%d calls served, %d executed, divergence %v, output %v; want %d served", res.Served, res.Executed,
			res.Divergence, res.Output, n)
	}
}

// BenchmarkToolRecord is the cost of one recorded tool call (call and
// result events, ids, redaction, hashes). It checks the recording
// (checkRecorded).
func BenchmarkToolRecord(b *testing.B) {
	b.ReportAllocs()
	n := b.N
	b.ResetTimer()
	start := cputime.Used()
	res, err := replay.Record(context.Background(), "bench", nil, loopAgent(n))
	if err != nil {
		b.Fatal(err)
	}
	cputime.Report(b, start)
	b.StopTimer()
	checkRecorded(b, res, n)
}

// BenchmarkToolRecordRuns100 is the cost of one recorded tool call in runs
// of 100 calls, the size of a typical agent run: BenchmarkToolRecord keeps
// every one of b.N calls alive in one trace, so on a machine where page
// faults are dear it mostly measures the kernel handing out fresh memory.
// It checks each recording (checkRecorded).
func BenchmarkToolRecordRuns100(b *testing.B) {
	agent := loopAgent(100)
	b.ReportAllocs()
	b.ResetTimer()
	start := cputime.Used()
	for range (b.N + 99) / 100 {
		res, err := replay.Record(context.Background(), "bench", nil, agent)
		if err != nil {
			b.Fatal(err)
		}
		checkRecorded(b, res, 100)
	}
	cputime.Report(b, start)
}

// BenchmarkToolReplayFrozen is the cost of one tool call served by a frozen
// replay (matching, serving, decoding, re-recording). It checks the
// replay (checkServed).
func BenchmarkToolReplayFrozen(b *testing.B) {
	n := b.N
	rec, err := replay.Record(context.Background(), "bench", nil, loopAgent(n))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cputime.Used()
	res, err := replay.Replay(context.Background(), rec.Trace, loopAgent(n))
	if err != nil {
		b.Fatal(err)
	}
	cputime.Report(b, start)
	b.StopTimer()
	checkServed(b, res, n)
}

// BenchmarkReplay10kCalls loads a saved 10,000-call run from disk and replays
// it frozen, end to end. It checks each replay (checkServed).
func BenchmarkReplay10kCalls(b *testing.B) {
	path := filepath.Join(b.TempDir(), "10k.sftrace")
	rec, err := replay.Record(context.Background(), "bench", nil, loopAgent(10_000))
	if err != nil {
		b.Fatal(err)
	}
	if err := rec.Trace.Save(path); err != nil {
		b.Fatal(err)
	}
	agent := loopAgent(10_000)
	b.ReportAllocs()
	start := cputime.Used()
	defer cputime.Report(b, start)
	for b.Loop() {
		tr, err := trace.Load(path)
		if err != nil {
			b.Fatal(err)
		}
		res, err := replay.Replay(context.Background(), tr, agent)
		if err != nil {
			b.Fatal(err)
		}
		checkServed(b, res, 10_000)
	}
}

// echoAgent makes the calls a trace recorded, with the recorded inputs: it
// stands for the agent that recorded a Python trace.
func echoAgent(base *trace.Trace) replay.Agent {
	var calls []trace.Event
	for _, ev := range base.Events {
		if ev.Type == trace.ToolCall || ev.Type == trace.LLMRequest {
			calls = append(calls, ev)
		}
	}
	return func(ctx context.Context, _ trace.Value) (any, error) {
		var last any
		for _, ev := range calls {
			switch ev.Type {
			case trace.ToolCall:
				out, err := replay.Tool(ev.Name, func(context.Context, trace.Value) (trace.Value, error) {
					return trace.Value{}, fmt.Errorf("tool %s executed", ev.Name)
				})(ctx, ev.Input)
				if err != nil {
					return nil, err
				}
				last = out
			default:
				if _, err := replay.LLMRaw(ctx, ev.Provider, ev.Model, ev.Input, func(context.Context, trace.Value) (trace.Value, error) {
					return trace.Value{}, fmt.Errorf("model %s executed", ev.Model)
				}); err != nil {
					return nil, err
				}
			}
		}
		return last, nil
	}
}

// TestReplayPythonRecording replays a 1,000-call run recorded by Python
// stepfork: every call is matched and served, and the replay's own trace
// has the recording's events.
func TestReplayPythonRecording(t *testing.T) {
	t.Parallel()
	tr, err := trace.Load("../testdata/vectors/stepfork-recorded/run_1000_calls.sftrace")
	require.NoError(t, err)
	res, err := replay.Replay(context.Background(), tr, echoAgent(tr))
	if err != nil {
		// The Python agent returned something else than its last tool output;
		// only an outcome difference is acceptable here.
		require.NotErrorIs(t, res.Divergence, replay.ErrDiverged)
		require.NoError(t, res.VerifyComplete())
	}
	assert.Equal(t, 1000, res.Served)
	assert.Equal(t, 0, res.Executed)
	assert.Nil(t, res.Divergence)
	evs := res.Trace.Events
	require.Len(t, evs, len(tr.Events))
	for i := 1; i < len(evs)-1; i++ {
		b, g := tr.Events[i], evs[i]
		assert.Equal(t, b.ID, g.ID, "event %d keeps the base id", i)
		assert.Equal(t, b.Type, g.Type)
		assert.Equal(t, b.ParentID, g.ParentID)
		assert.True(t, b.Input == g.Input || b.Input.IsAbsent() && g.Input.IsAbsent(), "input of event %d", i)
		assert.Equal(t, b.Output, g.Output, "output of event %d", i)
	}
}

// checkPythonReplay fails b unless the frozen replay of a Python recording
// by echoAgent served its calls calls, executed none, and differs from it
// only in its outcome: echoAgent returns its last tool output, not the
// recorded run's output, so the replay's error is a mismatch at the run's
// end (step runEnd) and not about a call.
func checkPythonReplay(b *testing.B, res *replay.Result, err error, calls, runEnd int) {
	b.Helper()
	m, outcome := err.(*replay.MismatchError)
	if !outcome || m.Call != 0 || m.Step != runEnd {
		b.Fatalf("the replay's error is not the outcome's mismatch at step %d: %v", runEnd, err)
	}
	if res.Divergence != nil || res.Served != calls || res.Executed != 0 {
		b.Fatalf("divergence %v, %d served, %d executed; want %d served", res.Divergence, res.Served, res.Executed, calls)
	}
}

// BenchmarkReplayPython1000Calls loads the 1,000-call Python recording
// and replays it frozen with echoAgent. It checks each replay
// (checkPythonReplay).
func BenchmarkReplayPython1000Calls(b *testing.B) {
	const path = "../testdata/vectors/stepfork-recorded/run_1000_calls.sftrace"
	tr, err := trace.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	agent := echoAgent(tr)
	b.ReportAllocs()
	start := cputime.Used()
	defer cputime.Report(b, start)
	for b.Loop() {
		tr, err := trace.Load(path)
		if err != nil {
			b.Fatal(err)
		}
		res, err := replay.Replay(context.Background(), tr, agent)
		checkPythonReplay(b, res, err, 1000, len(tr.Events)-1)
	}
}

// python10k is a 10,000-call run of the shape Python stepfork records
// (20,002 events): the 1,000-call vector repeated ten times, each copy with
// fresh event ids, saved at path and loaded so that it is a valid bundle.
func python10k(b *testing.B) (tr *trace.Trace, path string) {
	b.Helper()
	src, err := trace.Load("../testdata/vectors/stepfork-recorded/run_1000_calls.sftrace")
	if err != nil {
		b.Fatal(err)
	}
	body := src.Events[1 : len(src.Events)-1] // between run_start and run_end
	evs := []trace.Event{src.Events[0].Clone()}
	for c := range 10 {
		ids := map[string]string{}
		for _, ev := range body {
			ev = ev.Clone()
			id := fmt.Sprintf("%s-%02d", ev.ID[:33], c)
			ids[ev.ID] = id
			ev.ID = id
			if p, ok := ids[ev.ParentID]; ok {
				ev.ParentID = p
			}
			ev.Step = len(evs)
			evs = append(evs, ev)
		}
	}
	end := src.Events[len(src.Events)-1].Clone()
	end.Step = len(evs)
	evs = append(evs, end)
	big := *src
	big.Events = evs
	big.Path = ""
	path = filepath.Join(b.TempDir(), "python-10k.sftrace")
	if err := big.Save(path); err != nil {
		b.Fatal(err)
	}
	tr, err = trace.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	if n := len(tr.Events); n != 20_002 {
		b.Fatalf("%d events, want 20,002", n)
	}
	return tr, path
}

// BenchmarkReplayPython10kCalls is workload B's frozen replay: a pre-loaded
// 10,000-call Python recording replayed by an agent that re-issues every
// recorded call through the wrappers. "first" replays a trace never
// replayed before (it is planned, and its payloads hashed, on the way);
// "again" replays one trace over and over, as a test suite or a sweep does;
// "loaded" loads the bundle as a test does (sftest.Load: loaded, its hashes
// and files verified) and replays it once. Each checks every replay
// (checkPythonReplay).
func BenchmarkReplayPython10kCalls(b *testing.B) {
	tr, path := python10k(b)
	agent := echoAgent(tr)
	run := func(b *testing.B, tr *trace.Trace) {
		res, err := replay.Replay(context.Background(), tr, agent)
		checkPythonReplay(b, res, err, 10_000, len(tr.Events)-1)
	}
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		defer cputime.Report(b, cputime.Used())
		for b.Loop() {
			fresh := *tr // a new trace to the plan cache, sharing the events
			run(b, &fresh)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/call")
	})
	b.Run("again", func(b *testing.B) {
		b.ReportAllocs()
		defer cputime.Report(b, cputime.Used())
		for b.Loop() {
			run(b, tr)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/call")
	})
	b.Run("loaded", func(b *testing.B) {
		b.ReportAllocs()
		defer cputime.Report(b, cputime.Used())
		for b.Loop() {
			run(b, sftest.Load(b, path))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/call")
	})
}

// poolAgent runs n tasks on 8 workers taking them from a channel; each
// task makes a tool call, reads an id and writes its state.
func poolAgent(n int) replay.Agent {
	search := replay.Tool("search", smallTool)
	return func(ctx context.Context, _ trace.Value) (any, error) {
		jobs := make(chan int)
		errs := make(chan error, n)
		done := make(chan struct{})
		for range 8 {
			go func() {
				defer func() { done <- struct{}{} }()
				for i := range jobs {
					out, err := search(ctx, smallIn{City: "LIS", Limit: i})
					if err == nil {
						_ = replay.NewID(ctx)
						err = replay.Set(ctx, fmt.Sprintf("task%d", i), out.Price)
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		for i := range n {
			jobs <- i
		}
		close(jobs)
		for range 8 {
			<-done
		}
		close(errs)
		return "done", <-errs
	}
}

// BenchmarkReplayPool is a frozen replay of a worker pool of 8 goroutines
// doing 1,000 tasks (a call, an id and a state write each): every
// operation is matched in the run's concurrent group, and the trace
// written in the canonical order. It checks that each replay served the
// 1,000 calls, executed none and wrote every event.
func BenchmarkReplayPool(b *testing.B) {
	ctx := context.Background()
	rec, err := replay.Record(ctx, "pool", nil, poolAgent(1000))
	require.NoError(b, err)
	p := replay.Prepare(rec.Trace)
	b.ReportAllocs()
	start := cputime.Used()
	for b.Loop() {
		res, err := p.Replay(ctx, poolAgent(1000))
		if err != nil {
			b.Fatal(err)
		}
		checkServed(b, res, 1000)
		if len(res.Trace.Events) != len(rec.Trace.Events) {
			b.Fatalf("%d events, want %d", len(res.Trace.Events), len(rec.Trace.Events))
		}
	}
	cputime.Report(b, start)
}

// BenchmarkRecordPool records the worker pool of BenchmarkReplayPool: the
// canonical order orders its groups by content. It checks that each
// recording executed the 1,000 calls and holds every event (a call, its
// result, an id and a state write a task).
func BenchmarkRecordPool(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	start := cputime.Used()
	for b.Loop() {
		res, err := replay.Record(ctx, "pool", nil, poolAgent(1000))
		if err != nil {
			b.Fatal(err)
		}
		if res.Executed != 1000 || res.Output != "done" || len(res.Trace.Events) != 4*1000+2 {
			b.Fatalf("%d calls executed, output %v, %d events; want 1000 and %d", res.Executed, res.Output,
				len(res.Trace.Events), 4*1000+2)
		}
	}
	cputime.Report(b, start)
}

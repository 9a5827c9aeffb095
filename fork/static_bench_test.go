package fork

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// benchEvents is the size of the generated bundle the fork benchmarks cut.
const benchEvents = 100_000

// largeBundle writes a recorder-shaped bundle of n events (a run_start, then
// model and tool calls with payloads of about 400 bytes, then run_end) and
// returns its path and the end offset of every line of events.jsonl.
func largeBundle(b *testing.B, n int) (string, []int64) {
	b.Helper()
	// Built directly: trace.Builder looks parents up by id, which is
	// quadratic at this size.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := &trace.Trace{Manifest: trace.Manifest{RunID: "run_bench", AgentName: "bench-agent", CreatedAt: t0, Status: trace.RunCompleted}}
	add := func(ev trace.Event) string {
		ev.ID = fmt.Sprintf("evt_%07d", len(tr.Events)+1)
		ev.RunID, ev.Step, ev.Status, ev.ReplayPolicy = tr.RunID, len(tr.Events), trace.StatusOK, trace.PolicyFrozen
		ev.Timestamp = t0.Add(time.Duration(len(tr.Events)) * time.Millisecond)
		tr.Events = append(tr.Events, ev)
		return ev.ID
	}
	root := add(trace.Event{Type: trace.RunStart, Input: trace.MustValueOf(map[string]any{"task": "benchmark", "n": n})})
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 8)
	for i := 1; len(tr.Events)+2 <= n-1; i++ {
		if i%2 == 0 {
			req := add(trace.Event{Type: trace.LLMRequest, ParentID: root, Provider: "openai", Model: "gpt-4o-mini",
				Input: trace.MustValueOf(map[string]any{"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("step %d: %s", i, filler)}}})})
			add(trace.Event{Type: trace.LLMResponse, ParentID: req, Model: "gpt-4o-mini",
				Output: trace.MustValueOf(map[string]any{"text": filler, "score": 0.61, "i": i})})
		} else {
			call := add(trace.Event{Type: trace.ToolCall, ParentID: root, Name: "search",
				Input: trace.MustValueOf(map[string]any{"query": fmt.Sprintf("q%d", i), "limit": 5})})
			add(trace.Event{Type: trace.ToolResult, ParentID: call, Name: "search",
				Output: trace.MustValueOf(map[string]any{"hits": []any{filler, i, 1e-05}, "next": nil})})
		}
	}
	if len(tr.Events) < n-1 {
		add(trace.Event{Type: trace.StateChange, ParentID: root, Key: "done", Before: trace.BoolValue(false), After: trace.BoolValue(true)})
	}
	add(trace.Event{Type: trace.RunEnd, RunStatus: trace.RunCompleted, Output: trace.MustValueOf(map[string]any{"ok": true})})
	path := filepath.Join(b.TempDir(), "large.sftrace")
	if err := tr.Save(path); err != nil {
		b.Fatal(err)
	}
	return path, lineEnds(b, path, n)
}

// lineEnds returns the end offset of every line of the bundle's events.jsonl.
func lineEnds(b *testing.B, path string, n int) []int64 {
	b.Helper()
	data, err := os.ReadFile(filepath.Join(path, trace.EventsFile))
	if err != nil {
		b.Fatal(err)
	}
	ends := make([]int64, 0, n)
	var off int64
	for line := range bytes.Lines(data) {
		off += int64(len(line))
		ends = append(ends, off)
	}
	if len(ends) != n {
		b.Fatalf("%s holds %d events, want %d", path, len(ends), n)
	}
	return ends
}

// cachedBundle is largeBundle kept under os.TempDir between runs (a 1M-event
// bundle takes a while to generate): it is generated the first time a
// benchmark asks for it and reused while its integrity verifies.
func cachedBundle(b *testing.B, n int) (string, []int64) {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("stepfork-bench-fork-%d-v1.sftrace", n))
	if res := trace.VerifyIntegrity(path); res.Status != trace.IntegrityVerified {
		os.RemoveAll(path)
		tmp, _ := largeBundle(b, n)
		if err := os.Rename(tmp, path); err != nil {
			b.Fatal(err)
		}
	}
	return path, lineEnds(b, path, n)
}

// processCPU returns the CPU time (user and system) the process has used so
// far, from /proc/self/stat (in 10 ms ticks); ok is false without it. The
// benchmarks report MB/s per CPU second ("cpu-MB/s") besides wall-clock
// MB/s, which swings on a shared machine.
func processCPU() (d time.Duration, ok bool) {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// BenchmarkForkLarge forks a 1M-event bundle (about 0.5 GB of events.jsonl,
// generated once under os.TempDir) through its path at steps 1k, 10k, 100k
// and 1M-1 (the last is skipped with -short), as stepfork fork does it
// (the fork streamed, never held in memory). SetBytes is the part of events.jsonl before the fork point,
// so MB/s is the fork's throughput and ns/op should grow in proportion to
// the step.
func BenchmarkForkLarge(b *testing.B) {
	const n = 1_000_000
	src, ends := cachedBundle(b, n)
	out := filepath.Join(b.TempDir(), "fork.sftrace")
	steps := []int{1_000, 10_000, 100_000, n - 1}
	if testing.Short() {
		steps = steps[:3]
	}
	for _, at := range steps {
		{
			name := fmt.Sprintf("step=%d", at)
			b.Run(name, func(b *testing.B) {
				b.SetBytes(ends[at])
				b.ReportAllocs()
				cpu0, cpuOK := processCPU()
				n := 0
				defer func() {
					if cpu1, ok := processCPU(); cpuOK && ok && cpu1 > cpu0 {
						b.ReportMetric(float64(ends[at])*float64(n)/(cpu1-cpu0).Seconds()/1e6, "cpu-MB/s")
					}
				}()
				for b.Loop() {
					n++
					res, err := Trace(src, ThroughStep(at), testOpts{OutputPath: out, Overwrite: true}.list()...)
					if err != nil {
						b.Fatal(err)
					}
					if res.ForkedEventCount != at+1 {
						b.Fatalf("%d events", res.ForkedEventCount)
					}
				}
			})
		}
	}
}

// BenchmarkForkPath forks a 100k-event bundle (about 90 MB) at several steps
// through a path, as `stepfork fork` does: stream up to the fork point, then
// save. SetBytes is the part of events.jsonl the fork reads, so MB/s is the
// throughput and ns/op should grow in proportion to the fork point.
func BenchmarkForkPath(b *testing.B) {
	src, ends := largeBundle(b, benchEvents)
	out := filepath.Join(b.TempDir(), "fork.sftrace")
	for _, at := range []int{1_000, 10_000, 50_000, benchEvents - 1} {
		b.Run(fmt.Sprintf("step=%d", at), func(b *testing.B) {
			b.SetBytes(ends[at])
			b.ReportAllocs()
			for b.Loop() {
				res, err := Trace(src, ThroughStep(at), testOpts{OutputPath: out, Overwrite: true}.list()...)
				if err != nil {
					b.Fatal(err)
				}
				if res.ForkedEventCount != at+1 {
					b.Fatalf("%d events", res.ForkedEventCount)
				}
			}
		})
	}
}

// BenchmarkEngineFork forks a loaded 100k-event trace in memory (no I/O):
// the cost of cutting, overriding, re-hashing and redacting. It checks
// that each fork keeps the events through the step, applies the one
// override and re-hashes the overridden output.
func BenchmarkEngineFork(b *testing.B) {
	src, ends := largeBundle(b, benchEvents)
	tr, err := trace.Load(src)
	if err != nil {
		b.Fatal(err)
	}
	changed := trace.MustValueOf(map[string]any{"text": "changed"})
	changedHash := trace.Hash(changed)
	for _, at := range []int{1_000, 10_000, benchEvents - 1} {
		b.Run(fmt.Sprintf("step=%d", at), func(b *testing.B) {
			b.SetBytes(ends[at])
			b.ReportAllocs()
			step := at / 2 * 2
			opts := testOpts{Overrides: []TraceOption{Override(OnStep(step), map[string]any{"text": "changed"})}}
			for b.Loop() {
				out, info, err := forkMem(tr, ThroughStep(at), opts)
				if err != nil {
					b.Fatal(err)
				}
				if ev := &out.Events[step]; len(out.Events) != at+1 || info.OverridesApplied != 1 ||
					ev.Output != changed || ev.OutputHash != changedHash {
					b.Fatalf("%d events, %d overrides applied, step %d: output %s hash %s", len(out.Events),
						info.OverridesApplied, step, ev.Output.Canonical(), ev.OutputHash)
				}
			}
		})
	}
}

package fork

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
		b.Fatalf("generated %d events, want %d", len(ends), n)
	}
	return path, ends
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
				res, err := Trace(src, AtStep(at), Options{OutputPath: out, Overwrite: true})
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
// the cost of cutting, overriding, re-hashing and redacting.
func BenchmarkEngineFork(b *testing.B) {
	src, ends := largeBundle(b, benchEvents)
	tr, err := trace.Load(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, at := range []int{1_000, 10_000, benchEvents - 1} {
		b.Run(fmt.Sprintf("step=%d", at), func(b *testing.B) {
			b.SetBytes(ends[at])
			b.ReportAllocs()
			opts := Options{Overrides: []Override{OverrideStep(at/2*2, map[string]any{"text": "changed"})}}
			for b.Loop() {
				if _, _, err := NewEngine(tr, AtStep(at), opts).Fork(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

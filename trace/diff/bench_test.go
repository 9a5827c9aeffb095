package diff

import (
	"fmt"
	"testing"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// benchRun builds a run of n behavior steps (tool calls with results and
// model calls, alternating), with payloads of about 200 bytes. It makes the
// events directly: the Builder looks parents up by scanning, which is too
// slow for 200k events.
func benchRun(b *testing.B, n int) *trace.Trace {
	b.Helper()
	tr := &trace.Trace{Manifest: trace.Manifest{RunID: "run_bench", AgentName: "bench", Status: trace.RunCompleted,
		CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	add := func(ev trace.Event) string {
		ev.ID = fmt.Sprintf("evt_%06d", len(tr.Events))
		ev.RunID, ev.Step, ev.Timestamp = tr.RunID, len(tr.Events), tr.CreatedAt.Add(time.Duration(len(tr.Events))*time.Millisecond)
		ev.Status, ev.ReplayPolicy = trace.StatusOK, trace.PolicyFrozen
		if ev.ParentID == "" && len(tr.Events) > 0 && ev.Type != trace.RunEnd {
			ev.ParentID = tr.Events[0].ID
		}
		ev.SetHashes()
		tr.Events = append(tr.Events, ev)
		return ev.ID
	}
	add(trace.Event{Type: trace.RunStart, Input: trace.MustValueOf(map[string]any{"n": n})})
	for i := range n - 1 {
		in := trace.MustValueOf(map[string]any{"i": i, "query": "flights from KTM to LIS, two adults", "page": i % 7})
		out := trace.MustValueOf(map[string]any{"i": i, "items": []any{"QR 641", "TK 727", i % 13}, "price": float64(i%500) + 0.5, "note": "ünïcödé"})
		if i%2 == 0 {
			name := []string{"search", "lookup", "book"}[i%3]
			call := add(trace.Event{Type: trace.ToolCall, Name: name, Input: in})
			add(trace.Event{Type: trace.ToolResult, ParentID: call, Name: name, Output: out})
		} else {
			req := add(trace.Event{Type: trace.LLMRequest, Provider: "openai", Model: "gpt-4o", Input: in})
			add(trace.Event{Type: trace.LLMResponse, ParentID: req, Model: "gpt-4o", Output: out})
		}
	}
	add(trace.Event{Type: trace.RunEnd, RunStatus: trace.RunCompleted, Output: trace.MustValueOf(map[string]any{"ok": true})})
	tr.Totals.Events = len(tr.Events)
	return tr
}

// changeOutputs returns a copy of tr in which every 100th tool result has a
// different output: 1% of the behavior steps differ.
func changeOutputs(tr *trace.Trace) *trace.Trace {
	c := tr.Clone()
	calls := 0
	for i := range c.Events {
		ev := &c.Events[i]
		if ev.Type != trace.ToolResult && ev.Type != trace.LLMResponse {
			continue
		}
		if calls%100 == 50 {
			ev.Output = trace.MustValueOf(map[string]any{"changed": calls})
			ev.SetHashes()
		}
		calls++
	}
	return c
}

// insertCalls returns a copy of tr with a new tool call and result inserted
// before every 100th call: 1% of the variant's steps are new, and every
// later step is shifted.
func insertCalls(tr *trace.Trace) *trace.Trace {
	c := tr.Clone()
	c.Events = c.Events[:0:0]
	calls := 0
	for _, ev := range tr.Events {
		if ev.Type == trace.ToolCall || ev.Type == trace.LLMRequest {
			if calls%100 == 50 {
				id := fmt.Sprintf("evt_ins_%d", calls)
				call := trace.Event{ID: id, RunID: ev.RunID, ParentID: ev.ParentID, Type: trace.ToolCall, Timestamp: ev.Timestamp,
					Status: trace.StatusOK, ReplayPolicy: trace.PolicyFrozen, Name: "inserted", Input: trace.IntValue(int64(calls))}
				res := trace.Event{ID: id + "_r", RunID: ev.RunID, ParentID: id, Type: trace.ToolResult, Timestamp: ev.Timestamp,
					Status: trace.StatusOK, ReplayPolicy: trace.PolicyFrozen, Name: "inserted", Output: trace.IntValue(int64(calls))}
				call.SetHashes()
				res.SetHashes()
				c.Events = append(c.Events, call, res)
			}
			calls++
		}
		c.Events = append(c.Events, ev.Clone())
	}
	return c
}

// BenchmarkDiff diffs two runs of N behavior steps that differ in 1% of
// their steps, by changed outputs and by inserted calls, in both
// alignments. Compare B/op across sizes to see memory grow linearly.
//
//	go test ./trace/diff -run '^$' -bench BenchmarkDiff -benchmem -benchtime 5x -count 1
func BenchmarkDiff(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		base := benchRun(b, n)
		variants := []struct {
			name string
			tr   *trace.Trace
			want func(d *Result) bool
		}{
			{"changed", changeOutputs(base), func(d *Result) bool { return d.Changed == n/100 && d.Added == 0 }},
			{"inserted", insertCalls(base), func(d *Result) bool { return d.Added == n/100 && d.Changed == 0 }},
		}
		for _, v := range variants {
			for _, mode := range []struct {
				name string
				opts []Option
			}{{"lcs", nil}, {"positional", []Option{AlignPosition()}}} {
				if mode.name == "positional" && v.name == "inserted" {
					continue // every later step differs: not the 1% case
				}
				b.Run(fmt.Sprintf("%s/%s/steps=%d", mode.name, v.name, n), func(b *testing.B) {
					b.ReportAllocs()
					var d *Result
					for b.Loop() {
						d = Runs(base, v.tr, mode.opts...)
					}
					if !v.want(d) {
						b.Fatalf("changed=%d added=%d removed=%d", d.Changed, d.Added, d.Removed)
					}
				})
			}
		}
	}
}

// BenchmarkDiffPrepared compares one variant with a base run of 10,000
// steps by Diff, which extracts the base every time, and by a Prepared
// prepared once, as a sweep does for its variants.
//
//	go test ./trace/diff -run '^$' -bench BenchmarkDiffPrepared -benchmem -benchtime 10x -count 1
func BenchmarkDiffPrepared(b *testing.B) {
	const n = 10_000
	base := benchRun(b, n)
	variant := changeOutputs(base)
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"lcs", nil}, {"positional", []Option{AlignPosition()}}} {
		check := func(b *testing.B, d *Result) {
			b.Helper()
			if d.Changed != n/100 || d.Added != 0 {
				b.Fatalf("changed=%d added=%d removed=%d", d.Changed, d.Added, d.Removed)
			}
		}
		b.Run(mode.name+"/diff", func(b *testing.B) {
			b.ReportAllocs()
			var d *Result
			for b.Loop() {
				d = Runs(base, variant, mode.opts...)
			}
			check(b, d)
		})
		b.Run(mode.name+"/prepared", func(b *testing.B) {
			b.ReportAllocs()
			db := Prepare(base, mode.opts...)
			var d *Result
			for b.Loop() {
				d = db.Diff(variant)
			}
			check(b, d)
		})
	}
}

// BenchmarkDiffForkOfRepetitiveRun diffs a run of N behavior steps of one
// repeated shape (pagedRun) with its fork whose model says "stop" half way,
// as the base says on its last page, and checks that the fork's changed
// answer is paired with the base's answer on the same page (one change
// where the fork departs, the base's later pages removed), not with the
// base's last answer.
//
//	go test ./trace/diff -run '^$' -bench BenchmarkDiffForkOfRepetitiveRun -benchmem -benchtime 5x -count 1
func BenchmarkDiffForkOfRepetitiveRun(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		stop := n / 2
		page := stop / 2
		base := pagedRun(b, stop)
		variant := forkedAt(base, page, page)
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var d *Result
			for b.Loop() {
				d = Runs(base, variant)
			}
			dv := d.Divergence
			if dv == nil || dv.Kind != Changed || dv.Base.Index != 2*page+1 || dv.Variant.Index != 2*page+1 ||
				d.Changed != 2 || d.Added != 0 || d.Removed != 2*(stop-page) {
				b.Fatalf("divergence %v; changed=%d added=%d removed=%d", dv, d.Changed, d.Added, d.Removed)
			}
		})
	}
}

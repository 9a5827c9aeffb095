package trace_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

// unlinkedResults is a bundle without parent links: tool_call lookup_order
// (step 1), tool_call check_policy (step 2), tool_result lookup_order
// (step 3), tool_result check_policy (step 4). Step 3 answers step 1.
const unlinkedResults = "../testdata/unlinked-results.sftrace"

// callSummary prints a call as "label step→result-step status output".
func callSummary(tr *trace.Trace, c trace.Call) string {
	res := "-"
	if c.Result >= 0 {
		res = fmt.Sprint(tr.Events[c.Result].Step)
	}
	if c.Failure >= 0 {
		res += fmt.Sprintf(" failure %d %s: %s", tr.Events[c.Failure].Step, c.ErrorType, c.Message)
	} else if c.ErrorType != "" || c.Message != "" {
		res += fmt.Sprintf(" %s: %s", c.ErrorType, c.Message)
	}
	return fmt.Sprintf("#%d %s %d→%s %s %s", c.Index, c.Label, tr.Events[c.Event].Step, res, c.Status, c.Output)
}

func TestCallsUnlinkedResults(t *testing.T) {
	t.Parallel()
	tr, err := trace.Load(unlinkedResults)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range tr.Events {
		if i > 0 && ev.ParentID != "" {
			t.Fatalf("the fixture has a parent link at step %d", ev.Step)
		}
	}
	var got []string
	for _, c := range tr.Calls() {
		got = append(got, callSummary(tr, c))
	}
	want := []string{
		`#0 lookup_order 1→3 ok {"total":120}`,
		`#1 check_policy 2→4 ok {"limit":100}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Calls:\n%q\nwant\n%q", got, want)
	}
}

func TestCallsPairing(t *testing.T) {
	t.Parallel()
	ev := func(id, parent string, typ trace.EventType, f func(e *trace.Event)) trace.Event {
		e := trace.Event{ID: id, ParentID: parent, Type: typ, Status: trace.StatusOK, ReplayPolicy: trace.PolicyFrozen}
		f(&e)
		return e
	}
	tool := func(name string, in any) func(e *trace.Event) {
		return func(e *trace.Event) { e.Name, e.Input = name, trace.MustValueOf(in) }
	}
	result := func(name string, out any) func(e *trace.Event) {
		return func(e *trace.Event) { e.Name, e.Output = name, trace.MustValueOf(out) }
	}
	for _, tc := range []struct {
		name   string
		events []trace.Event
		want   []string
	}{{
		name: "parent links beat the order of the file",
		events: []trace.Event{
			ev("a", "", trace.ToolCall, tool("t", 1)),
			ev("b", "", trace.ToolCall, tool("t", 2)),
			ev("rb", "b", trace.ToolResult, result("t", "two")),
			ev("ra", "a", trace.ToolResult, result("t", "one")),
			ev("ra2", "a", trace.ToolResult, result("t", "again")), // not the first child: ignored
		},
		want: []string{`#0 t 1→4 ok "one"`, `#1 t 2→3 ok "two"`},
	}, {
		name: "legacy scan: same name, the next call of the name stops it",
		events: []trace.Event{
			ev("a", "", trace.ToolCall, tool("t", 1)),
			ev("b", "", trace.ToolCall, tool("t", 2)),
			ev("r", "", trace.ToolResult, result("t", "x")),
		},
		want: []string{`#0 t 1→- skipped <absent>`, `#1 t 2→3 ok "x"`},
	}, {
		name: "legacy scan: a linked result is not taken twice",
		events: []trace.Event{
			ev("a", "", trace.ToolCall, tool("u", 1)),
			ev("b", "", trace.ToolCall, tool("t", 2)),
			ev("rb", "b", trace.ToolResult, result("t", "b's")),
			ev("c", "", trace.ToolCall, tool("u", 3)),
			ev("r", "", trace.ToolResult, result("u", "c's")),
		},
		want: []string{`#0 u 1→- skipped <absent>`, `#1 t 2→3 ok "b's"`, `#2 u 4→5 ok "c's"`},
	}, {
		name: "a failed tool result is described by its error child, else by its output",
		events: []trace.Event{
			ev("a", "", trace.ToolCall, tool("t", 1)),
			ev("ra", "a", trace.ToolResult, func(e *trace.Event) {
				e.Name, e.Status, e.Output = "t", trace.StatusError, trace.MustValueOf(map[string]any{"error_type": "Out", "message": "from output"})
			}),
			ev("xa", "ra", trace.ErrorEvent, func(e *trace.Event) { e.ErrorType, e.Message, e.Status = "Boom", "from error", trace.StatusError }),
			ev("b", "", trace.ToolCall, tool("t", 2)),
			ev("rb", "b", trace.ToolResult, func(e *trace.Event) {
				e.Name, e.Status, e.Output = "t", trace.StatusError, trace.MustValueOf(map[string]any{"error_type": "Out", "message": "from output"})
			}),
		},
		want: []string{
			`#0 t 1→2 failure 3 Boom: from error error {"error_type":"Out","message":"from output"}`,
			`#1 t 4→5 Out: from output error {"error_type":"Out","message":"from output"}`,
		},
	}, {
		name: "model calls: response, else error child, else skipped",
		events: []trace.Event{
			ev("q1", "", trace.LLMRequest, func(e *trace.Event) { e.Provider, e.Model, e.Input = "p", "m", trace.StringValue("hi") }),
			ev("x1", "q1", trace.ErrorEvent, func(e *trace.Event) { e.ErrorType, e.Message, e.Status = "RateLimit", "slow down", trace.StatusError }),
			ev("q2", "", trace.LLMRequest, func(e *trace.Event) { e.Model, e.Input = "m", trace.StringValue("again") }),
			ev("r2", "q2", trace.LLMResponse, func(e *trace.Event) { e.Model, e.Output = "m", trace.StringValue("ok") }),
			ev("q3", "", trace.LLMRequest, func(e *trace.Event) { e.Provider, e.Model, e.Input = "p", "m", trace.StringValue("lost") }),
			ev("r3", "", trace.LLMResponse, func(e *trace.Event) { e.Model, e.Output = "m", trace.StringValue("unlinked") }),
		},
		want: []string{`#0 p/m 1→- failure 2 RateLimit: slow down error null`, `#1 m 3→4 ok "ok"`, `#2 p/m 5→- skipped <absent>`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := trace.NewBuilder("pairing")
			b.RunStart(nil)
			for _, e := range tc.events {
				b.Add(e)
			}
			tr := b.MustTrace()
			var got []string
			for _, c := range tr.Calls() {
				got = append(got, callSummary(tr, c))
				if c.Missing() != (c.Status == trace.StatusSkipped) {
					t.Errorf("call %d: Missing() = %v with status %s", c.Index, c.Missing(), c.Status)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Calls:\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestNodes(t *testing.T) {
	t.Parallel()
	marker := func(name, phase, parent string) trace.Event {
		ev := trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: name, Phase: phase, Status: trace.NodeStatusOK})
		if phase == trace.PhaseEnter {
			ev = trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: name, Phase: phase})
		}
		ev.ParentID = parent
		return ev
	}
	b := trace.NewBuilder("nodes")
	b.RunStart(nil)
	outer := b.Add(marker("loop", trace.PhaseEnter, ""))
	inner := b.Add(marker("loop", trace.PhaseEnter, outer))
	b.Add(marker("loop", trace.PhaseExit, outer)) // closes the outer one, by its parent link
	b.Add(marker("loop", trace.PhaseExit, ""))    // no link: the innermost open loop
	b.Add(marker("stray", trace.PhaseExit, ""))   // closes nothing
	b.Add(marker("open", trace.PhaseEnter, ""))   // never exits
	_ = inner
	tr := b.MustTrace()
	var got []string
	for _, n := range tr.Nodes() {
		step := func(i int) string {
			if i < 0 {
				return "-"
			}
			return fmt.Sprint(tr.Events[i].Step)
		}
		got = append(got, n.Name+" "+step(n.Enter)+"→"+step(n.Exit))
	}
	want := []string{"loop 1→3", "loop 2→4", "stray -→5", "open 6→-"}
	if !slices.Equal(got, want) {
		t.Errorf("Nodes = %q, want %q", got, want)
	}
}

// TestCallsCache checks that the calls are computed once per trace, shared
// by concurrent readers, and computed again when the events are replaced.
func TestCallsCache(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("cache")
	b.RunStart(nil)
	b.Tool("t", 1, "one")
	tr := b.MustTrace()

	var wg sync.WaitGroup
	got := make([][]trace.Call, 8)
	for i := range got {
		wg.Go(func() { got[i] = tr.Calls() })
	}
	wg.Wait()
	for i := range got {
		if len(got[i]) != 1 || &got[i][0] != &got[0][0] {
			t.Fatalf("reader %d got its own list %v", i, got[i])
		}
	}

	c := tr.Clone()
	if &c.Calls()[0] == &tr.Calls()[0] {
		t.Errorf("a clone shares the calls of its original")
	}
	b2 := trace.NewBuilder("cache")
	b2.RunStart(nil)
	b2.Tool("t", 1, "one")
	b2.Tool("u", 2, "two")
	tr.Events = b2.MustTrace().Events
	if n := len(tr.Calls()); n != 2 {
		t.Errorf("after replacing the events, %d calls, want 2", n)
	}
	tr.Events = tr.Events[:2]
	if n := len(tr.Calls()); n != 1 {
		t.Errorf("after cutting the events, %d calls, want 1", n)
	}
}

package assert_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/trace"
)

// rerecord returns a copy of tr as a second recording of the same run would
// look: other run id, event ids, timestamps and durations, saved and loaded
// again from another path.
func rerecord(t testing.TB, tr *trace.Trace) *trace.Trace {
	t.Helper()
	c := tr.Clone()
	c.RunID = "run_rerecorded"
	c.CreatedAt = c.CreatedAt.Add(36 * time.Hour)
	ids := map[string]string{}
	for i := range c.Events {
		ids[c.Events[i].ID] = fmt.Sprintf("evt_other_%04d", i)
	}
	for i := range c.Events {
		ev := &c.Events[i]
		ev.ID = ids[ev.ID]
		if ev.ParentID != "" {
			ev.ParentID = ids[ev.ParentID]
		}
		ev.RunID = c.RunID
		ev.Timestamp = ev.Timestamp.Add(36*time.Hour + time.Duration(i)*time.Millisecond)
		d := int64(10 + i)
		ev.DurationMS = &d
	}
	for i := range c.Redactions {
		if id, ok := ids[c.Redactions[i].EventID]; ok {
			c.Redactions[i].EventID = id
		}
	}
	total := int64(999)
	c.Totals.DurationMS = &total
	path := filepath.Join(t.TempDir(), "rerecorded.sftrace")
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := trace.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// TestTraceOptionsOnVectors compares real Python-written traces with their
// re-recordings: equal under TraceOptions, and each preset is needed.
func TestTraceOptionsOnVectors(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"stepfork/successful_run.sftrace",
		"stepfork/failed_tool_run.sftrace",
		"stepfork/failed_llm_run.sftrace",
		"stepfork-recorded/run_1000_calls.sftrace",
	} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			t.Parallel()
			want := loadVector(t, name)
			got := rerecord(t, want)
			if d := cmp.Diff(want, got, assert.TraceOptions()); d != "" {
				t.Fatalf("re-recording differs under TraceOptions (-want +got):\n%s", d)
			}
			assert.TraceEqual(t, want, got)
			if len(want.Events) > 100 {
				return // the leave-one-out diffs below are slow on large runs
			}
			assert.TraceEqual(t, want, got, assert.TraceOptions(), assert.IgnoreIDs(), assert.CanonicalPayloads())

			all := []struct {
				name string
				opt  cmp.Option
				path string // a field the diff must mention when opt is left out
			}{
				{"IgnoreIDs", assert.IgnoreIDs(), "ID:"},
				{"IgnoreRunIDs", assert.IgnoreRunIDs(), "RunID:"},
				{"IgnoreTimestamps", assert.IgnoreTimestamps(), "Timestamp:"},
				{"IgnoreDurations", assert.IgnoreDurations(), "DurationMS:"},
			}
			for i, leave := range all {
				var opts []cmp.Option
				for j, o := range all {
					if j != i {
						opts = append(opts, o.opt)
					}
				}
				opts = append(opts, assert.CanonicalPayloads(), cmp.FilterPath(func(p cmp.Path) bool {
					return p.Last().String() == ".Path"
				}, cmp.Ignore()))
				d := cmp.Diff(want, got, opts...)
				if !strings.Contains(d, leave.path) {
					t.Errorf("without %s the diff does not mention %s:\n%s", leave.name, leave.path, d)
				}
			}
		})
	}
}

// TestTraceEqualFails changes one output and checks the failure.
func TestTraceEqualFails(t *testing.T) {
	t.Parallel()
	want := loadVector(t, "stepfork/successful_run.sftrace")
	got := rerecord(t, want)
	got.Events[4].Output = trace.MustParse(`{"condition":"rain","temperature_c":22}`)
	r := &recorder{}
	if assert.TraceEqual(r, want, got, "after %s", "rerecording") {
		t.Fatal("TraceEqual passed on runs with different tool outputs")
	}
	msg := strings.ReplaceAll(r.errors[0], "\u00a0", " ")
	for _, part := range []string{
		"runs differ (-want +got):\n",
		`"condition": "clear",`,
		`"condition": "rain",`,
		"Output: trace.Value(Inverse(CanonicalPayloads",
		"\nMessages:   after rerecording",
	} {
		if !strings.Contains(msg, part) {
			t.Errorf("failure does not contain %q:\n%s", part, msg)
		}
	}
	if err := assert.CheckTraceEqual(want, got); !errors.Is(err, assert.ErrMismatch) {
		t.Errorf("CheckTraceEqual error %v does not wrap ErrMismatch", err)
	}
	if err := assert.CheckTraceEqual(nil, got); !errors.Is(err, assert.ErrInvalid) {
		t.Errorf("CheckTraceEqual(nil, …) = %v; want ErrInvalid", err)
	}
}

// TestIgnoreIDsKeepsShape moves a call under another parent: the ids are
// ignored, the move is not.
func TestIgnoreIDsKeepsShape(t *testing.T) {
	t.Parallel()
	want := refundRun(t)
	got := want.Clone()
	for i := range got.Events {
		got.Events[i].ID = "other_" + got.Events[i].ID
		if got.Events[i].ParentID != "" {
			got.Events[i].ParentID = "other_" + got.Events[i].ParentID
		}
	}
	if d := cmp.Diff(want, got, assert.TraceOptions()); d != "" {
		t.Fatalf("renamed ids differ (-want +got):\n%s", d)
	}
	got.Events[3].ParentID = got.Events[2].ID // lookup_order call under the model response
	d := cmp.Diff(want, got, assert.TraceOptions())
	if !strings.Contains(d, `ParentID: "#0"`) || !strings.Contains(d, `ParentID: "#2"`) {
		t.Errorf("moving a call under another parent does not show as a positional parent change:\n%s", d)
	}
}

// TestIgnoreIDsMinted: the ids providers minted are keyed by event id in
// their file; under IgnoreIDs two runs whose calls minted the same ids
// compare equal whatever their event ids, and a different id still shows,
// with SortConcurrentCalls too.
func TestIgnoreIDsMinted(t *testing.T) {
	t.Parallel()
	minted := func(tr *trace.Trace, id string) {
		var req string
		for _, ev := range tr.Events {
			if ev.Type == trace.LLMRequest {
				req = ev.ID
			}
		}
		tr.Extras = map[string][]byte{trace.MintedFile: []byte(`{"` + req + `":[{"kind":"call","id":"` + id + `"}]}`)}
	}
	want := refundRun(t)
	minted(want, "call_AAAA1111")
	got := want.Clone()
	for i := range got.Events {
		got.Events[i].ID = "other_" + got.Events[i].ID
		if got.Events[i].ParentID != "" {
			got.Events[i].ParentID = "other_" + got.Events[i].ParentID
		}
	}
	minted(got, "call_AAAA1111")
	for _, opts := range []cmp.Options{{assert.TraceOptions()}, {assert.TraceOptions(), assert.SortConcurrentCalls()}} {
		if d := cmp.Diff(want, got, opts); d != "" {
			t.Fatalf("renamed ids differ (-want +got):\n%s", d)
		}
	}
	minted(got, "call_BBBB2222")
	if d := cmp.Diff(want, got, assert.TraceOptions()); !strings.Contains(d, "BBBB2222") {
		t.Errorf("another minted id does not show:\n%s", d)
	}
}

// TestCanonicalPayloads compares payloads canonically, keeps 1 and 1.0 apart,
// and never prints a secret.
func TestCanonicalPayloads(t *testing.T) {
	t.Parallel()
	type payload struct{ V trace.Value }
	tests := []struct {
		a, b  string
		equal bool
	}{
		{`{"a":1,"b":[true,null]}`, `{"b":[true,null],"a":1}`, true},
		{`1`, `1.0`, false},
		{`{"api_key":"sk-live-1"}`, `{"api_key":"[REDACTED]"}`, true},
		{`null`, ``, false},
	}
	for _, tc := range tests {
		var a, b payload
		if tc.a != "" {
			a.V = trace.MustParse(tc.a)
		}
		if tc.b != "" {
			b.V = trace.MustParse(tc.b)
		}
		d := cmp.Diff(a, b, assert.CanonicalPayloads())
		if (d == "") != tc.equal {
			t.Errorf("Diff(%s, %s) = %q; want equal=%v", tc.a, tc.b, d, tc.equal)
		}
	}
	a := payload{trace.MustParse(`{"api_key":"sk-live-123456","n":1}`)}
	b := payload{trace.MustParse(`{"api_key":"sk-live-123456","n":2}`)}
	d := cmp.Diff(a, b, assert.CanonicalPayloads())
	if d == "" || strings.Contains(d, "sk-live") || !strings.Contains(d, "[REDACTED]") {
		t.Errorf("diff of payloads with a secret:\n%s", d)
	}
}

// concurrentRun records a search fan-out: three calls started together under
// one model response, their results written in the order given, then a
// sequential summarize call.
func concurrentRun(t testing.TB, ids func(int) string, order []string) *trace.Trace {
	t.Helper()
	b := trace.NewBuilder("fanout").IDs(ids)
	b.RunStart("go")
	req := b.LLMRequest("openai", "gpt-4o", "plan")
	resp := b.LLMResponse(req, "fan out")
	b.Push(resp)
	calls := map[string]string{}
	for _, city := range order {
		calls[city] = b.ToolCall("search", map[string]any{"city": city})
	}
	for i := len(order) - 1; i >= 0; i-- {
		b.ToolResult(calls[order[i]], map[string]any{"found": order[i]})
	}
	b.Pop()
	b.Tool("summarize", "all", "done")
	b.RunEnd(trace.RunCompleted, "ok")
	return b.MustTrace()
}

func TestSortConcurrentCalls(t *testing.T) {
	t.Parallel()
	want := concurrentRun(t, func(n int) string { return fmt.Sprintf("a%d", n) }, []string{"KTM", "DEL", "BOM"})
	got := concurrentRun(t, func(n int) string { return fmt.Sprintf("b%d", n) }, []string{"BOM", "KTM", "DEL"})
	if d := cmp.Diff(want, got, assert.TraceOptions()); d == "" {
		t.Fatal("without SortConcurrentCalls the reordered fan-out compares equal")
	}
	if d := cmp.Diff(want, got, assert.TraceOptions(), assert.SortConcurrentCalls()); d != "" {
		t.Fatalf("concurrent calls in another order differ (-want +got):\n%s", d)
	}
	assert.TraceEqual(t, want, got, assert.SortConcurrentCalls())

	// Sequential calls keep their order: swapping two sequential tools shows.
	seq := func(first, second string) *trace.Trace {
		b := trace.NewBuilder("seq")
		b.RunStart(nil)
		b.Tool(first, 1, 1)
		b.Tool(second, 1, 1)
		b.RunEnd(trace.RunCompleted, nil)
		return b.MustTrace()
	}
	if err := assert.CheckTraceEqual(seq("a", "b"), seq("b", "a"), assert.SortConcurrentCalls()); err == nil {
		t.Error("SortConcurrentCalls hid a reordering of sequential calls")
	}

	// The input is not modified, and steps are renumbered.
	before := got.Clone()
	opt := assert.SortConcurrentCalls()
	_ = cmp.Equal(want, got, assert.TraceOptions(), opt)
	if d := cmp.Diff(before, got, assert.CanonicalPayloads()); d != "" {
		t.Errorf("SortConcurrentCalls modified its input:\n%s", d)
	}
}

func TestSortConcurrentCallsOnVector(t *testing.T) {
	t.Parallel()
	// A recorded run without concurrency is unchanged by sorting.
	tr := loadVector(t, "stepfork-recorded/run_1000_calls.sftrace")
	again := loadVector(t, "stepfork-recorded/run_1000_calls.sftrace")
	if d := cmp.Diff(tr, again, assert.SortConcurrentCalls(), assert.CanonicalPayloads()); d != "" {
		t.Fatalf("sorting changed a sequential run:\n%.2000s", d)
	}
	if cmp.Equal(tr, loadVector(t, "stepfork-recorded/run_1000_calls.changed.sftrace"), assert.TraceOptions(), assert.SortConcurrentCalls()) {
		t.Fatal("the run with 5 changed tool outputs compares equal")
	}
	base, changed := loadVector(t, "stepfork/diff_baseline.sftrace"), loadVector(t, "stepfork/diff_changed.sftrace")
	if err := assert.CheckTraceEqual(base, changed, assert.SortConcurrentCalls()); !errors.Is(err, assert.ErrMismatch) {
		t.Fatalf("CheckTraceEqual of diff_baseline and diff_changed = %v; want a mismatch", err)
	}
}

// TestCheckTraceEqualCheapPath: CheckTraceEqual decides equal runs without
// cmp, and its answer is cmp's on every change to one field, those
// TraceOptions ignores and those it does not: the cheap path never calls
// two runs equal that cmp tells apart.
func TestCheckTraceEqualCheapPath(t *testing.T) {
	t.Parallel()
	secret := "sk-live-" + strings.Repeat("a1B2", 8)
	mutations := []struct {
		name   string
		change func(tr *trace.Trace)
	}{
		{"nothing", func(*trace.Trace) {}},
		{"path", func(tr *trace.Trace) { tr.Path = "elsewhere" }},
		{"run id", func(tr *trace.Trace) { tr.RunID = "run_x" }},
		{"agent", func(tr *trace.Trace) { tr.AgentName += "2" }},
		{"created", func(tr *trace.Trace) { tr.CreatedAt = tr.CreatedAt.Add(time.Hour) }},
		{"status", func(tr *trace.Trace) { tr.Status = trace.RunFailed }},
		{"total events", func(tr *trace.Trace) { tr.Totals.Events++ }},
		{"total duration", func(tr *trace.Trace) { d := int64(7); tr.Totals.DurationMS = &d }},
		{"event id", func(tr *trace.Trace) { tr.Events[1].ID = "evt_renamed" }},
		{"parent id", func(tr *trace.Trace) { tr.Events[2].ParentID = tr.Events[0].ID }},
		{"dangling parent", func(tr *trace.Trace) { tr.Events[2].ParentID = "evt_nowhere" }},
		{"event run id", func(tr *trace.Trace) { tr.Events[1].RunID = "run_y" }},
		{"step", func(tr *trace.Trace) { tr.Events[1].Step++ }},
		{"type", func(tr *trace.Trace) { tr.Events[1].Type = trace.StateChange }},
		{"timestamp", func(tr *trace.Trace) { tr.Events[1].Timestamp = tr.Events[1].Timestamp.Add(time.Second) }},
		{"duration", func(tr *trace.Trace) { d := int64(3); tr.Events[1].DurationMS = &d }},
		{"input", func(tr *trace.Trace) { tr.Events[1].Input = trace.MustParse(`{"other":1}`) }},
		{"int or float", func(tr *trace.Trace) { tr.Events[1].Output = trace.MustParse(`1.0`) }},
		{"secret", func(tr *trace.Trace) { tr.Events[1].Output = trace.StringValue(secret) }},
		{"redacted", func(tr *trace.Trace) { tr.Events[1].Output = trace.StringValue("[REDACTED]") }},
		{"empty redactions", func(tr *trace.Trace) { tr.Events[1].Redactions = []string{} }},
		{"a redaction", func(tr *trace.Trace) { tr.Events[1].Redactions = []string{"$.input.key"} }},
		{"no redaction entries", func(tr *trace.Trace) { tr.Redactions = []trace.RedactionEntry{} }},
		{"a redaction entry", func(tr *trace.Trace) {
			tr.Redactions = append(tr.Redactions, trace.RedactionEntry{EventID: tr.Events[1].ID, Path: "$.x"})
		}},
		{"no extras", func(tr *trace.Trace) { tr.Extras = map[string][]byte{} }},
		{"an extra", func(tr *trace.Trace) { tr.Extras = map[string][]byte{"fork.json": []byte("{}")} }},
		{"minted", func(tr *trace.Trace) {
			tr.Extras = map[string][]byte{trace.MintedFile: []byte(`{"` + tr.Events[1].ID + `":[{"kind":"call","id":"call_A1"}]}`)}
		}},
		{"events dropped", func(tr *trace.Trace) { tr.Events = tr.Events[:len(tr.Events)-1] }},
		{"events swapped", func(tr *trace.Trace) { tr.Events[1], tr.Events[2] = tr.Events[2], tr.Events[1] }},
	}
	for _, base := range []*trace.Trace{refundRun(t), loadVector(t, "stepfork/failed_tool_run.sftrace")} {
		// Two recordings of one run: saved, loaded, with other ids, times
		// and durations.
		first := rerecord(t, base)
		second := rerecord(t, first)
		if !assert.EqualCheaply(first, second) || !assert.EqualCheaply(first, second, assert.SortConcurrentCalls()) {
			t.Fatal("a re-recording is not found equal without cmp")
		}
		for _, a := range mutations {
			for _, b := range mutations {
				if a.name != b.name && a.name != "nothing" && b.name != "nothing" {
					continue // one side changed, or both alike
				}
				x, y := first.Clone(), second.Clone()
				a.change(x)
				b.change(y)
				for _, c := range []struct{ opts, cmpOpts []cmp.Option }{
					{nil, []cmp.Option{assert.TraceOptions()}},
					{[]cmp.Option{assert.SortConcurrentCalls()}, []cmp.Option{assert.TraceOptions(), assert.SortConcurrentCalls()}},
					{[]cmp.Option{assert.IgnoreIDs(), assert.TraceOptions()}, []cmp.Option{assert.TraceOptions()}}, // repeats are dropped
				} {
					opts := c.opts
					cmpEqual := cmp.Equal(x, y, c.cmpOpts...)
					err := assert.CheckTraceEqual(x, y, opts...)
					if (err == nil) != cmpEqual {
						t.Errorf("%s against %s, %d options: CheckTraceEqual %v, cmp.Equal %v", a.name, b.name, len(opts), err, cmpEqual)
					}
					if assert.EqualCheaply(x, y, opts...) && !cmpEqual {
						t.Errorf("%s against %s: equal without cmp, not with it", a.name, b.name)
					}
				}
			}
		}
	}
}

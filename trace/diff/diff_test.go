package diff

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/trace"
)

// vectorDir holds the bundles Python stepfork wrote.
const vectorDir = "../../testdata/vectors"

// diffVectors are the stepfork golden bundles of the worked diff example.
var (
	diffBaseline = filepath.Join(vectorDir, "stepfork", "diff_baseline.sftrace")
	diffChanged  = filepath.Join(vectorDir, "stepfork", "diff_changed.sftrace")
	recorded     = filepath.Join(vectorDir, "stepfork-recorded", "run_1000_calls.sftrace")
	recordedEdit = filepath.Join(vectorDir, "stepfork-recorded", "run_1000_calls.changed.sftrace")
)

func mustLoad(t testing.TB, path string) *trace.Trace {
	t.Helper()
	tr, err := trace.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestDiffStepforkWorkedExample is the worked example of
// stepfork-format.md §6.4: `stepfork diff --json` on the two golden bundles.
func TestDiffStepforkWorkedExample(t *testing.T) {
	t.Parallel()
	base, variant := mustLoad(t, diffBaseline), mustLoad(t, diffChanged)
	d := Runs(base, variant, AlignPosition(),
		DisplayPaths("tests/golden/diff_baseline.sftrace", "tests/golden/diff_changed.sftrace"))
	want := `{"equivalent":false,` +
		`"baseline":{"path":"tests/golden/diff_baseline.sftrace","agent_name":"golden-diff-agent","run_id":"run_diff_baseline","status":"running","events":4},` +
		`"candidate":{"path":"tests/golden/diff_changed.sftrace","agent_name":"golden-diff-agent","run_id":"run_diff_changed","status":"running","events":4},` +
		`"steps":[` +
		`{"index":0,"kind":"changed","step_type":"tool","label":"flight_search","fields":["input","output","status"],` +
		`"changes":[{"path":"output.price","kind":"changed","expected":320,"actual":450},` +
		`{"path":"output.selected_flight","kind":"changed","expected":"B","actual":"A"}]},` +
		`{"index":1,"kind":"changed","step_type":"run","label":"run","fields":["output","run_status"],` +
		`"changes":[{"path":"output.selected_flight","kind":"changed","expected":"B","actual":"A"}]}],` +
		`"added":0,"removed":0,"changed":2,"unchanged":0}`
	if got := string(d.JSON()); got != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
	if got, err := d.MarshalJSON(); err != nil || string(got) != want {
		t.Errorf("MarshalJSON = %s, %v", got, err)
	}
	wantText := `Stepfork Behavioral Diff

Baseline:  tests/golden/diff_baseline.sftrace
Candidate: tests/golden/diff_changed.sftrace

tool: flight_search
  output:
    expected: 320
    actual:   450
    at:       output.price
    expected: "B"
    actual:   "A"
    at:       output.selected_flight
  input: unchanged
  status: unchanged
run: run
  output:
    expected: "B"
    actual:   "A"
    at:       output.selected_flight
  run_status: unchanged
Steps: 2 total (2 changed, 0 added, 0 removed, 0 unchanged)

Result: BEHAVIOR CHANGED
`
	if got := d.StepforkText(); got != wantText {
		t.Errorf("StepforkText:\n%s\nwant:\n%s", got, wantText)
	}
}

func TestDiffSummaryPaths(t *testing.T) {
	t.Parallel()
	base, variant := mustLoad(t, diffBaseline), mustLoad(t, diffChanged)
	tests := []struct {
		name             string
		base, variant    *trace.Trace
		opts             []Option
		wantBase, wantV  string
		wantJSONBasePath string
	}{
		{"loaded traces report their path", base, variant, nil, diffBaseline, diffChanged, `"path":"` + diffBaseline + `"`},
		{"in-memory traces report null", &trace.Trace{Manifest: base.Manifest, Events: base.Events}, variant, nil, "", diffChanged, `"path":null`},
		{"display paths are normalized like pathlib", base, variant,
			[]Option{DisplayPaths("./tests//golden/diff_baseline.sftrace/", "/abs/./x.sftrace")},
			"tests/golden/diff_baseline.sftrace", "/abs/x.sftrace", `"path":"tests/golden/diff_baseline.sftrace"`},
		{"empty display path is in-memory", base, variant, []Option{DisplayPaths("", "b.sftrace")}, "", "b.sftrace", `"path":null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := Runs(tc.base, tc.variant, append(tc.opts, AlignPosition())...)
			if d.Base.Path != tc.wantBase || d.Variant.Path != tc.wantV {
				t.Errorf("paths = %q, %q; want %q, %q", d.Base.Path, d.Variant.Path, tc.wantBase, tc.wantV)
			}
			if js := string(d.JSON()); !strings.HasPrefix(js, `{"equivalent":false,"baseline":{`+tc.wantJSONBasePath+`,`) {
				t.Errorf("JSON starts %.120s", js)
			}
			text := d.StepforkText()
			wantLine := "Baseline:  " + tc.wantBase + "\n"
			if tc.wantBase == "" {
				wantLine = "Baseline:  (in-memory trace)\n"
			}
			if !strings.Contains(text, wantLine) {
				t.Errorf("StepforkText lacks %q:\n%s", wantLine, text)
			}
		})
	}
}

func TestPythonPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":            "",
		".":           ".",
		"./":          ".",
		"a/b/":        "a/b",
		"./a//b/./c":  "a/b/c",
		"a/../b":      "a/../b",
		"/x/y":        "/x/y",
		"//x":         "//x",
		"///x":        "/x",
		"x.sftrace//": "x.sftrace",
	} {
		if got := pythonPath(in); got != want {
			t.Errorf("pythonPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDiffRecorded1000 diffs the recorder-made 1,000-call run against its
// copy with 5 changed tool outputs: both alignments find exactly those.
func TestDiffRecorded1000(t *testing.T) {
	t.Parallel()
	base, variant := mustLoad(t, recorded), mustLoad(t, recordedEdit)
	wantIdx := []int{1, 201, 401, 601, 801}
	for _, opts := range [][]Option{nil, {AlignPosition()}} {
		d := Runs(base, variant, opts...)
		if d.Changed != 5 || d.Added != 0 || d.Removed != 0 || d.Unchanged != 996 {
			t.Fatalf("positional=%v: counts changed=%d added=%d removed=%d unchanged=%d, want 5/0/0/996",
				d.Positional, d.Changed, d.Added, d.Removed, d.Unchanged)
		}
		var got []int
		for _, s := range d.Steps {
			if s.Kind == Changed {
				got = append(got, s.Index)
				if s.Type != trace.StepTool {
					t.Errorf("changed step %d is %s, want tool", s.Index, s.Type)
				}
				for _, c := range s.Changes {
					if !strings.HasPrefix(c.Path, "output") {
						t.Errorf("step %d: change at %s, want only outputs", s.Index, c.Path)
					}
				}
			}
		}
		if !slices.Equal(got, wantIdx) {
			t.Errorf("positional=%v: changed steps %v, want %v", d.Positional, got, wantIdx)
		}
		if d.Divergence == nil || d.Divergence.Index != 1 || d.Divergence.Base.EventID != base.Events[3].ID {
			t.Errorf("positional=%v: divergence %+v, want step 1 at %s", d.Positional, d.Divergence, base.Events[3].ID)
		}
		if self := Runs(base, base, opts...); !self.Equivalent() || self.Unchanged != 1001 {
			t.Errorf("positional=%v: self diff not equivalent: %s", d.Positional, self.Explain())
		}
	}
}

// runBuilder starts a trace whose run id, event ids and timestamps depend on
// tag, so that two runs of the same behavior differ in all of them.
func runBuilder(tag string) *trace.Builder {
	b := trace.NewBuilder("agent").RunID("run_" + tag).
		IDs(func(n int) string { return fmt.Sprintf("evt_%s_%03d", tag, n) }).
		Start(time.Date(2026, 1, 1+len(tag), 0, 0, 0, 0, time.UTC))
	b.RunStart(map[string]any{"tag": tag}) // run_start input is not behavior
	return b
}

type script func(b *trace.Builder)

func tools(names ...string) script {
	return func(b *trace.Builder) {
		for _, n := range names {
			b.Tool(n, map[string]any{"q": n}, map[string]any{"r": n})
		}
		b.RunEnd(trace.RunCompleted, nil)
	}
}

func marker(m trace.Marker) script { return func(b *trace.Builder) { b.Add(trace.MarkerEvent(m)) } }

func seq(ss ...script) script {
	return func(b *trace.Builder) {
		for _, s := range ss {
			s(b)
		}
	}
}

func build(t testing.TB, tag string, s script) *trace.Trace {
	t.Helper()
	b := runBuilder(tag)
	s(b)
	tr, err := b.Trace()
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// counts is changed/added/removed/unchanged.
type counts [4]int

func countsOf(d *Result) counts { return counts{d.Changed, d.Added, d.Removed, d.Unchanged} }

func changePaths(s *Step) []string {
	var ps []string
	for _, c := range s.Changes {
		ps = append(ps, c.Path)
	}
	return ps
}

func TestDiffCases(t *testing.T) {
	t.Parallel()
	mixed := func(out any) script {
		return func(b *trace.Builder) {
			b.Tool("search", map[string]any{"value": "x"}, out)
			b.LLM("openai", "gpt-4o", map[string]any{"prompt": "hi"}, map[string]any{"text": "ok"})
			b.State("draft", nil, "v1")
			b.RunEnd(trace.RunCompleted, map[string]any{"ok": true})
		}
	}
	input := func(in any) script {
		return func(b *trace.Builder) {
			b.Tool("search", in, map[string]any{"value": 1})
			b.RunEnd(trace.RunCompleted, nil)
		}
	}
	output := func(out trace.Value) script {
		return func(b *trace.Builder) {
			b.Tool("search", map[string]any{"q": 1}, out)
			b.RunEnd(trace.RunCompleted, nil)
		}
	}
	failing := func(b *trace.Builder) {
		call := b.ToolCall("search", map[string]any{"q": 1})
		b.ToolFailure(call, "Timeout", "timed out")
		b.Fail("Timeout", "timed out")
	}
	decision := func(v string) script {
		return seq(
			marker(trace.Marker{Key: trace.MarkerNode, Name: "triage", Phase: trace.PhaseEnter}),
			marker(trace.Marker{Key: trace.MarkerDecision, Name: "route", Kind: trace.KindDecision, Value: trace.StringValue(v)}),
			marker(trace.Marker{Key: trace.MarkerNode, Name: "triage", Phase: trace.PhaseExit, Status: trace.NodeStatusOK}),
			tools("reply"),
		)
	}
	node := func(status, msg string) script {
		return func(b *trace.Builder) {
			b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "write", Phase: trace.PhaseEnter}))
			b.Tool("draft", "in", "out")
			b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "write", Phase: trace.PhaseExit, Status: status, Error: msg}))
			b.RunEnd(trace.RunCompleted, nil)
		}
	}
	tests := []struct {
		name               string
		base, variant      script
		lcs, pos           counts
		lcsDiv, posDiv     int      // divergence index (-1: none)
		lcsPaths, posPaths []string // change paths of the first differing step
	}{
		{name: "identical runs with other ids and timestamps", base: mixed(map[string]any{"value": 1}), variant: mixed(map[string]any{"value": 1}),
			lcs: counts{0, 0, 0, 4}, pos: counts{0, 0, 0, 4}, lcsDiv: -1, posDiv: -1},
		{name: "changed output", base: mixed(map[string]any{"value": 1}), variant: mixed(map[string]any{"value": 2}),
			lcs: counts{1, 0, 0, 3}, pos: counts{1, 0, 0, 3},
			lcsPaths: []string{"output.value"}, posPaths: []string{"output.value"}},
		{name: "changed input", base: input(map[string]any{"value": "a"}), variant: input(map[string]any{"value": "b"}),
			lcs: counts{1, 0, 0, 1}, pos: counts{1, 0, 0, 1},
			lcsPaths: []string{"input.value"}, posPaths: []string{"input.value"}},
		{name: "1 and 1.0 differ", base: output(trace.MustParse(`{"v":1}`)), variant: output(trace.MustParse(`{"v":1.0}`)),
			lcs: counts{1, 0, 0, 1}, pos: counts{1, 0, 0, 1},
			lcsPaths: []string{"output.v"}, posPaths: []string{"output.v"}},
		{name: "key order does not matter", base: output(trace.MustParse(`{"a":1,"b":[1,{"y":2,"x":1}]}`)),
			variant: output(trace.MustParse(`{"b":[1,{"x":1,"y":2}],"a":1}`)),
			lcs:     counts{0, 0, 0, 2}, pos: counts{0, 0, 0, 2}, lcsDiv: -1, posDiv: -1},
		{name: "list grows", base: output(trace.MustParse(`{"items":[1,2]}`)), variant: output(trace.MustParse(`{"items":[1,2,3]}`)),
			lcs: counts{1, 0, 0, 1}, pos: counts{1, 0, 0, 1},
			lcsPaths: []string{"output.items[2]"}, posPaths: []string{"output.items[2]"}},
		{name: "call order", base: tools("A", "B"), variant: tools("B", "A"),
			lcs: counts{0, 1, 1, 2}, pos: counts{2, 0, 0, 1},
			posPaths: []string{"label", "input.q", "output.r"}},
		{name: "added call leaves later steps unchanged in LCS", base: tools("A", "B", "C"), variant: tools("A", "X", "B", "C"),
			lcs: counts{0, 1, 0, 4}, pos: counts{2, 1, 0, 2}, lcsDiv: 1, posDiv: 1,
			posPaths: []string{"label", "input.q", "output.r"}},
		{name: "removed call", base: tools("A", "X", "B"), variant: tools("A", "B"),
			lcs: counts{0, 0, 1, 3}, pos: counts{1, 0, 1, 2}, lcsDiv: 1, posDiv: 1,
			posPaths: []string{"label", "input.q", "output.r"}},
		{name: "error vs success", base: input(map[string]any{"q": 1}), variant: failing,
			lcs: counts{2, 2, 0, 0}, pos: counts{2, 2, 0, 0},
			lcsPaths: []string{"output.error_type", "output.message", "output.value", "status"},
			posPaths: []string{"output.error_type", "output.message", "output.value", "status"}},
		{name: "decision changed", base: decision("refund"), variant: decision("escalate"),
			lcs: counts{1, 0, 0, 3}, pos: counts{1, 0, 0, 4}, lcsDiv: 1, posDiv: 1,
			lcsPaths: []string{"value"}, posPaths: []string{"after.value"}},
		{name: "node failed", base: node(trace.NodeStatusOK, ""), variant: node(trace.NodeStatusFail, "boom"),
			lcs: counts{1, 0, 0, 2}, pos: counts{1, 0, 0, 3}, lcsDiv: 0, posDiv: 2,
			lcsPaths: []string{"error", "status"}, posPaths: []string{"after.error", "after.status"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, variant := build(t, "base", tc.base), build(t, "variant", tc.variant)
			for _, mode := range []struct {
				opts  []Option
				want  counts
				div   int
				paths []string
			}{{nil, tc.lcs, tc.lcsDiv, tc.lcsPaths}, {[]Option{AlignPosition()}, tc.pos, tc.posDiv, tc.posPaths}} {
				d := Runs(base, variant, mode.opts...)
				if got := countsOf(d); got != mode.want {
					t.Errorf("positional=%v: changed/added/removed/unchanged = %v, want %v\n%s", d.Positional, got, mode.want, d)
				}
				wantEq := mode.want[0]+mode.want[1]+mode.want[2] == 0
				if d.Equivalent() != wantEq || (d.Divergence == nil) != wantEq {
					t.Errorf("positional=%v: Equivalent() = %v, divergence %+v; want equivalent %v", d.Positional, d.Equivalent(), d.Divergence, wantEq)
				}
				if d.Divergence == nil {
					continue
				}
				if d.Divergence.Index != mode.div {
					t.Errorf("positional=%v: divergence at %d, want %d\n%s", d.Positional, d.Divergence.Index, mode.div, d)
				}
				if mode.paths != nil {
					if got := changePaths(&d.Steps[d.Divergence.Index]); !slices.Equal(got, mode.paths) {
						t.Errorf("positional=%v: change paths %q, want %q\n%s", d.Positional, got, mode.paths, d)
					}
				}
			}
		})
	}
}

func TestDiffErrorVersusSuccessRunStep(t *testing.T) {
	t.Parallel()
	base := build(t, "base", func(b *trace.Builder) {
		b.Tool("search", map[string]any{"q": 1}, map[string]any{"value": 1})
		b.RunEnd(trace.RunCompleted, nil)
	})
	variant := build(t, "variant", func(b *trace.Builder) {
		call := b.ToolCall("search", map[string]any{"q": 1})
		b.ToolFailure(call, "Timeout", "timed out")
		b.Fail("Timeout", "timed out")
	})
	for _, opts := range [][]Option{nil, {AlignPosition()}} {
		d := Runs(base, variant, opts...)
		last := d.Steps[len(d.Steps)-1]
		want := []Change{{"run_status", Changed, trace.StringValue("completed"), trace.StringValue("failed")}}
		if last.Type != trace.StepRun || !slices.Equal(last.Changes, want) {
			t.Errorf("positional=%v: last step %s %v, want run with %v", d.Positional, last.Type, last.Changes, want)
		}
		tool := d.Steps[0]
		st := tool.Changes[len(tool.Changes)-1]
		if st != (Change{"status", Changed, trace.StringValue("ok"), trace.StringValue("error")}) {
			t.Errorf("positional=%v: tool status change %v", d.Positional, st)
		}
		if d.Base.Terminal() != trace.RunCompleted || d.Variant.Terminal() != trace.RunFailed || d.Variant.Status != trace.RunFailed {
			t.Errorf("terminal statuses %s/%s", d.Base.Terminal(), d.Variant.Terminal())
		}
		for _, s := range d.Steps[1:3] {
			if s.Kind != Added || s.Type != trace.StepError || s.Label != "Timeout" || len(s.Fields) != 0 {
				t.Errorf("positional=%v: step %d = %s %s %s fields %v, want added error Timeout", d.Positional, s.Index, s.Kind, s.Type, s.Label, s.Fields)
			}
		}
	}
}

func TestDiffNativeStepsHideMarkers(t *testing.T) {
	t.Parallel()
	tr := build(t, "m", seq(
		marker(trace.Marker{Key: trace.MarkerNode, Name: "plan", Phase: trace.PhaseEnter}),
		marker(trace.Marker{Key: trace.MarkerParam, Name: "max_results", Value: trace.IntValue(5)}),
		marker(trace.Marker{Key: trace.MarkerNow, Value: trace.StringValue("2026-01-01T00:00:00Z")}),
		marker(trace.Marker{Key: trace.MarkerID, Value: trace.StringValue("abc")}),
		marker(trace.Marker{Key: trace.MarkerDecision, Name: "approve", Kind: trace.KindApproval, Value: trace.TrueValue}),
		func(b *trace.Builder) { b.State("draft", nil, "x") },
		marker(trace.Marker{Key: trace.MarkerNode, Name: "plan", Phase: trace.PhaseExit, Status: trace.NodeStatusOK}),
		marker(trace.Marker{Key: trace.MarkerNode, Name: "orphan", Phase: trace.PhaseExit, Status: trace.NodeStatusOK}),
		tools(),
	))
	var got []string
	for _, s := range behavior(tr, false) {
		got = append(got, string(s.Type)+":"+s.Label+" "+s.Payload.Canonical())
	}
	want := []string{
		`node:plan {"status":"ok"}`,
		`param:max_results {"value":5}`,
		`decision:approve {"kind":"approval","value":true}`,
		`state:draft {"after":"x","before":null}`,
		`node:orphan {"status":"ok"}`,
		`run:run {"output":null,"run_status":"completed"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("native steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var labels []string
	for _, s := range behavior(tr, true) {
		labels = append(labels, string(s.Type)+":"+s.Label)
	}
	wantPy := []string{"state:@node", "state:@param", "state:@now", "state:@id", "state:@decision", "state:draft", "state:@node", "state:@node", "run:run"}
	if !slices.Equal(labels, wantPy) {
		t.Errorf("stepfork steps %v, want %v", labels, wantPy)
	}
}

func TestDiffPairing(t *testing.T) {
	t.Parallel()
	ev := func(id, parent string, typ trace.EventType, f func(e *trace.Event)) trace.Event {
		e := trace.Event{ID: id, ParentID: parent, Type: typ, Status: trace.StatusOK, ReplayPolicy: trace.PolicyFrozen}
		f(&e)
		return e
	}
	b := trace.NewBuilder("legacy")
	b.RunStart(nil)
	for _, e := range []trace.Event{
		ev("c1", "", trace.ToolCall, func(e *trace.Event) { e.Name, e.Input = "t", trace.IntValue(1) }),
		ev("c2", "", trace.ToolCall, func(e *trace.Event) { e.Name, e.Input = "u", trace.IntValue(2) }),
		ev("r1", "", trace.ToolResult, func(e *trace.Event) { e.Name, e.Output = "t", trace.StringValue("one") }),
		ev("r2", "", trace.ToolResult, func(e *trace.Event) { e.Name, e.Output = "u", trace.StringValue("two") }),
		ev("c3", "", trace.ToolCall, func(e *trace.Event) { e.Name, e.Input = "t", trace.IntValue(3) }), // no result: skipped
		ev("c4", "", trace.ToolCall, func(e *trace.Event) { e.Name, e.Input = "t", trace.IntValue(4) }),
		ev("r4", "c4", trace.ToolResult, func(e *trace.Event) { e.Name, e.Output, e.Status = "t", trace.StringValue("four"), trace.StatusError }),
		ev("x4", "r4", trace.ErrorEvent, func(e *trace.Event) {
			e.ErrorType, e.Message, e.Status = "Boom", "api_key=sk-abcdefghijklmnopqrstuvwx", trace.StatusError
		}),
		ev("q1", "", trace.LLMRequest, func(e *trace.Event) { e.Provider, e.Model, e.Input = "p", "m", trace.StringValue("hi") }),
		ev("e1", "q1", trace.ErrorEvent, func(e *trace.Event) { e.ErrorType, e.Message, e.Status = "RateLimit", "slow down", trace.StatusError }),
		ev("q2", "", trace.LLMRequest, func(e *trace.Event) { e.Model, e.Input = "m", trace.StringValue("again") }),
	} {
		b.Add(e)
	}
	tr := b.MustTrace()
	var got []string
	for _, s := range behavior(tr, false) {
		got = append(got, fmt.Sprintf("%s:%s %s %s", s.Type, s.Label, s.ResultID, s.Payload.Canonical()))
	}
	want := []string{
		`tool:t r1 {"input":1,"output":"one","status":"ok"}`,
		`tool:u r2 {"input":2,"output":"two","status":"ok"}`,
		`tool:t  {"input":3,"output":null,"status":"skipped"}`,
		`tool:t r4 {"input":4,"output":"four","status":"error"}`,
		`error:Boom  {"message":"api_key=[REDACTED]"}`,
		`llm:p/m e1 {"input":"hi","output":null,"status":"error"}`,
		`error:RateLimit  {"message":"slow down"}`,
		`llm:m  {"input":"again","output":null,"status":"skipped"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDiffRedactsPayloads(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-0123456789abcdefghijkl"
	mk := func(tag, v string) *trace.Trace {
		return build(t, tag, func(b *trace.Builder) {
			b.Tool("login", map[string]any{"api_key": secret, "user": v}, map[string]any{"token": "Bearer " + secret})
			b.RunEnd(trace.RunCompleted, nil)
		})
	}
	base, variant := mk("a", "ann"), mk("b", "bob")
	// Builder does not redact (Save does): the diff must.
	for _, d := range []*Result{Runs(base, variant), Runs(base, variant, AlignPosition())} {
		for name, out := range map[string]string{"JSON": string(d.JSON()), "Explain": d.Explain(), "StepforkText": d.StepforkText()} {
			if strings.Contains(out, secret) {
				t.Errorf("positional=%v: %s leaks the secret:\n%s", d.Positional, name, out)
			}
		}
		if got := changePaths(&d.Steps[0]); !slices.Equal(got, []string{"input.user"}) {
			t.Errorf("positional=%v: changes %v, want only input.user", d.Positional, got)
		}
	}
}

func TestDiffStateTokensCost(t *testing.T) {
	t.Parallel()
	usage := func(tr *trace.Trace, tokens int64, cost float64) {
		for i := range tr.Events {
			if tr.Events[i].Type == trace.LLMResponse {
				tr.Events[i].TotalTokens, tr.Events[i].CostUSD = &tokens, &cost
			}
		}
	}
	base := build(t, "a", func(b *trace.Builder) {
		b.State("draft", nil, "abc")
		b.State("tmp", nil, 2)
		b.State("gone", nil, 1)
		b.Add(trace.Event{Type: trace.StateChange, Key: "gone", Before: trace.IntValue(1)}) // absent after: deleted
		b.LLM("", "m", "q", "a")
		b.RunEnd(trace.RunCompleted, nil)
	})
	variant := build(t, "b", func(b *trace.Builder) {
		b.State("draft", nil, "abcd")
		b.State("new", nil, map[string]any{"a": 1})
		b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerParam, Name: "k", Value: trace.IntValue(1)}))
		b.LLM("", "m", "q", "a")
		b.RunEnd(trace.RunCompleted, nil)
	})
	usage(base, 100, 0.25)
	pt, ct := int64(70), int64(50)
	for i := range variant.Events {
		if variant.Events[i].Type == trace.LLMResponse {
			variant.Events[i].PromptTokens, variant.Events[i].CompletionTokens = &pt, &ct
		}
	}
	d := Runs(base, variant)
	want := []StateDelta{
		{"draft", Changed, trace.StringValue("abc"), trace.StringValue("abcd"), 1},
		{"new", Added, trace.Value{}, trace.MustParse(`{"a":1}`), 7},
		{"tmp", Removed, trace.IntValue(2), trace.Value{}, -1},
	}
	if !slices.Equal(d.State, want) {
		t.Errorf("state deltas %v, want %v", d.State, want)
	}
	if d.Base.Tokens != 100 || d.Variant.Tokens != 120 || d.TokensDelta != 20 {
		t.Errorf("tokens %d → %d (%+d), want 100 → 120 (+20)", d.Base.Tokens, d.Variant.Tokens, d.TokensDelta)
	}
	if d.Base.CostUSD != 0.25 || d.CostDelta != -0.25 {
		t.Errorf("cost %v, delta %v", d.Base.CostUSD, d.CostDelta)
	}
	text := d.Explain()
	for _, s := range []string{"  state     ~draft (+1B)  +new (+7B)  -tmp (-1B)\n", "  tokens    +20 (100 → 120)\n", "  cost      -$0.25 ($0.25 → $0.00)\n"} {
		if !strings.Contains(text, s) {
			t.Errorf("Explain lacks %q:\n%s", s, text)
		}
	}
	js := string(d.JSON())
	for _, s := range []string{`"state":[{"key":"draft","change":"changed","bytes_delta":1,"before":"abc","after":"abcd"},{"key":"new","change":"added","bytes_delta":7,"before":null,"after":{"a":1}}`, `"tokens_delta":20,"cost_usd_delta":-0.25,`} {
		if !strings.Contains(js, s) {
			t.Errorf("JSON lacks %s:\n%s", s, js)
		}
	}
}

func TestDiffExplain(t *testing.T) {
	t.Parallel()
	base := build(t, "a", func(b *trace.Builder) {
		b.Tool("search", map[string]any{"to": "LIS"}, map[string]any{"price": 320})
		b.Tool("book", map[string]any{"id": 1}, map[string]any{"ok": true})
		b.State("draft", nil, "hi")
		b.RunEnd(trace.RunCompleted, nil)
	})
	variant := build(t, "b", func(b *trace.Builder) {
		b.Tool("search", map[string]any{"to": "LIS"}, map[string]any{"price": 450})
		b.Tool("book", map[string]any{"id": 1}, map[string]any{"ok": true})
		b.State("draft", nil, "hi!")
		b.Fail("Timeout", "late")
	})
	want := `behavior changed: 3 changed, 1 added, 0 removed, 1 unchanged (5 steps, LCS)
  status    failed          was completed
  diverged  steps 1–2: tool 'search' changed: output.price 320 → 450
  path      ~tool:search → tool:book → ~state:draft → +error:Timeout → ~run
            ^ diverged here
  ~ #0      tool search (base #0 evt_a_002 steps 1–2, variant #0 evt_b_002 steps 1–2)
              output.price
                expected: 320
                actual:   450
  ~ #2      state draft (base #2 evt_a_006 step 5, variant #2 evt_b_006 step 5)
              after
                expected: "hi"
                actual:   "hi!"
  + #3      error Timeout (variant #3 evt_b_007 step 6)
  ~ #4      run run (base #3 evt_a_007 step 6, variant #4 evt_b_008 step 7)
              run_status
                expected: "completed"
                actual:   "failed"
  state     ~draft (+1B)
`
	d := Runs(base, variant)
	if got := d.Explain(); got != want {
		t.Errorf("Explain:\n%s\nwant:\n%s", got, want)
	}
	if d.String() != d.Explain() {
		t.Error("trace.String differs from Explain")
	}
	if dv := d.Divergence; dv.Base.EventID != "evt_a_002" || dv.Variant.EventID != "evt_b_002" || dv.BaseIndex != 0 || dv.VariantIndex != 0 {
		t.Errorf("divergence %+v", dv)
	}

	// The caret sits under the diverging token; equivalent runs say so.
	d = Runs(base, build(t, "c", func(b *trace.Builder) {
		b.Tool("search", map[string]any{"to": "LIS"}, map[string]any{"price": 320})
		b.Tool("cancel", map[string]any{"id": 1}, map[string]any{"ok": true})
		b.Tool("book", map[string]any{"id": 1}, map[string]any{"ok": true})
		b.State("draft", nil, "hi")
		b.RunEnd(trace.RunCompleted, nil)
	}))
	lines := strings.Split(d.Explain(), "\n")
	if lines[3] != "  path      tool:search → +tool:cancel → tool:book → state:draft → run" ||
		lines[4] != strings.Repeat(" ", 12+utf8.RuneCountInString("tool:search → "))+"^ diverged here" {
		t.Errorf("path lines:\n%s\n%s", lines[3], lines[4])
	}
	if dv := d.Divergence; dv.Kind != Added || dv.Base != nil || dv.BaseIndex != 1 || dv.VariantIndex != 1 {
		t.Errorf("divergence %+v, want added at base index 1", dv)
	}
	eq := Runs(base, base).Explain()
	if eq != "behavior equivalent: 4 steps unchanged (LCS)\n  status    completed\n  path      tool:search → tool:book → state:draft → run\n" {
		t.Errorf("equivalent Explain:\n%s", eq)
	}
}

// A long value that changed is shown on both sides as the same window
// around its first difference: a sentence appended to a long prompt is seen.
func TestDiffExplainWindowsLongChanges(t *testing.T) {
	t.Parallel()
	prompt := strings.Repeat("Refunds need a receipt. ", 8)
	for _, tc := range []struct {
		name             string
		before, after    string
		expected, actual string
	}{
		{"appended", prompt, prompt + "Above the limit, ask for approval.",
			`… need a receipt. Refunds need a receipt. Refunds need a receipt. "`,
			`… need a receipt. Refunds need a receipt. Refunds need a receipt. Above the limit, ask for approval."`},
		{"changed in the middle", prompt + "Reply in English. " + prompt, prompt + "Reply in French. " + prompt,
			`…need a receipt. Reply in English. Refunds need a receipt. Refunds need a receipt. Refunds need a rec…`,
			`…need a receipt. Reply in French. Refunds need a receipt. Refunds need a receipt. Refunds need a rece…`},
		{"changed at the start", "Refunds" + prompt, "Returns" + prompt,
			`"Refunds` + prompt[:92] + `…`, `"Returns` + prompt[:92] + `…`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mk := func(tag, system string) *trace.Trace {
				return build(t, tag, func(b *trace.Builder) {
					b.LLM("fake", "m", map[string]any{"system": system}, map[string]any{"content": "ok"})
					b.RunEnd(trace.RunCompleted, nil)
				})
			}
			text := Runs(mk("a", tc.before), mk("b", tc.after)).Explain()
			want := "              input.system\n                expected: " + tc.expected + "\n                actual:   " + tc.actual + "\n"
			if !strings.Contains(text, want) {
				t.Errorf("Explain:\n%s\nwant it to contain:\n%s", text, want)
			}
		})
	}
}

func TestDiffExplainLongRunsStayShort(t *testing.T) {
	t.Parallel()
	mk := func(tag string, changed map[int]bool) *trace.Trace {
		return build(t, tag, func(b *trace.Builder) {
			for i := range 200 {
				out := map[string]any{"i": i}
				if changed[i] {
					out["changed"] = true
				}
				b.Tool("t", map[string]any{"i": i}, out)
			}
			b.RunEnd(trace.RunCompleted, nil)
		})
	}
	many := map[int]bool{}
	for i := 50; i < 70; i++ {
		many[i] = true
	}
	text := Runs(mk("a", nil), mk("b", many)).Explain()
	if n := strings.Count(text, "\n"); n > 60 {
		t.Errorf("Explain of 20 changed steps has %d lines:\n%s", n, text)
	}
	for _, s := range []string{"  path      … → tool:t → tool:t → tool:t → tool:t → ~tool:t", "  … and 10 more differing steps\n"} {
		if !strings.Contains(text, s) {
			t.Errorf("Explain lacks %q:\n%s", s, text)
		}
	}
}

func TestStepforkTextShapes(t *testing.T) {
	t.Parallel()
	base := build(t, "a", tools("A"))
	long := strings.Repeat("é", 200)
	variant := build(t, "b", func(b *trace.Builder) {
		b.Tool("A", map[string]any{"q": "A"}, map[string]any{"r": "A", "x": []any{1, map[string]any{"b": 1.5, "a": long}}})
		b.Tool("B", map[string]any{"q": "B"}, map[string]any{"r": "B"})
		b.Tool("C", map[string]any{"q": "C"}, map[string]any{"r": "C"})
	})
	got := Runs(base, variant, AlignPosition()).StepforkText()
	want := `Stepfork Behavioral Diff

Baseline:  (in-memory trace)
Candidate: (in-memory trace)

tool: A
  output:
    expected: (absent)
    actual:   [1, {"a": "` + strings.Repeat("é", 119-len(`[1, {"a": "`)) + `…
    at:       output.x
  input: unchanged
  status: unchanged
run: run
  type:
    expected: "run"
    actual:   "tool"
  label:
    expected: "run"
    actual:   "B"
  input:
    expected: (absent)
    actual:   {"q": "B"}
  output:
    expected: (absent)
    actual:   {"r": "B"}
  run_status:
    expected: "completed"
    actual:   (absent)
  status:
    expected: (absent)
    actual:   "ok"
+ tool: C (added)
Steps: 3 total (2 changed, 1 added, 0 removed, 0 unchanged)

Result: BEHAVIOR CHANGED
`
	if got != want {
		t.Errorf("StepforkText:\n%s\nwant:\n%s", got, want)
	}
	if rev := Runs(variant, base, AlignPosition()).StepforkText(); !strings.Contains(rev, "\n- tool: C (removed)\nSteps: 3 total (2 changed, 0 added, 1 removed, 0 unchanged)\n") {
		t.Errorf("reverse StepforkText:\n%s", rev)
	}
	eq := Runs(base, base, AlignPosition()).StepforkText()
	if !strings.HasSuffix(eq, "tool: A\n  unchanged\nrun: run\n  unchanged\nSteps: 2 total (all unchanged)\n\nResult: BEHAVIOR EQUIVALENT\n") {
		t.Errorf("equivalent text:\n%s", eq)
	}
	if got := pythonDumps(trace.MustParse(`{"a":[1,2.5,"x, y: z"],"b":{"c":null}}`)); got != `{"a": [1, 2.5, "x, y: z"], "b": {"c": null}}` {
		t.Errorf("pythonDumps = %s", got)
	}
}

func TestDiffNilAndEmpty(t *testing.T) {
	t.Parallel()
	d := Runs(nil, nil)
	if !d.Equivalent() || len(d.Steps) != 0 || d.Divergence != nil {
		t.Errorf("Runs(nil, nil) = %+v", d)
	}
	if !strings.Contains(d.Explain(), "(no steps)") {
		t.Errorf("Explain: %s", d.Explain())
	}
	d = Runs(nil, build(t, "x", tools("A")), AlignPosition())
	if d.Added != 2 || d.Divergence.Index != 0 || d.Divergence.Variant == nil {
		t.Errorf("Runs(nil, run) = %s", d)
	}
	if got := string(d.JSON()); !strings.HasPrefix(got, `{"equivalent":false,"baseline":{"path":null,"agent_name":"","run_id":"","status":"","events":0}`) {
		t.Errorf("JSON: %s", got)
	}
}

func TestFirstDifference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		exp, act string
		path     string
		e, a     string // "" = absent
		differ   bool
	}{
		{`{"a":{"b":[1,2]}}`, `{"a":{"b":[1,3]}}`, "a.b[1]", "2", "3", true},
		{`{"a":1}`, `{"a":1,"b":2}`, "b", "", "2", true},
		{`{"a":1,"b":2}`, `{"a":1}`, "b", "2", "", true},
		{`[1]`, `[1,2]`, "[1]", "", "2", true},
		{`[1,2]`, `[1]`, "[1]", "2", "", true},
		{`1`, `2`, "$", "1", "2", true},
		{`1`, `1.0`, "$", "1", "1.0", true},
		{`{"x":[1]}`, `{"x":{"0":1}}`, "x", `[1]`, `{"0":1}`, true},
		{`{"b":2,"a":1}`, `{"a":1,"b":2}`, "", "", "", false},
		{`null`, `null`, "", "", "", false},
	}
	for _, tc := range tests {
		p, e, a, ok := FirstDifference(trace.MustParse(tc.exp), trace.MustParse(tc.act))
		if p != tc.path || e.Canonical() != tc.e || a.Canonical() != tc.a || ok != tc.differ {
			t.Errorf("FirstDifference(%s, %s) = %q, %s, %s, %v; want %q, %q, %q, %v", tc.exp, tc.act, p, e, a, ok, tc.path, tc.e, tc.a, tc.differ)
		}
	}
}

func TestCollectFieldChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		exp, act string
		want     []string // path kind expected actual
	}{
		{`{"a":1}`, `{"a":1}`, nil},
		{`{"a":1,"b":2}`, `{"b":3,"c":4}`, []string{"x.a removed 1 <absent>", "x.b changed 2 3", "x.c added <absent> 4"}},
		{`[1,2,3]`, `[1,5]`, []string{"x[1] changed 2 5", "x[2] removed 3 <absent>"}},
		{`[1]`, `[1,{"k":true}]`, []string{`x[1] added <absent> {"k":true}`}},
		{`{"a":[1]}`, `"s"`, []string{`x changed {"a":[1]} "s"`}},
		{`[{"a":1}]`, `{"a":1}`, []string{`x changed [{"a":1}] {"a":1}`}},
		{`true`, `1`, []string{"x changed true 1"}},
	}
	for _, tc := range tests {
		var got []string
		for _, c := range collectFieldChanges(trace.MustParse(tc.exp), trace.MustParse(tc.act), "x", nil) {
			got = append(got, fmt.Sprintf("%s %s %s %s", c.Path, c.Kind, c.Expected, c.Actual))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("collect(%s, %s) = %q, want %q", tc.exp, tc.act, got, tc.want)
		}
	}
}

// ---- properties ----

// randomRun builds a random run and reports, for every successful tool call,
// its result id and its index among the behavior steps of each extraction.
type toolSite struct {
	resultID      string
	native, stepf int
}

func randomRun(t testing.TB, r *rand.Rand, tag string) (*trace.Trace, []toolSite) {
	t.Helper()
	b := runBuilder(tag)
	var sites []toolSite
	native, stepf := 0, 0
	value := func() any {
		switch r.IntN(6) {
		case 0:
			return r.IntN(5)
		case 1:
			return float64(r.IntN(5)) / 2
		case 2:
			return []any{r.IntN(3), "é", nil}
		case 3:
			return map[string]any{"k": r.IntN(3), "n": map[string]any{"z": true}}
		case 4:
			return nil
		}
		return fmt.Sprint("s", r.IntN(4))
	}
	names := []string{"search", "book", "lookup"}
	for range r.IntN(25) + 1 {
		switch r.IntN(8) {
		case 0, 1, 2:
			call := b.ToolCall(names[r.IntN(3)], value())
			res := b.ToolResult(call, value())
			sites = append(sites, toolSite{res, native, stepf})
			native++
			stepf++
		case 3:
			b.LLM("p", "m", value(), value())
			native++
			stepf++
		case 4:
			b.State(names[r.IntN(3)], value(), value())
			native++
			stepf++
		case 5:
			call := b.ToolCall("flaky", value())
			b.ToolFailure(call, "Boom", "failed")
			native += 2
			stepf += 2
		case 6:
			b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerDecision, Name: "route", Kind: trace.KindDecision, Value: trace.MustValueOf(value())}))
			native++
			stepf++
		case 7:
			b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "n", Phase: trace.PhaseEnter}))
			b.Tool("inner", value(), value())
			b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "n", Phase: trace.PhaseExit, Status: trace.NodeStatusOK}))
			native += 2
			stepf += 3
		}
	}
	b.RunEnd(trace.RunCompleted, value())
	tr, err := b.Trace()
	if err != nil {
		t.Fatal(err)
	}
	return tr, sites
}

// relabel returns a copy of tr as another run of the same behavior: new run
// id, event ids and timestamps.
func relabel(tr *trace.Trace) *trace.Trace {
	c := tr.Clone()
	c.RunID = "run_other"
	ids := map[string]string{}
	for i := range c.Events {
		ids[c.Events[i].ID] = fmt.Sprintf("evt_other_%d", i)
	}
	for i := range c.Events {
		e := &c.Events[i]
		e.ID, e.RunID = ids[e.ID], c.RunID
		if e.ParentID != "" {
			e.ParentID = ids[e.ParentID]
		}
		e.Timestamp = e.Timestamp.Add(time.Hour)
	}
	return c
}

func TestDiffProperties(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		tr, sites := randomRun(t, r, "p")
		for _, opts := range [][]Option{nil, {AlignPosition()}} {
			if d := Runs(tr, tr, opts...); !d.Equivalent() || d.Unchanged != len(d.Steps) || d.Divergence != nil {
				t.Fatalf("seed %d: Runs(t, t) not equivalent:\n%s", seed, d)
			}
			if d := Runs(tr, relabel(tr), opts...); !d.Equivalent() {
				t.Fatalf("seed %d: relabeled run not equivalent:\n%s", seed, d)
			}
		}
		if len(sites) == 0 {
			continue
		}
		site := sites[r.IntN(len(sites))]
		changed := tr.Clone()
		ev, _ := changed.Event(site.resultID)
		ev.Output = trace.MustValueOf(map[string]any{"changed": seed})
		ev.SetHashes()
		for _, mode := range []struct {
			opts []Option
			k    int
		}{{nil, site.native}, {[]Option{AlignPosition()}, site.stepf}} {
			d := Runs(tr, changed, mode.opts...)
			dv := d.Divergence
			if dv == nil || dv.Index != mode.k || dv.Kind != Changed || dv.BaseIndex != mode.k || dv.VariantIndex != mode.k ||
				dv.Base.ResultID != site.resultID || dv.Variant.ResultID != site.resultID {
				t.Fatalf("seed %d positional=%v: divergence %+v, want changed at %d (%s)\n%s", seed, d.Positional, dv, mode.k, site.resultID, d)
			}
			if d.Changed != 1 || d.Added+d.Removed != 0 {
				t.Fatalf("seed %d positional=%v: %v, want exactly one changed step\n%s", seed, d.Positional, countsOf(d), d)
			}
			for _, c := range d.Steps[mode.k].Changes {
				if !strings.HasPrefix(c.Path, "output") {
					t.Fatalf("seed %d: change at %s, want only output", seed, c.Path)
				}
			}
		}
	}
}

// checkAlignment verifies that pairs cover every index of both sides once,
// in order.
func checkAlignment(t *testing.T, pairs []stepPair, nb, nv int) {
	t.Helper()
	bi, vi := 0, 0
	for _, p := range pairs {
		if p.b >= 0 {
			if p.b != bi {
				t.Fatalf("base index %d out of order (want %d): %v", p.b, bi, pairs)
			}
			bi++
		}
		if p.v >= 0 {
			if p.v != vi {
				t.Fatalf("variant index %d out of order (want %d): %v", p.v, vi, pairs)
			}
			vi++
		}
		if p.b < 0 && p.v < 0 {
			t.Fatalf("empty pair in %v", pairs)
		}
	}
	if bi != nb || vi != nv {
		t.Fatalf("alignment covers %d/%d base and %d/%d variant steps", bi, nb, vi, nv)
	}
}

// TestAlignLCSExpensiveStaysValid reverses a long run of shared steps: D is far
// beyond the search bound, and the alignment must still be valid.
func TestAlignLCSExpensiveStaysValid(t *testing.T) {
	t.Parallel()
	bs, vs := make([]trace.BehaviorStep, 3000), make([]trace.BehaviorStep, 3000)
	for i := range bs {
		bs[i] = trace.BehaviorStep{Type: trace.StepTool, Label: "t", Payload: trace.IntValue(int64(i))}
		vs[len(vs)-1-i] = bs[i]
	}
	checkAlignment(t, alignLCS(bs, vs), len(bs), len(vs))
}

// lcsLength is the textbook table, for checking small cases only.
func lcsLength(a, b []int32) int {
	t := make([][]int, len(a)+1)
	for i := range t {
		t[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	return t[0][0]
}

func TestAlignLCSRandomIsValid(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	labels := []string{"a", "b", "c"}
	mk := func(n int) []trace.BehaviorStep {
		s := make([]trace.BehaviorStep, n)
		for i := range s {
			s[i] = trace.BehaviorStep{Index: i, Type: trace.StepTool, Label: labels[r.IntN(3)], Payload: trace.IntValue(int64(r.IntN(3)))}
		}
		return s
	}
	for range 500 {
		bs, vs := mk(r.IntN(20)), mk(r.IntN(20))
		pairs := alignLCS(bs, vs)
		checkAlignment(t, pairs, len(bs), len(vs))
		same := 0
		for _, p := range pairs {
			if p.same {
				same++
			}
		}
		ex := func(s []trace.BehaviorStep) []int32 {
			out := make([]int32, len(s))
			for i := range s {
				out[i] = int32(labelIndex(s[i].Label)*3) + int32(must(s[i].Payload.Int()))
			}
			return out
		}
		if want := lcsLength(ex(bs), ex(vs)); same != want {
			t.Fatalf("%d equal pairs, want LCS %d", same, want)
		}
	}
}

func labelIndex(l string) int { return int(l[0] - 'a') }

func must(i int64, ok bool) int64 {
	if !ok {
		panic("not an int")
	}
	return i
}

// sameDiff fails unless got is the same diff as want: the same JSON bytes,
// the same texts, and equal field by field.
func sameDiff(t *testing.T, name string, want, got *Result) {
	t.Helper()
	if w, g := string(want.JSON()), string(got.JSON()); w != g {
		t.Fatalf("%s: JSON differs:\nwant %s\ngot  %s", name, w, g)
	}
	if w, g := want.StepforkText(), got.StepforkText(); w != g {
		t.Fatalf("%s: StepforkText differs:\nwant %s\ngot  %s", name, w, g)
	}
	if w, g := want.Explain(), got.Explain(); w != g {
		t.Fatalf("%s: Explain differs:\nwant %s\ngot  %s", name, w, g)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("%s: Result differs (-want +got):\n%s", name, d)
	}
}

// diffModes are the option sets the prepared base is checked in: both
// alignments, with and without display paths.
var diffModes = []struct {
	name string
	opts []Option
}{
	{"lcs", nil},
	{"positional", []Option{AlignPosition()}},
	{"lcs/paths", []Option{DisplayPaths("./a//base.sftrace/", "variant.sftrace")}},
	{"positional/paths", []Option{AlignPosition(), DisplayPaths("base", "")}},
}

// TestDiffBaseMatchesDiff checks that a prepared base gives what Diff gives,
// for every variant compared with it in turn: the golden bundles against
// each other, the 1000-call recording against its changed copy, random runs
// against changed copies and against other random runs, and empty runs.
func TestDiffBaseMatchesDiff(t *testing.T) {
	t.Parallel()
	var golden []*trace.Trace
	paths, err := filepath.Glob(filepath.Join(vectorDir, "stepfork", "*.sftrace"))
	if err != nil || len(paths) < 7 {
		t.Fatalf("golden bundles: %v, %v", paths, err)
	}
	for _, p := range paths {
		golden = append(golden, mustLoad(t, p))
	}
	type group struct {
		name     string
		base     *trace.Trace
		variants []*trace.Trace
	}
	groups := []group{
		{"recorded", mustLoad(t, recorded), []*trace.Trace{mustLoad(t, recordedEdit), mustLoad(t, recorded), nil, golden[0]}},
		{"nil", nil, []*trace.Trace{nil, &trace.Trace{}, golden[0]}},
	}
	for i, g := range golden {
		groups = append(groups, group{filepath.Base(paths[i]), g, append(slices.Clone(golden), nil)})
	}
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 11))
		tr, sites := randomRun(t, r, "b")
		other, _ := randomRun(t, r, "o")
		vs := []*trace.Trace{tr, relabel(tr), other, &trace.Trace{}}
		if len(sites) > 0 {
			changed := tr.Clone()
			ev, _ := changed.Event(sites[r.IntN(len(sites))].resultID)
			ev.Output = trace.MustValueOf(map[string]any{"changed": seed})
			ev.SetHashes()
			vs = append(vs, changed)
		}
		groups = append(groups, group{fmt.Sprintf("random/%d", seed), tr, vs})
	}
	for _, g := range groups {
		for _, m := range diffModes {
			db := Prepare(g.base, m.opts...)
			for i, v := range g.variants {
				name := fmt.Sprintf("%s/%s/variant %d", g.name, m.name, i)
				sameDiff(t, name, Runs(g.base, v, m.opts...), db.Diff(v))
			}
		}
	}
}

// TestDiffBaseConcurrent diffs many variants against one prepared base from
// several goroutines at once (run with -race): every result is what Diff
// gives.
func TestDiffBaseConcurrent(t *testing.T) {
	t.Parallel()
	base, edit := mustLoad(t, recorded), mustLoad(t, recordedEdit)
	r := rand.New(rand.NewPCG(3, 5))
	other, _ := randomRun(t, r, "c")
	variants := []*trace.Trace{edit, base, relabel(edit), other, nil}
	for _, m := range diffModes[:2] {
		want := make([]*Result, len(variants))
		for i, v := range variants {
			want[i] = Runs(base, v, m.opts...)
		}
		db := Prepare(base, m.opts...)
		const workers = 4
		got := make([][]*Result, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range variants {
					// Each worker starts at another variant.
					got[w] = append(got[w], db.Diff(variants[(i+w)%len(variants)]))
				}
			})
		}
		wg.Wait()
		for w := range workers {
			for i, d := range got[w] {
				sameDiff(t, fmt.Sprintf("%s/worker %d/variant %d", m.name, w, (i+w)%len(variants)), want[(i+w)%len(variants)], d)
			}
		}
	}
}

// TestDiffBaseIsASnapshot checks that a prepared base does not change when
// the base trace or an earlier result does.
func TestDiffBaseIsASnapshot(t *testing.T) {
	t.Parallel()
	base, edit := mustLoad(t, diffBaseline), mustLoad(t, diffChanged)
	want := Runs(base, edit)
	db := Prepare(base)

	first := db.Diff(edit)
	first.Steps[0].Base.Payload = trace.StringValue("scribbled")
	first.Steps[0].Base.Label = "scribbled"
	for i := range base.Events {
		base.Events[i].Output = trace.StringValue("scribbled")
		base.Events[i].After = trace.StringValue("scribbled")
	}
	base.RunID, base.Path = "run_scribbled", "scribbled"

	sameDiff(t, "after mutation", want, db.Diff(edit))
	if string(Runs(base, edit).JSON()) == string(want.JSON()) {
		t.Fatal("the scribbles did not change the base: the test checks nothing")
	}
}

// TestDiffUnlinkedResults diffs a bundle without parent links whose two tool
// calls (steps 1, 2) come before their results (steps 3, 4) against a copy
// whose step 3 answers differently: the change is lookup_order's, the call
// step 3 answers.
func TestDiffUnlinkedResults(t *testing.T) {
	t.Parallel()
	base := mustLoad(t, "../../testdata/unlinked-results.sftrace")
	variant := base.Clone()
	variant.Events[3].Output = trace.MustValueOf(map[string]any{"total": 999})
	variant.Events[3].SetHashes()
	d := Runs(base, variant)
	var got []string
	for _, s := range d.Steps {
		line := fmt.Sprintf("%s %s:%s %s→%s", s.Kind, s.Type, s.Label, s.Base.EventID, s.Base.ResultID)
		for _, c := range s.Changes {
			line += fmt.Sprintf(" %s %s→%s", c.Path, c.Expected, c.Actual)
		}
		got = append(got, line)
	}
	want := []string{
		"changed tool:lookup_order evt_02→evt_04 output.total 120→999",
		"unchanged tool:check_policy evt_03→evt_05",
		"unchanged run:run evt_06→",
	}
	if !slices.Equal(got, want) {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestExplainShowsMintedIDsAsPlaceholders: ids providers minted in either
// run are shown as placeholders, numbered by kind in order of appearance.
func TestExplainShowsMintedIDsAsPlaceholders(t *testing.T) {
	t.Parallel()
	run := func(id string) *trace.Trace {
		b := trace.NewBuilder("agent")
		b.RunStart(nil)
		req := b.LLMRequest("openai", "m", map[string]any{"q": 1})
		b.LLMResponse(req, map[string]any{"tool_calls": []any{map[string]any{"id": id, "name": "lookup"}}})
		b.RunEnd(trace.RunCompleted, nil)
		tr := b.MustTrace()
		tr.Extras = map[string][]byte{trace.MintedFile: []byte(`{"` + req + `":[{"kind":"call","id":"` + id + `"}]}`)}
		return tr
	}
	d := Runs(run("call_AAAA1111"), run("call_BBBB2222"))
	if d.Base.Minted["call_AAAA1111"] != "call" {
		t.Errorf("Base.Minted = %v", d.Base.Minted)
	}
	out := d.Explain()
	for _, want := range []string{`output.tool_calls[0].id "<call-1>" → "<call-2>"`, `expected: "<call-1>"`, `actual:   "<call-2>"`} {
		if !strings.Contains(out, want) {
			t.Errorf("Explain lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "AAAA1111") || strings.Contains(out, "BBBB2222") {
		t.Errorf("Explain shows a minted id:\n%s", out)
	}
}

// TestAlignNumberedGivesLackedStepsOneNumber: the steps of a variant that
// its base lacks all get one number, not one per distinct step; the
// alignment must be the one a numbering of every distinct step gives
// (numberSteps of both runs), for unrelated runs and for variants derived
// from their base (a shared prefix, then changes).
func TestAlignNumberedGivesLackedStepsOneNumber(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	step := func(alpha int, id string) trace.BehaviorStep {
		return trace.BehaviorStep{Type: trace.StepTool, Label: string(rune('a' + r.IntN(alpha))),
			Payload: trace.IntValue(int64(r.IntN(alpha))), EventID: id}
	}
	for n := range 3000 {
		bs := make([]trace.BehaviorStep, r.IntN(25))
		for i := range bs {
			bs[i] = step(3, fmt.Sprintf("e%d", i))
		}
		var vs []trace.BehaviorStep
		if n%2 == 0 { // derived: the base's first steps, then others
			k := r.IntN(len(bs) + 1)
			vs = append(vs, bs[:k]...)
		}
		for range r.IntN(25) {
			vs = append(vs, step(5, "")) // a wider alphabet: steps the base lacks
		}
		for i := range vs {
			vs[i].Index = i
		}
		got := alignNumbered(bs, numberSteps(bs), vs)
		all := numberSteps(append(slices.Clone(bs), vs...))
		want := alignIDs(bs, vs, all.ids[:len(bs)], all.ids[len(bs):], int32(len(all.byKey)))
		if !slices.Equal(got, want) {
			t.Fatalf("case %d: alignment %v, want %v (every step numbered)", n, got, want)
		}
	}
}

package view

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/failures"
	"github.com/stepfork/stepfork/internal/view/viewtest"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

func load(t testing.TB, name string) *trace.Trace {
	t.Helper()
	tr, err := trace.Load(filepath.Join("../../testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func render(t testing.TB, p *Page) string {
	t.Helper()
	var b bytes.Buffer
	if err := p.Render(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// bookingFork is the README's fork: the failed payment overridden.
func bookingFork(t testing.TB) (*trace.Trace, *trace.Trace) {
	t.Helper()
	base := load(t, "booking-agent.sftrace")
	res, err := fork.Trace("../../testdata/booking-agent.sftrace", fork.ThroughStep(11),
		fork.Override(fork.OnStep(11), map[string]any{"booking_ref": "PNR-6E1158", "status": "confirmed"}),
		fork.SaveTo(filepath.Join(t.TempDir(), "booking-fixed.sftrace")))
	if err != nil {
		t.Fatal(err)
	}
	v, err := trace.Load(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	return base, v
}

func TestRunPageShowsNodesCallsAndStatus(t *testing.T) {
	t.Parallel()
	page := render(t, RunPage(load(t, "research.sftrace")))
	for _, want := range []string{
		`<details class="node s-ok" id="row-3" open>`, // the node "research" as a block
		`<span class="n">research</span>`,
		`<span class="tag">tool</span> <span class="n">search</span>`,
		`<span class="tag">model</span> <span class="n">fake/fake-1</span>`,
		`120 tok · $0.002`,
		`<span class="tag">decision</span> <span class="n">route</span>`,
		`steps 4, 5`,
		`<script type="application/json" id="sf-data">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
	// Calls recorded in a node are inside its block.
	tl := buildTimeline(load(t, "research.sftrace"))
	var research *item
	for _, it := range tl.Top {
		if it.Kind == "node" && it.Name == "research" {
			research = it
		}
	}
	if research == nil || len(research.Kids) != 2 || research.Kids[0].Name != "search" || research.Kids[1].Steps[1] != 7 {
		t.Errorf("the node research does not hold its two search calls: %+v", research)
	}
}

func TestFailedCallsAreMarked(t *testing.T) {
	t.Parallel()
	page := render(t, RunPage(load(t, "booking-agent.sftrace")))
	for _, want := range []string{
		`class="call k-tool s-error failed"`,
		`PaymentDeclined: card ending 4242 was declined`,
		`failed: PaymentDeclined`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
}

func TestConcurrentCallsAreOneGroup(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("par")
	b.RunStart(nil)
	a := b.ToolCall("fetch", map[string]any{"u": 1})
	c := b.ToolCall("fetch", map[string]any{"u": 2})
	b.ToolResult(c, 2)
	b.ToolResult(a, 1)
	b.Tool("after", nil, 3)
	b.RunEnd(trace.RunCompleted, nil)
	tl := buildTimeline(b.MustTrace())
	var kinds []string
	for _, it := range tl.Top {
		kinds = append(kinds, it.Kind)
	}
	if got := strings.Join(kinds, ","); got != "start,group,tool,run" {
		t.Fatalf("top-level items %s, want start,group,tool,run", got)
	}
	g := tl.Top[1]
	if len(g.Members) != 2 || g.Members[0].Input.Canonical() != `{"u":1}` || g.Members[1].Output.Canonical() != "2" {
		t.Errorf("group members %+v", g.Members)
	}
	if g.Members[0].Group != 1 || g.Members[0].Lane != 1 || g.Members[1].Lane != 2 {
		t.Errorf("members not numbered: %+v %+v", g.Members[0], g.Members[1])
	}
}

func TestDiffPageMarksTheDivergenceTheDiffNames(t *testing.T) {
	t.Parallel()
	base, v := bookingFork(t)
	p := DiffPage(base, v)
	rd := diff.Runs(base, v)
	if rd.Divergence == nil {
		t.Fatal("the fork does not diverge")
	}
	page := render(t, p)
	want := `<tr id="d-` + itoa(rd.Divergence.Index) + `" class="k-changed div">`
	if !strings.Contains(page, want) {
		t.Errorf("the divergence row %s is not marked", want)
	}
	if n := strings.Count(page, `class="badge bad">first divergence</span>`); n != 1 {
		t.Errorf("%d rows are marked as the first divergence, want 1", n)
	}
	for _, s := range []string{`<code>output.<wbr>booking_ref</code>`, `<mark>&#34;PNR-6E1158&#34;</mark>`, `static`, `step 11`, `3 removed`} {
		if !strings.Contains(page, s) {
			t.Errorf("the diff page lacks %s", s)
		}
	}
}

func TestWindowHighlightsWhereLongStringsDiffer(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("the quick brown fox ", 200)
	a := trace.StringValue(long + "jumps over the lazy dog" + long)
	b := trace.StringValue(long + "leaps over the lazy cat" + long)
	c := changeOf("output.text", "changed", a, b)
	if !strings.HasPrefix(c.Exp.Mid, "jumps over the lazy dog") || !strings.HasPrefix(c.Act.Mid, "leaps over the lazy cat") {
		t.Errorf("mid %q / %q", clip.Head(c.Exp.Mid, 40), clip.Head(c.Act.Mid, 40))
	}
	if n := utf8.RuneCountInString(c.Exp.Pre + c.Exp.Mid + c.Exp.Post); n > windowMax+2 || !strings.HasPrefix(c.Exp.Pre, clip.Ellipsis) {
		t.Errorf("the long value is not cut to a window: %d characters, %q…", n, clip.Head(c.Exp.Pre, 10))
	}
	// Short values are shown whole; multi-byte characters are never split.
	c = changeOf("x", "changed", trace.StringValue("añb"), trace.StringValue("aéb"))
	if c.Exp.Pre != "a" || c.Exp.Mid != "ñ" || c.Act.Mid != "é" || c.Exp.Post != "b" {
		t.Errorf("short window %+v / %+v", c.Exp, c.Act)
	}
	c = changeOf("x", "added", trace.Value{}, trace.MustParse(`{"a":1}`))
	if !c.Exp.Absent || c.Act.Mid != `{"a":1}` {
		t.Errorf("added %+v", c)
	}
}

func TestEverythingShownIsRedacted(t *testing.T) {
	t.Parallel()
	const secret = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
	b := trace.NewBuilder("leaky")
	b.RunStart(map[string]any{"password": "hunter2hunter2"})
	call := b.ToolCall("fetch "+secret, map[string]any{"auth": "Bearer " + secret})
	b.ToolFailure(call, "AuthError", "rejected key "+secret)
	b.State("note", nil, "token "+secret)
	b.Fail("AuthError", "rejected key "+secret)
	tr := b.MustTrace()
	base := trace.NewBuilder("leaky")
	base.RunStart(nil)
	base.RunEnd(trace.RunCompleted, nil)
	for name, p := range map[string]*Page{
		"run":   RunPage(tr),
		"diff":  DiffPage(base.MustTrace(), tr),
		"sweep": SweepPage(base.MustTrace(), []SweepVariant{{Name: "v " + secret, Trace: tr}}, nil),
	} {
		page := render(t, p)
		for _, leak := range []string{secret, "hunter2hunter2", "VIEWTEST"} {
			if strings.Contains(page, leak) {
				t.Errorf("the %s page shows %q", name, leak)
			}
		}
		if !strings.Contains(page, trace.Redacted) {
			t.Errorf("the %s page shows nothing redacted", name)
		}
	}
	large := render(t, RunPage(viewtest.LargeRun(2000)))
	if strings.Contains(large, viewtest.Secret) {
		t.Error("the large run's page shows its secret")
	}
}

func TestLargeRunIsSummarizedInMarkup(t *testing.T) {
	t.Parallel()
	tr := viewtest.LargeRun(20_000)
	p := RunPage(tr)
	if p.Runs[0].Static {
		t.Fatal("a run of 20k events is listed in full in the markup")
	}
	page := render(t, p)
	if strings.Count(page, `class="call `) != 0 || !strings.Contains(page, "timeline rows are too many to list without JavaScript") {
		t.Error("the large run's markup is not a summary")
	}
	if n := len(p.Runs[0].Timeline.Rows); n < 5000 {
		t.Errorf("only %d rows", n)
	}
}

func TestSweepPageHasOneRowPerVariant(t *testing.T) {
	t.Parallel()
	base, v := bookingFork(t)
	page := render(t, SweepPage(base, []SweepVariant{
		{Name: "fixed", Trace: v},
		{Name: "same", Trace: base},
		{Name: "broken", Err: os.ErrNotExist},
	}, nil))
	if n := strings.Count(page, `<tr class="s-row`); n != 3 {
		t.Errorf("%d rows, want 3", n)
	}
	for _, want := range []string{`<a href="#variant-1">fixed</a>`, `<details class="embedded card" id="variant-1">`, `<circle class="pt st-running dv"`,
		`data-diverged="no"`, `<span class="muted">behaved as the base</span>`, `file does not exist`,
		`<td class="v-div">steps 10–11: tool &#39;book_flight&#39; changed: output.booking_ref (absent) → &#34;PNR-6E1158&#34; (&#43;4 more)</td>`,
		`<td class="v-tools"></td>`, `<option value="running">running</option>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the sweep page lacks %s", want)
		}
	}
}

func TestPageIsSelfContained(t *testing.T) {
	t.Parallel()
	base, v := bookingFork(t)
	page := render(t, DiffPage(base, v))
	// Nothing is fetched: no src/href to another origin, no @import.
	ext := regexp.MustCompile(`(?i)(src|href)="(https?:)?//|@import|url\(`)
	if m := ext.FindString(page); m != "" {
		t.Errorf("the page refers to something outside it: %s", m)
	}
}

func TestWriteFileIsAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "page.html")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, RunPage(load(t, "research.sftrace"))); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "page.html"), RunPage(load(t, "research.sftrace"))); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int) string {
	var b []byte
	if n == 0 {
		return "0"
	}
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// TestRunPageShowsTheCode: a run recorded by a Go agent names the code
// that made it; one without build.json shows no code fact.
func TestRunPageShowsTheCode(t *testing.T) {
	t.Parallel()
	tr := load(t, "research.sftrace")
	if strings.Contains(render(t, RunPage(tr)), "<dt>code</dt>") {
		t.Error("a run without build.json shows a code fact")
	}
	data, err := trace.MarshalBuild(trace.Build{Module: "example.com/research", Version: "v1.4.0", Revision: "46b7ad0c4abd65b7e0efec1149cdb0d7ddcb7ecd"})
	if err != nil {
		t.Fatal(err)
	}
	built := tr.Clone()
	built.Extras = map[string][]byte{trace.BuildFile: data}
	if want := `<div><dt>code</dt><dd><code>example.com/research v1.4.0, revision 46b7ad0c4abd</code></dd></div>`; !strings.Contains(render(t, RunPage(built)), want) {
		t.Errorf("the run page lacks %s", want)
	}
}

// TestDiffPageSaysWhy: a step an intended change explains, or that
// matched through a user matcher, says so on the page.
func TestDiffPageSaysWhy(t *testing.T) {
	t.Parallel()
	base, v := bookingFork(t)
	d := diff.Runs(base, v)
	d.Mark(func(s *diff.Step) (string, string) { return "", "tool result of step 11" })
	page := render(t, ResultPage(d))
	if want := `<span class="badge why">intended: tool result of step 11</span>`; !strings.Contains(page, want) {
		t.Errorf("the diff page lacks %s", want)
	}
}

// TestFailuresFirst: a failed test's page starts with its failed
// assertions, each linked to the row of the step it names (the aligned
// step with a diff, the timeline's row without), or to the sweep variant
// whose check failed; messages are redacted like everything a page shows;
// a test that failed without any says where its failures are.
func TestFailuresFirst(t *testing.T) {
	t.Parallel()
	base, v := bookingFork(t)
	dp := DiffPage(base, v).WithFailures([]failures.Failure{
		{Assertion: "assert.DivergesAtStep", Where: "x_test.go:9", Message: "expected the runs to diverge at step 3; they diverged at steps 10–11: tool 'book_flight' changed", Step: 10},
		{Assertion: "assert.OutputEqual", Where: "x_test.go:10", Message: "output: token ghp_" + strings.Repeat("a", 36) + " differs at step 11", Step: -1},
		{Assertion: "assert.ToolCalled", Where: "x_test.go:11", Message: "expected tool 'refund' to be called", Step: -1},
		{Assertion: "assert.X", Message: "about step 99", Step: -1},
	})
	page := render(t, dp)
	main := page[strings.Index(page, "<main>"):]
	if !strings.HasPrefix(main, "<main>\n<section class=\"card failures\" aria-label=\"failed assertions\" id=\"failures\">\n  <h2 class=\"error-text\">4 failed assertion(s)</h2>") {
		t.Errorf("the page does not start with its failures:\n%.400s", main)
	}
	div := dp.Diff.Div
	for _, want := range []string{
		`<code class="f-assertion">assert.DivergesAtStep</code> <span class="muted">at x_test.go:9</span> · <a class="f-link" href="#d-` + itoa(div.I) + `">go to step 10</a>`,
		// Step 11 is the result of the same call: the same aligned step.
		`<code class="f-assertion">assert.OutputEqual</code> <span class="muted">at x_test.go:10</span> · <a class="f-link" href="#d-` + itoa(div.I) + `">go to step 11</a>`,
		`<code class="f-assertion">assert.ToolCalled</code> <span class="muted">at x_test.go:11</span></div>`,
		`step 99 is not on this page`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the failures lack %s", want)
		}
	}
	if strings.Contains(page, "ghp_aaaa") {
		t.Error("a credential in a failure message reached the page")
	}

	// Without a diff, the timeline's row.
	rp := RunPage(v).WithFailures([]failures.Failure{{Assertion: "assert.ToolSucceeded", Message: "failed at step 9 (event evt_009)", Step: -1}})
	row := -1
	for _, it := range rp.Runs[0].Timeline.Rows {
		if it.Kind == "tool" && len(it.Steps) > 0 && it.Steps[0] == 8 {
			row = it.Row
		}
	}
	if row < 0 || rp.Failures[0].Link != "#row-"+itoa(row) {
		t.Errorf("a failure about step 9 links to %q, want the row of the check_seat call (%d)", rp.Failures[0].Link, row)
	}

	// A test that failed on its own.
	page = render(t, RunPage(v).WithFailures(nil))
	if !strings.Contains(page, "No assertion of package <code>assert</code> or <code>sftest.Golden</code> failed") {
		t.Error("a failed test without failed assertions does not say where its failures are")
	}
	if strings.Contains(render(t, RunPage(v)), `id="failures"`) {
		t.Error("the page of a run (no test) has a failures section")
	}
}

// TestPagesShowMintedIDsAsPlaceholders: the ids providers minted in a
// page's runs show as placeholders, in payloads and texts alike.
func TestPagesShowMintedIDsAsPlaceholders(t *testing.T) {
	t.Parallel()
	run := func(id string) *trace.Trace {
		b := trace.NewBuilder("agent")
		b.RunStart(nil)
		req := b.LLMRequest("openai", "m", map[string]any{"q": 1})
		b.LLMResponse(req, map[string]any{"tool_calls": []any{map[string]any{"id": id, "name": "lookup"}}})
		b.Tool("lookup", map[string]any{"call": id}, "sunny")
		b.RunEnd(trace.RunCompleted, nil)
		tr := b.MustTrace()
		tr.Extras = map[string][]byte{trace.MintedFile: []byte(`{"` + req + `":[{"kind":"call","id":"` + id + `"}]}`)}
		return tr
	}
	base, variant := run("call_AAAA1111"), run("call_BBBB2222")
	for name, p := range map[string]*Page{
		"run":    RunPage(base),
		"diff":   DiffPage(base, variant),
		"result": ResultPage(diff.Runs(base, variant)),
	} {
		var buf bytes.Buffer
		if err := p.Render(&buf); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Contains(out, "AAAA1111") || strings.Contains(out, "BBBB2222") {
			t.Errorf("%s page shows a minted id", name)
		}
		if !strings.Contains(out, "call-1") {
			t.Errorf("%s page has no placeholder", name)
		}
	}
}

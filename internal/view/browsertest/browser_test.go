// Package browsertest drives the pages of package view in headless Chromium:
// what a person sees when they open a run, a fork, a diff and a sweep.
//
// It is a module of its own so that the core module's dependencies do not
// grow. It needs Debian's chromium (/usr/bin/chromium, or $CHROMIUM);
// .ci/run installs it from .ci/apt-packages. Screenshots of every view are
// written to each test's artifact directory: keep them with
//
//	go test -artifacts -outputdir=/tmp/shots ./...
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
	stopBrowser = func() {}
)

// chromium is the browser binary: $CHROMIUM, else Debian's.
func chromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// browser starts one headless Chromium for the test binary, with a fresh
// profile and nothing that talks to the network on its own.
func browser(t testing.TB) context.Context {
	t.Helper()
	browserOnce.Do(func() {
		if _, err := exec.LookPath(chromium()); err != nil {
			browserErr = fmt.Errorf("no Chromium at %s (apt-get install chromium, or set CHROMIUM): %w", chromium(), err)
			return
		}
		profile, err := os.MkdirTemp("", "stepfork-chromium-")
		if err != nil {
			browserErr = err
			return
		}
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(chromium()),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true),
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.UserDataDir(profile),
			chromedp.WindowSize(1280, 900),
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil {
			browserErr = fmt.Errorf("starting %s: %w", chromium(), err)
		}
		browserCtx = bctx
		stopBrowser = func() {
			cancelBrowser()
			cancelAlloc()
			os.RemoveAll(profile)
		}
	})
	if browserErr != nil {
		t.Fatal(browserErr)
	}
	return browserCtx
}

// tab is one browser tab for a test; the test fails on every error its
// pages write to the console and every exception they throw.
type tab struct {
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

func newTab(t *testing.T) *tab {
	t.Helper()
	return newTabFor(t, 90*time.Second)
}

// newTabFor is newTab with the time the tab may take.
func newTabFor(t *testing.T, limit time.Duration) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t))
	if err := chromedp.Do(ctx); err != nil { // open the tab before it has a timeout
		t.Fatal(err)
	}
	messages := chromedp.Console(ctx)
	tb := &tab{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == "assert" {
				tb.mu.Lock()
				tb.errs = append(tb.errs, m.String())
				tb.mu.Unlock()
			}
		}
	}()
	tctx, cancelTimeout := context.WithTimeout(ctx, limit)
	tb.ctx = tctx
	t.Cleanup(func() {
		// Let the last messages arrive, then stop listening.
		_ = chromedp.Do(ctx, chromedp.Sleep(50*time.Millisecond))
		cancelTimeout()
		cancel()
		<-done
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for _, e := range tb.errs {
			t.Errorf("the page reported an error: %s", e)
		}
	})
	return tb
}

func (tb *tab) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

func fileURL(path string) string { return "file://" + filepath.ToSlash(path) }

// open loads a page and waits for its script to have rendered.
func (tb *tab) open(t *testing.T, path string) {
	t.Helper()
	tb.do(t, chromedp.Navigate(fileURL(path)), chromedp.WaitReady(chromedp.CSS("html.sf-complete")))
}

// eval evaluates a JavaScript expression.
func eval[T any](t *testing.T, tb *tab, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// text is the visible text of the first element matching the CSS selector.
func (tb *tab) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// screenshot writes the page as NAME.png into the test's artifact
// directory.
func (tb *tab) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestRunView: the run's nodes are blocks holding their calls, selecting a
// call shows its payload and event ids, and the keyboard moves the
// selection and folds nodes.
func TestRunView(t *testing.T) {
	tb := newTab(t)
	tb.open(t, fx.run)
	rows := eval[int](t, tb, `document.querySelectorAll('.timeline .vrow').length`)
	if rows < 15 {
		t.Fatalf("%d timeline rows on screen, want every row of the research run", rows)
	}
	nodeRows := eval[[]string](t, tb, `[...document.querySelectorAll('.vrow.node .n')].map(e => e.textContent)`)
	if strings.Join(nodeRows, ",") != "research,title,write,write" {
		t.Errorf("node rows %q", nodeRows)
	}
	// A call inside the node is drawn one level in.
	guides := eval[int](t, tb, `[...document.querySelectorAll('.vrow')].find(r => r.textContent.includes('search') && r.textContent.includes('steps 4, 5')).querySelectorAll('.guide').length`)
	if guides != 1 {
		t.Errorf("the search call in node research has %d nesting guides, want 1", guides)
	}
	// Select the first search call with the mouse.
	tb.do(t, chromedp.Click(`//div[contains(@class,"vrow")][contains(., "steps 4, 5")]`))
	detail := tb.text(t, "#detail")
	for _, want := range []string{"tool search", "vaccines basics", "step 4 · evt_", "step 5 · evt_", "input", "output"} {
		if !strings.Contains(detail, want) {
			t.Errorf("the selected call's panel lacks %q:\n%s", want, detail)
		}
	}
	tb.screenshot(t, "run")
	// j moves to the next row: the second search call.
	tb.do(t, chromedp.KeyEvent("j"))
	if d := tb.text(t, "#detail"); !strings.Contains(d, "step 6 · evt_") {
		t.Errorf("after j the panel shows:\n%s", d)
	}
	// Up twice reaches the node research; ArrowLeft folds it.
	tb.do(t, chromedp.KeyEvent(kb.ArrowUp), chromedp.KeyEvent(kb.ArrowUp))
	if d := tb.text(t, "#detail"); !strings.Contains(d, "node research\n") {
		t.Errorf("after two ArrowUp the panel shows:\n%s", d)
	}
	tb.do(t, chromedp.KeyEvent(kb.ArrowLeft))
	after := eval[int](t, tb, `document.querySelectorAll('.timeline .vrow').length`)
	if after != rows-2 {
		t.Errorf("folding research left %d rows, want %d", after, rows-2)
	}
	tb.do(t, chromedp.KeyEvent(kb.Escape))
	hidden := eval[bool](t, tb, `document.getElementById('detail').hidden`)
	if !hidden {
		t.Error("Escape did not close the panel")
	}
}

// TestSelectedPayloadIsRedacted: a call whose input held a bearer token and
// a password shows them redacted, and the page holds neither.
func TestSelectedPayloadIsRedacted(t *testing.T) {
	tb := newTab(t)
	tb.open(t, fx.secret)
	tb.do(t, chromedp.Click(`//div[contains(@class,"vrow")][contains(., "call_api")]`))
	detail := tb.text(t, "#detail")
	if !strings.Contains(detail, "[REDACTED]") || !strings.Contains(detail, "https://api.example.com/v1/orders") {
		t.Errorf("the panel does not show the redacted input:\n%s", detail)
	}
	html := eval[string](t, tb, `document.documentElement.outerHTML`)
	for _, leak := range []string{"VIEWTESTSECRET", "hunter2"} {
		if strings.Contains(html, leak) || strings.Contains(detail, leak) {
			t.Errorf("the page shows %q", leak)
		}
	}
	tb.screenshot(t, "redacted")
}

// TestDiffView: the divergence is marked on the step the diff names, d
// jumps to it, and its changed fields are shown side by side.
func TestDiffView(t *testing.T) {
	tb := newTab(t)
	tb.open(t, fx.diff)
	want := fx.bookingDiff.Divergence.Index
	marked := eval[[]string](t, tb, `[...document.querySelectorAll('.vrow.div')].map(r => r.querySelector('.idx').textContent)`)
	if len(marked) != 1 || marked[0] != fmt.Sprintf("#%d", want) {
		t.Fatalf("rows marked as the divergence: %q, want #%d", marked, want)
	}
	if got := tb.text(t, ".vrow.div"); !strings.Contains(got, "first divergence") || !strings.Contains(got, "book_flight") {
		t.Errorf("the divergence row reads %q", got)
	}
	tb.do(t, chromedp.Focus(chromedp.CSS(".vlist")), chromedp.KeyEvent("d"))
	detail := tb.text(t, "#detail")
	for _, s := range []string{fmt.Sprintf("#%d tool book_flight (changed)", want), "first divergence", "output.booking_ref", "PNR-6E1158", "PaymentDeclined"} {
		if !strings.Contains(detail, s) {
			t.Errorf("the divergence's panel lacks %q:\n%s", s, detail)
		}
	}
	sel := eval[int](t, tb, `window.stepforkView.diff.sel`)
	if sel != want {
		t.Errorf("d selected step %d, want %d", sel, want)
	}
	// k goes one step back.
	tb.do(t, chromedp.KeyEvent("k"))
	sel = eval[int](t, tb, `window.stepforkView.diff.sel`)
	if sel != want-1 {
		t.Errorf("k selected step %d, want %d", sel, want-1)
	}
	tb.screenshot(t, "diff")
}

// TestForkView: the served prefix and the live tail are told apart, with
// the fork point between them, and the change says where it applied.
func TestForkView(t *testing.T) {
	tb := newTab(t)
	tb.open(t, fx.fork)
	fork := tb.text(t, "section.fork")
	for _, s := range []string{"served prefix", "live tail", "counterfactual", "prompt of 'decide'", "applied 1 time(s)", "allow:book_flight"} {
		if !strings.Contains(fork, s) {
			t.Errorf("the fork panel lacks %q:\n%s", s, fork)
		}
	}
	prefix := eval[int](t, tb, `document.querySelectorAll('.timeline .vrow.x-prefix').length`)
	tail := eval[int](t, tb, `document.querySelectorAll('.timeline .vrow.x-tail').length`)
	point := eval[int](t, tb, `document.querySelectorAll('.timeline .vrow.forkpoint').length`)
	if prefix == 0 || tail == 0 || point != 1 {
		t.Errorf("prefix rows %d, tail rows %d, fork point markers %d", prefix, tail, point)
	}
	// The row after the fork point is the first of the tail, at the step
	// the fork resolved to.
	first := eval[string](t, tb, `(() => { const r = document.querySelector('.timeline .vrow.forkpoint'); return [...r.parentNode.children].find(x => +x.dataset.pos === +r.dataset.pos + 1).textContent })()`)
	if !strings.Contains(first, "decide") {
		t.Errorf("the first tail row is %q, want the node decide", first)
	}
	tb.screenshot(t, "fork")
}

// TestSweepView: one row per variant saying which change did what — its
// changes, status, own first divergence, output, tool calls and cost, as
// the rendered page reads — sortable, filtered by text, status and
// divergence, each opening its diff; keyboard moves between rows.
func TestSweepView(t *testing.T) {
	tb := newTab(t)
	tb.open(t, fx.sweep)
	rows := eval[[][]string](t, tb, `[...document.querySelectorAll('#sweep-table tbody tr')].map(r => [...r.cells].map(c => c.innerText.trim()))`)
	if len(rows) != len(fx.sweepRows) {
		t.Fatalf("%d rows, want %d: %q", len(rows), len(fx.sweepRows), rows)
	}
	got := map[string][]string{}
	for _, r := range rows {
		got[r[0]] = r
	}
	// variant, changes, status, first divergence, output, tool calls, incurred, tokens
	for _, w := range fx.sweepRows {
		r := got[w.name]
		if r == nil || r[2] != w.status || r[6] != w.cost {
			t.Errorf("row %s reads %q, want status %s and cost %s", w.name, r, w.status, w.cost)
		}
	}
	want := map[string][5]string{ // changes, first divergence (prefix), output, tool calls
		"baseline":    {"none (the control)", "behaved as the base", "as in the base", ""},
		"cheapest":    {"prompt of 'decide'", `steps 6–7: llm 'fake/planner-1' changed: input.system "Pick the flight that fits best." → "Pick the cheapest flight."`, `{"ref":"PNR-F2","status":"confirmed"} (base: null)`, ""},
		"forced-f2":   {`model response of 'fake/planner-1' call 1`, `steps 6–7: llm 'fake/planner-1' changed: output.content "F1" → "F2"`, `{"ref":"PNR-F2","status":"confirmed"} (base: null)`, ""},
		"other-model": {"model of 'decide' → planner-2", "steps 6–7: llm 'fake/planner-1' became llm 'fake/planner-2'", "as in the base", ""},
	}
	divergences := map[string]string{}
	for name, w := range want {
		r := got[name]
		if r == nil {
			continue
		}
		if r[1] != w[0] || !strings.HasPrefix(r[3], w[1]) || r[4] != w[2] || r[5] != w[3] {
			t.Errorf("row %s reads\n  changes %q\n  diverged %q\n  output %q\n  tools %q\nwant\n  %q\n  %q…\n  %q\n  %q", name, r[1], r[3], r[4], r[5], w[0], w[1], w[2], w[3])
		}
		if other, dup := divergences[r[3]]; dup && r[3] != "behaved as the base" {
			t.Errorf("%s and %s show the same first divergence: %s", name, other, r[3])
		}
		divergences[r[3]] = name
	}
	facts := tb.text(t, ".sweep-facts")
	if !strings.HasPrefix(facts, "base run_") || !strings.Contains(facts, "(travel-agent, failed) · forked at BeforeNode(\"decide\", 1)") || !strings.Contains(facts, " · total incurred $") {
		t.Errorf("the sweep's facts read %q", facts)
	}
	points := eval[int](t, tb, `document.querySelectorAll('.chart circle').length`)
	if points != len(fx.sweepRows) {
		t.Errorf("%d points in the chart, want %d", points, len(fx.sweepRows))
	}
	ticks := eval[[]string](t, tb, `[...document.querySelectorAll('.chart text.tick')].map(e => e.textContent)`)
	if len(ticks) != 5 || ticks[0] != "$0.00" || ticks[1] == ticks[2] {
		t.Errorf("the chart's cost ticks read %q", ticks)
	}
	// Filters: by text (a name, a change, an output), by status, by divergence.
	visible := func() []string {
		return eval[[]string](t, tb, `[...document.querySelectorAll('#sweep-table tbody tr')].filter(r => r.offsetParent !== null).map(r => r.cells[0].innerText.trim()).sort()`)
	}
	tb.do(t, chromedp.SendKeys(`#sweep-filter`, "PNR-F2"))
	if v := visible(); strings.Join(v, ",") != "cheapest,forced-f2" {
		t.Errorf("filtering by PNR-F2 shows %q", v)
	}
	if n := tb.text(t, "#sweep-shown"); n != "2 of 4 variants shown" {
		t.Errorf("the count of shown variants reads %q", n)
	}
	clear := func() {
		eval[int](t, tb, `(() => { const f = document.getElementById('sweep-filter'); f.value = ''; f.dispatchEvent(new Event('input')); return 0 })()`)
	}
	clear()
	tb.do(t, chromedp.SendKeys(`#sweep-filter`, "planner-2"))
	if v := visible(); strings.Join(v, ",") != "other-model" {
		t.Errorf("filtering by planner-2 shows %q", v)
	}
	clear()
	tb.do(t, chromedp.Click(`#sweep-diverged`))
	if v := visible(); strings.Join(v, ",") != "cheapest,forced-f2,other-model" {
		t.Errorf("diverged only shows %q", v)
	}
	tb.do(t, chromedp.Click(`#sweep-diverged`))
	if v := visible(); len(v) != 4 {
		t.Errorf("without filters %d rows are shown", len(v))
	}
	// Sort by incurred cost, descending after two clicks.
	tb.do(t, chromedp.Click(chromedp.CSS(`#sweep-table th:nth-child(7)`)), chromedp.Click(chromedp.CSS(`#sweep-table th:nth-child(7)`)))
	costs := eval[[]float64](t, tb, `[...document.querySelectorAll('#sweep-table tbody tr')].map(r => +r.cells[6].dataset.v)`)
	for i := 1; i < len(costs); i++ {
		if costs[i-1] < costs[i] {
			t.Errorf("costs after sorting descending: %v", costs)
			break
		}
	}
	// Keyboard: focus the first row, ArrowDown moves to the second, Enter
	// opens that variant's diff.
	tb.do(t, chromedp.Focus(chromedp.CSS(`#sweep-table tbody tr`)), chromedp.KeyEvent(kb.ArrowDown))
	focused := eval[string](t, tb, `document.activeElement.cells[0].textContent.trim()`)
	if focused != costsOrderName(t, tb, 1) {
		t.Errorf("ArrowDown focused %q", focused)
	}
	tb.do(t, chromedp.KeyEvent(kb.Enter))
	// Enter follows the row's link; the page opens the diff on the
	// hashchange event, which the browser fires after the key event
	// returns (reading at once failed under load: "opened []").
	tb.wait(t, `document.querySelectorAll('details.embedded[open]').length > 0`)
	open := eval[[]string](t, tb, `[...document.querySelectorAll('details.embedded[open] summary code')].map(c => c.textContent)`)
	if len(open) != 1 || open[0] != focused {
		t.Errorf("Enter on %s opened %q", focused, open)
	}
	tb.screenshot(t, "sweep")
}

// TestSampledSweepView: with several samples a variant's row reads how
// many completed, the samples' statuses and mean cost, and its mean score
// with its 95 % interval.
func TestSampledSweepView(t *testing.T) {
	tb := newTab(t)
	tb.open(t, fx.sampled)
	rows := eval[[][]string](t, tb, `[...document.querySelectorAll('#sweep-table tbody tr')].map(r => [...r.cells].map(c => c.innerText.trim()))`)
	got := map[string][]string{}
	for _, r := range rows {
		got[r[0]] = r
	}
	for _, name := range []string{"baseline", "cheapest"} {
		e := fx.sampledRun.Entry(name)
		st := e.Stats()
		r := got[name]
		if r == nil || len(r) < 9 {
			t.Fatalf("row %s reads %q", name, r)
		}
		wantScore := fmt.Sprintf("%.2f [%.2f, %.2f] (base %.2f)", st.Mean, st.Low, st.High, e.Variant.BaseScore)
		if r[8] != wantScore {
			t.Errorf("row %s's score reads %q, want %q", name, r[8], wantScore)
		}
		if !strings.Contains(r[2], "samples 3: ") || !strings.Contains(r[2], "mean $") {
			t.Errorf("row %s's status reads %q", name, r[2])
		}
	}
	if s := got["cheapest"][2]; !strings.HasPrefix(s, "3/3 completed") {
		t.Errorf("cheapest's status reads %q", s)
	}
	if s := got["baseline"][2]; !strings.HasPrefix(s, "0/3 completed") || !strings.Contains(s, "3 failed") {
		t.Errorf("baseline's status reads %q", s)
	}
	tb.screenshot(t, "sampled")
}

func costsOrderName(t *testing.T, tb *tab, i int) string {
	return eval[string](t, tb, fmt.Sprintf(`document.querySelectorAll('#sweep-table tbody tr')[%d].cells[0].textContent.trim()`, i))
}

// TestWithoutJavaScript: with scripts disabled the page is a static
// document: the aligned steps are a table with the divergence marked, the
// run a set of nested blocks.
func TestWithoutJavaScript(t *testing.T) {
	tb := newTab(t)
	tb.do(t, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}), chromedp.Navigate(fileURL(fx.diff)), chromedp.WaitVisible(chromedp.CSS(`tr.div`)))
	if got := tb.text(t, "tr.div"); !strings.Contains(got, "book_flight") || !strings.Contains(got, "first divergence") {
		t.Errorf("without JavaScript the divergence row reads %q", got)
	}
	tb.screenshot(t, "diff-nojs")
	tb.do(t, chromedp.Navigate(fileURL(fx.run)), chromedp.WaitVisible(chromedp.CSS(`details.node`)))
	blocks := eval[[]string](t, tb, `[...document.querySelectorAll('details.node > summary .n')].map(e => e.textContent)`)
	if strings.Join(blocks, ",") != "research,title,write,write" {
		t.Errorf("static node blocks %q", blocks)
	}
	tb.screenshot(t, "run-nojs")
}

// TestLargeRun: a run of 100k events opens with only the rows on screen in
// the document, and scrolling renders the rows it reaches.
func TestLargeRun(t *testing.T) {
	tb := newTab(t)
	tb.do(t, chromedp.Navigate(fileURL(fx.large)), chromedp.WaitReady(chromedp.CSS("html.sf-complete")))
	marks := eval[map[string]float64](t, tb, `({
		paint: (performance.getEntriesByName('first-contentful-paint')[0] || {startTime: -1}).startTime,
		rows: performance.getEntriesByName('sf-first-rows')[0].startTime,
		all: performance.getEntriesByName('sf-all-rows')[0].startTime})`)
	if !(marks["rows"] < marks["all"]) {
		t.Errorf("the first rows were drawn at %.0f ms, not before the whole document was read (%.0f ms)", marks["rows"], marks["all"])
	}
	n := eval[int](t, tb, `document.querySelectorAll('.timeline .vrow').length`)
	total := eval[int](t, tb, `JSON.parse(document.getElementById('sf-data').textContent).runs[0].count`)
	listed := eval[int](t, tb, `window.stepforkView.lists[0].pos.length`)
	if total < 30_000 || listed < total/2 || n == 0 || n > 200 {
		t.Fatalf("%d rows in the document, %d listed of %d, want every row listed and only those on screen in the document", n, listed, total)
	}
	eval[int](t, tb, `(() => { const b = document.querySelector('.vlist'); b.scrollTop = b.scrollHeight; b.dispatchEvent(new Event('scroll')); return 0 })()`)
	tb.do(t, chromedp.Sleep(100*time.Millisecond))
	last := eval[string](t, tb, `[...document.querySelectorAll('.timeline .vrow')].sort((a, b) => b.dataset.pos - a.dataset.pos)[0].textContent`)
	if !strings.Contains(last, "completed") {
		t.Errorf("the last row after scrolling to the end reads %q", last)
	}
	t.Logf("100k-event page: %d rows; first paint %.0f ms, first rows %.0f ms, every row %.0f ms after navigation (BenchmarkFirstPaint100k measures it)", total, marks["paint"], marks["rows"], marks["all"])
	tb.screenshot(t, "large")
}

// BenchmarkFirstPaint100k is the time from navigation to the first rows of
// a 100k-event run on screen, and the browser's first contentful paint.
func BenchmarkFirstPaint100k(b *testing.B) {
	ctx, cancel := chromedp.NewContext(browser(b))
	defer cancel()
	var fcp, rows, all float64
	for b.Loop() {
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(fileURL(fx.large)),
			chromedp.WaitReady(chromedp.CSS("html.sf-complete"))); err != nil {
			b.Fatal(err)
		}
		m, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`({
			fcp: (performance.getEntriesByName('first-contentful-paint')[0] || {startTime: -1}).startTime,
			rows: (performance.getEntriesByName('sf-first-rows')[0] || {startTime: -1}).startTime,
			all: (performance.getEntriesByName('sf-all-rows')[0] || {startTime: -1}).startTime})`))
		if err != nil {
			b.Fatal(err)
		}
		fcp, rows, all = m["fcp"], m["rows"], m["all"]
	}
	b.ReportMetric(fcp, "ms-first-paint")
	b.ReportMetric(rows, "ms-first-rows")
	b.ReportMetric(all, "ms-all-rows")
}

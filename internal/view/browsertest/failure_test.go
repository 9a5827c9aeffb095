package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// childEnv marks the test binary run by TestFailurePages as the child whose
// tests fail on purpose.
const childEnv = "BROWSERTEST_FAILING_CHILD"

// failingPages runs the failing tests below in a child test binary with
// -stepfork.report and returns the pages it printed, by test name.
func failingPages(t *testing.T, tests ...string) map[string]string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^("+strings.Join(tests, "|")+")$", "-test.v", "-stepfork.report="+dir)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the child tests should fail, got %v:\n%s", err, out)
	}
	pages := map[string]string{}
	for _, m := range regexp.MustCompile(`sftest: the page of this failure: (\S+\.html)`).FindAllStringSubmatch(string(out), -1) {
		rel, err := filepath.Rel(dir, m[1])
		if err != nil {
			t.Fatal(err)
		}
		pages[filepath.ToSlash(filepath.Dir(rel))] = m[1]
	}
	if len(pages) == 0 {
		t.Fatalf("the child wrote no page:\n%s", out)
	}
	return pages
}

func failingChild(t *testing.T) {
	t.Helper()
	if os.Getenv(childEnv) == "" {
		t.Skip("fails on purpose: run by TestFailurePages")
	}
}

// travelBase records the travel agent, as the tests of a user would load
// their committed run.
func travelBase(t *testing.T) *trace.Trace {
	t.Helper()
	rec, err := replay.Record(t.Context(), "travel-agent", trip{To: "LIS"}, travelAgent)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Trace
}

func TestChildFailingFork(t *testing.T) {
	failingChild(t)
	v := sftest.Fork(t, travelBase(t), fork.BeforeNode("decide", 1), travelAgent,
		fork.Prompt("decide", "Pick the cheapest flight."), fork.Allow("book_flight"))
	assert.Completed(t, v)                            // holds
	assert.ToolNotCalled(t, v, "book_flight")         // fails: it books F2
	assert.DivergesAtStep(t, v, 2, "the prompt edit") // fails: it diverges at the model call
}

func TestChildFailingSweep(t *testing.T) {
	failingChild(t)
	sftest.Sweep(t, travelBase(t), fork.BeforeNode("decide", 1), travelAgent, []fork.Named{
		{Name: "control"},
		{Name: "cheapest", Changes: []fork.Change{fork.Prompt("decide", "Pick the cheapest flight.")}},
	}, func(t *testing.T, _ string, v *fork.Variant) {
		assert.Status(t, v, fork.StatusFailed) // fails for "cheapest", which completes
	}, fork.Allow("book_flight"))
}

func TestChildFailingWithoutAssertion(t *testing.T) {
	failingChild(t)
	v := sftest.Fork(t, travelBase(t), fork.BeforeNode("decide", 1), travelAgent, fork.Prompt("decide", "Pick the cheapest flight."), fork.Allow("book_flight"))
	if v.Status == fork.StatusCompleted {
		t.Error("completed") // fails, through the test's own t.Error
	}
}

// TestFailurePages: the page a failing test gets shows, first thing, every
// assertion that failed, where, its message, and a link that selects the
// step it names; a sweep's page names the variant whose check failed and
// opens it; a test that failed on its own says where its failures are.
func TestFailurePages(t *testing.T) {
	pages := failingPages(t, "TestChildFailingFork", "TestChildFailingSweep", "TestChildFailingWithoutAssertion")
	tb := newTab(t)

	tb.open(t, pages["TestChildFailingFork"])
	first := eval[string](t, tb, `document.querySelector('main').firstElementChild.getAttribute('aria-label')`)
	if first != "failed assertions" {
		t.Errorf("the page starts with %q, want the failed assertions", first)
	}
	items := eval[[]string](t, tb, `[...document.querySelectorAll('#failures li')].map(li => li.innerText)`)
	if len(items) != 2 {
		t.Fatalf("%d failed assertions shown, want 2: %q", len(items), items)
	}
	for i, want := range [][]string{
		{"assert.ToolNotCalled at failure_test.go:", "expected tool 'book_flight' not to be called"},
		{"assert.DivergesAtStep at failure_test.go:", "go to step ", "expected the runs to diverge at step 2; they diverged at steps ", "llm 'fake/planner-1' changed", "Messages:   the prompt edit"},
	} {
		for _, w := range want {
			if !strings.Contains(items[i], w) {
				t.Errorf("failed assertion %d reads\n%s\nwant %q", i+1, items[i], w)
			}
		}
	}
	if h := tb.text(t, "#failures h2"); h != "2 failed assertion(s)" {
		t.Errorf("the heading reads %q", h)
	}
	// The link selects the aligned step holding the step it names, and its
	// panel shows that call.
	link := eval[string](t, tb, `document.querySelector('#failures a.f-link').textContent`)
	step := strings.TrimPrefix(link, "go to step ")
	tb.do(t, chromedp.Click(chromedp.CSS(`#failures a.f-link`)))
	tb.wait(t, `window.stepforkView.diff.sel >= 0 && !document.getElementById('detail').hidden`)
	detail := tb.text(t, "#detail")
	if !strings.Contains(detail, "llm fake/planner-1 (changed)") || !strings.Contains(detail, "first divergence") ||
		!regexp.MustCompile(`steps? `+regexp.QuoteMeta(step)+`\b`).MatchString(detail) {
		t.Errorf("after %q the panel shows:\n%s", link, detail)
	}
	if sel, div := eval[int](t, tb, `window.stepforkView.diff.sel`), eval[int](t, tb, `JSON.parse(document.getElementById('sf-data').textContent).diff.div`); sel != div {
		t.Errorf("the link selected aligned step %d, want the divergence %d", sel, div)
	}
	tb.screenshot(t, "failure-fork")

	tb.open(t, pages["TestChildFailingSweep"])
	items = eval[[]string](t, tb, `[...document.querySelectorAll('#failures li')].map(li => li.innerText)`)
	if len(items) != 1 || !strings.Contains(items[0], "assert.Status at failure_test.go:") || !strings.Contains(items[0], "variant cheapest") ||
		!strings.Contains(items[0], "expected the variant to end failed; it completed") {
		t.Fatalf("the sweep's failed assertions read %q", items)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`#failures a.f-link`)))
	tb.wait(t, `document.querySelector('details.embedded[open]') !== null`)
	open := eval[[]string](t, tb, `[...document.querySelectorAll('details.embedded[open] summary code')].map(c => c.textContent)`)
	if len(open) != 1 || open[0] != "cheapest" {
		t.Errorf("the link opened %q, want the variant cheapest", open)
	}
	tb.screenshot(t, "failure-sweep")

	tb.open(t, pages["TestChildFailingWithoutAssertion"])
	if s := tb.text(t, "#failures"); !strings.Contains(s, "The test failed") || !strings.Contains(s, "go test") {
		t.Errorf("a test failed by t.Error gets %q", s)
	}
}

// TestKeyDWithoutFocus: d goes to the first divergence wherever the focus
// is, as the legend says, but not while typing in a field.
func TestKeyDWithoutFocus(t *testing.T) {
	tb := newTab(t)
	tb.open(t, fx.diff)
	want := fx.bookingDiff.Divergence.Index
	if sel := eval[int](t, tb, `window.stepforkView.diff.sel`); sel == want {
		t.Fatalf("the divergence is selected before d")
	}
	eval[int](t, tb, `(() => { document.activeElement && document.activeElement.blur(); return 0 })()`)
	tb.do(t, chromedp.KeyEvent("d"))
	if sel := eval[int](t, tb, `window.stepforkView.diff.sel`); sel != want {
		t.Errorf("d without focus selected aligned step %d, want %d", sel, want)
	}
	if d := tb.text(t, "#detail"); !strings.Contains(d, "book_flight") {
		t.Errorf("after d the panel shows:\n%s", d)
	}
}

// TestFieldNamesWrapBetweenKeys: in a narrow window a field path of the
// changes table wraps after a '.', never inside a key.
func TestFieldNamesWrapBetweenKeys(t *testing.T) {
	tb := newTab(t)
	tb.open(t, fx.diff)
	for _, w := range []int64{480, 640, 900} {
		tb.do(t, chromedp.EmulateViewport(w, 900))
		tb.do(t, chromedp.Click(`//div[contains(@class,"vrow")][contains(@class,"div")]`))
		// Every text node of a path, and each key in it, is drawn on one line.
		broken := eval[[]string](t, tb, `(() => {
			const out = [];
			for (const code of document.querySelectorAll('#detail table.changes td:first-child code, .divergence table.changes td:first-child code')) {
				for (const n of code.childNodes) {
					if (n.nodeType !== Node.TEXT_NODE) continue;
					for (const m of n.textContent.matchAll(/[^.\[\]]+/g)) {
						const r = document.createRange();
						r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
						const tops = new Set([...r.getClientRects()].map(x => Math.round(x.top)));
						if (tops.size > 1) out.push(code.textContent + ': ' + m[0]);
					}
				}
			}
			return out })()`)
		if len(broken) > 0 {
			t.Errorf("at %d px, keys broken across lines: %q", w, broken)
		}
	}
	paths := eval[[]string](t, tb, `[...document.querySelectorAll('#detail table.changes td:first-child code')].map(c => c.textContent)`)
	if !slicesContains(paths, "output.booking_ref") {
		t.Errorf("the panel's paths read %q", paths)
	}
	tb.screenshot(t, "narrow-diff")
}

func slicesContains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// TestLiveTailLabelOnLongRuns: the fork of a long run whose tail is a few
// events shows the live tail's label whole, not cut to "li".
func TestLiveTailLabelOnLongRuns(t *testing.T) {
	tb := newTab(t)
	tb.open(t, fx.longFork)
	for _, sel := range []string{".side-prefix", ".side-tail"} {
		cut := eval[bool](t, tb, fmt.Sprintf(`(() => { const e = document.querySelector('section.fork %s'); return e.scrollWidth > e.clientWidth })()`, sel))
		if cut {
			t.Errorf("the label %s is cut: %q", sel, tb.text(t, "section.fork "+sel))
		}
	}
	if s := tb.text(t, "section.fork .side-tail"); !strings.HasPrefix(s, "live tail · ") || !strings.Contains(s, " events, ") {
		t.Errorf("the live tail's label reads %q", s)
	}
	tb.screenshot(t, "long-fork")
}

// longAgent reads pages until its model says stop: a long run of repeated
// shapes.
var (
	fetchPage = replay.Tool("fetch_page", func(_ context.Context, page int) (string, error) {
		return "the same text on every page", nil
	})
	longAgent = replay.Typed(func(ctx context.Context, pages int) (int, error) {
		for i := range pages {
			var stop bool
			if err := replay.Node(ctx, "page", func(ctx context.Context) error {
				text, err := fetchPage(ctx, i)
				if err != nil {
					return err
				}
				resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "reader",
					Messages: []replay.Message{{Role: "user", Content: "More? " + text}}}, func(context.Context, replay.Request) (replay.Response, error) {
					return replay.Response{Content: "continue"}, nil
				})
				stop = resp.Content == "stop"
				return err
			}); err != nil || stop {
				return i, err
			}
		}
		return pages, nil
	})
)

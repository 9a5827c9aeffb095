//go:build unix

package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stepfork/stepfork/trace"
)

// repoRoot is the repository's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// refundModule copies the refund example into a temporary module: the
// examples module's go.mod (its replace directive pointing at the
// repository's root) and go.sum, and the refund package with its tests and
// testdata. The explore session writes there, never into the repository.
func refundModule(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	mod, err := os.ReadFile(filepath.Join(root, "examples", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	replaced := regexp.MustCompile(`(?m)^replace github\.com/stepfork/stepfork => .*$`).ReplaceAll(mod, []byte("replace github.com/stepfork/stepfork => "+root))
	if bytes.Equal(replaced, mod) {
		t.Fatal("examples/go.mod has no replace directive for the repository")
	}
	write := func(p string, b []byte) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "go.mod"), replaced)
	sum, err := os.ReadFile(filepath.Join(root, "examples", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "go.sum"), sum)
	src := filepath.Join(root, "examples", "refund")
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if rel == "cmd" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		write(filepath.Join(dir, "refund", rel), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "refund")
}

// goTest is a go test run in a directory, in a session and process group
// of its own (no terminal to write to, and killed whole if the test ends
// early), with CI unset: this test is the person at the browser.
type goTest struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	urls chan string
	done chan error
}

var exploreURL = regexp.MustCompile(`http://127\.0\.0\.1:\d+/s/[0-9a-f]+/`)

func startGoTest(t *testing.T, dir string, args ...string) *goTest {
	t.Helper()
	if raceEnabled {
		args = append([]string{"-race"}, args...) // shares the build cache with the examples module's tests
	}
	g := &goTest{urls: make(chan string, 4), done: make(chan error, 1)}
	g.cmd = exec.Command("go", append([]string{"test"}, args...)...)
	g.cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CI=") {
			g.cmd.Env = append(g.cmd.Env, kv)
		}
	}
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	pr, pw := io.Pipe()
	g.cmd.Stdout, g.cmd.Stderr = pw, pw
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := g.cmd.Wait()
		pw.Close()
		g.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			g.mu.Lock()
			g.out.WriteString(line + "\n")
			g.mu.Unlock()
			if u := exploreURL.FindString(line); u != "" {
				g.urls <- u
			}
		}
		io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL) // the group: go and the test binary it runs
	})
	return g
}

func (g *goTest) output() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out.String()
}

// url waits for the address the explore session prints.
func (g *goTest) url(t *testing.T) string {
	t.Helper()
	select {
	case u := <-g.urls:
		return u
	case err := <-g.done:
		t.Fatalf("go test ended (%v) before it served a session:\n%s", err, g.output())
	case <-time.After(15 * time.Minute): // the first build of the example compiles the OpenAI SDK
		t.Fatalf("no session after 15 minutes:\n%s", g.output())
	}
	return ""
}

// wait waits for go test to end and fails the test unless it passed.
func (g *goTest) wait(t *testing.T) string {
	t.Helper()
	select {
	case err := <-g.done:
		if err != nil {
			t.Fatalf("go test failed: %v\n%s", err, g.output())
		}
	case <-time.After(15 * time.Minute):
		t.Fatalf("go test did not end:\n%s", g.output())
	}
	return g.output()
}

// TestExploreRefund drives the explore page of the refund example's own
// test, run as a person would run it (go test -stepfork.explore), end to
// end: the failure point is marked; a tool result edited in its JSON
// editor changes the run's status, with the divergence marked; a prompt
// changed by a passage fixes the failure; the two runs are compared; the
// code of the fix is copied and a test file written; the session ends from
// the page and the test passes. Then the copied code, pasted into a test,
// and the written file pass go test in the module.
func TestExploreRefund(t *testing.T) {
	dir := refundModule(t)
	g := startGoTest(t, dir, "-run", "^TestRefundNeedsApproval$", "-stepfork.explore=^TestRefundNeedsApproval$", "-timeout=10m", "-count=1")
	url := g.url(t)
	t.Logf("session: %s", url)
	refuses(t, url)

	start := time.Now()
	tb := newTabFor(t, 5*time.Minute)
	tb.openExplore(t, url)
	// The failure point is marked, and offers the model's response and the
	// prompts of the failed 'decide' node.
	failure := tb.text(t, "#points li.point .badge.failure")
	point := eval[string](t, tb, `document.querySelector('#points .badge.failure').closest('li').innerText`)
	if failure != "failure" || !strings.Contains(point, "before 'decide' execution 1") {
		t.Errorf("the failure point reads %q", point)
	}

	t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), "Run 1:")
	// Run 1: earlier, at the policy lookup, raise the refund limit in the
	// tool's result. The 249.00 USD refund is now within the limit, so the
	// agent asks a person to confirm it, which the fork cannot answer: the
	// failed run becomes a blocked one.
	tb.do(t, chromedp.Click(chromedp.CSS(`#points li.point[data-step="4"]`)))
	tb.wait(t, `document.getElementById('choices').dataset.step === '4'`)
	if title := tb.text(t, "#point-title"); !strings.Contains(title, `fork.BeforeCall(replay.KindTool, "get_refund_policy", 1)`) {
		t.Errorf("the point's title reads %q", title)
	}
	const policy = `.choice[data-kind="tool_result"][data-name="get_refund_policy"]`
	tb.do(t, chromedp.Click(chromedp.CSS(policy+` input.toggle`)))
	recorded := eval[string](t, tb, `document.querySelector('`+policy+` textarea').value`)
	if !strings.Contains(recorded, `"auto_refund_limit": 100`) {
		t.Fatalf("the editor is not prefilled with the recorded result:\n%s", recorded)
	}
	// An edit that is not JSON is refused before anything runs.
	setEditor(t, tb, policy+` textarea`, strings.Replace(recorded, `"auto_refund_limit": 100`, `"auto_refund_limit": 300,,`, 1))
	if !eval[bool](t, tb, `document.getElementById('run-btn').disabled`) || !strings.Contains(tb.text(t, policy+" .check"), "not valid JSON") {
		t.Errorf("invalid JSON: Run enabled, or the editor says %q", tb.text(t, policy+" .check"))
	}
	setEditor(t, tb, policy+` textarea`, strings.Replace(recorded, `"auto_refund_limit": 100`, `"auto_refund_limit": 300`, 1))
	tb.do(t, chromedp.Click(chromedp.CSS(`#run-btn`)))
	tb.wait(t, `(document.querySelector('#runs tr[data-id="1"]') || {innerText: 'running'}).innerText.indexOf('running') < 0`)
	row := tb.runsRow(t, 1)
	if !strings.Contains(row, "failed\t→\tblocked") && !strings.Contains(row, "failed → blocked") {
		t.Errorf("run 1 reads %q, want the status failed → blocked", row)
	}
	if !strings.Contains(row, "confirm_refund") {
		t.Errorf("run 1 does not say what was held back: %q", row)
	}
	page := tb.frameText(t, "run-frame", "run/1")
	for _, want := range []string{"blocked", "First divergence", "get_refund_policy", "auto_refund_limit"} {
		if !strings.Contains(page, want) {
			t.Errorf("run 1's page lacks %q:\n%s", want, page)
		}
	}
	div := eval[string](t, tb, `(() => { const d = document.getElementById('run-frame').contentDocument; const r = d.querySelector('.vrow.div'); return r ? r.innerText : ''; })()`)
	if !strings.Contains(div, "get_refund_policy") || !strings.Contains(div, "first divergence") {
		t.Errorf("the divergence marked in run 1's diff reads %q", div)
	}

	t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), "Run 2:")
	// Run 2: at the failure point, replace a passage of the 'decide'
	// prompt, and let request_approval (it only files a case) run live.
	tb.do(t, chromedp.Click(chromedp.CSS(`#points li.point[data-step="8"]`)))
	tb.wait(t, `document.getElementById('choices').dataset.step === '8'`)
	if title := tb.text(t, "#point-title"); !strings.Contains(title, "fork.Failure()") {
		t.Errorf("the failure point's title reads %q", title)
	}
	const prompt = `.choice[data-kind="prompt"][data-target="decide"]`
	if rec := eval[string](t, tb, `document.querySelector('`+prompt+` textarea.prompt-text').value`); !strings.HasPrefix(rec, "You triage refund requests for an online shop. Refund what the customer asks") {
		t.Errorf("the prompt editor holds %q", rec)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(prompt+` input.toggle`)))
	eval[bool](t, tb, `(() => { const s = document.querySelector('`+prompt+` select.op'); s.value = 'replace'; s.dispatchEvent(new Event('change')); return true; })()`)
	setEditor(t, tb, prompt+` input.passage`, "Refund what the customer asks when the order is eligible.")
	setEditor(t, tb, prompt+` textarea.edit-text`, "Refunds above the policy limit need approval: escalate them.")
	if check := tb.text(t, prompt+" .check"); !strings.Contains(check, "the passage is in the recorded prompt") {
		t.Errorf("the passage check reads %q", check)
	}
	// request_approval: no run called it yet, so it is named.
	tb.do(t, chromedp.Click(chromedp.CSS(`input[name=policy][value=allow]`)))
	setEditor(t, tb, "#allow-other", "request_approval")
	if warn := tb.text(t, "#allow-warning"); !strings.Contains(warn, "execute for real") {
		t.Errorf("no warning for a tool allowed to run live: %q", warn)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`#run-btn`)))
	tb.wait(t, `(document.querySelector('#runs tr[data-id="2"]') || {innerText: 'running'}).innerText.indexOf('running') < 0`)
	row = tb.runsRow(t, 2)
	if !strings.Contains(row, "completed") || !strings.Contains(row, "decide") {
		t.Errorf("run 2 reads %q, want the status failed → completed", row)
	}
	page = tb.frameText(t, "run-frame", "run/2")
	for _, want := range []string{"completed", "request_approval", "awaiting_approval", "prompt of 'decide' (a passage replaced)"} {
		if !strings.Contains(page, want) {
			t.Errorf("run 2's page lacks %q:\n%s", want, page)
		}
	}
	tb.screenshot(t, "explore")
	tb.clipShot(t, "explore-readme", "#runs") // docs/explore.png

	t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), "Compare the two r")
	// Compare the two runs side by side, as a sweep, and as a diff.
	tb.do(t, chromedp.Click(chromedp.CSS(`#runs tr[data-id="1"] input.pick`)), chromedp.Click(chromedp.CSS(`#runs tr[data-id="2"] input.pick`)),
		chromedp.Click(chromedp.CSS(`#compare-btn`)))
	cmp := tb.frameText(t, "compare-frame", "compare?ids=1,2")
	for _, want := range []string{"run 1", "blocked", "run 2", "completed"} {
		if !strings.Contains(cmp, want) {
			t.Errorf("the comparison lacks %q:\n%s", want, cmp)
		}
	}
	rows := eval[[][]string](t, tb, `[...document.getElementById('compare-frame').contentDocument.querySelectorAll('#sweep-table tbody tr')].map(r => [...r.cells].map(c => c.innerText.trim()))`)
	// Columns: variant, changes, status, … (the sweep table's).
	if len(rows) != 2 || len(rows[0]) < 3 || len(rows[1]) < 3 || rows[0][0] != "run 1" || rows[0][2] != "blocked" || rows[1][0] != "run 2" || rows[1][2] != "completed" {
		t.Errorf("the comparison's rows: %q", rows)
	}
	tb.screenshot(t, "explore-compare")
	tb.do(t, chromedp.Click(chromedp.CSS(`#pair-link`)))
	if pair := tb.frameText(t, "compare-frame", "pair/1/2"); !strings.Contains(pair, "First divergence") {
		t.Errorf("the diff of the two runs:\n%s", pair)
	}

	t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), "The code of run 2")
	// The code of run 2: copy it, and write it as a test file.
	tb.do(t, chromedp.Click(chromedp.CSS(`#runs tr[data-id="2"] button.open`)))
	tb.wait(t, `document.getElementById('code-snippet').textContent.includes('fork.PromptReplace')`)
	eval[bool](t, tb, `(() => { navigator.clipboard.writeText = text => { window.copied = text; return Promise.resolve(); }; return true; })()`)
	tb.do(t, chromedp.Click(chromedp.CSS(`#copy-btn`)))
	tb.wait(t, `typeof window.copied === 'string'`)
	copied := eval[string](t, tb, `window.copied`)
	if shown := eval[string](t, tb, `document.getElementById('code-snippet').textContent`); copied != shown {
		t.Errorf("Copy copied %q, the page shows %q", copied, shown)
	}
	for _, want := range []string{
		"v := sftest.Fork(t, base, fork.Failure(), w.agent.Run,",
		`fork.PromptReplace("decide", "Refund what the customer asks when the order is eligible.", "Refunds above the policy limit need approval: escalate them.")`,
		`fork.Allow("request_approval")`,
		"assert.Completed(t, v)",
		`assert.ToolCalled(t, v, "request_approval")`,
		"assert.OutputEqual(t, v, trace.MustParse(",
	} {
		if !strings.Contains(copied, want) {
			t.Errorf("the copied code lacks %s:\n%s", want, copied)
		}
	}
	imports := strings.Split(strings.TrimPrefix(tb.text(t, "#code-imports"), "imports: "), ", ")
	tb.do(t, chromedp.Click(chromedp.CSS(`#write-btn`)))
	tb.wait(t, `document.getElementById('code-msg').textContent.startsWith('written: ')`)
	written := strings.TrimPrefix(tb.text(t, "#code-msg"), "written: ")
	if filepath.Dir(written) != dir || filepath.Base(written) != "refund_needs_approval_explore1_test.go" {
		t.Errorf("the test file was written to %s", written)
	}
	// Writing again never overwrites it: the next name is taken.
	tb.do(t, chromedp.Click(chromedp.CSS(`#write-btn`)))
	tb.wait(t, `document.getElementById('code-msg').textContent.includes('explore2_test.go')`)
	// Save run 2 as a bundle, under the test's testdata.
	tb.do(t, chromedp.Click(chromedp.CSS(`#save-btn`)))
	tb.wait(t, `document.getElementById('save-msg').textContent.startsWith('saved: ')`)
	saved := strings.TrimPrefix(tb.text(t, "#save-msg"), "saved: ")
	if saved != filepath.Join("testdata", "explore", "TestRefundNeedsApproval-run-2.sftrace") {
		t.Errorf("run 2 was saved as %s", saved)
	}
	if tr, err := trace.Load(filepath.Join(dir, saved)); err != nil || tr.Status != trace.RunCompleted {
		t.Errorf("the saved bundle: %v", err)
	}
	all := tb.everything(t)
	if strings.Contains(all, "sk-test-5f0c2a9d41e84b7c") {
		t.Error("the page shows the fake server's API key")
	}

	t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), "End the session")
	// End the session: the test continues and passes.
	tb.do(t, chromedp.Click(chromedp.CSS(`#end-btn`)))
	tb.wait(t, `!document.getElementById('ended').hidden`)
	out := g.wait(t)
	if !strings.Contains(out, "ended from the page") || !strings.Contains(out, "ok ") && !strings.Contains(out, "PASS") {
		t.Errorf("go test's output:\n%s", out)
	}

	t.Run("the code passes go test", func(t *testing.T) {
		// The copied code, pasted where the test's base and agent are in scope.
		var b strings.Builder
		b.WriteString("package refund_test\n\nimport (\n\t\"testing\"\n")
		for _, im := range imports {
			fmt.Fprintf(&b, "\t%q\n", im)
		}
		b.WriteString(")\n\nfunc TestPasted(t *testing.T) {\n\tw := newWorld(t)\n\tbase := sftest.Load(t, \"testdata/refund-failure.sftrace\")\n")
		b.WriteString(copied)
		b.WriteString("}\n")
		if err := os.WriteFile(filepath.Join(dir, "pasted_test.go"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile(written)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the written test file:\n%s", src)
		g := startGoTest(t, dir, "-run", "^(TestPasted|TestRefundNeedsApprovalExplore1)$", "-v", "-count=1")
		out := g.wait(t)
		for _, want := range []string{"--- PASS: TestPasted", "--- PASS: TestRefundNeedsApprovalExplore1"} {
			if !strings.Contains(out, want) {
				t.Errorf("go test's output lacks %q:\n%s", want, out)
			}
		}
	})
}

// setEditor sets the value of an editor and tells the page, as typing
// does.
func setEditor(t *testing.T, tb *tab, sel, value string) {
	t.Helper()
	eval[bool](t, tb, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event('input')); return true; })()`, sel, value))
}

// refuses checks that the session refuses a request without its token,
// from another Host, and a state change by GET.
func refuses(t *testing.T, url string) {
	t.Helper()
	tok := strings.Split(url, "/")[4]
	root := strings.TrimSuffix(url, "/s/"+tok+"/")
	for _, c := range []struct {
		name, method, url, host string
		want                    int
	}{
		{"no token", "GET", root + "/api/runs", "", http.StatusForbidden},
		{"another token", "GET", root + "/s/" + strings.Repeat("a", len(tok)) + "/api/runs", "", http.StatusForbidden},
		{"another Host", "GET", url + "api/runs", "attacker.example", http.StatusForbidden},
		{"GET of a state change", "GET", url + "api/end", "", http.StatusMethodNotAllowed},
		{"POST without the token header", "POST", url + "api/end", "", http.StatusForbidden},
	} {
		req, _ := http.NewRequestWithContext(context.Background(), c.method, c.url, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		if c.host != "" {
			req.Host = c.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

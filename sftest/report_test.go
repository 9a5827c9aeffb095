package sftest_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/sftest"
)

// A failing test gets the page of what failed, at the path it prints: in
// -stepfork.report's directory, in the artifact directory with -artifacts,
// and only a hint without either.
func TestReportPages(t *testing.T) {
	if os.Getenv("SFTEST_CHILD") != "" {
		t.Skip("running as the child")
	}
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pageLine := regexp.MustCompile(`sftest: the page of this failure: (\S+\.html)`)
	for _, tc := range []struct {
		name, child string
		flags       func(dir string) []string
		pages       int      // pages printed
		under       string   // the pages' directory, relative to dir
		has         []string // in every page
		out         string   // in the output
	}{
		{"fork", "TestChildReportFork", func(d string) []string { return []string{"-stepfork.report=" + d} },
			1, "TestChildReportFork", []string{"first divergence", "prompt of &#39;decide&#39;", "Fork",
				// Every failed assertion first, with its message and a link to its step.
				`<main>
<section class="card failures" aria-label="failed assertions" id="failures">
  <h2 class="error-text">2 failed assertion(s)</h2>`,
				`<code class="f-assertion">assert.ToolCalled</code> <span class="muted">at report_test.go:`,
				`expected tool &#39;issue_refund&#39; to be called`,
				`<code class="f-assertion">assert.DivergesAtStep</code> <span class="muted">at report_test.go:`,
				`<a class="f-link" href="#d-4">go to step 7</a>`,
				`expected the runs to diverge at step 2; they diverged at steps 7–8: llm &#39;fake/fake-1&#39; changed`},
			"expected tool 'issue_refund' to be called"},
		{"sweep", "TestChildReportSweep", func(d string) []string { return []string{"-stepfork.report=" + d} },
			2, "TestChildReportSweep", []string{"first divergence", "1 failed assertion(s)", `<code class="f-assertion">assert.Status</code>`,
				"expected the variant to end failed; it completed"}, "--- FAIL: TestChildReportSweep/approval"},
		{"golden", "TestChildGoldenMismatch", func(d string) []string { return []string{"-stepfork.report=" + d} },
			1, "TestChildGoldenMismatch", []string{"Run timeline", "stepfork view", "1 failed assertion(s)",
				`<code class="f-assertion">sftest.Golden</code>`, "the rendering differs from testdata/TestChildGoldenMismatch.golden, first at line "},
			"sftest.Golden: the rendering differs"},
		{"artifacts", "TestChildReportFork", func(d string) []string { return []string{"-test.artifacts", "-test.outputdir=" + d} },
			1, "", []string{"first divergence"}, "--- FAIL: TestChildReportFork"},
		{"off", "TestChildReportFork", func(string) []string { return nil },
			0, "", nil, "sftest: run with -stepfork.report=DIR (or go test -artifacts) for an HTML page of this failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd := exec.Command(exe, append([]string{"-test.run=^" + tc.child + "$", "-test.v"}, tc.flags(dir)...)...)
			cmd.Env = append(os.Environ(), "SFTEST_CHILD=1")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the child test should fail, got %v:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.out) {
				t.Errorf("the output lacks %q:\n%s", tc.out, out)
			}
			found := pageLine.FindAllStringSubmatch(string(out), -1)
			if len(found) != tc.pages {
				t.Fatalf("%d page(s) printed, want %d:\n%s", len(found), tc.pages, out)
			}
			for _, m := range found {
				path := m[1]
				rel, err := filepath.Rel(dir, path)
				if err != nil || strings.HasPrefix(rel, "..") || (tc.under != "" && !strings.HasPrefix(rel, tc.under+string(filepath.Separator))) {
					t.Errorf("page %s is not under %s", path, filepath.Join(dir, tc.under))
				}
				page, err := os.ReadFile(path)
				if err != nil {
					t.Errorf("the printed page does not exist: %v", err)
					continue
				}
				for _, h := range tc.has {
					if !strings.Contains(string(page), h) {
						t.Errorf("page %s lacks %q", path, h)
					}
				}
			}
		})
	}
}

func TestChildReportFork(t *testing.T) {
	child(t)
	v := sftest.Fork(t, loadRefund(t), fork.Failure(), refund.Agent,
		fork.Prompt("decide", "Refunds above the policy limit need approval."), fork.Memoize())
	assert.ToolCalled(t, v, "issue_refund") // fails: the fix asks for approval instead
	assert.DivergesAtStep(t, v, 2)          // fails: it diverges at the model call, steps 7–8
}

func TestChildReportSweep(t *testing.T) {
	child(t)
	sftest.Sweep(t, loadRefund(t), fork.Failure(), refund.Agent, []fork.Named{
		{Name: "baseline"},
		{Name: "approval", Changes: []fork.Change{fork.Prompt("decide", "Ask for approval above the limit.")}},
	}, func(t *testing.T, _ string, v *fork.Variant) {
		assert.Status(t, v, fork.StatusFailed) // fails for "approval", which completes
	}, fork.Memoize())
}

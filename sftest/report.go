package sftest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/failures"
	"github.com/stepfork/stepfork/internal/view"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// ReportFlag is the name of the command-line flag that names the directory
// sftest writes failure pages to: go test -stepfork.report=DIR.
//
// When a test fails after Fork, Sweep or Golden handled a variant, a sweep,
// a trace or a diff, sftest writes the HTML page of it (the page `stepfork
// view` shows: for a variant its fork point, changes and guard, the diff
// against its base, both runs aligned with the first divergence marked, and
// its timeline; for a sweep the table of its variants) and logs its path
// in the test's output, right after the failure. The page starts with
// every assertion of the test that failed (package assert's, and Golden's
// mismatch): the assertion and the test's line that called it, its
// message, and a link to the step it names, or, on a sweep's page, to the
// variant whose check failed:
//
//	sftest: the page of this failure: /tmp/reports/TestRefund/fork-1.html
//
// The directory is, in this order:
//   - DIR/<test name>/ with -stepfork.report=DIR (subtests in
//     subdirectories);
//   - the test's artifact directory (testing.T.ArtifactDir, kept under
//     -outputdir) with go test -artifacts;
//   - none otherwise: no page is written, and a failing test is told how to
//     get one.
//
// Pages are written only for failed tests, atomically, and redacted like
// every output of stepfork. The flag is defined only in test binaries
// (testing.Testing).
const ReportFlag = "stepfork.report"

var reportDir = new(string)

func init() {
	if testing.Testing() {
		reportDir = flag.String(ReportFlag, "", "write an HTML page of each failed sftest fork, sweep or golden to `DIR` (default with go test -artifacts: the test's artifact directory)")
	}
}

// reportRoot is the directory t's pages go to, or "" when reports are off.
func reportRoot(t testing.TB) string {
	if *reportDir != "" {
		var segs []string
		for s := range strings.SplitSeq(t.Name(), "/") {
			segs = append(segs, safeName(s))
		}
		return filepath.Join(append([]string{*reportDir}, segs...)...)
	}
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	return ""
}

// safeName keeps letters, digits, '.', '-' and '_' of a test name.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
	if s == "" || s == "." || s == ".." {
		s = "_"
	}
	return s
}

var (
	pageSeq atomic.Int64
	hinted  sync.Map // testing.TB → bool: the test was told how to get pages
)

// reportOnFailure arranges for the page of subject (a *fork.Variant,
// *fork.Sweep, *trace.Trace, *replay.Result or *diff.Result) to be written
// when t has failed by the time it ends.
func reportOnFailure(t testing.TB, subject any) {
	if subject == nil {
		return
	}
	if failures.Watch(t) {
		// Registered before the page's cleanup, so run after it.
		t.Cleanup(func() { failures.Forget(t) })
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		kind, page := pageOf(subject)
		if page == nil {
			return
		}
		page.WithFailures(failures.Of(t))
		root := reportRoot(t)
		if root == "" {
			if _, done := hinted.LoadOrStore(t, true); !done {
				t.Logf("sftest: run with -%s=DIR (or go test -artifacts) for an HTML page of this failure", ReportFlag)
			}
			return
		}
		path, err := writeReport(root, kind, page)
		if err != nil {
			t.Logf("sftest: the page of this failure could not be written: %v", err)
			return
		}
		t.Logf("sftest: the page of this failure: %s", path)
	})
}

// pageOf builds the page of a subject and names its kind.
func pageOf(subject any) (string, *view.Page) {
	switch s := subject.(type) {
	case *fork.Variant:
		if s != nil && s.Trace != nil {
			return "fork", view.VariantPage(s)
		}
	case *fork.Sweep:
		if s != nil {
			return "sweep", view.SweepPage(s.Base, view.FromSweep(s), nil)
		}
	case *trace.Trace:
		if s != nil {
			return "run", view.RunPage(s)
		}
	case *replay.Result:
		if s != nil && s.Trace != nil {
			return "run", view.RunPage(s.Trace)
		}
	case *diff.Result:
		if s != nil {
			return "diff", view.ResultPage(s)
		}
	}
	return "", nil
}

// writeReport writes page into root as KIND-N.html and returns its
// absolute path.
func writeReport(root, kind string, page *view.Page) (string, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(root, fmt.Sprintf("%s-%d.html", kind, pageSeq.Add(1)))
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if err := view.WriteFile(path, page); err != nil {
		return "", err
	}
	return path, nil
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

// forged is what a hostile name holds: a line break starting a forged
// line, a C1 control sequence introducer, a bidi override and an escape.
const forged = "lookup\nFAKE LINE\u009b2J\u202eevil\x1b[31m"

// TestOutputsAreInert feeds runs whose names, state keys, messages and
// values hold line breaks, C1 and bidi controls through every command and
// output format: no output starts a line with the forged text, and none
// holds a raw C1 or bidi control or an escape.
func TestOutputsAreInert(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mk := func(variant bool) *trace.Trace {
		b := trace.NewBuilder("agent " + forged)
		start := b.RunStart(map[string]any{"ask": forged})
		b.Tool(forged, map[string]any{"q": forged}, map[string]any{"r": forged})
		if variant {
			b.Tool("other"+forged, map[string]any{"q": 1}, map[string]any{"r": 2})
		}
		b.State("key"+forged, nil, map[string]any{"v": forged})
		b.Error(start, "Err"+forged, "failed: "+forged, nil)
		b.Fail("Err"+forged, "failed: "+forged)
		return b.MustTrace()
	}
	for name, variant := range map[string]bool{"base.sftrace": false, "variant.sftrace": true} {
		if err := mk(variant).Save(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	runs := [][]string{
		{"validate", "base.sftrace"}, {"validate", "base.sftrace", "--json"},
		{"inspect", "base.sftrace"}, {"inspect", "base.sftrace", "--json"}, {"inspect", "base.sftrace", "--events"},
		{"inspect", "base.sftrace", "--step", "2"},
		{"points", "base.sftrace"}, {"points", "base.sftrace", "--json"},
		{"diff", "base.sftrace", "variant.sftrace"}, {"diff", "base.sftrace", "variant.sftrace", "--json"},
		{"diff", "base.sftrace", "variant.sftrace", "--align", "position"},
		{"diff", "base.sftrace", "variant.sftrace", "--align", "position", "--json"},
		{"export", "base.sftrace", "--otlp"}, {"export", "base.sftrace", "--otlp", "--content"},
		{"fork", "base.sftrace", "--at-step", "2", "-o", "f.sftrace"},
		{"minimize", "base.sftrace", "-o", "m.sftrace"},
	}
	for _, args := range runs {
		r := stepfork(t, dir, nil, args...)
		for stream, out := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
			line := strings.Join(args, " ")
			for l := range strings.Lines(out) {
				if strings.HasPrefix(strings.TrimSpace(l), "FAKE LINE") {
					t.Errorf("stepfork %s: %s has a forged line: %q", line, stream, l)
				}
			}
			for _, bad := range []string{"\u009b", "\u202e", "\x1b"} {
				if strings.Contains(out, bad) {
					t.Errorf("stepfork %s: %s holds %q", line, stream, bad)
				}
			}
		}
	}
	// The page too.
	if r := stepfork(t, dir, nil, "view", "base.sftrace", "variant.sftrace", "--html", "diff.html"); r.code != 0 {
		t.Fatalf("view: %d %s", r.code, r.stderr)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "diff.html"))
	for _, bad := range []string{"\u009b", "\u202e", "\x1b"} {
		if strings.Contains(string(page), bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
}

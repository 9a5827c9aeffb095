package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

// stepfork diff shows a long changed value on both sides as the same window
// around its first difference: a sentence appended to a long system prompt
// is what the diff shows, not two identical beginnings.
func TestDiffShowsWhereLongValuesDiffer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prompt := strings.Repeat("Refunds need a receipt. ", 8)
	save := func(name, system string) string {
		b := trace.NewBuilder("agent")
		b.RunStart(nil)
		b.LLM("fake", "m", map[string]any{"system": system}, map[string]any{"content": "ok"})
		b.RunEnd(trace.RunCompleted, nil)
		p := filepath.Join(dir, name+".sftrace")
		if err := b.MustTrace().Save(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base, variant := save("base", prompt), save("variant", prompt+"Above the limit, ask for approval.")
	r := stepfork(t, "", nil, "diff", base, variant)
	if r.code != exitDifferent {
		t.Fatalf("exit %d, want %d: %s", r.code, exitDifferent, r.stderr)
	}
	for _, want := range []string{
		`                expected: … need a receipt. Refunds need a receipt. Refunds need a receipt. "` + "\n",
		`                actual:   … need a receipt. Refunds need a receipt. Refunds need a receipt. Above the limit, ask for approval."` + "\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stepfork diff:\n%s\nwant it to contain:\n%s", r.stdout, want)
		}
	}
}

// The README forks the booking run with --at-step 11 --override 11: the
// diff must name the call it changed by the steps a user types, the call's
// and its result's, not only the call's ("book_flight step 10").
func TestDiffNamesTheStepsTheForkTakes(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "fixed.sftrace")
	r := stepfork(t, "", nil, "fork", booking, "--at-step", "11",
		"--override", `11={"booking_ref":"PNR-6E1158","status":"confirmed"}`, "-o", out)
	if r.code != 0 {
		t.Fatalf("fork: exit %d\n%s", r.code, r.stderr)
	}
	r = stepfork(t, "", nil, "diff", booking, out)
	for _, want := range []string{
		`  diverged  steps 10–11: tool 'book_flight' changed: output.booking_ref (absent) → "PNR-6E1158" (+4 more)`,
		`  ~ #5      tool book_flight (base #5 evt_011 steps 10–11, variant #5 evt_011 steps 10–11)`,
	} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("diff does not say\n%s\nit printed:\n%s", want, r.stdout)
		}
	}
}

package sftest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hexops/autogold/v2"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// Golden compares the rendering of v (see Render) with the golden file
// testdata/<test name>.golden through autogold.ExpectFile; a subtest's file
// is testdata/<test>/<subtest>.golden. v is a *fork.Variant, a
// *replay.Result, a *diff.Result, a *trace.Trace or a *fork.Sweep.
//
// go test -update (autogold's flag; sftest never defines it) writes the
// rendering to the file; without it a mismatch fails the test with the
// (-want +got) difference and the command that accepts the new rendering.
// The rendering holds no run id, event id, timestamp or duration, so a
// golden does not churn between runs, and each test writes only its own
// file, so Golden is safe under t.Parallel. opts are autogold's (Name, Dir).
func Golden(t *testing.T, v any, opts ...autogold.Option) {
	t.Helper()
	text, err := Render(v)
	if err != nil {
		t.Fatalf("sftest.Golden: %v", err)
	}
	file := goldenFile(t, opts)
	// autogold.ExpectFile is called even when the file matches: under
	// -update -clean it deletes the golden files no test asked for.
	if want, err := os.ReadFile(file); err == nil && bytes.Equal(want, []byte(text)) {
		// matches: nothing to say
	} else if updating() {
		t.Logf("sftest.Golden: writing %s", file)
	} else if os.IsNotExist(err) {
		t.Logf("sftest.Golden: %s does not exist; create it with:\n\tgo test -run '%s' -update", file, runPattern(t.Name()))
	} else {
		t.Logf("sftest.Golden: the rendering differs from %s; if the change is intended, accept it with:\n\tgo test -run '%s' -update", file, runPattern(t.Name()))
	}
	autogold.ExpectFile(t, autogold.Raw(text), opts...)
}

// updating reports whether autogold's -update flag is set.
func updating() bool {
	f := flag.Lookup("update")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	b, _ := g.Get().(bool)
	return b
}

// goldenFile names the golden file in Golden's messages:
// testdata/<test name>.golden, or "the golden file" when autogold options
// (which are opaque) may have moved it.
func goldenFile(t *testing.T, opts []autogold.Option) string {
	if len(opts) > 0 {
		return "the golden file"
	}
	return filepath.Join("testdata", t.Name()+".golden")
}

// Render is the text Golden compares: a stable, human-readable rendering of
// v, a *fork.Variant, a *replay.Result, a *diff.Result, a *trace.Trace or
// a *fork.Sweep.
//
// A variant renders as its fork point, its changes (wire form) and how often
// each applied, its status, policy, incurred cost and live calls, the first
// divergence from the base, every behavior step of the aligned runs (=
// unchanged, ~ changed with each changed field, + only in the variant, -
// only in the base) with its output, the state that changed, and the final
// output. A replay result renders as its mode, its served and executed
// calls, its divergence and the steps of its run; a trace as its steps; a
// diff as the aligned steps; a sweep as one line per variant and each
// variant's first divergence.
//
// Nothing in it varies between runs of the same behavior: steps are named by
// their step numbers, never by event or run ids, and no timestamp or
// duration is printed. Payloads are canonical JSON (as recorded, so
// redacted), shortened to 200 characters; any run id, event id, UUID or
// RFC 3339 time inside a payload is replaced by a numbered placeholder
// (<run-1>, <evt-1>, <uuid-1>, <time-1>) in order of first appearance.
func Render(v any) (string, error) {
	var b strings.Builder
	switch x := v.(type) {
	case *fork.Variant:
		if x == nil || x.Trace == nil || x.Base == nil {
			return "", fmt.Errorf("cannot render a nil or incomplete *fork.Variant")
		}
		renderVariant(&b, x)
	case *replay.Result:
		if x == nil || x.Trace == nil {
			return "", fmt.Errorf("cannot render a nil *replay.Result, or one without a trace")
		}
		renderResult(&b, x)
	case *diff.Result:
		if x == nil {
			return "", fmt.Errorf("cannot render a nil *diff.Result")
		}
		renderDiff(&b, x)
	case *trace.Trace:
		if x == nil {
			return "", fmt.Errorf("cannot render a nil *trace.Trace")
		}
		renderTrace(&b, x)
	case *fork.Sweep:
		if x == nil || x.Base == nil {
			return "", fmt.Errorf("cannot render a nil *fork.Sweep")
		}
		renderSweep(&b, x)
	default:
		return "", fmt.Errorf("cannot render a %T: pass a *fork.Variant, *replay.Result, *diff.Result, *trace.Trace or *fork.Sweep", v)
	}
	return normalize(b.String()), nil
}

// ---- rendering ----

func traceName(tr *trace.Trace) string {
	if tr.Path != "" {
		return filepath.Base(tr.Path)
	}
	return "in-memory run of " + strconv.Quote(tr.AgentName)
}

func renderVariant(b *strings.Builder, v *fork.Variant) {
	fmt.Fprintf(b, "fork of %s at %s: %s\n", traceName(v.Base), v.At.Asked, v.At)
	if len(v.Changes) == 0 {
		b.WriteString("change    none (a null fork)\n")
	}
	for _, c := range v.Changes {
		state := "unused: its target matched nothing in the tail"
		if c.Applied > 0 {
			steps := make([]string, len(c.Steps))
			for i, s := range c.Steps {
				steps[i] = strconv.Itoa(s)
			}
			state = "applied at step " + strings.Join(steps, ", ")
			if c.Applied > len(c.Steps) {
				state += fmt.Sprintf(" (+%d more)", c.Applied-len(c.Steps))
			}
		}
		fmt.Fprintf(b, "change    %s (%s)\n", short(c.Change.Wire().Canonical()), state)
	}
	status := string(v.Status)
	if bt := v.Diff.Base.Terminal(); string(bt) != status {
		status += " (base: " + string(bt) + ")"
	}
	if v.Err != nil {
		status += ": " + short(firstLine(v.Err.Error()))
	}
	fmt.Fprintf(b, "status    %s\n", status)
	policy := v.Policy.String()
	if v.Memoized {
		policy += ", memoize"
	}
	fmt.Fprintf(b, "policy    %s\n", policy)
	fmt.Fprintf(b, "incurred  $%.4f, %d tokens; live: %d model call(s), %d tool call(s); served in the tail: %d memo hit(s), %d replayed tool call(s)\n",
		v.IncurredCost, v.IncurredTokens, v.LiveModelCalls, v.LiveToolCalls, len(v.MemoHits), len(v.Replayed))
	for _, s := range v.Suppressed {
		fmt.Fprintf(b, "blocked   step %d %s '%s' %s: %s\n", s.Step, s.Kind, s.Tool, short(s.Input.Canonical()), s.Reason)
	}
	renderDiff(b, v.Diff)
}

func renderResult(b *strings.Builder, r *replay.Result) {
	mode := string(r.Mode) + " replay"
	if r.Mode == "" {
		mode = "recording"
	}
	fmt.Fprintf(b, "%s of %s: %d call(s) served, %d executed, %d blocked\n", mode, strconv.Quote(r.Trace.AgentName), r.Served, r.Executed, r.Blocked)
	if r.Divergence != nil {
		fmt.Fprintf(b, "diverged  %s\n", short(strings.ReplaceAll(r.Divergence.Error(), "\n", " ")))
	} else if err := r.VerifyComplete(); err != nil {
		fmt.Fprintf(b, "incomplete %s\n", short(firstLine(err.Error())))
	}
	if r.Err != nil {
		fmt.Fprintf(b, "error     %s\n", short(firstLine(r.Err.Error())))
	}
	renderTrace(b, r.Trace)
}

func renderTrace(b *strings.Builder, tr *trace.Trace) {
	d := diff.Runs(tr, tr)
	fmt.Fprintf(b, "run       %s, %d event(s), %d behavior step(s)\n", d.Variant.Terminal(), d.Variant.Events, d.Variant.Steps)
	writeSteps(b, d, false)
	writeOutput(b, d)
}

func renderDiff(b *strings.Builder, d *diff.Result) {
	if d.Equivalent() {
		fmt.Fprintf(b, "behavior  equivalent to the base (%d steps)\n", len(d.Steps))
	} else {
		fmt.Fprintf(b, "behavior  %d changed, %d added, %d removed, %d unchanged\n", d.Changed, d.Added, d.Removed, d.Unchanged)
		fmt.Fprintf(b, "diverged  %s\n", divergence(d))
	}
	writeSteps(b, d, true)
	for _, s := range d.State {
		switch s.Change {
		case diff.Added:
			fmt.Fprintf(b, "state     + %s: %s\n", s.Key, short(s.After.Canonical()))
		case diff.Removed:
			fmt.Fprintf(b, "state     - %s (was %s)\n", s.Key, short(s.Before.Canonical()))
		default:
			fmt.Fprintf(b, "state     ~ %s: %s → %s\n", s.Key, short(s.Before.Canonical()), short(s.After.Canonical()))
		}
	}
	writeOutput(b, d)
}

func renderSweep(b *strings.Builder, s *fork.Sweep) {
	fmt.Fprintf(b, "sweep of %s at %s: %s, %d variant(s)\n", traceName(s.Base), s.At.Asked, s.At, len(s.Entries))
	width := len("variant")
	for _, e := range s.Entries {
		width = max(width, len(e.Name))
	}
	for _, e := range s.Entries {
		if e.Variant == nil {
			msg := "not run"
			if e.Err != nil {
				msg = firstLine(e.Err.Error())
			}
			fmt.Fprintf(b, "  %-*s  error: %s\n", width, e.Name, short(msg))
			continue
		}
		v := e.Variant
		what := "equivalent to the base"
		if !v.Diff.Equivalent() {
			what = "diverged at " + divergence(v.Diff)
		}
		fmt.Fprintf(b, "  %-*s  %-9s $%.4f  %s\n", width, e.Name, v.Status, v.IncurredCost, what)
	}
}

// writeSteps lists the aligned steps of d; marks says whether to mark them
// as unchanged, changed, added or removed.
func writeSteps(b *strings.Builder, d *diff.Result, marks bool) {
	if marks {
		b.WriteString("steps     (= as in the base, ~ changed, + only in the variant, - only in the base)\n")
	} else {
		b.WriteString("steps\n")
	}
	for i := range d.Steps {
		s := &d.Steps[i]
		side := s.Variant
		if side == nil {
			side = s.Base
		}
		mark := ""
		if marks {
			mark = map[diff.Kind]string{diff.Unchanged: "= ", diff.Changed: "~ ", diff.Added: "+ ", diff.Removed: "- "}[s.Kind]
		}
		fmt.Fprintf(b, "  %sstep %-3d %-8s %s", mark, side.Step, side.Type, side.Label)
		if what := stepSummary(side); what != "" {
			b.WriteString("  ")
			b.WriteString(what)
		}
		b.WriteByte('\n')
		if s.Kind != diff.Changed {
			continue
		}
		if s.Base.Step != s.Variant.Step {
			fmt.Fprintf(b, "      (step %d in the base)\n", s.Base.Step)
		}
		for _, c := range s.Changes {
			fmt.Fprintf(b, "      %s: %s → %s\n", c.Path, valueText(c.Expected), valueText(c.Actual))
		}
	}
}

// stepSummary is what a step did: a call's status and output, a state
// write's new value, a decision's or parameter's value, a node's status, an
// error's message.
func stepSummary(s *trace.BehaviorStep) string {
	p := s.Payload
	switch s.Type {
	case trace.StepTool, trace.StepLLM:
		st, _ := p.Get("status").Str()
		return st + " " + valueText(p.Get("output"))
	case trace.StepState:
		return "= " + valueText(p.Get("after"))
	case trace.StepDecision, trace.StepParam:
		return "= " + valueText(p.Get("value"))
	case trace.StepNode:
		st, _ := p.Get("status").Str()
		if e := p.Get("error"); !e.IsAbsent() && !e.IsNull() {
			return st + " " + valueText(e)
		}
		return st
	case trace.StepError:
		return valueText(p.Get("message"))
	case trace.StepRun:
		st, _ := p.Get("run_status").Str()
		return st
	}
	return ""
}

func writeOutput(b *strings.Builder, d *diff.Result) {
	for i := len(d.Steps) - 1; i >= 0; i-- {
		s := d.Steps[i].Variant
		if s != nil && s.Type == trace.StepRun {
			fmt.Fprintf(b, "output    %s\n", valueText(s.Payload.Get("output")))
			return
		}
	}
	b.WriteString("output    (the run has no run_end)\n")
}

// divergence describes the first divergence of d in one line, naming its
// step: "step 7: llm 'fake/fake-1' changed: input.system …".
func divergence(d *diff.Result) string {
	dv := d.Divergence
	if dv == nil {
		return "nowhere: the runs are equivalent"
	}
	switch dv.Kind {
	case diff.Added:
		return fmt.Sprintf("step %d: %s '%s' only in the variant", dv.Variant.Step, dv.Variant.Type, dv.Variant.Label)
	case diff.Removed:
		return fmt.Sprintf("step %d: %s '%s' only in the base", dv.Base.Step, dv.Base.Type, dv.Base.Label)
	}
	sd := &d.Steps[dv.Index]
	if dv.Base.Type != dv.Variant.Type || dv.Base.Label != dv.Variant.Label {
		return fmt.Sprintf("step %d: %s '%s' became %s '%s'", dv.Variant.Step, dv.Base.Type, dv.Base.Label, dv.Variant.Type, dv.Variant.Label)
	}
	text := fmt.Sprintf("step %d: %s '%s' changed", dv.Variant.Step, dv.Variant.Type, dv.Variant.Label)
	if len(sd.Changes) > 0 {
		c := sd.Changes[0]
		text += fmt.Sprintf(": %s %s → %s", c.Path, valueText(c.Expected), valueText(c.Actual))
		if n := len(sd.Changes) - 1; n > 0 {
			text += fmt.Sprintf(" (+%d more)", n)
		}
	}
	return text
}

func valueText(v trace.Value) string {
	if v.IsAbsent() {
		return "(absent)"
	}
	return short(v.Canonical())
}

// short cuts s to 200 characters, or just past a volatile value (an id or
// a time) that straddles the cut, so that normalize still recognizes it.
func short(s string) string {
	const limit = 200
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	cut := len(string([]rune(s)[:limit]))
	for _, v := range volatile {
		for _, m := range v.re.FindAllStringIndex(s, -1) {
			if m[0] < cut && m[1] > cut {
				cut = m[1]
			}
		}
	}
	if cut >= len(s) {
		return s
	}
	return s[:cut] + "…"
}

// ---- normalization ----

var volatile = []struct {
	re   *regexp.Regexp
	name string
}{
	{regexp.MustCompile(`\brun_[0-9a-f]{32}\b`), "run"},
	{regexp.MustCompile(`\bevt_[0-9a-f]{32}\b`), "evt"},
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "uuid"},
	{regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`), "time"},
}

// normalize replaces the run ids, event ids, UUIDs and times in s by
// placeholders numbered in order of first appearance, so that the same value
// gets the same placeholder everywhere.
func normalize(s string) string {
	for _, v := range volatile {
		seen := map[string]string{}
		s = v.re.ReplaceAllStringFunc(s, func(m string) string {
			p, ok := seen[m]
			if !ok {
				p = fmt.Sprintf("<%s-%d>", v.name, len(seen)+1)
				seen[m] = p
			}
			return p
		})
	}
	return s
}

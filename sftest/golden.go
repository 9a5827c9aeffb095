package sftest

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/hexops/autogold/v2"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/failures"
	"github.com/stepfork/stepfork/internal/outcome"
	"github.com/stepfork/stepfork/internal/readlimit"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/internal/volatile"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// maxGoldenBytes bounds a golden file read.
const maxGoldenBytes = 64 << 20

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
	reportOnFailure(t, v)
	text, err := Render(v)
	if err != nil {
		t.Fatalf("sftest.Golden: %v", err)
	}
	file, known := goldenFile(t, opts)
	again := runPattern(t.Name())
	// autogold.ExpectFile is called even when the file matches: under
	// -update -clean it deletes the golden files no test asked for.
	want, err := readlimit.ReadFile(file, maxGoldenBytes) // never a FIFO, never a gigabyte
	if known && err != nil && !errors.Is(err, fs.ErrNotExist) {
		// autogold reads the file itself, whole and blocking: a FIFO would
		// hang the test, a link to /dev/zero or a gigabyte fill its memory,
		// with -update too.
		t.Fatalf("sftest.Golden: %v\na golden file is a regular file of at most %d bytes: remove %s and write it again with:\n\tgo test -run '%s' -update", err, maxGoldenBytes, file, again)
	}
	switch {
	case known && err == nil && bytes.Equal(want, []byte(text)):
		// matches: nothing to say
	case updating():
		t.Logf("sftest.Golden: writing %s", file)
	case !known:
		t.Logf("sftest.Golden: if the rendering differs from the golden file or the file does not exist, accept the rendering with:\n\tgo test -run '%s' -update", again)
	case os.IsNotExist(err):
		t.Logf("sftest.Golden: %s does not exist; create it with:\n\tgo test -run '%s' -update", file, again)
		failures.Note(t, fmt.Sprintf("%s does not exist; create it with: go test -run '%s' -update", file, again), -1, 0)
	default:
		t.Logf("sftest.Golden: the rendering differs from %s; if the change is intended, accept it with:\n\tgo test -run '%s' -update", file, again)
		failures.Note(t, fmt.Sprintf("the rendering differs from %s%s", file, firstDifferentLine(string(want), text)), -1, 0)
	}
	autogold.ExpectFile(t, autogold.Raw(text), opts...)
}

// firstDifferentLine says where want and got first differ: ", first at
// line 7:\n  want: …\n  got:  …" ("" when they do not).
func firstDifferentLine(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b || i >= len(w) || i >= len(g) {
			return fmt.Sprintf(", first at line %d:\n  want: %s\n  got:  %s", i+1, a, b)
		}
	}
	return ""
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

// goldenFile is the file autogold.ExpectFile compares with:
// testdata/<test name>.golden, or the directory and name that the first
// autogold.Dir and autogold.Name among opts give. autogold keeps them in
// unexported string fields of its options ("dir", "name"), which are read
// by reflection; when an option does not have that shape (another autogold
// version), known is false and Golden's messages name no file rather than a
// wrong one.
func goldenFile(t *testing.T, opts []autogold.Option) (file string, known bool) {
	dir, name := "", ""
	for _, o := range opts {
		rv := reflect.ValueOf(o)
		if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
			return "", false
		}
		d, n := rv.Elem().FieldByName("dir"), rv.Elem().FieldByName("name")
		if d.Kind() != reflect.String || n.Kind() != reflect.String {
			return "", false
		}
		if dir == "" {
			dir = d.String()
		}
		if name == "" {
			name = n.String()
		}
	}
	if dir == "" {
		dir = "testdata"
	}
	if name == "" {
		name = t.Name()
	}
	return filepath.Join(dir, name+".golden"), true
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
// their step numbers, never by event or run ids (a call by the step it was
// made at, not the step its result landed at, which for concurrent calls
// depends on scheduling), and no timestamp or duration is printed. Payloads are canonical JSON, and everything printed
// is redacted first, as a recording is (trace.RedactValue): a secret in a
// change, an error or a label never reaches a golden file. Any id a
// provider minted in the runs' model responses (trace.MintedIDs: a response
// id, a tool-call id, wherever it appears: in the answer, in the requests
// and tool inputs that carry it back), run id, event id or UUID in the text
// is replaced by a placeholder numbered by kind in order of first
// appearance (<call-1>, <response-1>, <run-1>, <evt-1>, <uuid-1>), the same
// id always by the same placeholder; any RFC 3339 time
// (whatever its number of fractional digits) by <time>, unnumbered, since two
// times that happen to be equal are a coincidence, not an identity. Only
// then is a long text cut: to its first 200 characters, or, for a changed
// field, on both sides to the same window of 200 characters around the first
// difference, so that a sentence appended to a long prompt shows as that
// sentence rather than as two identical beginnings.
func Render(v any) (string, error) {
	r := newRenderer()
	b := &r.b
	switch x := v.(type) {
	case *fork.Variant:
		if x == nil || x.Trace == nil || x.Base == nil {
			return "", fmt.Errorf("cannot render a nil or incomplete *fork.Variant")
		}
		r.know(trace.MintedIDs(x.Trace, x.Base))
		r.renderVariant(x)
	case *replay.Result:
		if x == nil || x.Trace == nil {
			return "", fmt.Errorf("cannot render a nil *replay.Result, or one without a trace")
		}
		r.know(trace.MintedIDs(x.Trace))
		r.renderResult(x)
	case *diff.Result:
		if x == nil {
			return "", fmt.Errorf("cannot render a nil *diff.Result")
		}
		r.know(x.Base.Minted, x.Variant.Minted)
		r.renderDiff(x)
	case *trace.Trace:
		if x == nil {
			return "", fmt.Errorf("cannot render a nil *trace.Trace")
		}
		r.know(trace.MintedIDs(x))
		r.renderTrace(x)
	case *fork.Sweep:
		if x == nil || x.Base == nil {
			return "", fmt.Errorf("cannot render a nil *fork.Sweep")
		}
		r.knowSweep(x)
		r.renderSweep(x)
	default:
		return "", fmt.Errorf("cannot render a %T: pass a *fork.Variant, *replay.Result, *diff.Result, *trace.Trace or *fork.Sweep", v)
	}
	// Texts that did not go through text, value or pair (a step's label, a
	// trace's file name) are redacted and normalized here, with the same
	// numbering.
	out, _ := trace.RedactString(b.String())
	return r.normalize(out), nil
}

// renderer writes a rendering. Every text taken from the runs (payloads,
// labels, messages) goes through text, value or pair, which redact it and
// replace its volatile values by placeholders before cutting it, so a cut
// falls at the same place whatever the width of the values it replaced.
type renderer struct {
	b      strings.Builder
	ph     volatile.Numbering // volatile kind → value → placeholder
	minted map[string]string  // the ids providers minted in the runs rendered: id → kind
}

func newRenderer() *renderer {
	r := &renderer{}
	r.b.Grow(4 << 10) // a golden of a few steps, without growing
	return r
}

// know adds ids providers minted in the runs rendered (id → kind) to those
// shown as placeholders.
func (r *renderer) know(ids ...map[string]string) {
	for _, m := range ids {
		for id, kind := range m {
			if r.minted == nil {
				r.minted = map[string]string{}
			}
			r.minted[id] = kind
		}
	}
}

// knowSweep is know for the runs of a sweep.
func (r *renderer) knowSweep(sw *fork.Sweep) {
	r.know(trace.MintedIDs(sw.Base))
	for _, e := range sw.Entries {
		if e.Variant != nil {
			r.know(trace.MintedIDs(e.Variant.Trace))
		}
	}
}

// ---- rendering ----

func traceName(tr *trace.Trace) string {
	if tr.Path != "" {
		return filepath.Base(tr.Path)
	}
	return "in-memory run of " + strconv.Quote(tr.AgentName)
}

func (r *renderer) renderVariant(v *fork.Variant) {
	b := &r.b
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
		fmt.Fprintf(b, "change    %s (%s)\n", r.value(c.Change.Wire()), state)
	}
	status := string(v.Status)
	if bt := v.Diff.Base.Terminal(); string(bt) != status {
		status += " (base: " + string(bt) + ")"
	}
	if v.Err != nil {
		status += ": " + r.text(firstLine(v.Err.Error()))
	}
	fmt.Fprintf(b, "status    %s\n", status)
	policy := v.Policy.String()
	if v.Memoized {
		policy += ", memoize"
	}
	fmt.Fprintf(b, "policy    %s\n", policy)
	fmt.Fprintf(b, "incurred  %s, %d tokens; live: %d model call(s), %d tool call(s); served in the tail: %d memo hit(s), %d replayed tool call(s)\n",
		usd.Format(v.IncurredCost), v.IncurredTokens, v.LiveModelCalls, v.LiveToolCalls, len(v.MemoHits), len(v.Replayed))
	for _, s := range v.Suppressed {
		fmt.Fprintf(b, "blocked   step %d %s '%s' %s: %s\n", s.Step, s.Kind, s.Tool, r.value(s.Input), s.Reason)
	}
	r.renderDiff(v.Diff)
}

func (r *renderer) renderResult(res *replay.Result) {
	b := &r.b
	mode := string(res.Mode) + " replay"
	if res.Mode == "" {
		mode = "recording"
	}
	fmt.Fprintf(b, "%s of %s: %d call(s) served, %d executed, %d blocked\n", mode, r.text(strconv.Quote(res.Trace.AgentName)), res.Served, res.Executed, res.Blocked)
	if res.Divergence != nil {
		fmt.Fprintf(b, "diverged  %s\n", r.text(strings.ReplaceAll(res.Divergence.Error(), "\n", " ")))
	} else if err := res.VerifyComplete(); err != nil {
		fmt.Fprintf(b, "incomplete %s\n", r.text(firstLine(err.Error())))
	}
	if res.Err != nil {
		fmt.Fprintf(b, "error     %s\n", r.text(firstLine(res.Err.Error())))
	}
	r.renderTrace(res.Trace)
}

func (r *renderer) renderTrace(tr *trace.Trace) {
	b := &r.b
	d := diff.Runs(tr, tr)
	fmt.Fprintf(b, "run       %s, %d event(s), %d behavior step(s)\n", d.Variant.Terminal(), d.Variant.Events, d.Variant.Steps)
	r.writeSteps(d, false)
	r.writeOutput(d)
}

func (r *renderer) renderDiff(d *diff.Result) {
	b := &r.b
	if d.Equivalent() {
		fmt.Fprintf(b, "behavior  equivalent to the base (%d steps)\n", len(d.Steps))
	} else {
		fmt.Fprintf(b, "behavior  %d changed, %d added, %d removed, %d unchanged\n", d.Changed, d.Added, d.Removed, d.Unchanged)
		fmt.Fprintf(b, "diverged  %s\n", r.divergence(d))
	}
	r.writeSteps(d, true)
	for _, s := range d.State {
		switch s.Change {
		case diff.Added:
			fmt.Fprintf(b, "state     + %s: %s\n", s.Key, r.value(s.After))
		case diff.Removed:
			fmt.Fprintf(b, "state     - %s (was %s)\n", s.Key, r.value(s.Before))
		default:
			fmt.Fprintf(b, "state     ~ %s: %s → %s\n", s.Key, r.value(s.Before), r.value(s.After))
		}
	}
	r.writeOutput(d)
}

func (r *renderer) renderSweep(s *fork.Sweep) {
	header := fmt.Sprintf("sweep of %s at %s: %s, %d variant(s)", traceName(s.Base), s.At.Asked, s.At, len(s.Entries))
	outcome.Write(&r.b, header, sweepRows(s, r, nil))
}

// sweepRows are the sweep's variants as its texts show them (outcome.Row):
// what each changed and did, normalized by r; checks, unless nil, are the
// outcomes of sftest.Sweep's checks. Where a variant was saved is left out
// (a path of the test's temporary directory would churn).
func sweepRows(s *fork.Sweep, r *renderer, checks []string) []outcome.Row {
	rows := make([]outcome.Row, len(s.Entries))
	for i := range s.Entries {
		e := &s.Entries[i]
		if e.Variant == nil {
			msg := "not run"
			if e.Err != nil {
				msg = firstLine(e.Err.Error())
			}
			rows[i] = outcome.Row{Name: e.Name, Err: r.text(msg)}
			continue
		}
		var changes []string
		for _, c := range e.Variant.Changes {
			changes = append(changes, r.text(c.Description))
		}
		samples := make([]outcome.Sample, len(e.Samples))
		for k, v := range e.Samples {
			if v != nil {
				samples[k] = outcome.Sample{Status: string(v.Status), Cost: v.IncurredCost}
			}
		}
		rows[i] = outcome.RowOf(e.Name, changes, samples, e.Variant.Diff, &outcome.Norm{Value: r.normalValue, CallSteps: true})
		rows[i].Summary.Divergence = r.line(rows[i].Summary.Divergence)
		if st := e.Stats(); e.Variant.Scored && !math.IsNaN(st.Mean) {
			rows[i].Score = outcome.ScoreText(st.Samples, st.Mean, st.Low, st.High, e.Variant.BaseScore)
		}
		if checks != nil {
			rows[i].Check = checks[i]
		}
	}
	return rows
}

// writeSteps lists the aligned steps of d; marks says whether to mark them
// as unchanged, changed, added or removed.
func (r *renderer) writeSteps(d *diff.Result, marks bool) {
	b := &r.b
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
		if what := r.stepSummary(side); what != "" {
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
			before, after := r.pair(c.Expected, c.Actual)
			fmt.Fprintf(b, "      %s: %s → %s\n", c.Path, before, after)
		}
	}
}

// stepSummary is what a step did: a call's status and output, a state
// write's new value, a decision's or parameter's value, a node's status, an
// error's message.
func (r *renderer) stepSummary(s *trace.BehaviorStep) string {
	p := s.Payload
	switch s.Type {
	case trace.StepTool, trace.StepLLM:
		st, _ := p.Get("status").Str()
		return st + " " + r.value(p.Get("output"))
	case trace.StepState:
		return "= " + r.value(p.Get("after"))
	case trace.StepDecision, trace.StepParam:
		return "= " + r.value(p.Get("value"))
	case trace.StepNode:
		st, _ := p.Get("status").Str()
		if e := p.Get("error"); !e.IsAbsent() && !e.IsNull() {
			return st + " " + r.value(e)
		}
		return st
	case trace.StepError:
		return r.value(p.Get("message"))
	case trace.StepRun:
		st, _ := p.Get("run_status").Str()
		return st
	}
	return ""
}

func (r *renderer) writeOutput(d *diff.Result) {
	b := &r.b
	for i := len(d.Steps) - 1; i >= 0; i-- {
		s := d.Steps[i].Variant
		if s != nil && s.Type == trace.StepRun {
			fmt.Fprintf(b, "output    %s\n", r.value(s.Payload.Get("output")))
			return
		}
	}
	b.WriteString("output    (the run has no run_end)\n")
}

// divergence describes the first divergence of d in one line
// (diff.Divergence.String through outcome.Of), naming the step of its call:
// "step 7: llm 'fake/fake-1' changed: input.system …". Its values are
// redacted and normalized before the description cuts them, so that the cut
// falls at the same place whatever the ids it holds.
func (r *renderer) divergence(d *diff.Result) string {
	return r.divergenceLine(d.Divergence)
}

// divergenceLine is divergence for any divergence of a diff (the first
// change of behavior, say).
func (r *renderer) divergenceLine(first *diff.Divergence) string {
	if first == nil {
		return "nowhere: the runs are equivalent"
	}
	return r.line(outcome.Line(first, &outcome.Norm{Value: r.normalValue, CallSteps: true}))
}

// normalValue is v redacted and normalized (absentOr), as a value.
func (r *renderer) normalValue(v trace.Value) trace.Value {
	if v.IsAbsent() {
		return v
	}
	n, err := trace.ParseValue([]byte(r.absentOr(v)))
	if err != nil {
		return v
	}
	return n
}

// line is s redacted and normalized, not cut.
func (r *renderer) line(s string) string {
	s, _ = trace.RedactString(s)
	return r.normalize(s)
}

func (r *renderer) value(v trace.Value) string {
	return clip.Head(r.absentOr(v), textLimit)
}

// textLimit is how many characters of a text a rendering shows.
const textLimit = 200

// text is s redacted (trace.RedactString), with its volatile values
// replaced (normalize), then cut to textLimit characters.
func (r *renderer) text(s string) string {
	s, _ = trace.RedactString(s)
	return clip.Head(r.normalize(s), textLimit)
}

// pair is the canonical JSON of a changed value before and after, redacted
// and normalized, then cut on both sides to the same window around their
// first difference (clip.Diff).
func (r *renderer) pair(before, after trace.Value) (string, string) {
	return clip.Diff(r.absentOr(before), r.absentOr(after), textLimit)
}

// absentOr is the canonical JSON of v redacted (trace.RedactValue: values
// under sensitive keys and credentials in any string), then normalized; or
// "(absent)".
func (r *renderer) absentOr(v trace.Value) string {
	if v.IsAbsent() {
		return "(absent)"
	}
	v, _ = trace.RedactValue(v)
	return r.normalize(v.Canonical())
}

// ---- normalization ----

// normalize replaces the volatile values in s by placeholders
// (volatile.Numbering.Replace): the ids providers minted in the runs by
// kind (<call-1>, <response-1>), run ids, event ids and UUIDs numbered in
// order of first appearance in the rendering, so that the same value gets
// the same placeholder everywhere, and times by <time>.
func (r *renderer) normalize(s string) string { return r.ph.Replace(s, r.minted) }

package sftest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/corpus"
	"github.com/stepfork/stepfork/internal/shapes"
	"github.com/stepfork/stepfork/internal/view"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// The schedules harness: every concurrent shape of package shapes, recorded
// with one timing and replayed and forked with others, at GOMAXPROCS 1 and
// 4. Each run checks a frozen replay, a memoized null fork at fork.Start
// (whose trace must be the base's), ForkCheck at every point, and a
// one-result change aimed at one goroutine's call (which must change that
// call and only that call); the texts test checks that the rendered golden,
// Explain and the report text are one text across re-recordings.
//
// CI runs a few repetitions; the counts are:
//
//	STEPFORK_SCHEDULE_RUNS=200 go test -race ./sftest -run 'TestSchedules$' -timeout 2h
//	STEPFORK_SCHEDULE_RECORDINGS=50 go test -race ./sftest -run 'TestScheduleTexts$'

// repetitions is the count an environment variable sets, def by default and
// 1 under -short.
func repetitions(t *testing.T, env string, def int) int {
	t.Helper()
	if s := os.Getenv(env); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", env, s)
		}
		return n
	}
	if testing.Short() {
		return 1
	}
	return def
}

var (
	recordDelays = shapes.Delays{Max: 2 * time.Millisecond}
	replayDelays = shapes.Delays{Max: 300 * time.Microsecond, Reverse: true}
)

func recordShape(t *testing.T, sh shapes.Shape, d shapes.Delays) *trace.Trace {
	t.Helper()
	res, err := replay.Record(context.Background(), sh.Name, sh.Input, sh.Agent(d))
	if err != nil || res.Err != nil {
		t.Fatalf("recording %s: %v, %v", sh.Name, err, res.Err)
	}
	return res.Trace
}

// eachProcs runs f at GOMAXPROCS 1 and 4 (not in parallel: GOMAXPROCS is
// the process's).
func eachProcs(t *testing.T, f func(t *testing.T)) {
	for _, procs := range []int{1, 4} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			prev := runtime.GOMAXPROCS(procs)
			defer runtime.GOMAXPROCS(prev)
			f(t)
		})
	}
}

func TestSchedules(t *testing.T) {
	runs := repetitions(t, "STEPFORK_SCHEDULE_RUNS", 2)
	eachProcs(t, func(t *testing.T) {
		for _, sh := range shapes.All() {
			t.Run(sh.Name, func(t *testing.T) {
				for run := range runs {
					if !checkSchedule(t, sh) {
						t.Fatalf("failed at run %d of %d", run+1, runs)
					}
				}
			})
		}
	})
}

// checkSchedule runs one round of the harness on sh and reports whether it
// passed.
func checkSchedule(t *testing.T, sh shapes.Shape) bool {
	t.Helper()
	ctx := context.Background()
	base := recordShape(t, sh, recordDelays)
	agent := sh.Agent(replayDelays)
	ok := true
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		ok = false
	}

	res, err := replay.Replay(ctx, base, agent)
	switch {
	case err != nil:
		fail("frozen replay: %v", err)
	case res.Executed != 0:
		fail("frozen replay executed %d call(s)", res.Executed)
	}

	v, err := fork.Run(ctx, base, fork.Start(), agent, fork.Memoize())
	if err != nil {
		fail("null fork at Start: %v", err)
	} else {
		if !v.Diff.Equivalent() {
			fail("null fork at Start is not equivalent:\n%s", v.Diff.Explain())
		}
		if v.LiveModelCalls+v.LiveToolCalls > 0 || len(v.Suppressed) > 0 {
			fail("null fork at Start: %d live model, %d live tool call(s), %d suppressed", v.LiveModelCalls, v.LiveToolCalls, len(v.Suppressed))
		}
		if want, got := mustRender(t, base), mustRender(t, v.Trace); want != got {
			fail("the null fork's trace is not its base's:\n--- base\n%s\n--- fork\n%s", want, got)
		}
	}

	for _, f := range NullForks(ctx, base, agent) {
		fail("ForkCheck: a null fork at step %d (%s) does not reproduce the base: %v", f.Point.Step, f.Point.Description, f.Err)
	}

	id, model, out, err := sh.Target(base)
	if err != nil {
		fail("%v", err)
		return ok
	}
	change := fork.ToolResult(fork.OnEvent(id), out)
	if model {
		change = fork.LLMResponse(fork.OnEvent(id), out)
	}
	cv, err := fork.Run(ctx, base, fork.Start(), agent, change, fork.Memoize(), fork.Allow(sh.Allow...))
	if err != nil {
		fail("the change aimed at %s: %v", id, err)
		return ok
	}
	if cv.Status != fork.StatusCompleted || cv.Changes[0].Applied != 1 {
		fail("the change aimed at %s: status %s, applied %d time(s)", id, cv.Status, cv.Changes[0].Applied)
	}
	if err := sh.Check(runOutput(base), runOutput(cv.Trace)); err != nil {
		fail("the change aimed at %s: %v\n%s", id, err, cv.Diff.Explain())
	}
	// The targeted call is the one whose output changed, and its step in
	// the diff names it.
	found := false
	for _, s := range cv.Diff.Steps {
		if s.Base != nil && s.Base.EventID == id {
			found = true
			if s.Kind != "changed" || len(s.Changes) == 0 || !strings.HasPrefix(s.Changes[0].Path, "output") {
				fail("the targeted call's step is %s %v", s.Kind, s.Changes)
			}
		}
	}
	if !found {
		fail("the targeted call %s is not in the diff", id)
	}
	return ok
}

func mustRender(t *testing.T, v any) string {
	t.Helper()
	s, err := Render(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func runOutput(tr *trace.Trace) trace.Value {
	for i := len(tr.Events) - 1; i >= 0; i-- {
		if tr.Events[i].Type == trace.RunEnd {
			return tr.Events[i].Output
		}
	}
	return trace.NullValue
}

// pageText is a page as HTML, with ids and times normalized as a rendering
// normalizes them and durations blanked. The page marks where two values
// differ, inside ids too: the marks go before the ids are normalized.
func pageText(t *testing.T, p *view.Page) string {
	t.Helper()
	var b strings.Builder
	if err := p.Render(&b); err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer("<mark>", "", "</mark>", "").Replace(b.String())
	return durations.ReplaceAllString(newRenderer().normalize(s), "<duration>")
}

// sweepBase is the start of a sweep's Explain, naming its base by the
// start of the run id.
var sweepBase = regexp.MustCompile(`^sweep of \S+`)

// durations are how long a call took, as a page shows them ("3 ms", and
// "ms":3 in its data): timing, not behavior.
var durations = regexp.MustCompile(`\b\d+(\.\d+)? ?(ns|µs|ms|s)\b|"ms":\d+`)

// TestScheduleTexts: the texts about runs of the same behaviour are one
// text, whatever order the goroutines ran in: the rendering of the
// recording and of a variant with the shape's change (what Golden
// compares), the variant's Explain and what stepfork diff prints of it, as
// text and JSON (ids normalized as a rendering normalizes them), its page
// (durations blanked too), and the report text of a corpus entry for it.
func TestScheduleTexts(t *testing.T) {
	recordings := repetitions(t, "STEPFORK_SCHEDULE_RECORDINGS", 2)
	eachProcs(t, func(t *testing.T) {
		for _, sh := range shapes.All() {
			t.Run(sh.Name, func(t *testing.T) {
				texts := map[string][]string{}
				for range recordings {
					base := recordShape(t, sh, recordDelays)
					id, model, out, err := sh.Target(base)
					if err != nil {
						t.Fatal(err)
					}
					change := fork.ToolResult(fork.OnEvent(id), out)
					if model {
						change = fork.LLMResponse(fork.OnEvent(id), out)
					}
					v, err := fork.Run(context.Background(), base, fork.Start(), sh.Agent(replayDelays), change, fork.Memoize(), fork.Allow(sh.Allow...))
					if err != nil {
						t.Fatal(err)
					}
					texts["recording"] = append(texts["recording"], mustRender(t, base))
					texts["golden"] = append(texts["golden"], mustRender(t, v))
					texts["explain"] = append(texts["explain"], newRenderer().normalize(v.Diff.Explain()))
					// What stepfork diff prints, as text and as JSON.
					texts["diff text"] = append(texts["diff text"], newRenderer().normalize(v.Diff.StepforkText()))
					texts["diff json"] = append(texts["diff json"], newRenderer().normalize(string(v.Diff.JSON())))
					texts["run page"] = append(texts["run page"], pageText(t, view.RunPage(base)))
					texts["variant page"] = append(texts["variant page"], pageText(t, view.VariantPage(v)))
					// A sweep of the change and a control: its golden, its
					// Explain and its page.
					sw, err := fork.Each(context.Background(), base, fork.Start(), sh.Agent(replayDelays),
						[]fork.Named{{Name: "control"}, {Name: "change", Changes: []fork.Change{change}}},
						fork.Memoize(), fork.Allow(sh.Allow...), fork.Concurrency(2))
					if err != nil {
						t.Fatal(err)
					}
					texts["sweep golden"] = append(texts["sweep golden"], mustRender(t, sw))
					// It names the base by the start of its run id.
					explain := sweepBase.ReplaceAllString(sw.Explain(), "sweep of <run>")
					texts["sweep explain"] = append(texts["sweep explain"], newRenderer().normalize(explain))
					texts["sweep page"] = append(texts["sweep page"], pageText(t, view.SweepPage(base, view.FromSweep(sw), func(string) string { return "" })))
					outcome, div := variantOutcome(base, v)
					rep, err := corpus.Merge([]corpus.Record{
						{Kind: "shard", Corpus: "TestCorpus", Total: 1, Matched: 1, Owned: 1},
						{Kind: "entry", Corpus: "TestCorpus", Name: sh.Name, Outcome: outcome, Divergence: div, Passed: true},
					})
					if err != nil {
						t.Fatal(err)
					}
					texts["report"] = append(texts["report"], rep.Text())
				}
				if sh.OrderVaries {
					t.Skipf("%s: its recordings may be written in other orders (a scope's own goroutine works while its goroutines do)", sh.Name)
				}
				for _, kind := range []string{"recording", "golden", "explain", "diff text", "diff json", "run page", "variant page", "sweep golden", "sweep explain", "sweep page", "report"} {
					if strings.HasSuffix(kind, "page") && sh.RandomData {
						continue // a page shows the random values
					}
					distinct := slices.Compact(slices.Sorted(slices.Values(texts[kind])))
					if len(distinct) != 1 {
						t.Errorf("%s: %d distinct texts in %d recordings; the first two:\n--- 1\n%s\n--- 2\n%s", kind, len(distinct), recordings, distinct[0], distinct[1])
					}
				}
			})
		}
	})
}

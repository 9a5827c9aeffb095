package sftest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/corpus"
	"github.com/stepfork/stepfork/internal/failures"
	"github.com/stepfork/stepfork/internal/outcome"
	"github.com/stepfork/stepfork/internal/shard"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Fork forks base at at and runs agent as fork.Run does: the recorded
// prefix is served, opts (changes such as fork.Prompt, and options such as
// fork.Memoize or fork.Allow) apply, and the tail executes. It returns the
// variant; a tail that fails or is blocked is a variant like any other, for
// the assertions to judge.
//
// The test fails at once when the fork cannot run: an unresolvable fork
// point or change, conflicting changes, an agent that panics, or an agent
// that no longer reproduces the recorded prefix (the message starts with
// that divergence and names its step). When the test fails, the page of
// the variant is written where ReportFlag says.
func Fork(t testing.TB, base *trace.Trace, at fork.At, agent replay.Agent, opts ...fork.RunOption) *fork.Variant {
	t.Helper()
	if *exploreFlag != "" {
		exploreAt(t, "Fork", base, agent)
	}
	v, err := fork.Run(t.Context(), base, at, agent, opts...)
	reportOnFailure(t, v)
	if err != nil {
		t.Fatalf("sftest.Fork: %v", err)
	}
	return v
}

// Sweep forks base at at once per variant (fork.Each: the fork point and
// every variant's changes are checked before any runs; variants run
// concurrently, bounded by fork.Concurrency) and then runs check on each
// variant in a subtest named after it, in the order given. check is given
// the subtest, the variant's name as written in variants (the subtest's name
// is that name as go test rewrites it: spaces become underscores) and the
// variant. A variant that could not run fails its own subtest. check may
// call t.Parallel.
//
// When every subtest has finished, a summary table is logged: one line per
// variant with its status, whether its check passed, its incurred cost and
// its first divergence from the base. Sweep returns the sweep (for
// instance for Golden); it fails the test at once when the sweep cannot
// start. A failed subtest gets the page of its variant, a failed test the
// page of the sweep, where ReportFlag says.
//
// While the variants run, Sweep logs how many runs are done
// ("sftest.Sweep: 12 run(s) of 40 variant(s) done (15s)") once they have
// taken 5 seconds, then at most every 5 seconds; it counts fork's
// "variant finished" events, so a [fork.Logger] passed in opts takes the
// place of that count.
func Sweep(t *testing.T, base *trace.Trace, at fork.At, agent replay.Agent, variants []fork.Named, check func(t *testing.T, name string, v *fork.Variant), opts ...fork.EachOption) *fork.Sweep {
	t.Helper()
	if *exploreFlag != "" {
		exploreAt(t, "Sweep", base, agent)
	}
	sh, err := shard.FromEnv()
	if err != nil {
		t.Fatalf("sftest.Sweep: %v", err)
	}
	all := len(variants)
	if sh.Sharded() {
		var mine []fork.Named
		for _, v := range variants {
			if sh.Owns(v.Name) {
				mine = append(mine, v)
			}
		}
		t.Logf("sftest.Sweep: shard %s runs %d of the %d variants", sh, len(mine), all)
		variants = mine
	}
	// Progress through fork's "variant finished" events; a Logger of the
	// caller's, given later, takes its place.
	p := newProgress(t, "sftest.Sweep", fmt.Sprintf("run(s) of %d variant(s)", len(variants)), 0)
	opts = append([]fork.EachOption{fork.Logger(p.forkLogger())}, opts...)
	sw, err := fork.Each(t.Context(), base, at, agent, variants, opts...)
	if err != nil {
		t.Fatalf("sftest.Sweep: %v", err)
	}
	reportOnFailure(t, sw)
	var mu sync.Mutex
	results := make([]string, len(sw.Entries))
	t.Cleanup(func() {
		t.Log(sweepSummary(sw, results))
		writeSweepResults(t, sw, sh, all, results)
	})
	parent := t
	for i := range sw.Entries {
		e := &sw.Entries[i]
		t.Run(e.Name, func(t *testing.T) {
			t.Helper()
			t.Cleanup(func() {
				mu.Lock()
				defer mu.Unlock()
				results[i] = map[bool]string{true: "FAIL", false: "ok"}[t.Failed()]
			})
			if e.Variant == nil || e.Err != nil {
				t.Fatalf("sftest.Sweep: variant %q did not run: %v", e.Name, e.Err)
			}
			reportOnFailure(t, e.Variant)
			// The variant's failed assertions go on the sweep's page too
			// (this runs before the subtest's are forgotten).
			t.Cleanup(func() {
				for _, f := range failures.Of(t) {
					f.Variant = e.Name
					failures.Keep(parent, f)
				}
			})
			if check != nil {
				check(t, e.Name, e.Variant)
			}
		})
	}
	return sw
}

// writeSweepResults writes the outcome of each variant this shard ran to
// the -stepfork.results file, as Corpus does for bundles, so that stepfork
// report merges the shards of a sweep too.
func writeSweepResults(t *testing.T, sw *fork.Sweep, sh shard.Shard, all int, checks []string) {
	out := results()
	out.add(corpus.Record{Kind: "shard", Corpus: t.Name(), Index: sh.Index, Total: max(sh.Total, 1), Matched: all, Owned: len(sw.Entries)})
	for i, e := range sw.Entries {
		rec := corpus.Record{Kind: "entry", Corpus: t.Name(), Name: e.Name, Outcome: corpus.NotRun, Passed: checks[i] == "ok"}
		if e.Variant != nil {
			rec.Outcome, rec.Divergence = variantOutcome(sw.Base, e.Variant)
			rec.Divergence = redactText(rec.Divergence)
			rec.BaseStatus, rec.Status, rec.Cost = string(sw.Base.Status), string(e.Variant.Status), e.Variant.IncurredCost
		}
		out.add(rec)
	}
	out.flush(t)
}

// sweepSummary is what Sweep logs: the sweep as its golden shows it (a
// block per variant saying what it changed and did, see Golden), each
// variant's status followed by the outcome of its check.
func sweepSummary(sw *fork.Sweep, results []string) string {
	r := newRenderer()
	r.knowSweep(sw)
	checks := make([]string, len(results))
	for i, res := range results {
		checks[i] = "(check " + map[string]string{"": "not run", "ok": "ok", "FAIL": "FAILED"}[res] + ")"
	}
	var b strings.Builder
	header := fmt.Sprintf("sweep of %s at %s: %d variant(s)", traceName(sw.Base), sw.At, len(sw.Entries))
	outcome.Write(&b, header, sweepRows(sw, r, checks))
	return strings.TrimRight(b.String(), "\n")
}

// PointFailure is a fork point at which a null fork did not reproduce the
// base run, as NullForks reports it.
type PointFailure struct {
	Point fork.PointInfo
	Err   error // the reason, starting with the first divergence
}

// NullForks forks tr at every point fork.Points lists, with no change and
// with fork.Memoize (plus opts), and returns the points where the variant
// does not reproduce the base: an error from fork.Run, a behavior
// difference (assert.CheckEquivalent: the first divergence, then the diff),
// a side effect held back, or a live model or tool call (a memoized null
// fork serves every call, so a live one means the agent's requests are not
// the recorded ones). Forks run concurrently, GOMAXPROCS at a time, so
// agent must be safe for concurrent use, as for fork.Each. ForkCheck is its
// test form.
func NullForks(ctx context.Context, tr *trace.Trace, agent replay.Agent, opts ...fork.RunOption) []PointFailure {
	points := fork.Points(tr)
	errs := make([]error, len(points))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	all := append([]fork.RunOption{fork.Memoize()}, opts...)
	for i, p := range points {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = nullFork(ctx, tr, p, agent, all)
		}()
	}
	wg.Wait()
	var out []PointFailure
	for i, err := range errs {
		if err != nil {
			out = append(out, PointFailure{Point: points[i], Err: err})
		}
	}
	return out
}

func nullFork(ctx context.Context, tr *trace.Trace, p fork.PointInfo, agent replay.Agent, opts []fork.RunOption) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the agent panicked: %v", r)
		}
	}()
	v, err := fork.Run(ctx, tr, p.At(), agent, opts...)
	if err != nil {
		return err
	}
	if err := assert.CheckEquivalent(v); err != nil {
		return err
	}
	if err := assert.CheckNoSuppressedEffects(v); err != nil {
		return err
	}
	if v.LiveModelCalls > 0 || v.LiveToolCalls > 0 {
		return fmt.Errorf("the null fork made %d live model call(s) and %d live tool call(s); a memoized null fork serves every call, so the agent's requests differ from the recorded ones (untraced nondeterminism?)",
			v.LiveModelCalls, v.LiveToolCalls)
	}
	return nil
}

// ForkCheck checks the fidelity of tr and agent at every fork point: a fork
// with no change must reproduce the base run exactly (see NullForks). Each
// point that does not is a failing subtest named after it, for instance
// "step6_before_'decide'_execution_1", whose message starts with the first
// divergence and names its step; the points that pass make no subtest. The
// number of points checked is logged.
func ForkCheck(t *testing.T, tr *trace.Trace, agent replay.Agent, opts ...fork.RunOption) {
	t.Helper()
	if tr == nil {
		t.Fatalf("sftest.ForkCheck: the trace is nil")
	}
	if *exploreFlag != "" {
		exploreAt(t, "ForkCheck", tr, agent)
	}
	failures := NullForks(t.Context(), tr, agent, opts...)
	t.Logf("sftest.ForkCheck: null-forked %s at %d point(s); %d did not reproduce it", traceName(tr), len(fork.Points(tr)), len(failures))
	for _, f := range failures {
		t.Run(PointName(f.Point), func(t *testing.T) {
			t.Helper()
			t.Errorf("a null fork at step %d (%s) does not reproduce the base: %v", f.Point.Step, f.Point.Description, f.Err)
		})
	}
}

// PointName is the subtest name ForkCheck gives a fork point: "step6 before
// 'decide' execution 1" (go test shows spaces as underscores).
func PointName(p fork.PointInfo) string {
	return fmt.Sprintf("step%d %s", p.Step, p.Description)
}

// Minimize finds the shortest prefix of tr from which agent still
// reproduces a failure, and returns it as a trace to commit: the trace a test
// forks (at its last event) to reproduce the failure with the least recorded.
//
// A candidate is the static fork of tr at a fork point p (fork.Trace through p: the
// events up to p, an unfinished run). It reproduces the failure when
// stillFails holds for the counterfactual fork of that prefix at p: the
// recorded prefix served, the rest executed by agent under opts (the
// side-effect guard blocks tool calls that the prefix does not hold unless
// opts allow them with fork.Allow; model calls run through the agent's
// client). The search is delta debugging over the fork points: it first
// checks the candidate at the last point, then bisects towards the start for
// the earliest point that still reproduces it (assuming that a longer prefix
// reproduces whatever a shorter one does), and logs how far it got.
//
// The test fails when tr has no fork point or when even the longest prefix
// does not reproduce the failure. Save the result with
// min.Save("testdata/NAME.sftrace") and commit it.
func Minimize(t testing.TB, tr *trace.Trace, agent replay.Agent, stillFails func(v *fork.Variant) bool, opts ...fork.RunOption) *trace.Trace {
	t.Helper()
	if tr == nil || agent == nil || stillFails == nil {
		t.Fatalf("sftest.Minimize: the trace, the agent and stillFails are all required")
	}
	if *exploreFlag != "" {
		exploreAt(t, "Minimize", tr, agent)
	}
	points := fork.Points(tr)
	if len(points) == 0 {
		t.Fatalf("sftest.Minimize: %s has no fork point, so there is nothing to minimize", traceName(tr))
	}
	try := func(i int) (*trace.Trace, bool, error) {
		p := points[i]
		cut, err := fork.Trace(tr, fork.ThroughStep(p.Step))
		if err != nil {
			return nil, false, err
		}
		prefix := cut.Trace
		v, err := fork.Run(t.Context(), prefix, fork.Step(p.Step), agent, opts...)
		if err != nil {
			return prefix, false, err
		}
		return prefix, stillFails(v), nil
	}
	last := len(points) - 1
	best, ok, err := try(last)
	switch {
	case err != nil:
		t.Fatalf("sftest.Minimize: the prefix up to step %d (%s) cannot be forked: %v", points[last].Step, points[last].Description, err)
	case !ok:
		t.Fatalf("sftest.Minimize: the failure does not reproduce even from the longest prefix (up to step %d, %s); check stillFails, or allow the tools the tail needs with fork.Allow",
			points[last].Step, points[last].Description)
	}
	lo, hi, tries := 0, last, 1 // points[hi] reproduces; find the least such index
	for lo < hi {
		mid := lo + (hi-lo)/2
		cand, ok, err := try(mid)
		tries++
		if err == nil && ok {
			best, hi = cand, mid
		} else {
			lo = mid + 1
		}
	}
	t.Logf("sftest.Minimize: %s: %d → %d event(s); the failure reproduces from step %d (%s) on (%d fork(s) tried)",
		traceName(tr), len(tr.Events), len(best.Events), points[hi].Step, points[hi].Description, tries)
	return best
}

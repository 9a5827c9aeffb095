package sftest

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/corpus"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// spendPlan is what a corpus may spend: the estimate of each bundle's tail
// (from a dry run) and, while the corpus runs, what it spent so far.
type spendPlan struct {
	mu        sync.Mutex
	estimates map[string]float64 // bundle name → estimated cost of its tail
	entries   map[string]CorpusEntry
	total     float64
	budget    float64
	hasBudget bool
	spent     float64
}

// estimateCorpus runs every bundle dry (fork.Heal with fork.DryRun: nothing
// runs live), logs where each tail would start and what it would cost, and
// fails t before anything is spent when the total is over the budget.
func estimateCorpus(t *testing.T, bundles []corpusBundle, agent replay.Agent, cfg *corpusConfig) *spendPlan {
	t.Helper()
	p := &spendPlan{estimates: map[string]float64{}, entries: map[string]CorpusEntry{}, budget: cfg.budget, hasBudget: cfg.hasBudget}
	var lines []string
	n := 0
	for _, b := range bundles {
		e := CorpusEntry{Name: b.name, Path: b.path, Outcome: string(corpus.Estimated), Passed: true}
		tr, err, mismatchErr := loadVerified(t.Context(), b.path)
		if err == nil {
			err = mismatchErr
		}
		if err != nil {
			e.Outcome, e.Passed, e.Divergence = string(corpus.Unloadable), false, firstLine(err.Error())
			p.entries[b.name] = e
			lines = append(lines, fmt.Sprintf("  %s: unloadable: %s", b.name, e.Divergence))
			continue
		}
		e.Build, _, _ = tr.Build()
		opts := append([]fork.RunOption{fork.DryRun()}, cfg.forkOpts...)
		v, err := fork.Heal(t.Context(), tr, agent, opts...)
		switch {
		case err != nil:
			e.Outcome, e.Passed, e.Divergence = string(corpus.FailedOutcome), false, firstLine(err.Error())
			lines = append(lines, fmt.Sprintf("  %s: cannot be estimated: %s", b.name, e.Divergence))
		case v.FirstLive == nil && len(v.Suppressed) > 0:
			e.Tail = stopped(v)
			lines = append(lines, fmt.Sprintf("  %s: would stop: %s", b.name, e.Tail))
		case v.FirstLive == nil:
			e.Tail = "nothing would run live"
			lines = append(lines, fmt.Sprintf("  %s: %s", b.name, e.Tail))
		default:
			est := v.Estimate
			e.Cost = est.CostUSD
			e.Tail = fmt.Sprintf("tail from %s: ~%s over %d model call(s) and %d tool call(s)", v.FirstLive, usd.Format(est.CostUSD), est.ModelCalls, est.ToolCalls)
			p.estimates[b.name] = est.CostUSD
			p.total = usd.Sum(p.total, est.CostUSD)
			n++
			lines = append(lines, fmt.Sprintf("  %s: %s", b.name, e.Tail))
		}
		p.entries[b.name] = e
	}
	head := fmt.Sprintf("sftest.Corpus: estimated, nothing run live: %d of %d bundle(s) would run a tail, ~%s in all", n, len(bundles), usd.Format(p.total))
	if cfg.hasBudget {
		head += fmt.Sprintf(" (budget %s)", usd.Format(cfg.budget))
	}
	t.Log(head + "\n" + strings.Join(lines, "\n"))
	if cfg.hasBudget && p.total > cfg.budget+1e-12 && !cfg.dry {
		t.Fatalf("sftest.Corpus: the tails are estimated at %s, over the budget of %s; nothing ran live. Raise the budget (sftest.Budget, -%s.budget), heal fewer bundles (-%s=REGEXP), or estimate with -%s.dryrun.",
			usd.Format(p.total), usd.Format(cfg.budget), HealFlag, HealFlag, HealFlag)
	}
	return p
}

// reserve says whether the bundle called name may run, its estimate added
// to what was spent; the reason when not.
func (p *spendPlan) reserve(name string) (bool, string) {
	if p == nil || !p.hasBudget {
		return true, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	est := p.estimates[name]
	if p.spent+est > p.budget+1e-12 {
		return false, fmt.Sprintf("its tail is estimated at %s and %s of the budget of %s is spent", usd.Format(est), usd.Format(p.spent), usd.Format(p.budget))
	}
	return true, ""
}

// spend adds what a bundle's run cost.
func (p *spendPlan) spend(cost float64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.spent = usd.Sum(p.spent, cost)
	p.mu.Unlock()
}

// stopped describes the calls the guard held back.
func stopped(v *fork.Variant) string {
	s := v.Suppressed[0]
	return fmt.Sprintf("the guard held back %s '%s' at step %d", s.Kind, s.Tool, s.Step)
}

// classifyBundle runs one bundle through fork.Heal, classifies it, and
// heals it when the heal pattern names it.
func classifyBundle(t testing.TB, b corpusBundle, tr *trace.Trace, agent replay.Agent, cfg *corpusConfig, plan *spendPlan, r bundleRun) bundleRun {
	t.Helper()
	if ok, why := plan.reserve(b.name); !ok {
		t.Errorf("sftest.Corpus: %s was not run: %s", b.path, why)
		r.outcome = corpus.NotRun
		return r
	}
	v, err := fork.Heal(t.Context(), tr, agent, cfg.forkOpts...)
	if v != nil {
		plan.spend(v.IncurredCost)
		r.status, r.cost, r.live, r.tokens = string(v.Status), v.IncurredCost, v.LiveModelCalls+v.LiveToolCalls, v.IncurredTokens
		r.tail = spent(v)
	}
	if err != nil {
		if errors.Is(err, fork.ErrOverBudget) {
			t.Errorf("sftest.Corpus: %s: %v", b.path, err)
		} else {
			t.Errorf("sftest.Corpus: %s could not be run against the agent: %v", b.path, err)
		}
		r.outcome = corpus.FailedOutcome
		return r
	}
	healing := cfg.heal != nil && cfg.heal.MatchString(b.name)
	if v.Status == fork.StatusBlocked || v.Status == fork.StatusCanceled {
		s := ""
		if len(v.Suppressed) > 0 {
			s = v.Suppressed[0].Tool
		}
		r.outcome, r.divergence = corpus.Changed, stopped(v)
		if v.Status == fork.StatusCanceled {
			r.outcome, r.divergence = corpus.FailedOutcome, "canceled"
		}
		what := "classified"
		if healing {
			what = "healed"
		}
		t.Errorf("sftest.Corpus: %s cannot be %s: the agent now calls tool '%s' (step %d), which the recording cannot answer with this input, and no fork.Allow lets it run live; the bundle is left as it was.\n%s\nto let the tail run it, pass sftest.ForkOptions(fork.Allow(%q))",
			b.path, what, s, v.Suppressed[0].Step, v.Suppressed[0].Reason, s)
		return r
	}
	rend := newRenderer()
	switch v.Class {
	case fork.ClassUnchanged:
		r.outcome = corpus.Unchanged
	case fork.ClassIntended:
		r.outcome = corpus.Intended
	case fork.ClassRepaired:
		r.outcome = corpus.Repaired
	default:
		r.outcome = corpus.Changed
		if dv := v.BehaviorChange(); dv != nil {
			r.divergence = rend.divergenceLine(dv)
		}
	}
	if healing && v.Class != fork.ClassUnchanged {
		if err := saveHealed(t, b, v); err != nil {
			t.Errorf("sftest.Corpus: healing %s: %v", b.path, err)
			return r
		}
		r.healed = true
		r.build, _, _ = v.Trace.Build()
		t.Logf("sftest.Corpus: healed %s (%s%s): %s", b.path, r.outcome, intendedWhere(v), r.tail)
		return r
	}
	if v.Class == fork.ClassChanged {
		t.Errorf("sftest.Corpus: the behavior of %s changed: %s\n%s\nif the change is intended, heal the bundle:\n\t-%s='^%s$'",
			b.path, r.divergence, indent(v.Diff.Explain()), HealFlag, regexpQuote(b.name))
	} else if v.FirstLive != nil {
		t.Logf("sftest.Corpus: %s is %s%s (%s)", b.path, r.outcome, intendedWhere(v), r.tail)
	}
	return r
}

// intendedWhere lists where the intended changes showed: ": prompt of
// 'decide' at step 8".
func intendedWhere(v *fork.Variant) string {
	var parts []string
	for _, s := range v.Diff.Steps {
		if s.Intended != "" && len(parts) < 3 {
			step := -1
			if s.Variant != nil {
				step = s.Variant.Step
			}
			parts = append(parts, fmt.Sprintf("%s at step %d", s.Intended, step))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, "; ")
}

// spent says where a variant's tail started and what its live calls spent:
// "tail from model call 'openai/gpt-4o' at step 7: 2 live model call(s), 1
// live tool call(s), 96 tokens, $0.000192".
func spent(v *fork.Variant) string {
	if v.FirstLive == nil {
		return "nothing ran live"
	}
	s := fmt.Sprintf("tail from %s: %d live model call(s), %d live tool call(s), %d tokens, %s",
		v.FirstLive, v.LiveModelCalls, v.LiveToolCalls, v.IncurredTokens, usd.Format(v.IncurredCost))
	if v.UnpricedModelCalls > 0 {
		s += fmt.Sprintf(" (%d unpriced)", v.UnpricedModelCalls)
	}
	return s
}

// saveHealed replaces the bundle with the healed run, atomically: a
// directory is saved over (trace.Save writes a sibling and renames it), a
// packed bundle is packed again from a saved copy. The result is checked as
// sftest.Load checks a bundle.
func saveHealed(t testing.TB, b corpusBundle, v *fork.Variant) error {
	unlock := lockPath(b.path)
	defer unlock()
	to := b.path
	packed := strings.HasSuffix(to, trace.PackedSuffix)
	if packed {
		to = filepath.Join(t.TempDir(), "healed.sftrace")
	}
	healed := v.Trace.Clone()
	if err := healed.Save(to, trace.Overwrite()); err != nil {
		return err
	}
	if packed {
		if err := trace.Pack(to, b.path, trace.Overwrite()); err != nil {
			return fmt.Errorf("packing the healed run: %w", err)
		}
	}
	_, err, mismatchErr := loadVerified(t.Context(), b.path)
	if err != nil {
		return fmt.Errorf("the healed bundle does not load: %w", err)
	}
	return mismatchErr
}

// healRecord heals the trace Record called name (at p, loaded as tr) when
// -stepfork.heal matches name, and returns the healed trace; nil when the
// flag does not name it.
func healRecord(t testing.TB, name, p string, tr *trace.Trace, agent replay.Agent) *trace.Trace {
	t.Helper()
	if *healFlag == "" {
		return nil
	}
	re, err := regexp.Compile(*healFlag)
	if err != nil {
		t.Fatalf("sftest.Record: -%s=%q is not a valid regexp: %v", HealFlag, *healFlag, err)
	}
	if !re.MatchString(name) {
		return nil
	}
	var opts []fork.RunOption
	if *healBudSet {
		opts = append(opts, fork.Budget(*healBudget))
	}
	if *healDryRun {
		opts = append(opts, fork.DryRun())
	}
	v, err := fork.Heal(t.Context(), tr, agent, opts...)
	if err != nil {
		t.Fatalf("sftest.Record: healing %s: %v", p, err)
	}
	switch {
	case v.Status == fork.StatusDryRun:
		t.Logf("sftest.Record: estimated, nothing run live: %s would heal from %s, ~%s over %d model call(s)", p, v.FirstLive, usd.Format(v.Estimate.CostUSD), v.Estimate.ModelCalls)
		return tr
	case v.Status == fork.StatusBlocked:
		s := v.Suppressed[0]
		t.Fatalf("sftest.Record: %s cannot be healed: the agent now calls tool '%s' (step %d), which the recording cannot answer with this input; the trace is left as it was. Record it again (-%s) to run its tools live.\n%s",
			p, s.Tool, s.Step, RecordFlag, s.Reason)
	case v.Class == fork.ClassUnchanged:
		t.Logf("sftest.Record: %s reproduces: nothing to heal", p)
		return tr
	}
	unlock := lockPath(p)
	defer unlock()
	if err := v.Trace.Clone().Save(p, trace.Overwrite()); err != nil {
		t.Fatalf("sftest.Record: healing %s: %v", p, err)
	}
	t.Logf("sftest.Record: healed %s (%s): %s", p, v.Class, spent(v))
	return Load(t, p)
}

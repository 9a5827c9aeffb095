package fork

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/internal/outcome"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Named is one variant of a sweep: a name and its changes.
//
// A variant with no Changes is the sweep's control: it forks the base at
// the same point with nothing changed (beyond the changes [Each]'s options
// give every variant), so the tail runs again as it is — what the other
// variants are compared with when the tail is not deterministic, or when
// Memoize or the guard change what it costs. Write it as
// fork.Named{Name: "control"}; a change that changes nothing, such as an
// empty [State], is refused instead.
type Named struct {
	Name    string
	Changes []Change
}

// Concurrency bounds how many variants of a sweep run at once (default
// GOMAXPROCS).
func Concurrency(n int) EachOption { return eachOption(func(c *config) { c.concurrency = n }) }

// Samples runs every variant of a sweep n times, for tails that are not
// deterministic (default 1).
func Samples(n int) EachOption { return eachOption(func(c *config) { c.samples = n }) }

// Entry is one variant of a sweep.
type Entry struct {
	Name string
	// Variant is the first sample; Samples all of them, in order. A sample
	// that failed to run (an error, a panic, cancellation before it ran) is
	// nil in Samples, and Err says why (the first such error).
	Variant *Variant
	Samples []*Variant
	Err     error
}

// MeanCost is the mean incurred cost of the samples that ran.
func (e *Entry) MeanCost() float64 {
	n, sum := 0, 0.0
	for _, v := range e.Samples {
		if v != nil {
			n++
			sum += v.IncurredCost
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// Sweep is the result of Each: one entry per variant, in the order given.
type Sweep struct {
	GroupID string
	Base    *trace.Trace
	At      Resolved
	Entries []Entry
}

// TotalCost is what every sample of every variant incurred.
func (s *Sweep) TotalCost() float64 {
	total := 0.0
	for i := range s.Entries {
		for _, v := range s.Entries[i].Samples {
			if v != nil {
				total += v.IncurredCost
			}
		}
	}
	return total
}

// Entry returns the entry named name, or nil.
func (s *Sweep) Entry(name string) *Entry {
	for i := range s.Entries {
		if s.Entries[i].Name == name {
			return &s.Entries[i]
		}
	}
	return nil
}

// Each forks base at one point once per variant and runs them. Every variant
// forks the same run at the same point, so the only thing separating them is
// its changes. The base index (pairings, fingerprints, node boundaries,
// occurrences) and the fork point are resolved once and shared read-only by
// all variants, and every variant's changes are checked before any runs: an
// unresolvable point or change, a conflict, an empty or duplicate name is
// an error and nothing runs.
//
// Variants run concurrently, at most Concurrency at a time (GOMAXPROCS by
// default), Samples times each. A variant that fails or panics is reported
// on its own entry and the sweep goes on. opts apply to every variant:
// changes given there are added to each variant's, [SaveDir] saves them,
// and a group id (GroupID, else a new one) ties the variants
// together in their fork.json. When ctx is canceled the variants not yet
// started are not run and the error is ctx's.
func Each(ctx context.Context, base *trace.Trace, at At, agent replay.Agent, variants []Named, opts ...EachOption) (*Sweep, error) {
	if base == nil {
		return nil, errors.New("fork.Each: the base trace is nil")
	}
	if agent == nil {
		return nil, errors.New("fork.Each: the agent is nil")
	}
	cfg := eachConfig(opts)
	ix := indexOf(base)
	plans, r, err := planSweep(ix, at, variants, cfg.changes)
	if err != nil {
		return nil, fmt.Errorf("fork.Each: %w", err)
	}
	for _, p := range plans {
		p.base = base
	}
	if cfg.hasBudget {
		total, samples := 0.0, max(cfg.samples, 1)
		for i, p := range plans {
			total += ix.predict(variants[i].Name, p).CostUSD * float64(samples)
		}
		if err := cfg.checkBudget("fork.Each", total, fmt.Sprintf("%d variant(s) × %d sample(s)", len(plans), samples)); err != nil {
			return nil, err
		}
	}
	// The replay plan of the base, shared by every variant: prepared here,
	// before the workers start, rather than by the first of them while the
	// others wait.
	if _, err := ix.prepared(); err != nil {
		return nil, fmt.Errorf("fork.Each: %w", err)
	}
	if cfg.groupID == "" {
		cfg.groupID = uuid.NewString()
	}
	samples := max(cfg.samples, 1)
	workers := cfg.concurrency
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	sw := &Sweep{GroupID: cfg.groupID, Base: base, At: r, Entries: make([]Entry, len(variants))}
	for i := range variants {
		sw.Entries[i] = Entry{Name: variants[i].Name, Samples: make([]*Variant, samples)}
	}
	if cfg.log != nil {
		cfg.log.LogAttrs(ctx, slog.LevelInfo, "sweep started", slog.String("base_run_id", base.RunID),
			slog.String("group_id", cfg.groupID), slog.Int("variants", len(variants)), slog.Int("samples", samples))
	}

	type job struct{ v, s int }
	jobs := make(chan job)
	errs := make([][]error, len(variants))
	for i := range errs {
		errs[i] = make([]error, samples)
	}
	var wg sync.WaitGroup
	for range min(workers, len(variants)*samples) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				path := ""
				if cfg.save {
					name := sw.Entries[j.v].Name
					if j.s > 0 {
						name = fmt.Sprintf("%s-%d", name, j.s+1)
					}
					path = filepath.Join(cfg.savePath, safeName(name)+".sftrace")
				}
				sw.Entries[j.v].Samples[j.s], errs[j.v][j.s] = runSample(ctx, plans[j.v], agent, &cfg, path)
			}
		}()
	}
feed:
	for v := range variants {
		for s := range samples {
			select {
			case jobs <- job{v, s}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()

	for i := range sw.Entries {
		e := &sw.Entries[i]
		e.Variant = e.Samples[0]
		for s, v := range e.Samples {
			err := errs[i][s]
			if v == nil && err == nil {
				err = fmt.Errorf("fork.Each: variant '%s' was not run: %w", e.Name, ctx.Err())
			}
			if err != nil && e.Err == nil {
				e.Err = err
			}
		}
	}
	if cfg.log != nil {
		cfg.log.LogAttrs(ctx, slog.LevelInfo, "sweep finished", slog.String("group_id", cfg.groupID),
			slog.Float64("incurred_cost_usd", sw.TotalCost()))
	}
	if err := ctx.Err(); err != nil {
		return sw, fmt.Errorf("fork.Each: the sweep was canceled: %w", err)
	}
	return sw, nil
}

// runSample runs one sample, turning a panic into the entry's error.
func runSample(ctx context.Context, p *forkPlan, agent replay.Agent, cfg *config, path string) (v *Variant, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("fork: %w: %v\n%s", ErrAgentPanicked, r, debug.Stack())
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fork: not run: %w", err)
	}
	return p.run(ctx, agent, cfg, path)
}

// planSweep resolves the point once and binds every variant's changes.
func planSweep(ix *index, at At, variants []Named, common []Change) ([]*forkPlan, Resolved, error) {
	if len(variants) == 0 {
		return nil, Resolved{}, errors.New("no variants given, so there is nothing to compare")
	}
	if at == nil {
		at = defaultAt()
	}
	r, err := at.resolve(ix)
	if err != nil {
		return nil, Resolved{}, err
	}
	seen := map[string]bool{}
	plans := make([]*forkPlan, len(variants))
	var errs []error
	for i, v := range variants {
		switch {
		case v.Name == "":
			errs = append(errs, fmt.Errorf("variant #%d has no name", i+1))
			continue
		case seen[v.Name]:
			errs = append(errs, fmt.Errorf("variant '%s' is named twice", v.Name))
			continue
		}
		seen[v.Name] = true
		changes := append(append([]Change(nil), common...), v.Changes...)
		bs, err := bindAll(ix, r, changes)
		if err != nil {
			errs = append(errs, fmt.Errorf("variant '%s': %w", v.Name, err))
			continue
		}
		plans[i] = &forkPlan{ix: ix, at: r, changes: bs}
	}
	if len(errs) > 0 {
		return nil, Resolved{}, errors.Join(errs...)
	}
	return plans, r, nil
}

func safeName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, name)
}

// Explain renders the sweep for people: a block per variant, in the order
// given, saying which change did what — its name, status, incurred cost
// and changes; then its own first divergence from the base, its output cut
// around where it differs from the base's, and the tool calls it made more
// or fewer of (or that it behaved as the base); with several samples, their
// statuses and mean cost; when scored, its score (the mean and its 95 %
// interval over several samples); where it was saved. The total is the sum
// of the costs shown.
//
//	sweep of 41d0be… at step 6 (before 'decide' execution 1): 3 variant(s)
//	  control   failed     $0.00     none (the control)
//	      behaved as the base
//	  stricter  completed  $0.0021   prompt of 'decide'
//	      diverged  steps 7–8: llm 'fake/fake-1' changed: input.system "Refund." → "Escalate." (+1 more)
//	      output    {"status":"escalated"} (base: null)
//	      tools     -issue_refund
//	      saved     testdata/out/stricter.sftrace
//	  broken    error: fork: the agent panicked: …
//	  total                $0.0021
func (s *Sweep) Explain() string {
	var b strings.Builder
	header := fmt.Sprintf("sweep of %s at %s: %d variant(s)", shortID(s.Base.RunID), s.At, len(s.Entries))
	if n := len(s.samples()); n > 1 {
		header += fmt.Sprintf(", %d samples each", n)
	}
	rows := make([]outcome.Row, len(s.Entries))
	for i := range s.Entries {
		rows[i] = s.Entries[i].row(nil)
		if v := s.Entries[i].Variant; v != nil && v.Path != "" {
			rows[i].Saved = v.Path
		}
	}
	outcome.Write(&b, header, rows)
	return b.String()
}

// samples are the samples of the sweep's first entry.
func (s *Sweep) samples() []*Variant {
	if len(s.Entries) == 0 {
		return nil
	}
	return s.Entries[0].Samples
}

// row is the entry as a sweep's texts show it (outcome.Write); norm as in
// outcome.Of.
func (e *Entry) row(norm *outcome.Norm) outcome.Row {
	if e.Variant == nil {
		msg := "not run"
		if e.Err != nil {
			msg, _, _ = strings.Cut(e.Err.Error(), "\n")
		}
		return outcome.Row{Name: e.Name, Err: msg}
	}
	var changes []string
	for _, c := range e.Variant.Changes {
		changes = append(changes, c.Description)
	}
	samples := make([]outcome.Sample, len(e.Samples))
	for i, v := range e.Samples {
		if v != nil {
			samples[i] = outcome.Sample{Status: string(v.Status), Cost: v.IncurredCost}
		}
	}
	r := outcome.RowOf(e.Name, changes, samples, e.Variant.Diff, norm)
	if st := e.Stats(); e.Variant.Scored && !math.IsNaN(st.Mean) {
		r.Score = outcome.ScoreText(st.Samples, st.Mean, st.Low, st.High, e.Variant.BaseScore)
	}
	return r
}

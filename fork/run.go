package fork

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// RunOption configures [Run] and [Reproduce]: every [Option], and
// [SaveTo].
type RunOption interface{ applyRun(*config) }

// EachOption configures [Each]: every [Option], and [Samples],
// [Concurrency] and [SaveDir].
type EachOption interface{ applyEach(*config) }

// Option configures [Run] and [Each] alike: the changes ([Prompt],
// [ToolResult], …), the side-effect policies ([Replay], [Block], [Allow]),
// [Memoize], [Logger] and [GroupID]. The interfaces are sealed: an option
// that means nothing where it is passed (a sweep's [Samples] given to Run)
// does not compile.
type Option interface {
	RunOption
	EachOption
}

// optionFunc is an Option of both Run and Each.
type optionFunc func(*config)

func (f optionFunc) applyRun(c *config)  { f(c) }
func (f optionFunc) applyEach(c *config) { f(c) }

// eachOption is an option of Each only.
type eachOption func(*config)

func (f eachOption) applyEach(c *config) { f(c) }

type config struct {
	changes     []Change
	policy      Policy
	memoize     bool
	log         *slog.Logger
	save        bool
	savePath    string // a bundle for Run, a directory for Each
	saveOpts    []trace.SaveOption
	groupID     string
	concurrency int
	samples     int

	budget       float64 // with hasBudget: the most the tails may cost, USD
	hasBudget    bool
	ignoreBudget bool
	reviewer     func(ctx context.Context, approval string) (any, error)
	score        func(run *trace.Trace, output trace.Value) float64
	runID        string // RunID; "" draws one
	strict       bool   // StrictContext
	dry          bool   // DryRun
	heal         bool   // Heal: tools matched before allowed, fork.json kind heal
	matchers     []replay.Matcher
}

// RunID names the variant before it runs: id is its run id, known to a
// [replay.Observer] in the context from the start of the run (so a sink
// keyed on the run can open before the tail writes into it), and in its
// fork.json. It must differ from the base run's: the base's own id is
// refused before anything runs, with an error matching [ErrInvalidChange].
func RunID(id string) RunOption { return runOnly(func(c *config) { c.runID = id }) }

// runOnly is an option of Run only.
type runOnly func(*config)

func (f runOnly) applyRun(c *config) { f(c) }

// Budget refuses a fork or a sweep whose tails are estimated to cost more
// than maxUSD before anything runs (the error matches [ErrOverBudget]). The
// estimate is [Estimate]'s: the base run's tail as recorded, less the calls
// the changes substitute, times [Samples] for a sweep (an upper bound under
// [Memoize]).
func Budget(maxUSD float64) Option {
	return optionFunc(func(c *config) { c.budget, c.hasBudget = maxUSD, true })
}

// IgnoreBudget runs a fork or sweep even when its estimate exceeds its
// [Budget], for a run that knowingly spends more than the budget shared by
// a set of options.
func IgnoreBudget() Option { return optionFunc(func(c *config) { c.ignoreBudget = true }) }

// budgetError is the refusal of a fork over its budget.
type budgetError struct{ msg string }

func (e *budgetError) Error() string        { return e.msg }
func (e *budgetError) Is(target error) bool { return target == ErrOverBudget }

// checkBudget refuses an estimated cost over the budget; what describes
// the estimate.
func (c *config) checkBudget(entry string, cost float64, what string) error {
	switch {
	case !c.hasBudget:
		return nil
	case math.IsNaN(c.budget) || c.budget < 0:
		return changeErrf(fmt.Sprintf("fork.Budget(%v)", c.budget), "a budget is a non-negative number of US dollars")
	case c.ignoreBudget || cost <= c.budget+1e-12:
		return nil
	}
	return &budgetError{fmt.Sprintf("%s: %s is estimated at %s (%s), over the budget of %s. Raise fork.Budget, fork later, substitute the calls, or pass fork.IgnoreBudget() to run anyway.",
		entry, map[bool]string{true: "the sweep", false: "the tail"}[entry == "fork.Each"], usd.Format(cost), what, usd.Format(c.budget))}
}

// Reviewer answers the approvals ([replay.Approve]) of the tail as the tail
// reaches them: review is called with the approval's name, and its answer
// (a [trace.Value] or anything [trace.ValueOf] accepts) is what the
// approval returns, recorded with "forced":true; an error from review fails
// the approval, and so, usually, the variant. A [HumanResponse] for the same
// approval wins over the reviewer. review is called while the session holds
// its lock, one approval at a time: it may block (a person answering), but
// must not call into package replay.
func Reviewer(review func(ctx context.Context, approval string) (any, error)) Option {
	return optionFunc(func(c *config) { c.reviewer = review })
}

func runConfig(opts []RunOption) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.applyRun(&c)
		}
	}
	return c
}

func eachConfig(opts []EachOption) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.applyEach(&c)
		}
	}
	return c
}

// Match makes the fork match calls with the user matchers ms (see
// [replay.Matcher]): a call of the served prefix whose input differs from
// the recorded one only in what a matcher accepts (the current time in a
// prompt, say) is served as the recorded call; in the tail the
// side-effect guard and [Memoize] find the recorded calls a matcher
// accepts; and the variant's diff marks such a step matched
// ([diff.Step.MatchedBy]) rather than changed in behaviour. The matchers
// are named in fork.json, and [Reproduce] asks for the same.
func Match(ms ...replay.Matcher) Option {
	return optionFunc(func(c *config) { c.matchers = append(c.matchers, ms...) })
}

// Memoize serves a tail model call whose request (model, provider and
// canonical input) equals a base call not yet consumed with that call's
// recorded response, instead of calling the model. Served calls are
// [MemoHit]s, never incurred cost. A fork with no changes and Memoize makes
// no live model call at all. Off by default: the tail runs live.
func Memoize() Option { return optionFunc(func(c *config) { c.memoize = true }) }

// StrictContext runs each variant under [replay.StrictContext]: a wrapper
// called, on a goroutine of the variant's run, with a context that carries
// no session fails with a [*replay.ContextError], and Run (or the entry of
// Each) returns it with the variant, whose trace misses that call.
func StrictContext() Option { return optionFunc(func(c *config) { c.strict = true }) }

// Logger sends structured events to l: "fork started", "change applied",
// "memo hit", "effect suppressed", "variant finished" (and, for sweeps,
// "sweep started" and "sweep finished"). Silent by default.
func Logger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.log = l }) }

// FileOption is an option that names one bundle: it configures [Run] (the
// variant) and [Trace] (the static fork) alike.
type FileOption interface {
	RunOption
	TraceOption
}

type saveTo struct {
	path string
	opts []trace.SaveOption
}

func (s saveTo) applyRun(c *config) { c.save, c.savePath, c.saveOpts = true, s.path, s.opts }
func (s saveTo) applyTrace(c *traceConfig) {
	c.save, c.out, c.saveOpts = true, s.path, s.opts
}

// SaveTo saves the fork's bundle (with fork.json) to path: the variant of
// [Run] once it has run, the static fork of [Trace]. opts go to
// [trace.Save] ([trace.Overwrite] to replace an existing bundle). A sweep
// saves into a directory instead: [SaveDir].
func SaveTo(path string, opts ...trace.SaveOption) FileOption { return saveTo{path, opts} }

// SaveDir saves every variant of a sweep into dir once it has run, as
// NAME.sftrace (NAME-N.sftrace for sample N > 1, NAME made safe for a file
// name). opts go to [trace.Save].
func SaveDir(dir string, opts ...trace.SaveOption) EachOption {
	return eachOption(func(c *config) { c.save, c.savePath, c.saveOpts = true, dir, opts })
}

// GroupID sets the group id recorded in fork.json ([Each] draws one when it
// is not set).
func GroupID(id string) Option { return optionFunc(func(c *config) { c.groupID = id }) }

// Status is how a variant ended.
type Status string

// Variant statuses.
const (
	StatusCompleted Status = "completed" // the agent returned without error
	StatusFailed    Status = "failed"    // the agent returned an error
	StatusBlocked   Status = "blocked"   // the guard held back a tail call (see Variant.Suppressed)
	StatusCanceled  Status = "canceled"  // the context was canceled while the tail ran
)

// ChangeReport is a change as the variant applied it.
type ChangeReport struct {
	Change      Change
	Description string
	// Applied counts the tail calls the change acted on; 0 means its target
	// matched nothing in the tail (unused).
	Applied int
	Steps   []int // variant steps where it was applied (the first 8)
}

// Variant is the result of a counterfactual fork: the new run, how it
// differs from the base, and what the fork did to get it.
type Variant struct {
	// Trace is the variant run: the base's prefix (same event ids, payloads
	// and hashes) followed by the tail as it ran. Its fork.json is in
	// Trace.Extras.
	Trace *trace.Trace
	Base  *trace.Trace
	// Diff compares the base with the variant (diff.Runs).
	Diff *diff.Result
	// At is the resolved fork point.
	At     Resolved
	Status Status
	// Output and Err are what the agent returned.
	Output any
	Err    error
	// Suppressed lists the calls the guard held back; MemoHits the model
	// calls served by Memoize; Replayed the tool calls the guard served from
	// the recording.
	Suppressed []SuppressedEffect
	MemoHits   []MemoHit
	Replayed   []MemoHit
	// Changes are the changes as bound to the base run, in the order given,
	// with how often each was applied.
	Changes []ChangeReport
	// FirstLive is the first call of the tail that ran live (with [DryRun],
	// that would have): where the variant started to differ from a replay
	// of the recording; nil when no call ran live. Estimate is, for a
	// variant with [StatusDryRun], what its tail is predicted to cost: the
	// base run's calls from FirstLive on, as recorded (an upper bound: the
	// memo serves the requests that turn out unchanged).
	FirstLive *TailCall
	Estimate  *VariantEstimate
	// Class says how the variant compares with its base, its changes taken
	// as intended ([ClassUnchanged], [ClassIntended], [ClassChanged],
	// [ClassRepaired]); Diff is marked with what explains each difference.
	Class Class
	// Info is the variant's provenance (also saved as fork.json).
	Info *Info
	// IncurredCost and IncurredTokens are what the tail's live model calls
	// cost: the served prefix, memo hits and substituted responses are not
	// counted. LiveModelCalls and LiveToolCalls count what really ran;
	// UnpricedModelCalls the live model calls whose response has no cost
	// (no price set with replay.Prices, none reported), which IncurredCost
	// cannot include.
	IncurredCost       float64
	IncurredTokens     int64
	UnpricedModelCalls int
	LiveModelCalls     int
	LiveToolCalls      int
	Policy             Policy
	Memoized           bool
	// Score and BaseScore are the variant's and the base run's scores, when
	// Scored ([Score]).
	Score, BaseScore float64
	Scored           bool
	// Path is where the variant was saved ("" when it was not).
	Path string

	ix       *index   // the base's index, for BehaviorChange
	bound    []*bound // the changes as bound, for BehaviorChange
	matchers []replay.Matcher
}

// RunTrace returns the variant's trace, so a Variant stands wherever a run
// is expected.
func (v *Variant) RunTrace() *trace.Trace { return v.Trace }

// Unused returns the changes whose target matched nothing in the tail.
func (v *Variant) Unused() []ChangeReport {
	var out []ChangeReport
	for _, c := range v.Changes {
		if c.Applied == 0 {
			out = append(out, c)
		}
	}
	return out
}

// Run forks base at at and runs agent again: every call before the fork
// point is served from the recording, the changes in opts are applied, and
// the tail executes under them. A nil at is Default(): Failure() on a failed
// base run, an error otherwise.
//
// The agent runs from its beginning (Go cannot resume a function in the
// middle), under a replay session whose Director serves the prefix strictly
// and directs the tail: tool calls through the side-effect guard (Replay by
// default), model calls live through the agent's own client unless Memoize
// serves them, decisions, parameters, approvals and state reads as the
// changes say.
//
// The fork point and every change are checked before the agent runs: an
// unresolvable point matches ErrUnresolved, a bad change ErrInvalidChange,
// two changes writing the same thing ErrConflict. A tail that fails,
// or that the guard blocks, is a Variant (Status failed or blocked), not an
// error. The error is non-nil when the prefix did not replay
// (ErrPrefixDiverged), when the agent panicked (ErrAgentPanicked), when ctx
// was canceled (the Variant, with Status canceled, is returned with it), and
// when saving failed.
func Run(ctx context.Context, base *trace.Trace, at At, agent replay.Agent, opts ...RunOption) (*Variant, error) {
	if base == nil {
		return nil, errors.New("fork.Run: the base trace is nil")
	}
	if agent == nil {
		return nil, errors.New("fork.Run: the agent is nil")
	}
	cfg := runConfig(opts)
	if cfg.runID != "" && cfg.runID == base.RunID {
		return nil, fmt.Errorf("fork.Run: %w", changeErrf(fmt.Sprintf("fork.RunID(%q)", cfg.runID),
			"it is the run id of the base run; a variant is a new run and needs an id of its own"))
	}
	p, err := planFork(indexOf(base), at, cfg.changes)
	if err != nil {
		return nil, err
	}
	p.base = base
	if cfg.hasBudget {
		ve := p.ix.predict("", p)
		if err := cfg.checkBudget("fork.Run", ve.CostUSD, fmt.Sprintf("%d model call(s) as recorded", ve.ModelCalls)); err != nil {
			return nil, err
		}
	}
	return p.run(ctx, agent, &cfg, cfg.savePath)
}

// forkPlan is a fork point and a set of changes resolved against a base
// index, ready to run any number of times.
type forkPlan struct {
	base    *trace.Trace // the caller's base run (ix.tr is the index's copy of it)
	ix      *index
	at      Resolved
	changes []*bound
}

func planFork(ix *index, at At, changes []Change) (*forkPlan, error) {
	if at == nil {
		at = defaultAt()
	}
	r, err := at.resolve(ix)
	if err != nil {
		return nil, err
	}
	bs, err := bindAll(ix, r, changes)
	if err != nil {
		return nil, err
	}
	return &forkPlan{ix: ix, at: r, changes: bs}, nil
}

// fresh copies the bound changes with their counters at zero.
func (p *forkPlan) fresh() []*bound {
	out := make([]*bound, len(p.changes))
	for i, b := range p.changes {
		c := *b
		c.applied, c.steps = 0, nil
		out[i] = &c
	}
	return out
}

// run executes one variant. savePath is where to save it when cfg.save.
func (p *forkPlan) run(ctx context.Context, agent replay.Agent, cfg *config, savePath string) (v *Variant, err error) {
	base := p.base
	d := &director{ctx: ctx, ix: p.ix, at: p.at, policy: cfg.policy, memoize: cfg.memoize, log: cfg.log, reviewer: cfg.reviewer,
		changes: p.fresh(), readDone: map[string]bool{}, matchFirst: cfg.heal, dry: cfg.dry, matchers: cfg.matchers}
	d.logf("fork started", slog.String("base_run_id", base.RunID), slog.Int("step", p.at.Step),
		slog.String("at", p.at.Description), slog.String("node", p.at.Node), slog.Int("changes", len(p.changes)),
		slog.String("group_id", cfg.groupID))

	prep, err := p.ix.prepared()
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	var res *replay.Result
	var replayErr error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("fork: %w in the variant of %s: %v\n%s", ErrAgentPanicked, base.RunID, r, debug.Stack())
			}
		}()
		opts := []replay.ReplayOption{replay.WithDirector(d)}
		if len(cfg.matchers) > 0 {
			opts = append(opts, replay.Match(cfg.matchers...))
		}
		if cfg.runID != "" {
			opts = append(opts, replay.RunID(cfg.runID))
		}
		if cfg.strict {
			opts = append(opts, replay.StrictContext())
		}
		res, replayErr = prep.Replay(ctx, agent, opts...)
	}()
	if err != nil {
		return nil, err
	}
	if res == nil && replayErr != nil {
		return nil, fmt.Errorf("fork: %w", replayErr)
	}
	if res == nil {
		return nil, errors.New("fork: the replay session produced no result")
	}
	if d.prefixErr != nil {
		detail := ""
		if res.Divergence != nil {
			detail = "\n" + res.Divergence.Error()
		}
		return nil, fmt.Errorf("fork: %w before %s: %v. The agent no longer makes the calls recorded before the fork point (its code changed, or it has nondeterminism that is not recorded); record the base run again, or fork earlier.%s",
			ErrPrefixDiverged, p.at, d.prefixErr, detail)
	}

	d.finishSteps(res)
	v = &Variant{Trace: res.Trace, Base: base, At: p.at, Output: res.Output, Err: res.Err,
		Suppressed: d.suppressed, MemoHits: d.memoHits, Replayed: d.replayed, Policy: cfg.policy, Memoized: cfg.memoize,
		FirstLive: d.firstLive}
	for _, b := range d.changes {
		v.Changes = append(v.Changes, ChangeReport{Change: b.change, Description: b.desc, Applied: b.applied, Steps: b.steps})
	}
	v.account(res)
	switch {
	case cfg.dry && d.firstLive != nil:
		v.Status = StatusDryRun
		v.Estimate = p.ix.estimateFrom(d.firstLivePos)
	case ctx.Err() != nil && (res.Err != nil || res.Trace.Status == trace.RunFailed):
		v.Status = StatusCanceled
	case len(d.suppressed) > 0:
		v.Status = StatusBlocked
	case res.Trace.Status == trace.RunFailed:
		v.Status = StatusFailed
	default:
		v.Status = StatusCompleted
	}
	if cfg.score != nil {
		v.Score, v.BaseScore, v.Scored = cfg.score(v.Trace, runOutput(v.Trace)), cfg.score(base, runOutput(base)), true
	}
	v.Diff = p.ix.diffVariant(v.Trace)
	p.classify(v, d.changes, cfg.matchers)
	for i, b := range d.changes {
		// Code fields count where they explained a difference.
		v.Changes[i].Applied, v.Changes[i].Steps = b.applied, b.steps
	}
	v.Info = p.info(v, cfg)
	data, merr := v.Info.marshal()
	if merr != nil {
		return nil, fmt.Errorf("fork: cannot encode the provenance: %w", merr)
	}
	if v.Trace.Extras == nil {
		v.Trace.Extras = map[string][]byte{}
	}
	v.Trace.Extras[infoFile] = data

	var errs []error
	if ce := (*replay.ContextError)(nil); errors.As(replayErr, &ce) {
		errs = append(errs, fmt.Errorf("fork: the variant's trace misses a call: %w", ce))
	}
	if cfg.save && !cfg.dry {
		if serr := v.Trace.Save(savePath, cfg.saveOpts...); serr != nil {
			errs = append(errs, fmt.Errorf("fork: the variant was not saved: %w", serr))
		} else {
			v.Path = v.Trace.Path
		}
	}
	d.logf("variant finished", slog.String("run_id", v.Trace.RunID), slog.String("status", string(v.Status)),
		slog.Float64("incurred_cost_usd", v.IncurredCost), slog.Int64("incurred_tokens", v.IncurredTokens),
		slog.Int("memo_hits", len(v.MemoHits)), slog.Int("suppressed", len(v.Suppressed)), slog.String("path", v.Path))
	if v.Status == StatusCanceled {
		errs = append(errs, fmt.Errorf("fork: the variant was canceled: %w", ctx.Err()))
	}
	return v, errors.Join(errs...)
}

// account counts what the tail really executed and what it cost: the
// responses of live model calls only: a served call costs nothing.
func (v *Variant) account(res *replay.Result) {
	evs := v.Trace.Events
	live := map[string]bool{}
	for _, c := range res.Calls {
		if c.Outcome != replay.Executed {
			continue
		}
		if c.Kind == replay.KindTool {
			v.LiveToolCalls++
			continue
		}
		v.LiveModelCalls++
		live[c.EventID] = true
	}
	if len(live) == 0 {
		return
	}
	for i := range evs {
		ev := &evs[i]
		if ev.Type == trace.LLMResponse && live[ev.ParentID] {
			if ev.CostUSD != nil {
				v.IncurredCost += *ev.CostUSD
			} else {
				v.UnpricedModelCalls++
			}
			v.IncurredTokens += ev.Tokens()
		}
	}
}

// info is the variant's provenance; a base that is a fork passes its own
// chain on, so the provenance reaches back to the original recording.
func (p *forkPlan) info(v *Variant, cfg *config) *Info {
	base := p.base
	kept := &base.Events[p.at.pos-1]
	changes := make([]Change, len(v.Changes))
	uses := make([]ChangeUse, len(v.Changes))
	for i, c := range v.Changes {
		changes[i] = c.Change
		uses[i] = ChangeUse{Description: c.Description, Count: c.Applied, Steps: slices.Clone(c.Steps)}
	}
	kind := KindCounterfactual
	if cfg.heal {
		kind = KindHeal
	}
	info := &Info{
		Kind:             kind,
		RunID:            v.Trace.RunID,
		ParentRunID:      base.RunID,
		ParentTracePath:  base.Path,
		ForkPoint:        p.at.Asked + ": " + p.at.String(),
		ForkPointStep:    kept.Step,
		ForkPointEventID: kept.ID,
		ForkTimestamp:    time.Now().UTC(),
		Changes:          wireChanges(changes),
		Applied:          uses,
		Policy:           cfg.policy.String(),
		Memoize:          cfg.memoize,
		GroupID:          cfg.groupID,
	}
	for _, m := range cfg.matchers {
		info.Matchers = append(info.Matchers, m.String())
	}
	if parent, err := ReadInfo(base); err == nil {
		info.Ancestors = append([]Info{parent.withoutAncestors()}, parent.Ancestors...)
	}
	return info
}

// Reproduce runs again the counterfactual fork (or heal) recorded in
// variant's fork.json, against its parent base: the same fork point,
// changes, policy and memoization. opts add to them (a Logger, SaveTo); a
// fork made with user matchers needs the same ones in opts ([Match]: a
// function cannot be recorded, only its name, which must agree).
func Reproduce(ctx context.Context, variant, base *trace.Trace, agent replay.Agent, opts ...RunOption) (*Variant, error) {
	if variant == nil || base == nil {
		return nil, errors.New("fork.Reproduce: the variant and its base are required")
	}
	info, err := ReadInfo(variant)
	if err != nil {
		return nil, fmt.Errorf("fork.Reproduce: %w", err)
	}
	if info.Kind != KindCounterfactual && info.Kind != KindHeal {
		return nil, fmt.Errorf("fork.Reproduce: %s is a %s fork, not a counterfactual one", variant.RunID, info.Kind)
	}
	if info.ParentRunID != base.RunID {
		return nil, fmt.Errorf("fork.Reproduce: %s was forked from run %s, not from run %s", variant.RunID, info.ParentRunID, base.RunID)
	}
	changes, err := parseChanges(info.Changes)
	if err != nil {
		return nil, fmt.Errorf("fork.Reproduce: %w", err)
	}
	var given []string
	for _, m := range runConfig(opts).matchers {
		given = append(given, m.String())
	}
	if !slices.Equal(redactAll(given), info.Matchers) {
		return nil, fmt.Errorf("fork.Reproduce: %s was made with the user matchers %q; pass the same with fork.Match (given: %q)", variant.RunID, info.Matchers, given)
	}
	policy, err := parsePolicy(info.Policy)
	if err != nil {
		return nil, fmt.Errorf("fork.Reproduce: %w", err)
	}
	all := []RunOption{policy}
	if info.Memoize {
		all = append(all, Memoize())
	}
	if info.GroupID != "" {
		all = append(all, GroupID(info.GroupID))
	}
	for _, c := range changes {
		all = append(all, c)
	}
	all = append(all, opts...)
	if info.Kind == KindHeal {
		return Heal(ctx, base, agent, all...)
	}
	kept := info.ForkPointEventID
	at := atFunc{fmt.Sprintf("after event %q", kept), func(ix *index) (Resolved, error) {
		i, ok := ix.ids.Lookup(kept)
		if !ok {
			return Resolved{}, pointErrf("the base run has no event '%s'", kept)
		}
		p := int(i) + 1
		if p >= len(ix.tr.Events) {
			return Resolved{}, pointErrf("event '%s' is the base run's last event", kept)
		}
		if err := ix.boundary(p); err != nil {
			return Resolved{}, err
		}
		return ix.resolvedAt(p, ix.describe(p)), nil
	}}
	return Run(ctx, base, at, agent, all...)
}

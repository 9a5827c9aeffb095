package sftest

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/corpus"
	"github.com/stepfork/stepfork/internal/shard"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// ResultsFlag is the name of the command-line flag that makes the corpus
// helpers write their results as JSON lines into a directory, one file per
// test binary and shard, for stepfork report to merge:
// go test ./... -stepfork.results=$PWD/results.
const ResultsFlag = "stepfork.results"

var resultsDir = new(string)

func init() {
	if testing.Testing() {
		resultsDir = flag.String(ResultsFlag, "", "write corpus results as JSON lines into `dir` (one file per test binary and shard), for stepfork report")
	}
}

// HealFlag is the name of the command-line flag that makes [Corpus] heal
// the bundles whose name matches its regexp, and [Record] the traces: go
// test -run TestTriage -stepfork.heal=. (see Corpus). Beside it, -stepfork.heal.budget=USD caps
// what the whole heal may cost ([Budget]) and -stepfork.heal.dryrun only
// estimates it ([DryRun]). Like -stepfork.record, the flags are defined
// only in test binaries (testing.Testing).
const HealFlag = "stepfork.heal"

var (
	healFlag   = new(string)
	healBudget = new(float64)
	healBudSet = new(bool)
	healDryRun = new(bool)
)

func init() {
	if testing.Testing() {
		healFlag = flag.String(HealFlag, "", "heal the sftest.Corpus bundles whose name matches `regexp`: re-record each from where the agent first departs from it, at the cost of the tail")
		flag.Func(HealFlag+".budget", "refuse a heal estimated to cost more than `USD` (US dollars) before anything runs live", func(s string) error {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("want a non-negative number of US dollars, such as 2.50")
			}
			*healBudget, *healBudSet = f, true
			return nil
		})
		healDryRun = flag.Bool(HealFlag+".dryrun", false, "estimate what -"+HealFlag+" would cost, per bundle, without running anything live or writing anything")
	}
}

// CorpusOption configures [Corpus]: [Check], [Intended], [ForkOptions],
// [Match], [Heal], [Budget] and [DryRun].
type CorpusOption interface{ corpusOption() }

type corpusCheck func(t *testing.T, base *trace.Trace) *fork.Variant

func (corpusCheck) corpusOption() {}

// Check makes [Corpus] run check on each bundle instead of a frozen replay.
// check receives the bundle's subtest and the loaded run; it may fork it
// (with [Fork], for instance at [fork.Failure] with a candidate fix), assert
// on it, and return the variant it made, or nil. The outcome of a bundle is
// then read from the variant: "repaired" when the run failed and the variant
// completed, "still failing" when both failed, "unchanged" when the variant is
// equivalent to the run, "intended" when it differs only where its changes
// apply ([fork.Variant.Class]), "changed" otherwise; "checked" when check
// returned nil. Whether the bundle passed is whether its subtest passed.
func Check(check func(t *testing.T, base *trace.Trace) *fork.Variant) CorpusOption {
	return corpusCheck(check)
}

type corpusIntended []fork.Change

func (corpusIntended) corpusOption() {}

// Intended declares the change the agent's code went through since the
// bundles were recorded, in the words of forks ([fork.Prompt],
// [fork.PromptReplace], [fork.Model], [fork.Temperature], [fork.Param],
// [fork.ToolResult], …), or marks the fields of requests that are code,
// not behavior ([fork.CodeFields]), and makes [Corpus] tell the bundles
// that changed only where that change applies from those whose behavior
// changed:
//
//	sftest.Corpus(t, "testdata/tickets", triage.Agent,
//		sftest.Intended(fork.Prompt("decide", triage.DecidePrompt)))
//
// Each bundle is then run by [fork.Heal]: the agent runs against the
// recording, every call the recording answers is served, the intended
// changes apply to every call they target (a target a bundle never reaches
// is no error; a request the code already makes as the change would is
// left alone), and what no longer matches the recording runs live: the
// model calls whose requests changed (through the agent's own client, at
// their cost), the tools [fork.Allow] names (with [ForkOptions]); any other
// tool call the recording cannot answer stops the bundle, naming the tool.
// Its outcome is its [fork.Class]: "unchanged", "intended" (the requests
// differ where the change applies, everything the agent did is the same),
// "changed" (its subtest fails with the first behavioral divergence),
// "repaired" (the recorded run failed, this one completes). Intended with
// no change classifies the bundles all the same, every difference being
// then a change.
func Intended(changes ...fork.Change) CorpusOption { return corpusIntended(changes) }

type corpusForkOptions []fork.Option

func (corpusForkOptions) corpusOption() {}

// ForkOptions passes opts to the runs that classify and heal the bundles
// ([fork.Heal]): [fork.Allow] for the tools a changed tail may run live,
// [fork.Block], [fork.Logger], a [fork.Reviewer]. Changes among them are
// intended changes, as with [Intended]. A [fork.Budget] here caps each
// bundle's run; [Budget] caps the whole corpus.
func ForkOptions(opts ...fork.Option) CorpusOption { return corpusForkOptions(opts) }

type corpusMatch []replay.Matcher

func (corpusMatch) corpusOption() {}

// Match makes every run of [Corpus] match calls with the user matchers ms
// (see [replay.Matcher]): the frozen replay of each bundle ([replay.Match])
// and the runs that classify and heal them ([fork.Match]). A bundle whose
// calls matched only through a matcher still replays, and a step matched
// so is marked in its diff, not counted as a change.
//
//	sftest.Corpus(t, "testdata/corpus", agent,
//		sftest.Match(replay.IgnoreTimestamps().Model("openai/gpt-4o")))
func Match(ms ...replay.Matcher) CorpusOption { return corpusMatch(ms) }

type corpusHeal string

func (corpusHeal) corpusOption() {}

// Heal makes [Corpus] heal the bundles whose name matches the regexp
// pattern, as -stepfork.heal=pattern does. It is for programs that
// maintain a corpus; in a test, prefer the flag, or every run of the test
// rewrites its bundles.
func Heal(pattern string) CorpusOption { return corpusHeal(pattern) }

type corpusBudget float64

func (corpusBudget) corpusOption() {}

// Budget caps what [Corpus] may spend running bundles live (classifying
// them with [Intended], healing them) at maxUSD US dollars: before anything
// runs live, every bundle is run dry ([fork.DryRun]) to find where its tail
// starts, and the corpus fails at once, spending nothing, when the tails
// are estimated to cost more (the base runs' calls from there on, as
// recorded: an upper bound, since unchanged requests are served). While
// the corpus runs, a bundle whose estimate would take the spending past
// the budget is not run. -stepfork.heal.budget sets it from the command
// line.
func Budget(maxUSD float64) CorpusOption { return corpusBudget(maxUSD) }

type corpusDryRun struct{}

func (corpusDryRun) corpusOption() {}

// DryRun makes [Corpus] estimate what classifying and healing the bundles
// would cost, without running anything live or writing anything: each
// bundle is run with [fork.DryRun], and its outcome is "estimated", with
// where its tail would start and what it would cost; the table is logged.
// -stepfork.heal.dryrun does the same.
func DryRun() CorpusOption { return corpusDryRun{} }

// corpusConfig is what the options of one Corpus say.
type corpusConfig struct {
	check     corpusCheck
	classify  bool // Intended, ForkOptions, a heal or a dry run: bundles run through fork.Heal
	forkOpts  []fork.RunOption
	matchers  []replay.Matcher
	heal      *regexp.Regexp // the bundles to heal, nil for none
	healText  string
	budget    float64
	hasBudget bool
	dry       bool
}

func corpusOptions(opts []CorpusOption) (*corpusConfig, error) {
	c := &corpusConfig{}
	pattern := *healFlag
	for _, o := range opts {
		switch o := o.(type) {
		case corpusCheck:
			c.check = o
		case corpusIntended:
			c.classify = true
			for _, ch := range o {
				c.forkOpts = append(c.forkOpts, ch)
			}
		case corpusForkOptions:
			c.classify = true
			for _, fo := range o {
				c.forkOpts = append(c.forkOpts, fo)
			}
		case corpusMatch:
			c.matchers = append(c.matchers, o...)
		case corpusHeal:
			if pattern == "" {
				pattern = string(o)
			}
		case corpusBudget:
			c.budget, c.hasBudget = float64(o), true
		case corpusDryRun:
			c.dry = true
		}
	}
	if *healBudSet {
		c.budget, c.hasBudget = *healBudget, true
	}
	if *healDryRun {
		c.dry = true
	}
	if c.hasBudget && (c.budget < 0 || math.IsNaN(c.budget)) {
		return nil, fmt.Errorf("sftest.Budget(%v): a budget is a non-negative number of US dollars", c.budget)
	}
	if pattern != "" {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, fmt.Errorf("-%s=%q is not a valid regexp: %v", HealFlag, pattern, err)
		}
		c.heal, c.healText = re, pattern
	}
	if c.heal != nil || c.dry {
		c.classify = true
	}
	if len(c.matchers) > 0 {
		c.forkOpts = append(c.forkOpts, fork.Match(c.matchers...))
	}
	if c.check != nil && c.classify {
		return nil, errors.New("sftest.Check cannot be combined with sftest.Intended, ForkOptions, a heal or a dry run: a check decides what each bundle runs; fork inside it with the intended changes instead")
	}
	return c, nil
}

// CorpusResult is what [Corpus] found: the outcome of each bundle this shard
// ran, in name order.
type CorpusResult struct {
	// Shard is the shard that ran ("unsharded", or "1/4": index/total).
	Shard string
	// Matched is the number of bundles the pattern matched; Entries holds the
	// ones this shard owned.
	Matched int
	Entries []CorpusEntry
}

// CorpusEntry is the outcome of one bundle of a corpus.
type CorpusEntry struct {
	Name string // the subtest name: the bundle's path below the corpus root, without .sftrace
	Path string
	// Outcome is one of "replayed", "diverged", "unchanged", "intended",
	// "changed", "repaired", "still failing", "checked", "recorded",
	// "estimated", "unloadable", "check failed".
	Outcome string
	Passed  bool
	// Divergence is the first divergence, when there was one (redacted);
	// for a bundle classified "changed", the first change of behavior.
	Divergence string
	// Healed says the bundle was replaced by its healed run. Tail says
	// where its tail started (or, estimated, would start) and what it
	// spent (or would spend); LiveCalls, Tokens and Cost are what its live
	// calls did spend (Cost, estimated: what they would).
	Healed    bool
	Tail      string
	LiveCalls int
	Tokens    int64
	Cost      float64
	// Build is the code that recorded the bundle (after a heal or a new
	// recording, the new one); Module is "" when the bundle does not say.
	Build trace.Build
}

// Corpus runs one subtest per bundle that pattern names, each named after
// its bundle, and logs a summary: how many bundles had each outcome
// ("corpus TestTriage: 50 bundle(s), 48 passed, 2 failed: 48 intended, 2
// changed"), with the first divergence of each that did not pass.
//
// pattern is a directory, whose bundles (directories named *.sftrace and
// packed bundles *.sftrace.tar.gz, at any depth) form the corpus, or a
// [filepath.Match] pattern such as "testdata/incidents/*.sftrace". A pattern that matches no bundle fails the
// test: an empty corpus checks nothing.
//
// By default each bundle is replayed frozen against agent ([replay.Replay]:
// nothing executes), and a divergence fails its subtest with the first
// divergence. [Check] replaces that with a check of the caller's.
// [Intended] classifies each bundle instead, telling the change the code
// went through from regressions (see Intended; [ForkOptions] passes options
// to those runs).
//
// # Recordings that survive change
//
// With -stepfork.heal=REGEXP ([HealFlag]; [Heal]), each bundle whose name
// matches is healed: run as Intended runs it (the recording serves every
// call it answers, from where the agent first departs from it the tail runs
// live, tools under the side-effect guard), and when it did not come out
// unchanged, replaced atomically by the new run (a packed bundle is packed
// again), whose fork.json records what it healed (kind "heal": the bundle's
// run id and path, the intended changes, when) and whose build.json the
// code that made it. So after a late prompt edit a corpus costs what the
// tails of its runs cost, not what the runs cost. Each healed bundle logs
// where its tail started, its live calls, tokens and cost, and what changed;
// a tool call the recording cannot answer and no [fork.Allow] allows stops
// that bundle, naming the tool, and leaves it as it was. [Budget]
// (-stepfork.heal.budget) refuses a heal estimated to cost more before
// anything runs live; [DryRun] (-stepfork.heal.dryrun) only estimates it.
//
// With -stepfork.record=REGEXP (the flag of [Record]), each bundle whose name
// matches is recorded again first: agent runs for real on the bundle's
// recorded input and the bundle is replaced (atomically) by the new run, so
// one run of a corpus can be refreshed when the agent legitimately changes.
// Healing costs less: only the tails run live.
//
// # Shards and results
//
// Under Bazel's test sharding (TEST_TOTAL_SHARDS and TEST_SHARD_INDEX set, as
// a target with shard_count or a CI matrix sets them), each shard runs the
// bundles it owns by name (a stable hash of the name), so every bundle runs in
// exactly one shard; TEST_SHARD_STATUS_FILE is touched. With
// -stepfork.results=DIR the outcomes are written as JSON lines into DIR, for
// stepfork report to merge the shards into one summary; each entry carries
// the module, version and revision of the code that recorded its bundle
// (its build.json), so that stepfork report --older-than REV lists the
// bundles recorded by older code.
//
// Subtests run one after the other, so the result is complete when Corpus
// returns. A corpus that takes longer than 5 seconds logs how many bundles
// are done ("sftest.Corpus: 12 bundle(s) of 50 done (15s)"), at most
// every 5 seconds, heals included.
func Corpus(t *testing.T, pattern string, agent replay.Agent, opts ...CorpusOption) *CorpusResult {
	t.Helper()
	cfg, err := corpusOptions(opts)
	if err != nil {
		t.Fatalf("sftest.Corpus: %v", err)
	}
	sh, err := shard.FromEnv()
	if err != nil {
		t.Fatalf("sftest.Corpus: %v", err)
	}
	bundles, err := corpusBundles(pattern)
	if err != nil {
		t.Fatalf("sftest.Corpus: %v", err)
	}
	if len(bundles) == 0 {
		t.Fatalf("sftest.Corpus: %q matches no bundle (want a directory holding *.sftrace bundles, or a pattern such as testdata/runs/*.sftrace)", pattern)
	}
	res := &CorpusResult{Shard: sh.String(), Matched: len(bundles)}
	var mine []corpusBundle
	for _, b := range bundles {
		if sh.Owns(b.name) {
			mine = append(mine, b)
		}
	}
	out := results()
	out.add(corpus.Record{Kind: "shard", Corpus: t.Name(), Index: sh.Index, Total: max(sh.Total, 1), Matched: len(bundles), Owned: len(mine)})
	var plan *spendPlan
	if cfg.classify && (cfg.hasBudget || cfg.dry) {
		plan = estimateCorpus(t, mine, agent, cfg)
		if cfg.dry {
			for _, b := range mine {
				e := plan.entries[b.name]
				res.Entries = append(res.Entries, e)
				out.add(entryRecord(t.Name(), e))
			}
			out.flush(t)
			t.Log(corpusSummary(t.Name(), res, sh))
			return res
		}
	}
	prog := newProgress(t, "sftest.Corpus", fmt.Sprintf("bundle(s) of %d", len(mine)), len(mine))
	for _, b := range mine {
		e := CorpusEntry{Name: b.name, Path: b.path, Outcome: string(corpus.NotRun)}
		var rec bundleRun
		e.Passed = t.Run(b.name, func(t *testing.T) {
			rec = runBundle(t, b, agent, cfg, plan)
		})
		if rec.outcome == "" || rec.outcome == corpus.NotRun && !e.Passed {
			// The check stopped its subtest (t.FailNow) before an outcome.
			rec.outcome = corpus.FailedOutcome
		}
		e.Outcome, e.Divergence, e.Healed, e.Tail = string(rec.outcome), rec.divergence, rec.healed, rec.tail
		e.LiveCalls, e.Tokens, e.Cost, e.Build = rec.live, rec.tokens, rec.cost, rec.build
		res.Entries = append(res.Entries, e)
		r := entryRecord(t.Name(), e)
		r.BaseStatus, r.Status = rec.baseStatus, rec.status
		out.add(r)
		prog.step()
	}
	out.flush(t)
	t.Log(corpusSummary(t.Name(), res, sh))
	return res
}

// entryRecord is the results record of a corpus entry.
func entryRecord(corpusName string, e CorpusEntry) corpus.Record {
	r := corpus.Record{Kind: "entry", Corpus: corpusName, Name: e.Name, Path: absPath(e.Path), Outcome: corpus.Outcome(e.Outcome),
		Passed: e.Passed, Divergence: redactText(e.Divergence), Cost: e.Cost, Healed: e.Healed, Tail: redactText(e.Tail),
		LiveCalls: e.LiveCalls, Tokens: e.Tokens}
	if r.Outcome == corpus.Estimated {
		r.Cost = 0 // an estimate, in Tail: nothing was incurred
	}
	if e.Build.Module != "" {
		r.Module, r.Version, r.Revision = redactText(e.Build.Module), redactText(e.Build.Version), e.Build.Revision
		if !e.Build.Time.IsZero() {
			r.RevisionTime = e.Build.Time.UTC().Format(time.RFC3339)
		}
	}
	return r
}

// bundleRun is what one bundle's subtest found.
type bundleRun struct {
	outcome            corpus.Outcome
	divergence         string
	baseStatus, status string
	cost               float64
	healed             bool
	tail               string
	live               int
	tokens             int64
	build              trace.Build
}

// runBundle runs one bundle's subtest and returns its outcome.
func runBundle(t testing.TB, b corpusBundle, agent replay.Agent, cfg *corpusConfig, plan *spendPlan) (r bundleRun) {
	t.Helper()
	tr, err, mismatchErr := loadVerified(t.Context(), b.path)
	if err == nil {
		err = mismatchErr // a bundle edited by hand is not a recording
	}
	if err != nil {
		t.Errorf("sftest.Corpus: %v", err)
		return bundleRun{outcome: corpus.Unloadable}
	}
	r.build, _, _ = tr.Build()
	results().add(corpus.Record{Kind: "used", Path: absPath(b.path)})
	rec, err := recording(b.name)
	if err != nil {
		t.Fatalf("sftest.Corpus: %v", err)
	}
	if rec {
		tr = rerecord(t, b, tr, agent)
		if tr == nil {
			return bundleRun{outcome: corpus.NotRun}
		}
		r.build, _, _ = tr.Build()
		if cfg.check == nil && !cfg.classify {
			r.outcome, r.baseStatus, r.status = corpus.Recorded, string(tr.Status), string(tr.Status)
			return r
		}
	}
	r.baseStatus = string(tr.Status)
	switch {
	case cfg.classify:
		return classifyBundle(t, b, tr, agent, cfg, plan, r)
	case cfg.check == nil:
		if _, err := replay.Replay(t.Context(), tr, agent, replay.Match(cfg.matchers...)); err != nil {
			msg := divergenceReport("sftest.Corpus", b.path, err)
			t.Errorf("%s\nif the change is intended, declare it (sftest.Intended) or heal the bundle:\n\t-%s='^%s$'\nor record it again with:\n\t-%s='^%s$'",
				msg, HealFlag, regexpQuote(b.name), RecordFlag, regexpQuote(b.name))
			r.outcome, r.divergence = corpus.Diverged, firstLine(err.Error())
			return r
		}
		r.outcome, r.status = corpus.Replayed, r.baseStatus
		return r
	}
	v := cfg.check(t.(*testing.T), tr) // Corpus passes its subtest; a check that stops it (t.FailNow) never returns
	if v == nil {
		if t.Failed() {
			r.outcome = corpus.FailedOutcome
			return r
		}
		r.outcome = corpus.Checked
		return r
	}
	r.status, r.cost = string(v.Status), v.IncurredCost
	r.outcome, r.divergence = variantOutcome(tr, v)
	return r
}

// variantOutcome says how the variant v compares with the run it was forked
// from, and its first divergence when it behaved otherwise (for a changed
// variant, its first change of behavior).
func variantOutcome(base *trace.Trace, v *fork.Variant) (corpus.Outcome, string) {
	var outcome corpus.Outcome
	switch {
	case base.Status == trace.RunFailed && v.Status == fork.StatusCompleted:
		outcome = corpus.Repaired
	case base.Status == trace.RunFailed:
		outcome = corpus.StillFailing
	case v.Class == fork.ClassIntended:
		outcome = corpus.Intended
	case v.Class == fork.ClassUnchanged || v.Diff != nil && v.Diff.Equivalent():
		outcome = corpus.Unchanged
	default:
		outcome = corpus.Changed
	}
	if v.Diff == nil || v.Diff.Equivalent() {
		return outcome, ""
	}
	r := newRenderer()
	r.know(v.Diff.Base.Minted, v.Diff.Variant.Minted)
	if dv := v.BehaviorChange(); dv != nil {
		return outcome, r.divergenceLine(dv)
	}
	if outcome == corpus.Intended || outcome == corpus.Unchanged {
		return outcome, ""
	}
	return outcome, r.divergence(v.Diff)
}

// rerecord runs agent for real on tr's recorded input and replaces the bundle
// with the new run. It returns the new trace, or nil after failing t.
func rerecord(t testing.TB, b corpusBundle, tr *trace.Trace, agent replay.Agent) *trace.Trace {
	t.Helper()
	unlock := lockPath(b.path)
	defer unlock()
	var input any
	if err := recordedInput(tr).Decode(&input); err != nil {
		t.Fatalf("sftest.Corpus: the recorded input of %s cannot be decoded: %v", b.path, err)
	}
	name := tr.AgentName
	if name == "" {
		name = filepath.Base(b.name)
	}
	to := b.path
	packed := strings.HasSuffix(to, trace.PackedSuffix)
	if packed {
		to = filepath.Join(t.TempDir(), "run.sftrace")
	}
	res, err := replay.Record(t.Context(), name, input, agent, replay.SaveTo(to, trace.Overwrite()))
	if res == nil || res.Path == "" {
		t.Fatalf("sftest.Corpus: recording %s again failed: %v", b.path, err)
		return nil
	}
	if packed {
		if err := trace.Pack(to, b.path, trace.Overwrite()); err != nil {
			t.Fatalf("sftest.Corpus: packing the new recording of %s: %v", b.path, err)
		}
	}
	t.Logf("sftest.Corpus: recorded %s again: %d events, %s", b.path, len(res.Trace.Events), res.Trace.Status)
	return res.Trace
}

type corpusBundle struct {
	name, path string
}

// corpusBundles lists the bundles pattern names, sorted by name.
func corpusBundles(pattern string) ([]corpusBundle, error) {
	var out []corpusBundle
	if fi, err := os.Stat(pattern); err == nil && fi.IsDir() && !strings.HasSuffix(pattern, ".sftrace") {
		err := filepath.WalkDir(pattern, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && strings.HasSuffix(d.Name(), ".sftrace") || !d.IsDir() && strings.HasSuffix(d.Name(), trace.PackedSuffix) {
				rel, _ := filepath.Rel(pattern, p)
				out = append(out, corpusBundle{name: bundleName(rel), path: p})
				if d.IsDir() {
					return filepath.SkipDir
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	} else {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("%q is not a valid pattern: %v", pattern, err)
		}
		root := globRoot(pattern)
		for _, p := range matches {
			fi, err := os.Stat(p)
			if err != nil || !(fi.IsDir() && strings.HasSuffix(p, ".sftrace") || fi.Mode().IsRegular() && strings.HasSuffix(p, trace.PackedSuffix)) {
				continue
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				rel = filepath.Base(p)
			}
			out = append(out, corpusBundle{name: bundleName(rel), path: p})
		}
	}
	slices.SortFunc(out, func(a, b corpusBundle) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(out); i++ {
		if out[i].name == out[i-1].name {
			return nil, fmt.Errorf("two bundles are both called %q: %s and %s", out[i].name, out[i-1].path, out[i].path)
		}
	}
	return out, nil
}

// globRoot is the longest leading part of pattern without a glob character:
// the directory bundle names are relative to.
func globRoot(pattern string) string {
	dir := filepath.Dir(pattern)
	for strings.ContainsAny(dir, "*?[\\") && dir != "." {
		dir = filepath.Dir(dir)
	}
	return dir
}

func bundleName(rel string) string {
	rel = filepath.ToSlash(rel)
	if n, ok := strings.CutSuffix(rel, trace.PackedSuffix); ok {
		return n
	}
	return strings.TrimSuffix(rel, ".sftrace")
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// redactText is s with anything credential-shaped replaced.
func redactText(s string) string {
	r, _ := trace.RedactString(s)
	return r
}

// corpusSummary is the table Corpus logs.
func corpusSummary(name string, res *CorpusResult, sh shard.Shard) string {
	recs := []corpus.Record{{Kind: "shard", Corpus: name, Index: sh.Index, Total: 1, Matched: len(res.Entries)}}
	for _, e := range res.Entries {
		recs = append(recs, entryRecord(name, e))
	}
	rep, _ := corpus.Merge(recs)
	head := ""
	if sh.Sharded() {
		head = fmt.Sprintf("shard %s: %d of the %d bundles matched\n", sh, len(res.Entries), res.Matched)
	}
	return head + strings.TrimRight(rep.Text(), "\n")
}

// resultsFile collects the records this test binary writes with
// -stepfork.results, and writes them (atomically) as the file
// DIR/<binary>.<shard>.jsonl whenever a corpus finishes.
type resultsFile struct {
	mu   sync.Mutex
	recs []corpus.Record
	used map[string]bool
}

var (
	resultsOnce sync.Once
	theResults  *resultsFile
)

func results() *resultsFile {
	resultsOnce.Do(func() { theResults = &resultsFile{used: map[string]bool{}} })
	return theResults
}

func (f *resultsFile) add(r corpus.Record) {
	if *resultsDir == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Kind == "used" {
		if f.used[r.Path] {
			return
		}
		f.used[r.Path] = true
	}
	f.recs = append(f.recs, r)
}

// used records that a test used the bundle at path, and writes the results
// when t ends.
func (f *resultsFile) usedBy(t testing.TB, path string) {
	if *resultsDir == "" {
		return
	}
	f.add(corpus.Record{Kind: "used", Path: absPath(path)})
	t.Cleanup(func() { f.flush(t) })
}

// flush writes every record so far. A failure to write fails t: results that
// silently go missing would make a merged report lie.
func (f *resultsFile) flush(t testing.TB) {
	t.Helper()
	if *resultsDir == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sh, _ := shard.FromEnv()
	bin := strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
	name := fmt.Sprintf("%s.shard-%d-of-%d.jsonl", bin, sh.Index, max(sh.Total, 1))
	if err := os.MkdirAll(*resultsDir, 0o755); err != nil {
		t.Errorf("sftest: -%s: %v", ResultsFlag, err)
		return
	}
	var b strings.Builder
	for _, r := range f.recs {
		if err := corpus.Encode(&b, r); err != nil {
			t.Errorf("sftest: -%s: %v", ResultsFlag, err)
			return
		}
	}
	dst := filepath.Join(*resultsDir, name)
	tmp, err := os.CreateTemp(*resultsDir, "."+name+".tmp-*")
	if err == nil {
		_, err = tmp.WriteString(b.String())
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), dst)
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		t.Errorf("sftest: -%s: writing %s: %v", ResultsFlag, dst, err)
	}
}

package sftest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

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

// CorpusOption configures [Corpus].
type CorpusOption interface{ corpusOption() }

type corpusCheck func(t *testing.T, base *trace.Trace) *fork.Variant

func (corpusCheck) corpusOption() {}

// Check makes [Corpus] run check on each bundle instead of a frozen replay.
// check receives the bundle's subtest and the loaded run; it may fork it
// (with [Fork], for instance at [fork.Failure] with a candidate fix), assert
// on it, and return the variant it made, or nil. The outcome of a bundle is
// then read from the variant: "repaired" when the run failed and the variant
// completed, "still failing" when both failed, "unchanged" when the variant is
// equivalent to the run, "changed" otherwise; "checked" when check returned
// nil. Whether the bundle passed is whether its subtest passed.
func Check(check func(t *testing.T, base *trace.Trace) *fork.Variant) CorpusOption {
	return corpusCheck(check)
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
	// Outcome is one of "replayed", "diverged", "repaired", "still failing",
	// "changed", "unchanged", "checked", "recorded", "unloadable",
	// "check failed".
	Outcome string
	Passed  bool
	// Divergence is the first divergence, when there was one (redacted).
	Divergence string
}

// Corpus runs one subtest per bundle that pattern names, each named after
// its bundle, and logs a summary: how many replayed, diverged (with the first
// divergence of each) or were repaired.
//
// pattern is a directory, whose bundles (directories named *.sftrace and
// packed bundles *.sftrace.tar.gz, at any depth) form the corpus, or a
// [filepath.Match] pattern such as "testdata/incidents/*.sftrace". A pattern that matches no bundle fails the
// test: an empty corpus checks nothing.
//
// By default each bundle is replayed frozen against agent ([replay.Replay]:
// nothing executes), and a divergence fails its subtest with the first
// divergence. [Check] replaces that with a check of the caller's.
//
// With -stepfork.record=REGEXP (the flag of [Record]), each bundle whose name
// matches is recorded again first: agent runs for real on the bundle's
// recorded input and the bundle is replaced (atomically) by the new run, so
// one run of a corpus can be refreshed when the agent legitimately changes.
//
// Under Bazel's test sharding (TEST_TOTAL_SHARDS and TEST_SHARD_INDEX set, as
// a target with shard_count or a CI matrix sets them), each shard runs the
// bundles it owns by name (a stable hash of the name), so every bundle runs in
// exactly one shard; TEST_SHARD_STATUS_FILE is touched. With
// -stepfork.results=DIR the outcomes are written as JSON lines into DIR, for
// stepfork report to merge the shards into one summary.
//
// Subtests run one after the other, so the result is complete when Corpus
// returns.
func Corpus(t *testing.T, pattern string, agent replay.Agent, opts ...CorpusOption) *CorpusResult {
	t.Helper()
	var check corpusCheck
	for _, o := range opts {
		if c, ok := o.(corpusCheck); ok {
			check = c
		}
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
	owned := 0
	for _, b := range bundles {
		if sh.Owns(b.name) {
			owned++
		}
	}
	out := results()
	out.add(corpus.Record{Kind: "shard", Corpus: t.Name(), Index: sh.Index, Total: max(sh.Total, 1), Matched: len(bundles), Owned: owned})
	for _, b := range bundles {
		if !sh.Owns(b.name) {
			continue
		}
		e := CorpusEntry{Name: b.name, Path: b.path, Outcome: string(corpus.NotRun)}
		var baseStatus, status string
		var cost float64
		outcome := corpus.NotRun
		e.Passed = t.Run(b.name, func(t *testing.T) {
			outcome, e.Divergence, baseStatus, status, cost = runBundle(t, b, agent, check)
		})
		if outcome == corpus.NotRun && !e.Passed {
			// The check stopped its subtest (t.FailNow) before an outcome.
			outcome = corpus.FailedOutcome
		}
		e.Outcome = string(outcome)
		res.Entries = append(res.Entries, e)
		out.add(corpus.Record{Kind: "entry", Corpus: t.Name(), Name: e.Name, Path: absPath(e.Path), Outcome: corpus.Outcome(e.Outcome),
			Passed: e.Passed, Divergence: redactText(e.Divergence), BaseStatus: baseStatus, Status: status, Cost: cost})
	}
	out.flush(t)
	t.Log(corpusSummary(t.Name(), res, sh))
	return res
}

// runBundle runs one bundle's subtest and returns its outcome.
func runBundle(t testing.TB, b corpusBundle, agent replay.Agent, check corpusCheck) (outcome corpus.Outcome, firstDiff, baseStatus, status string, cost float64) {
	t.Helper()
	tr, err := trace.Load(b.path)
	if err == nil {
		err = verify(t.Context(), b.path, tr) // a bundle edited by hand is not a recording
	}
	if err != nil {
		t.Errorf("sftest.Corpus: %v", err)
		return corpus.Unloadable, "", "", "", 0
	}
	results().add(corpus.Record{Kind: "used", Path: absPath(b.path)})
	rec, err := recording(b.name)
	if err != nil {
		t.Fatalf("sftest.Corpus: %v", err)
	}
	if rec {
		tr = rerecord(t, b, tr, agent)
		if tr == nil {
			return corpus.NotRun, "", "", "", 0
		}
		if check == nil {
			return corpus.Recorded, "", string(tr.Status), string(tr.Status), 0
		}
	}
	baseStatus = string(tr.Status)
	if check == nil {
		if _, err := replay.Replay(t.Context(), tr, agent); err != nil {
			msg := divergenceReport("sftest.Corpus", b.path, err)
			t.Errorf("%s\nif the change is intended, record it again with:\n\t-%s='^%s$'", msg, RecordFlag, regexpQuote(b.name))
			return corpus.Diverged, firstLine(err.Error()), baseStatus, "", 0
		}
		return corpus.Replayed, "", baseStatus, baseStatus, 0
	}
	v := check(t.(*testing.T), tr) // Corpus passes its subtest; a check that stops it (t.FailNow) never returns
	if v == nil {
		if t.Failed() {
			return corpus.FailedOutcome, "", baseStatus, "", 0
		}
		return corpus.Checked, "", baseStatus, "", 0
	}
	status = string(v.Status)
	cost = v.IncurredCost
	outcome, firstDiff = variantOutcome(tr, v)
	return outcome, firstDiff, baseStatus, status, cost
}

// variantOutcome says how the variant v compares with the run it was forked
// from, and its first divergence when it behaved otherwise.
func variantOutcome(base *trace.Trace, v *fork.Variant) (corpus.Outcome, string) {
	var outcome corpus.Outcome
	switch {
	case base.Status == trace.RunFailed && v.Status == fork.StatusCompleted:
		outcome = corpus.Repaired
	case base.Status == trace.RunFailed:
		outcome = corpus.StillFailing
	case v.Diff != nil && v.Diff.Equivalent():
		outcome = corpus.Unchanged
	default:
		outcome = corpus.Changed
	}
	if v.Diff != nil && !v.Diff.Equivalent() {
		return outcome, newRenderer().divergence(v.Diff)
	}
	return outcome, ""
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
		recs = append(recs, corpus.Record{Kind: "entry", Corpus: name, Name: e.Name, Outcome: corpus.Outcome(e.Outcome), Passed: e.Passed, Divergence: redactText(e.Divergence)})
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

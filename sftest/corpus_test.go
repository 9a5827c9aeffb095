package sftest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/corpus"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// ticket is the input of the corpus agent.
type ticket struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

// corpusAgent triages a ticket: a model (a fake that mints fresh ids, as
// providers do) decides, a lookup runs, and a refund is issued; refunds above
// limit fail, so runs with large amounts are failed runs. The limit is a
// parameter, which a fork can change. An agent with another idPrefix looks
// tickets up under other ids: it no longer reproduces the recordings.
func corpusAgent(idPrefix string) replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, id string) (map[string]any, error) {
		return map[string]any{"id": id, "tier": "gold", "api_key": "sk-live-" + strings.Repeat("x", 24)}, nil
	})
	refund := replay.Tool("refund", func(_ context.Context, amount float64) (string, error) {
		return "rf_" + uuid.NewString()[:8], nil
	})
	model := func(_ context.Context, req replay.Request) (replay.Response, error) {
		return replay.Response{Extra: map[string]any{"id": "chatcmpl-" + uuid.NewString()}, Content: "refund", Usage: replay.Usage{PromptTokens: 12, CompletionTokens: 3}}, nil
	}
	return replay.Typed(func(ctx context.Context, in ticket) (string, error) {
		if _, err := replay.LLM(ctx, replay.Request{Model: "fake-model", Messages: []replay.Message{{Role: "user", Content: "ticket " + in.ID}}}, model); err != nil {
			return "", err
		}
		if _, err := lookup(ctx, idPrefix+in.ID); err != nil {
			return "", err
		}
		limit := replay.Param(ctx, "limit", 100.0)
		if in.Amount > limit {
			return "", fmt.Errorf("refund of %.2f is above the limit of %.2f", in.Amount, limit)
		}
		return refund(ctx, in.Amount)
	})
}

// writeCorpus records n runs of corpusAgent into dir (a third of them failed,
// in nested folders for some) and returns the bundle names.
func writeCorpus(tb testing.TB, dir string, n int) []string {
	tb.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	var names []string
	for i := range n {
		name := fmt.Sprintf("run-%04d", i)
		if i%5 == 0 {
			name = "incidents/" + name
		}
		amount := float64(rng.IntN(100))
		if i%3 == 0 {
			amount += 150 // a failed run
		}
		p := filepath.Join(dir, filepath.FromSlash(name)+".sftrace")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		res, err := replay.Record(context.Background(), "triage", ticket{ID: fmt.Sprintf("t_%d", i), Amount: amount}, corpusAgent(""), replay.SaveTo(p))
		if res == nil || res.Path == "" {
			tb.Fatalf("recording %s: %v", p, err)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func TestCorpusReplaysEveryBundle(t *testing.T) {
	dir := t.TempDir()
	names := writeCorpus(t, dir, 12)
	res := sftest.Corpus(t, dir, corpusAgent(""))
	if res.Matched != 12 || len(res.Entries) != 12 || res.Shard != "unsharded" {
		t.Fatalf("Corpus matched %d, ran %d on %s; want 12, 12, unsharded", res.Matched, len(res.Entries), res.Shard)
	}
	for i, e := range res.Entries {
		if e.Name != names[i] || e.Outcome != "replayed" || !e.Passed {
			t.Errorf("entry %d = %+v, want %s replayed and passed", i, e, names[i])
		}
	}
}

// TestCorpusPacked mixes packed bundles into the corpus: they run like the
// directories, named without the suffix, and one is re-recorded in place.
func TestCorpusPacked(t *testing.T) {
	dir := t.TempDir()
	names := writeCorpus(t, dir, 6)
	for _, n := range names[:3] {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := trace.Pack(p+".sftrace", p+trace.PackedSuffix); err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(p + ".sftrace")
	}
	res := sftest.Corpus(t, dir, corpusAgent(""))
	var got []string
	for _, e := range res.Entries {
		got = append(got, e.Name)
		if e.Outcome != "replayed" {
			t.Errorf("%s: %s", e.Name, e.Outcome)
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("entries %v, want %v", got, names)
	}
}

// TestCorpusVerifies hand-edits one bundle's payload: that bundle fails as
// unloadable (its hash no longer matches), in a child so the suite stays green.
func TestCorpusVerifies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeCorpus(t, dir, 2)
	p := filepath.Join(dir, "run-0001.sftrace", "events.jsonl")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"tier":"gold"`, `"tier":"platinum"`, 1)
	if edited == string(data) {
		t.Fatal("nothing to edit")
	}
	os.WriteFile(p, []byte(edited), 0o644)
	out, ok := runChild(t, []string{"SFTEST_CORPUS=" + dir, "SFTEST_ID_PREFIX="})
	if ok || !strings.Contains(out, "was changed after it was written") || !strings.Contains(out, "unloadable") {
		t.Fatalf("a hand-edited bundle was replayed:\n%s", out)
	}
}

func TestCorpusGlob(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, dir, 6)
	res := sftest.Corpus(t, filepath.Join(dir, "incidents", "*.sftrace"), corpusAgent(""))
	if len(res.Entries) != 2 || res.Entries[0].Name != "run-0000" || res.Entries[1].Name != "run-0005" {
		t.Fatalf("entries = %+v, want run-0000 and run-0005 (named below the glob's folder)", res.Entries)
	}
}

func TestCorpusEmptyFails(t *testing.T) {
	t.Parallel()
	out, ok := runChild(t, []string{"SFTEST_CORPUS=" + filepath.Join(t.TempDir(), "*.sftrace"), "SFTEST_ID_PREFIX="})
	if ok || !strings.Contains(out, "matches no bundle") {
		t.Fatalf("an empty corpus passed or said something else:\n%s", out)
	}
}

// TestCorpusRepairs checks a corpus with a fork check: the failed runs are
// forked with a higher limit and repaired; the completed
// ones are unchanged.
func TestCorpusRepairs(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, dir, 9)
	agent := corpusAgent("")
	res := sftest.Corpus(t, dir, agent, sftest.Check(func(t *testing.T, base *trace.Trace) *fork.Variant {
		if base.Status != trace.RunFailed {
			return sftest.Fork(t, base, fork.Start(), agent, fork.Memoize())
		}
		return sftest.Fork(t, base, fork.Start(), agent, fork.Param("limit", 1000.0), fork.Allow("refund"))
	}))
	counts := map[string]int{}
	for _, e := range res.Entries {
		counts[e.Outcome]++
		if !e.Passed {
			t.Errorf("%s did not pass", e.Name)
		}
	}
	if counts["repaired"] != 3 || counts["unchanged"] != 6 {
		t.Fatalf("outcomes = %v, want 3 repaired and 6 unchanged", counts)
	}
}

// The child tests run in a test binary started by the tests below, with the
// corpus and the flags they are given.

func TestChildCorpus(t *testing.T) {
	child(t)
	sftest.Corpus(t, os.Getenv("SFTEST_CORPUS"), corpusAgent(os.Getenv("SFTEST_ID_PREFIX")))
}

// runChild runs TestChildCorpus in a new process with env and args, and
// returns its output and whether it passed.
func runChild(t *testing.T, env []string, args ...string) (string, bool) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"-test.run=^TestChildCorpus$", "-test.v"}, args...)...)
	cmd.Env = append(append(os.Environ(), "SFTEST_CHILD=1", "TEST_TOTAL_SHARDS=", "TEST_SHARD_INDEX=", "TEST_SHARD_STATUS_FILE="), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running the child: %v", err)
	}
	return string(out), err == nil
}

func readResults(t *testing.T, dir string) []corpus.Record {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no results in %s (%v)", dir, err)
	}
	var recs []corpus.Record
	for _, f := range files {
		r, err := corpus.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r...)
	}
	return recs
}

// TestCorpusShards runs the same corpus unsharded and as 4 shards set by
// Bazel's variables: every bundle runs in exactly one shard, each shard
// touches the status file, and the merge of the 4 shard results equals the
// unsharded results.
func TestCorpusShards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	names := writeCorpus(t, dir, 40)
	env := []string{"SFTEST_CORPUS=" + dir, "SFTEST_ID_PREFIX="}

	whole := t.TempDir()
	if out, ok := runChild(t, env, "-stepfork.results="+whole); !ok {
		t.Fatalf("the unsharded corpus failed:\n%s", out)
	}
	sharded := t.TempDir()
	seen := map[string]int{}
	for i := range 4 {
		status := filepath.Join(t.TempDir(), "status")
		out, ok := runChild(t, append(env, "TEST_TOTAL_SHARDS=4", fmt.Sprintf("TEST_SHARD_INDEX=%d", i), "TEST_SHARD_STATUS_FILE="+status),
			"-stepfork.results="+sharded)
		if !ok {
			t.Fatalf("shard %d failed:\n%s", i, out)
		}
		if _, err := os.Stat(status); err != nil {
			t.Errorf("shard %d did not touch TEST_SHARD_STATUS_FILE: %v", i, err)
		}
		for _, m := range regexp.MustCompile(`--- PASS: TestChildCorpus/(\S+)`).FindAllStringSubmatch(out, -1) {
			seen[m[1]]++
		}
	}
	for _, n := range names {
		if seen[n] != 1 {
			t.Errorf("bundle %s ran in %d shards, want exactly 1", n, seen[n])
		}
	}
	if len(seen) != len(names) {
		t.Errorf("the shards ran %d bundles, want %d", len(seen), len(names))
	}

	want, err := corpus.Merge(readResults(t, whole))
	if err != nil {
		t.Fatal(err)
	}
	got, err := corpus.Merge(readResults(t, sharded))
	if err != nil {
		t.Fatalf("merging the shards: %v", err)
	}
	if got.Text() != want.Text() {
		t.Errorf("the merged shard report differs from the unsharded one:\n--- unsharded\n%s--- merged\n%s", want.Text(), got.Text())
	}
	if !slices.Equal(got.Used, want.Used) || len(got.Used) != len(names) {
		t.Errorf("used bundles: merged %d, unsharded %d, want %d", len(got.Used), len(want.Used), len(names))
	}
	if unused, err := got.Unused(dir); err != nil || len(unused) != 0 {
		t.Errorf("Unused = %v, %v; want none", unused, err)
	}

	// A missing shard is reported, never merged silently.
	files, _ := filepath.Glob(filepath.Join(sharded, "*.jsonl"))
	os.Remove(files[2])
	if _, err := corpus.Merge(readResults(t, sharded)); !errors.Is(err, corpus.ErrIncomplete) || !strings.Contains(err.Error(), "shard 2/4 did not report") {
		t.Errorf("merging 3 of 4 shards: err = %v, want ErrIncomplete naming shard 2/4", err)
	}
}

// TestCorpusDivergence replays the corpus against an agent that changed:
// every bundle diverges, its subtest fails with the first divergence and how
// to record it again, and the results say so.
func TestCorpusDivergence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeCorpus(t, dir, 3)
	results := t.TempDir()
	out, ok := runChild(t, []string{"SFTEST_CORPUS=" + dir, "SFTEST_ID_PREFIX=ord_"}, "-stepfork.results="+results)
	if ok {
		t.Fatalf("a corpus replayed by a changed agent passed:\n%s", out)
	}
	for _, w := range []string{
		"--- FAIL: TestChildCorpus/run-0001",
		"sftest.Corpus: the replay of " + filepath.Join(dir, "run-0001.sftrace") + " diverged",
		"-stepfork.record='^run-0001$'",
		"corpus TestChildCorpus: 3 bundle(s), 0 passed, 3 failed",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks %q:\n%s", w, out)
		}
	}
	rep, err := corpus.Merge(readResults(t, results))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Corpora[0].Entries {
		if e.Outcome != corpus.Diverged || e.Passed || e.Divergence == "" {
			t.Errorf("entry %+v, want diverged, failed, with its divergence", e)
		}
		if strings.Contains(e.Divergence, "sk-live-") {
			t.Errorf("a secret reached the results: %s", e.Divergence)
		}
	}
}

// TestCorpusRecordOne re-records one bundle of the corpus by name after the
// agent changed, leaving the others as they were.
func TestCorpusRecordOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeCorpus(t, dir, 3)
	before := map[string]string{}
	for _, n := range []string{"run-0001", "run-0002"} {
		tr, err := trace.Load(filepath.Join(dir, n+".sftrace"))
		if err != nil {
			t.Fatal(err)
		}
		before[n] = tr.RunID
	}
	out, ok := runChild(t, []string{"SFTEST_CORPUS=" + dir, "SFTEST_ID_PREFIX=ord_"}, "-stepfork.record=^run-0001$")
	if ok {
		t.Fatalf("the corpus passed although run-0002 and incidents/run-0000 still diverge:\n%s", out)
	}
	if !strings.Contains(out, "--- PASS: TestChildCorpus/run-0001") || !strings.Contains(out, "--- FAIL: TestChildCorpus/run-0002") {
		t.Fatalf("want run-0001 re-recorded and passing, run-0002 still failing:\n%s", out)
	}
	for n, id := range before {
		tr, err := trace.Load(filepath.Join(dir, n+".sftrace"))
		if err != nil {
			t.Fatal(err)
		}
		if changed := tr.RunID != id; changed != (n == "run-0001") {
			t.Errorf("%s: run id changed = %v, want %v", n, changed, n == "run-0001")
		}
	}
	out, ok = runChild(t, []string{"SFTEST_CORPUS=" + filepath.Join(dir, "run-0001.sftrace"), "SFTEST_ID_PREFIX=ord_"})
	if !ok {
		t.Fatalf("the re-recorded bundle does not replay:\n%s", out)
	}
}

func TestChildSweep(t *testing.T) {
	child(t)
	agent := corpusAgent("")
	base := sftest.Load(t, os.Getenv("SFTEST_SWEEP_BASE"))
	var variants []fork.Named
	for i := range 16 {
		variants = append(variants, fork.Named{Name: fmt.Sprintf("limit-%03d", i*20), Changes: []fork.Change{fork.Param("limit", float64(i*20))}})
	}
	sftest.Sweep(t, base, fork.Start(), agent, variants, func(*testing.T, string, *fork.Variant) {}, fork.Allow("refund"))
}

// TestSweepShards splits a sweep of 16 variants into 4 shards by Bazel's
// variables: every variant runs in exactly one shard, and the merged shard
// results equal the unsharded ones.
func TestSweepShards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "base.sftrace")
	if res, err := replay.Record(context.Background(), "triage", ticket{ID: "t_1", Amount: 130}, corpusAgent(""), replay.SaveTo(p)); res == nil || res.Path == "" {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	run := func(results string, env ...string) string {
		cmd := exec.Command(exe, "-test.run=^TestChildSweep$", "-test.v", "-stepfork.results="+results)
		cmd.Env = append(append(os.Environ(), "SFTEST_CHILD=1", "SFTEST_SWEEP_BASE="+p, "TEST_TOTAL_SHARDS=", "TEST_SHARD_INDEX="), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the sweep failed: %v\n%s", err, out)
		}
		return string(out)
	}
	whole, sharded := t.TempDir(), t.TempDir()
	run(whole)
	seen := map[string]int{}
	for i := range 4 {
		out := run(sharded, "TEST_TOTAL_SHARDS=4", fmt.Sprintf("TEST_SHARD_INDEX=%d", i))
		for _, m := range regexp.MustCompile(`--- PASS: TestChildSweep/(\S+)`).FindAllStringSubmatch(out, -1) {
			seen[m[1]]++
		}
	}
	if len(seen) != 16 {
		t.Errorf("the shards ran %d variants, want 16: %v", len(seen), seen)
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("variant %s ran in %d shards", n, c)
		}
	}
	want, err := corpus.Merge(readResults(t, whole))
	if err != nil {
		t.Fatal(err)
	}
	got, err := corpus.Merge(readResults(t, sharded))
	if err != nil {
		t.Fatal(err)
	}
	if got.Text() != want.Text() || !strings.Contains(got.Text(), "16 bundle(s)") {
		t.Errorf("merged:\n%s\nunsharded:\n%s", got.Text(), want.Text())
	}
	if !strings.Contains(want.Text(), "repaired") {
		t.Errorf("no variant repaired the failed run:\n%s", want.Text())
	}
}

// TestProgressOfSweepsAndCorpora: a sweep logs how many of its variants'
// runs are done and a corpus how many of its bundles, at most once per
// period (here every unit; the corpus's last is its summary). Not
// parallel: it sets the period.
func TestProgressOfSweepsAndCorpora(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	defer sftest.SetProgress(0, func(line string) { mu.Lock(); lines = append(lines, line); mu.Unlock() })()

	sftest.Sweep(t, loadRefund(t), fork.Failure(), refund.Agent, []fork.Named{
		{Name: "control"},
		{Name: "approval", Changes: []fork.Change{fork.Prompt("decide", "Ask for approval above the limit.")}},
	}, nil, fork.Memoize(), fork.Concurrency(1))
	dir := t.TempDir()
	writeCorpus(t, dir, 3)
	sftest.Corpus(t, dir, corpusAgent(""))

	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"sftest.Sweep: 1 run(s) of 2 variant(s) done",
		"sftest.Sweep: 2 run(s) of 2 variant(s) done",
		"sftest.Corpus: 1 bundle(s) of 3 done",
		"sftest.Corpus: 2 bundle(s) of 3 done",
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %q, want lines starting %q", lines, want)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]+" (") {
			t.Errorf("line %d = %q, want %q (elapsed)", i, l, want[i])
		}
	}
}

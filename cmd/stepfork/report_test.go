package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/internal/corpus"
	"github.com/stepfork/stepfork/internal/shard"
)

// writeShard writes the results file of one shard of a corpus as
// sftest.Corpus does: a shard record, then the entries the shard owns.
func writeShard(t *testing.T, dir string, index, total int, entries map[string]corpus.Record) {
	t.Helper()
	var b strings.Builder
	owns := func(name string) bool { return shard.Shard{Index: index, Total: total}.Owns(name) }
	owned := 0
	for name := range entries {
		if owns(name) {
			owned++
		}
	}
	corpus.Encode(&b, corpus.Record{Kind: "shard", Corpus: "TestCorpus", Index: index, Total: total, Matched: len(entries), Owned: owned})
	for name, r := range entries {
		if !owns(name) {
			continue
		}
		r.Kind, r.Corpus, r.Name = "entry", "TestCorpus", name
		corpus.Encode(&b, r)
		corpus.Encode(&b, corpus.Record{Kind: "used", Path: r.Path})
	}
	p := filepath.Join(dir, fmt.Sprintf("pkg.test.shard-%d-of-%d.jsonl", index, total))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReport(t *testing.T) {
	t.Parallel()
	bundles := t.TempDir()
	entries := map[string]corpus.Record{}
	for i := range 20 {
		name := fmt.Sprintf("run-%02d", i)
		p := filepath.Join(bundles, name+".sftrace")
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		r := corpus.Record{Path: p, Outcome: corpus.Replayed, Passed: true}
		if i == 7 {
			r = corpus.Record{Path: p, Outcome: corpus.Diverged, Divergence: "call #2: tool 'lookup' input differs (token ghp_" + strings.Repeat("a", 36) + ")"}
		}
		entries[name] = r
	}
	os.MkdirAll(filepath.Join(bundles, "stale.sftrace"), 0o755) // no test uses it

	whole, sharded := t.TempDir(), t.TempDir()
	writeShard(t, whole, 0, 1, entries)
	for i := range 4 {
		writeShard(t, sharded, i, 4, entries)
	}
	w := stepfork(t, "", nil, "report", whole)
	s := stepfork(t, "", nil, "report", sharded)
	if w.code != exitDifferent || s.code != exitDifferent {
		t.Fatalf("exit codes %d and %d, want %d (a bundle failed):\n%s%s", w.code, s.code, exitDifferent, w.stderr, s.stderr)
	}
	if s.stdout != w.stdout {
		t.Errorf("the merged shards report differs from the unsharded one:\n--- unsharded\n%s--- merged\n%s", w.stdout, s.stdout)
	}
	for _, want := range []string{
		"corpus TestCorpus: 20 bundle(s), 19 passed, 1 failed: 19 replayed, 1 diverged\n",
		"  FAIL run-07: diverged — call #2: tool 'lookup' input differs (token [REDACTED])\n",
	} {
		if !strings.Contains(s.stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, s.stdout)
		}
	}
	if strings.Contains(s.stdout, "ghp_") {
		t.Errorf("a token reached the report:\n%s", s.stdout)
	}

	u := stepfork(t, "", nil, "report", sharded, "--corpus", bundles)
	if !strings.Contains(u.stdout, "1 bundle(s) under "+bundles+" that no test used:\n  stale.sftrace\n") {
		t.Errorf("--corpus does not list the unused bundle:\n%s", u.stdout)
	}

	page := filepath.Join(t.TempDir(), "report.html")
	h := stepfork(t, "", nil, "report", sharded, "--corpus", bundles, "--html", page)
	html, err := os.ReadFile(page)
	if h.code != exitDifferent || err != nil {
		t.Fatalf("--html: exit %d, %v\n%s", h.code, err, h.stderr)
	}
	for _, want := range []string{"<h2>TestCorpus — 20 bundle(s), 19 passed, 1 failed: 19 replayed, 1 diverged (4 shards)</h2>", "<td>run-07</td><td class=\"FAIL\">FAIL</td><td>diverged</td>", "stale.sftrace"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(string(html), "ghp_") || strings.Contains(string(html), "<script src") || strings.Contains(string(html), "http") {
		t.Errorf("the page holds a token or fetches something:\n%s", html)
	}

	j := stepfork(t, "", nil, "report", "--json", sharded)
	if !strings.HasPrefix(j.stdout, `{"corpora":[{"name":"TestCorpus","shards":4,"entries":[`) || strings.Contains(j.stdout, "ghp_") {
		t.Errorf("--json output:\n%s", j.stdout)
	}
}

func TestReportIncomplete(t *testing.T) {
	t.Parallel()
	entries := map[string]corpus.Record{}
	for i := range 12 {
		entries[fmt.Sprintf("run-%02d", i)] = corpus.Record{Outcome: corpus.Replayed, Passed: true}
	}
	dir := t.TempDir()
	for _, i := range []int{0, 1, 3} {
		writeShard(t, dir, i, 4, entries)
	}
	r := stepfork(t, "", nil, "report", dir)
	if r.code != exitInput || !strings.Contains(r.stderr, "stepfork report: the shard results are incomplete:\n  TestCorpus: shard 2/4 did not report\n") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	writeShard(t, filepath.Join(dir), 2, 4, entries)
	dup := filepath.Join(dir, "copy.jsonl")
	b, _ := os.ReadFile(filepath.Join(dir, "pkg.test.shard-1-of-4.jsonl"))
	os.WriteFile(dup, b, 0o644)
	r = stepfork(t, "", nil, "report", dir)
	if r.code != exitInput || !strings.Contains(r.stderr, "TestCorpus: shard 1/4 reported twice") {
		t.Fatalf("a doubled shard: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{\"kind\":\"entry\"}\nnot json\n"), 0o644)
	r = stepfork(t, "", nil, "report", bad)
	if r.code != exitInput || !strings.Contains(r.stderr, "bad.jsonl:2: not a stepfork results record") {
		t.Fatalf("a corrupt file: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = stepfork(t, "", nil, "report", t.TempDir())
	if r.code != exitInput || !strings.Contains(r.stderr, "holds no results (*.jsonl)") {
		t.Fatalf("an empty directory: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestReportOlderThan lists the bundles recorded by code older than a
// revision, asking git in the current directory which commits came first:
// in a repository of three commits, the bundles of the first two are older
// than the third; a bundle without build.json is listed apart.
func TestReportOlderThan(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Parallel()
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=a@example.com", "-c", "user.name=a", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	var revs []string
	for i := range 3 {
		os.WriteFile(filepath.Join(repo, "f"), []byte{byte(i)}, 0o644)
		git("add", ".")
		git("commit", "-q", "-m", fmt.Sprint(i))
		revs = append(revs, git("rev-parse", "HEAD"))
	}
	results := t.TempDir()
	entries := map[string]corpus.Record{}
	for i, rev := range []string{revs[0], revs[1], revs[2], ""} {
		entries[fmt.Sprintf("run-%d", i)] = corpus.Record{Outcome: corpus.Replayed, Passed: true, Module: "example.com/agent", Revision: rev}
	}
	writeShard(t, results, 0, 1, entries)
	r := stepfork(t, repo, nil, "report", results, "--older-than", revs[2][:10])
	want := fmt.Sprintf("\n2 bundle(s) recorded by code older than %s:\n  TestCorpus/run-0: revision %s\n  TestCorpus/run-1: revision %s\n"+
		"1 bundle(s) whose code is unknown or cannot be compared with %s:\n  TestCorpus/run-3: unknown code\n", revs[2][:10], revs[0][:12], revs[1][:12], revs[2][:10])
	if r.code != exitOK || !strings.HasSuffix(r.stdout, want) {
		t.Errorf("exit %d, output\n%s\nwant it to end with\n%s\n%s", r.code, r.stdout, want, r.stderr)
	}
	for _, want := range []string{"\n  recorded by    ", revs[0][:12] + " (1)", revs[1][:12] + " (1)", revs[2][:12] + " (1)", ", unknown (1)\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the summary does not say which revisions recorded the bundles (%q):\n%s", want, r.stdout)
		}
	}
	j := stepfork(t, repo, nil, "report", results, "--older-than", revs[1], "--json")
	if !strings.Contains(j.stdout, `"older_than":{"revision":"`+revs[1]+`","older":[{"kind":"entry","corpus":"TestCorpus","name":"run-0"`) {
		t.Errorf("--json:\n%s", j.stdout)
	}
	if b := stepfork(t, repo, nil, "report", results, "--older-than", "main"); b.code != exitInput || !strings.Contains(b.stderr, "--older-than: \"main\" is neither a commit hash") {
		t.Errorf("a branch name: exit %d, %s", b.code, b.stderr)
	}
}

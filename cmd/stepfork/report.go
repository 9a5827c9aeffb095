package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stepfork/stepfork/internal/corpus"
)

var reportCmd = &command{
	name:    "report",
	args:    "RESULTS... [--corpus DIR] [--older-than REV] [--json] [--html FILE]",
	summary: "merge the results of corpus shards into one summary",
	description: `
Report merges the results that sftest.Corpus writes with
go test -stepfork.results=DIR (JSON lines, one file per test binary and
shard) into one summary: per corpus, on one line, how many bundles had each
outcome ("48 intended, 2 changed"), the revisions of the code that recorded
them, and one line per bundle that failed, was healed or behaved otherwise,
with its first divergence. Each RESULTS argument is a results file or a
directory of them.

The shards of a corpus are split by Bazel's TEST_TOTAL_SHARDS and
TEST_SHARD_INDEX (a target's shard_count, or a CI matrix that sets them);
report checks that every shard reported once and every bundle ran in one
shard, and says which is missing otherwise. The merge of the shards of a run
prints exactly what the same run unsharded prints.

With --html FILE, report also writes the summary as one self-contained HTML
page (no script, nothing fetched from elsewhere), redacted like everything
it prints.

With --corpus DIR, report also lists the bundles under DIR that no test used
(no corpus ran them, no sftest.Load or sftest.Record loaded them), for
pruning a corpus.

With --older-than REV (a commit, at least 7 hexadecimal digits, or an RFC
3339 time), report also lists the bundles recorded by code older than REV
(each bundle's build.json says which revision recorded it): revisions that
git, run in the current directory, knows to be ancestors of REV, else whose
commit time is before REV's; and apart, the bundles whose code is unknown
(recorded by Python stepfork or an earlier Go version) or cannot be
compared. They are the ones to heal or record again.

Exit codes: 0 every bundle passed, 1 a bundle failed, 2 unreadable or
incomplete results.`,
	minArgs: 1, maxArgs: -1,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &reportOptions{}
		fs.StringVar(&o.corpus, "corpus", "", "also list the bundles under `DIR` that no test used")
		fs.BoolVar(&o.json, "json", false, "print the merged report as JSON")
		fs.StringVar(&o.html, "html", "", "also write the report as one self-contained HTML page to `FILE`")
		fs.StringVar(&o.olderThan, "older-than", "", "also list the bundles recorded by code older than `REV` (a commit or an RFC 3339 time)")
		return func(e *env, args []string) int { return o.run(e, args) }
	},
}

// maxReportBytes is how much report reads in all.
const maxReportBytes = 256 << 20

type reportOptions struct {
	corpus, html, olderThan string
	json                    bool
}

func (o *reportOptions) run(e *env, args []string) int {
	var files []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			fmt.Fprintf(e.stderr, "stepfork report: %v\n", err)
			return exitInput
		}
		if !fi.IsDir() {
			files = append(files, a)
			continue
		}
		m, _ := filepath.Glob(filepath.Join(a, "*.jsonl"))
		if len(m) == 0 {
			fmt.Fprintf(e.stderr, "stepfork report: %s holds no results (*.jsonl); write them with go test -stepfork.results=%s\n", a, a)
			return exitInput
		}
		files = append(files, m...)
	}
	slices.Sort(files)
	var recs []corpus.Record
	var total int64
	for _, f := range files {
		// The budget of the command: results of 256 MiB in all, each file
		// at most corpus.MaxResultsBytes (corpus.Read refuses more).
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			if total += fi.Size(); total > maxReportBytes {
				fmt.Fprintf(e.stderr, "stepfork report: the results given are more than %d bytes in all; merge fewer at a time\n", maxReportBytes)
				return exitInput
			}
		}
		r, err := corpus.Read(f)
		if err != nil {
			fmt.Fprintf(e.stderr, "stepfork report: %v\n", err)
			return exitInput
		}
		recs = append(recs, r...)
	}
	for i := range recs {
		// Redaction first: the fields only shown are redacted whole before
		// any is cut (a revision is shown by its first 12 characters, which
		// no pattern would know for a token's). Names, corpora and paths
		// stay as they are to match one another and the files under
		// --corpus, and are redacted where they are printed.
		r := &recs[i]
		for _, f := range []*string{&r.Divergence, &r.Tail, &r.BaseStatus, &r.Status, &r.Module, &r.Version, &r.Revision, &r.RevisionTime} {
			*f = redact(*f)
		}
	}
	rep, mergeErr := corpus.Merge(recs)
	var unused []string
	if o.corpus != "" {
		var err error
		if unused, err = rep.Unused(o.corpus); err != nil {
			fmt.Fprintf(e.stderr, "stepfork report: --corpus: %v\n", err)
			return exitInput
		}
	}
	var older, unknown []corpus.Record
	if o.olderThan != "" {
		var err error
		if older, unknown, err = rep.OlderThan(o.olderThan, gitVCS{}); err != nil {
			fmt.Fprintf(e.stderr, "stepfork report: --older-than: %v\n", err)
			return exitInput
		}
	}
	if o.json {
		type corpusJSON struct {
			Name    string          `json:"name"`
			Shards  int             `json:"shards"`
			Entries []corpus.Record `json:"entries"`
		}
		type olderJSON struct {
			Revision string          `json:"revision"`
			Older    []corpus.Record `json:"older"`
			Unknown  []corpus.Record `json:"unknown"`
		}
		out := struct {
			Corpora   []corpusJSON `json:"corpora"`
			Unused    []string     `json:"unused,omitempty"`
			OlderThan *olderJSON   `json:"older_than,omitempty"`
			Problem   string       `json:"problem,omitempty"`
		}{Unused: unused}
		if o.olderThan != "" {
			clean := func(rs []corpus.Record) []corpus.Record {
				out := make([]corpus.Record, len(rs))
				for i, r := range rs {
					r.Corpus, r.Name, r.Path, r.Divergence = redact(r.Corpus), redact(r.Name), redact(r.Path), redact(r.Divergence)
					out[i] = r
				}
				return out
			}
			out.OlderThan = &olderJSON{Revision: redact(o.olderThan), Older: clean(older), Unknown: clean(unknown)}
		}
		for _, c := range rep.Corpora {
			cj := corpusJSON{Name: redact(c.Name), Shards: c.Total, Entries: make([]corpus.Record, len(c.Entries))}
			for i, r := range c.Entries {
				r.Corpus, r.Name, r.Path, r.Divergence = redact(r.Corpus), redact(r.Name), redact(r.Path), redact(r.Divergence)
				cj.Entries[i] = r
			}
			out.Corpora = append(out.Corpora, cj)
		}
		for i, u := range out.Unused {
			out.Unused[i] = redact(u)
		}
		if mergeErr != nil {
			out.Problem = redact(mergeErr.Error())
		}
		b, _ := json.Marshal(out)
		e.writeJSON(b)
	} else {
		for line := range strings.Lines(rep.Text()) {
			e.println(clean(strings.TrimSuffix(line, "\n"))) // a name cannot forge a line
		}
		if o.corpus != "" {
			if len(unused) == 0 {
				e.printf("\nevery bundle under %s was used\n", o.corpus)
			} else {
				e.printf("\n%d bundle(s) under %s that no test used:\n", len(unused), o.corpus)
				for _, u := range unused {
					e.printf("  %s\n", redact(u))
				}
			}
		}
		if o.olderThan != "" {
			line := func(r corpus.Record) string {
				code := "unknown code"
				if r.Revision != "" {
					code = "revision " + shortRev(r.Revision)
					if r.RevisionTime != "" {
						code += " of " + r.RevisionTime
					}
				}
				return fmt.Sprintf("  %s/%s: %s\n", r.Corpus, r.Name, code)
			}
			e.printf("\n%d bundle(s) recorded by code older than %s:\n", len(older), o.olderThan)
			for _, r := range older {
				e.printf("%s", redact(line(r)))
			}
			if len(unknown) > 0 {
				e.printf("%d bundle(s) whose code is unknown or cannot be compared with %s:\n", len(unknown), o.olderThan)
				for _, r := range unknown {
					e.printf("%s", redact(line(r)))
				}
			}
		}
	}
	if o.html != "" {
		problem := ""
		if mergeErr != nil {
			problem = mergeErr.Error()
		}
		var page strings.Builder
		if err := rep.HTML(&page, problem, unused, redact); err != nil {
			fmt.Fprintf(e.stderr, "stepfork report: --html: %v\n", err)
			return exitInput
		}
		if code, msg := writeOutput("Writing the page", o.html, []byte(page.String()), true); code != exitOK {
			fmt.Fprintf(e.stderr, "stepfork report: %s\n", msg)
			return exitInput
		}
	}
	if mergeErr != nil {
		fmt.Fprintf(e.stderr, "stepfork report: %s\n", redact(mergeErr.Error()))
		return exitInput
	}
	if rep.Failed() {
		return exitDifferent
	}
	return exitOK
}

func shortRev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// gitVCS asks git, in the current directory, about commits.
type gitVCS struct{}

func git(args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimSpace(string(out)), 0
	case errors.As(err, &exit):
		return "", exit.ExitCode()
	}
	return "", -1
}

// IsAncestor is git merge-base --is-ancestor: exit 0 yes, 1 no, anything
// else (an unknown commit, no repository, no git) cannot tell.
func (gitVCS) IsAncestor(older, newer string) (bool, bool) {
	switch _, code := git("merge-base", "--is-ancestor", older, newer); code {
	case 0:
		return true, true
	case 1:
		return false, true
	}
	return false, false
}

func (gitVCS) CommitTime(rev string) (time.Time, bool) {
	out, code := git("show", "-s", "--format=%cI", rev+"^{commit}")
	if code != 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, out)
	return t.UTC(), err == nil
}

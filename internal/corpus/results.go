// Package corpus holds the results of a corpus run as its shards write them
// and as stepfork report merges them: one rule for the file both sides read.
//
// A results file is JSON lines. Each line is one record with a "kind":
//
//   - "shard": a corpus (the test that ran it) started on one shard: the
//     shard index and total, how many bundles the corpus matched and how many
//     this shard owned;
//   - "entry": one bundle's outcome;
//   - "used": a bundle that a test loaded (sftest.Load, sftest.Record or a
//     corpus), for listing the bundles no test used.
//
// Records hold no secrets: every text is redacted before it is written.
package corpus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/readlimit"
	"github.com/stepfork/stepfork/internal/usd"
)

// Outcome says what happened to one bundle of a corpus.
type Outcome string

// The outcomes. A frozen replay either replayed or diverged; a check that
// forks the bundle reports how the variant compares with it.
const (
	Replayed      Outcome = "replayed"      // the frozen replay reproduced the run
	Diverged      Outcome = "diverged"      // the agent no longer reproduces the run
	Repaired      Outcome = "repaired"      // the run failed; the variant completed
	StillFailing  Outcome = "still failing" // the run failed; so did the variant
	Changed       Outcome = "changed"       // the behavior changed (the first change is the divergence)
	Intended      Outcome = "intended"      // changed only where the intended changes apply
	Unchanged     Outcome = "unchanged"     // the variant is equivalent to the run
	Checked       Outcome = "checked"       // the check ran and returned no variant
	Recorded      Outcome = "recorded"      // re-recorded with -stepfork.record
	Unloadable    Outcome = "unloadable"    // the bundle did not load
	FailedOutcome Outcome = "check failed"  // the check failed the subtest on its own
	NotRun        Outcome = "not run"       // the subtest stopped before an outcome
	Estimated     Outcome = "estimated"     // a dry run of a heal: nothing ran live
)

// outcomeOrder is the order in which reports list the outcomes.
var outcomeOrder = []Outcome{Replayed, Unchanged, Intended, Checked, Recorded, Estimated, Repaired, Changed, StillFailing, Diverged, FailedOutcome, Unloadable, NotRun}

// Record is one line of a results file.
type Record struct {
	Kind string `json:"kind"` // "shard", "entry" or "used"

	// Corpus is the name of the test that ran the corpus (shard, entry).
	Corpus string `json:"corpus,omitempty"`

	// Shard records.
	Index   int `json:"index,omitempty"`
	Total   int `json:"total,omitempty"`
	Matched int `json:"matched,omitempty"`
	Owned   int `json:"owned,omitempty"`

	// Entry records.
	Name       string  `json:"name,omitempty"`
	Outcome    Outcome `json:"outcome,omitempty"`
	Passed     bool    `json:"passed,omitempty"`
	Divergence string  `json:"divergence,omitempty"`
	BaseStatus string  `json:"base_status,omitempty"`
	Status     string  `json:"status,omitempty"`
	Cost       float64 `json:"incurred_cost_usd,omitempty"`
	// Healed says the bundle was replaced by its healed run; Tail is where
	// the tail started (or, estimated, would start) and what it spent or
	// would spend; LiveCalls and Tokens count the live calls of the run.
	Healed    bool   `json:"healed,omitempty"`
	Tail      string `json:"tail,omitempty"`
	LiveCalls int    `json:"live_calls,omitempty"`
	Tokens    int64  `json:"tokens,omitempty"`
	// The code that made the bundle (its build.json, after a heal or a new
	// recording the new one): module, version, VCS revision and its commit
	// time (RFC 3339).
	Module       string `json:"module,omitempty"`
	Version      string `json:"version,omitempty"`
	Revision     string `json:"revision,omitempty"`
	RevisionTime string `json:"revision_time,omitempty"`

	// Path is the bundle's path (entry, used).
	Path string `json:"path,omitempty"`
}

// Encode writes r as one line.
func Encode(w io.Writer, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// MaxResultsBytes is the largest results file Read reads.
const MaxResultsBytes = 64 << 20

// Read reads every record of one results file: a regular file of at most
// MaxResultsBytes (a FIFO or a device is refused before it is read). An
// unreadable line is an error naming the file and line: a results file is
// never repaired.
func Read(path string) ([]Record, error) {
	data, err := readlimit.ReadFile(path, MaxResultsBytes)
	if err != nil {
		return nil, err
	}
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r Record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("%s:%d: not a stepfork results record: %v", path, n, err)
		}
		switch r.Kind {
		case "shard", "entry", "used":
		default:
			return nil, fmt.Errorf("%s:%d: unknown record kind %q (want shard, entry or used)", path, n, r.Kind)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Report is the merge of the results of every shard of every corpus.
type Report struct {
	Corpora []*Corpus
	// Used lists every bundle path a test used, sorted, without repeats.
	Used []string
}

// Corpus is one corpus (one test) merged over its shards.
type Corpus struct {
	Name    string
	Total   int    // the number of shards that ran it
	Shards  []bool // Shards[i]: shard i reported
	Matched int
	Entries []Record // sorted by name
}

// ErrIncomplete reports a merge in which a shard is missing or reported twice.
var ErrIncomplete = errors.New("the shard results are incomplete")

// Merge merges the records of every shard. Every corpus must have been
// reported by each of its shards exactly once, with each bundle in exactly one
// shard; anything else is an error wrapping [ErrIncomplete] that says which
// shard or bundle is missing or doubled, and the report is still returned with
// what was read.
func Merge(records []Record) (*Report, error) {
	byName := map[string]*Corpus{}
	used := map[string]bool{}
	var problems []string
	get := func(name string) *Corpus {
		c := byName[name]
		if c == nil {
			c = &Corpus{Name: name}
			byName[name] = c
		}
		return c
	}
	seen := map[[2]string]bool{}
	for _, r := range records {
		switch r.Kind {
		case "used":
			used[r.Path] = true
		case "shard":
			c := get(r.Corpus)
			total := max(r.Total, 1)
			if c.Total == 0 {
				c.Total, c.Shards, c.Matched = total, make([]bool, total), r.Matched
			}
			if total != c.Total {
				problems = append(problems, fmt.Sprintf("%s: shards disagree on the number of shards (%d and %d)", r.Corpus, c.Total, total))
				continue
			}
			if r.Matched != c.Matched {
				problems = append(problems, fmt.Sprintf("%s: shards matched different corpora (%d and %d bundles)", r.Corpus, c.Matched, r.Matched))
			}
			if r.Index < 0 || r.Index >= total {
				problems = append(problems, fmt.Sprintf("%s: shard index %d outside 0..%d", r.Corpus, r.Index, total-1))
				continue
			}
			if c.Shards[r.Index] {
				problems = append(problems, fmt.Sprintf("%s: shard %d/%d reported twice", r.Corpus, r.Index, total))
			}
			c.Shards[r.Index] = true
		case "entry":
			c := get(r.Corpus)
			k := [2]string{r.Corpus, r.Name}
			if seen[k] {
				problems = append(problems, fmt.Sprintf("%s: bundle %q reported twice", r.Corpus, r.Name))
				continue
			}
			seen[k] = true
			c.Entries = append(c.Entries, r)
			if r.Path != "" {
				used[r.Path] = true
			}
		}
	}
	rep := &Report{}
	for _, c := range byName {
		slices.SortFunc(c.Entries, func(a, b Record) int { return strings.Compare(a.Name, b.Name) })
		for i, ok := range c.Shards {
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: shard %d/%d did not report", c.Name, i, c.Total))
			}
		}
		if c.Total == 0 {
			problems = append(problems, fmt.Sprintf("%s: no shard record (results written by something else?)", c.Name))
		} else if len(c.Entries) != c.Matched && !slices.Contains(c.Shards, false) {
			problems = append(problems, fmt.Sprintf("%s: %d bundles matched, %d reported", c.Name, c.Matched, len(c.Entries)))
		}
		rep.Corpora = append(rep.Corpora, c)
	}
	slices.SortFunc(rep.Corpora, func(a, b *Corpus) int { return strings.Compare(a.Name, b.Name) })
	for p := range used {
		rep.Used = append(rep.Used, p)
	}
	slices.Sort(rep.Used)
	if len(problems) > 0 {
		slices.Sort(problems)
		return rep, fmt.Errorf("%w:\n  %s", ErrIncomplete, strings.Join(problems, "\n  "))
	}
	return rep, nil
}

// Failed reports whether any bundle of any corpus failed its subtest.
func (r *Report) Failed() bool {
	for _, c := range r.Corpora {
		for _, e := range c.Entries {
			if !e.Passed {
				return true
			}
		}
	}
	return false
}

// Text is the summary stepfork report prints: per corpus one line with the
// counts by outcome ("corpus TestTriage: 50 bundle(s), 48 passed, 2 failed:
// 48 intended, 2 changed"), what the runs incurred, the revisions of the
// code that recorded the bundles, then one line per bundle that did not
// pass, was healed, or whose outcome is worth reading (diverged, repaired,
// changed, still failing), sorted by name. It depends only on the merged
// records, so the merge of the shards of a run prints exactly what the
// unsharded run does.
func (r *Report) Text() string {
	var b strings.Builder
	for i, c := range r.Corpora {
		if i > 0 {
			b.WriteString("\n")
		}
		passed, cost := 0, 0.0
		for _, e := range c.Entries {
			cost = usd.Sum(cost, e.Cost)
			if e.Passed {
				passed++
			}
		}
		fmt.Fprintf(&b, "corpus %s: %d bundle(s), %d passed, %d failed", clip.Inert(c.Name), len(c.Entries), passed, len(c.Entries)-passed)
		if counts := Counts(c.Entries); counts != "" {
			b.WriteString(": " + counts)
		}
		b.WriteString("\n")
		if cost > 0 {
			fmt.Fprintf(&b, "  incurred       %s\n", usd.Format(cost))
		}
		if code := Revisions(c.Entries); code != "" {
			fmt.Fprintf(&b, "  recorded by    %s\n", code)
		}
		for _, e := range c.Entries {
			if e.Passed && !e.Healed && e.Outcome != Diverged && e.Outcome != Repaired && e.Outcome != Changed && e.Outcome != StillFailing {
				continue
			}
			mark := "ok  "
			if !e.Passed {
				mark = "FAIL"
			}
			// One line per entry: what the results file says is written
			// inert, so a divergence quoting a line break cannot start a
			// line that reads as another entry's.
			line := fmt.Sprintf("  %s %s: %s", mark, clip.Inert(e.Name), clip.Inert(string(e.Outcome)))
			if e.Healed {
				line += ", healed"
			}
			if e.Divergence != "" {
				line += " — " + clip.Inert(e.Divergence)
			}
			if e.Tail != "" {
				line += " (" + clip.Inert(e.Tail) + ")"
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// Counts is the number of entries of each outcome, in the order reports
// list them: "48 intended, 2 changed" ("" for no entries), with the healed
// ones counted at the end ("…, 2 healed").
func Counts(entries []Record) string {
	counts := map[Outcome]int{}
	healed := 0
	for _, e := range entries {
		counts[e.Outcome]++
		if e.Healed {
			healed++
		}
	}
	var parts []string
	for _, o := range outcomeOrder {
		if n := counts[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o))
		}
	}
	var other []Outcome // outcomes a newer writer knows, by name
	for o := range counts {
		if !slices.Contains(outcomeOrder, o) {
			other = append(other, o)
		}
	}
	slices.Sort(other)
	for _, o := range other {
		parts = append(parts, fmt.Sprintf("%d %s", counts[o], o))
	}
	if healed > 0 {
		parts = append(parts, fmt.Sprintf("%d healed", healed))
	}
	return strings.Join(parts, ", ")
}

// Revisions says which code recorded the entries' bundles: each revision
// (12 digits) with how many bundles it recorded, most first, then the
// bundles whose code is unknown: "46b7ad0c4abd (48), 1a2b3c4d5e6f (2),
// unknown (3)". It is "" when no entry knows its code.
func Revisions(entries []Record) string {
	counts := map[string]int{}
	known := false
	for _, e := range entries {
		rev := "unknown"
		if e.Revision != "" {
			rev, known = e.Revision, true
			if len(rev) > 12 {
				rev = rev[:12]
			}
		}
		counts[rev]++
	}
	if !known {
		return ""
	}
	revs := make([]string, 0, len(counts))
	for r := range counts {
		revs = append(revs, r)
	}
	slices.SortFunc(revs, func(a, b string) int {
		if (a == "unknown") != (b == "unknown") {
			if a == "unknown" {
				return 1
			}
			return -1
		}
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(revs))
	for i, r := range revs {
		parts[i] = fmt.Sprintf("%s (%d)", r, counts[r])
	}
	return strings.Join(parts, ", ")
}

// Unused lists the bundles under dir (directories named *.sftrace and packed
// *.sftrace.tar.gz files, at any depth) that no record says a test used,
// as paths relative to dir with forward slashes. Paths in the records are
// compared after filepath.Abs, so a results file written from another working
// directory of the same checkout still matches.
func (r *Report) Unused(dir string) ([]string, error) {
	used := map[string]bool{}
	for _, p := range r.Used {
		if a, err := filepath.Abs(p); err == nil {
			used[a] = true
		}
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		isBundle := (d.IsDir() && strings.HasSuffix(name, ".sftrace")) || (!d.IsDir() && strings.HasSuffix(name, ".sftrace.tar.gz"))
		if !isBundle {
			return nil
		}
		if !used[p] {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	return out, err
}

// Package outcome says what one variant of a sweep did, compared with the
// base run it was forked from, in the few words every text of a sweep
// shows: fork.Sweep.Explain, the golden of a sweep (sftest.Golden), the
// summary sftest.Sweep logs, and the sweep's page. Reading them answers
// "which change did what": each variant names its changes, its status, its
// own first divergence from the base, its output cut around where it
// differs from the base's, the tool calls it added or lost, and what it
// cost.
//
// [Of] computes a variant's [Summary] from its diff against the base, and
// [Write] lays the variants out, one block each. Both work on plain values
// so that every package showing a sweep uses them (package fork included).
package outcome

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// Width is how many characters of an output a summary shows, cut around
// where the variant's differs from the base's.
const Width = 80

// Summary is what a variant did compared with its base.
type Summary struct {
	// Equivalent is set when the variant behaved as the base.
	Equivalent bool
	// Divergence is its first divergence from the base
	// (diff.Divergence.String), "" when it is equivalent.
	Divergence string
	// Output is the variant's output and BaseOutput the base's, as
	// canonical JSON cut to the same window around their first difference
	// ([clip.Diff]); "(none)" for a run that did not end. SameOutput is
	// set when the two are equal.
	Output, BaseOutput string
	SameOutput         bool
	// Added and Lost are the tool calls the variant made more or fewer of
	// than the base, by name: "request_approval", "search ×2".
	Added, Lost []string
}

// Norm is how a text that must not change from run to run (a golden file)
// shows a summary.
type Norm struct {
	// Value rewrites every value before it is cut or shown (ids replaced by
	// placeholders first, so that a cut falls at the same place whatever
	// the ids).
	Value func(trace.Value) trace.Value
	// CallSteps names a call by the step it was made at only, not also the
	// step its result landed at, which for concurrent calls depends on
	// scheduling.
	CallSteps bool
}

// Of summarizes the diff d of a variant against its base, as norm says
// (nil: as it is).
func Of(d *diff.Result, norm *Norm) Summary {
	value := func(v trace.Value) trace.Value { return v }
	if norm != nil && norm.Value != nil {
		value = norm.Value
	}
	s := Summary{Equivalent: d.Equivalent(), Divergence: Divergence(d, norm)}
	base, variant := outputs(d)
	s.SameOutput = base == variant
	bt, vt := "(none)", "(none)"
	if !base.IsAbsent() {
		bt = value(base).Canonical()
	}
	if !variant.IsAbsent() {
		vt = value(variant).Canonical()
	}
	s.BaseOutput, s.Output = clip.Diff(bt, vt, Width)
	s.Added, s.Lost = tools(d)
	return s
}

// Divergence is d's first divergence in one line (diff.Divergence.String),
// as norm says (nil: as it is); "" when the runs are equivalent.
func Divergence(d *diff.Result, norm *Norm) string { return Line(d.Divergence, norm) }

// Line is one divergence of a diff (its first, or its first change of
// behaviour, diff.Result.BehaviorChange) in one line, as norm says (nil: as
// it is); "" for none.
func Line(dv *diff.Divergence, norm *Norm) string {
	if dv == nil {
		return ""
	}
	value := func(v trace.Value) trace.Value { return v }
	if norm != nil && norm.Value != nil {
		value = norm.Value
	}
	c := *dv
	if norm != nil && norm.CallSteps {
		for _, side := range []**trace.BehaviorStep{&c.Base, &c.Variant} {
			if *side != nil {
				st := **side
				st.ResultStep = st.Step
				*side = &st
			}
		}
	}
	c.Changes = slices.Clone(dv.Changes)
	for i := range c.Changes {
		ch := &c.Changes[i]
		if !ch.Expected.IsAbsent() {
			ch.Expected = value(ch.Expected)
		}
		if !ch.Actual.IsAbsent() {
			ch.Actual = value(ch.Actual)
		}
	}
	return c.String()
}

// outputs are the outputs of the last run step of each side (Absent for a
// run that did not end).
func outputs(d *diff.Result) (base, variant trace.Value) {
	var b, v bool
	for i := len(d.Steps) - 1; i >= 0 && !(b && v); i-- {
		st := &d.Steps[i]
		if !b && st.Base != nil && st.Base.Type == trace.StepRun {
			base, b = st.Base.Payload.Get("output"), true
		}
		if !v && st.Variant != nil && st.Variant.Type == trace.StepRun {
			variant, v = st.Variant.Payload.Get("output"), true
		}
	}
	return base, variant
}

// tools compares the numbers of tool calls of each name in the two runs.
func tools(d *diff.Result) (added, lost []string) {
	count := map[string][2]int{}
	var names []string
	note := func(s *trace.BehaviorStep, side int) {
		if s == nil || s.Type != trace.StepTool {
			return
		}
		c, seen := count[s.Label]
		if !seen {
			names = append(names, s.Label)
		}
		c[side]++
		count[s.Label] = c
	}
	for i := range d.Steps {
		note(d.Steps[i].Base, 0)
		note(d.Steps[i].Variant, 1)
	}
	times := func(name string, n int) string {
		if n == 1 {
			return name
		}
		return fmt.Sprintf("%s ×%d", name, n)
	}
	for _, n := range names {
		switch c := count[n]; {
		case c[1] > c[0]:
			added = append(added, times(n, c[1]-c[0]))
		case c[0] > c[1]:
			lost = append(lost, times(n, c[0]-c[1]))
		}
	}
	return added, lost
}

// ToolsText is "+request_approval -issue_refund", or "" when the variant
// made the tool calls the base made.
func (s Summary) ToolsText() string {
	var parts []string
	for _, a := range s.Added {
		parts = append(parts, "+"+a)
	}
	for _, l := range s.Lost {
		parts = append(parts, "-"+l)
	}
	return strings.Join(parts, " ")
}

// Row is one variant of a sweep as [Write] lays it out.
type Row struct {
	Name    string
	Changes []string // the changes' descriptions; none for the control
	// Err, when set, is why the variant did not run; nothing else is shown.
	Err     string
	Status  string  // "completed", or for samples "2/3 completed"
	Cost    float64 // what it incurred, over all its samples
	Summary Summary
	// Samples, Score and Saved are lines shown when set: the samples'
	// statuses and mean cost, the mean score and its interval, where the
	// variant was saved.
	Samples, Score, Saved string
	// Check is the outcome of sftest.Sweep's check of the variant ("ok",
	// "FAIL"), shown after the status when set.
	Check string
}

// Write lays out a sweep: header, then a block per variant — its name,
// status, incurred cost and changes on one line, then what it did — and
// the total incurred, the sum of the costs shown above it:
//
//	sweep of refund-failure.sftrace at step 8 (before 'decide' execution 1): 2 variant(s)
//	  approval  completed  $0.000047  prompt of 'decide'
//	      diverged  step 9: llm 'openai/gpt-4o-mini' changed: input.system "…" → "…"
//	      output    {"outcome":"awaiting_approval"} (base: null)
//	      tools     +request_approval -issue_refund
//	  control   failed     $0.00      none (the control)
//	      behaved as the base
//	  total                $0.000047
func Write(w io.Writer, header string, rows []Row) {
	fmt.Fprintln(w, header)
	name, status, cost := len("total"), 0, 0
	costs := make([]string, len(rows))
	for i, r := range rows {
		name = max(name, len([]rune(r.Name)))
		st := r.Status
		if r.Check != "" {
			st += " " + r.Check
		}
		status = max(status, len([]rune(st)))
		costs[i] = usd.Format(r.Cost)
		cost = max(cost, len(costs[i]))
	}
	total := 0.0
	for i, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(w, "  %s  error: %s\n", pad(r.Name, name), r.Err)
			continue
		}
		st := r.Status
		if r.Check != "" {
			st += " " + r.Check
		}
		changes := "none (the control)"
		if len(r.Changes) > 0 {
			changes = strings.Join(r.Changes, "; ")
		}
		fmt.Fprintf(w, "  %s  %s  %s  %s\n", pad(r.Name, name), pad(st, status), pad(costs[i], cost), changes)
		total = usd.Sum(total, r.Cost)
		s := r.Summary
		if s.Equivalent {
			fmt.Fprintf(w, "      behaved as the base\n")
		} else {
			fmt.Fprintf(w, "      diverged  %s\n", s.Divergence)
			if s.SameOutput {
				fmt.Fprintf(w, "      output    as in the base\n")
			} else {
				fmt.Fprintf(w, "      output    %s (base: %s)\n", s.Output, s.BaseOutput)
			}
			if t := s.ToolsText(); t != "" {
				fmt.Fprintf(w, "      tools     %s\n", t)
			}
		}
		for _, l := range []struct{ k, v string }{{"samples", r.Samples}, {"score", r.Score}, {"saved", r.Saved}} {
			if l.v != "" {
				fmt.Fprintf(w, "      %-9s %s\n", l.k, l.v)
			}
		}
	}
	fmt.Fprintf(w, "  %s  %s  %s\n", pad("total", name), pad("", status), usd.Format(total))
}

// Sample is one run of a variant, for [RowOf]: its status ("" when it did
// not run) and what it incurred.
type Sample struct {
	Status string
	Cost   float64
}

// RowOf builds the row of a variant named name with the given changes from
// its samples (the first one's diff d against the base; nil when it did
// not run): its status (for several samples, how many completed: "2/3
// completed", and a samples line with each status and the mean cost), the
// cost over all samples (each as shown, see usd.Sum), and the summary of d
// (see [Of]; norm as there).
func RowOf(name string, changes []string, samples []Sample, d *diff.Result, norm *Norm) Row {
	r := Row{Name: name, Changes: changes}
	ran, completed := 0, 0
	counts := map[string]int{}
	var order []string
	for _, s := range samples {
		r.Cost = usd.Sum(r.Cost, s.Cost)
		st := s.Status
		if st == "" {
			st = "not run"
		} else {
			ran++
		}
		if st == "completed" {
			completed++
		}
		if counts[st] == 0 {
			order = append(order, st)
		}
		counts[st]++
	}
	switch {
	case len(samples) == 1:
		r.Status = samples[0].Status
	case len(samples) > 1:
		r.Status = fmt.Sprintf("%d/%d completed", completed, len(samples))
		parts := make([]string, len(order))
		for i, st := range order {
			parts[i] = fmt.Sprintf("%d %s", counts[st], st)
		}
		r.Samples = fmt.Sprintf("%d: %s", len(samples), strings.Join(parts, ", "))
		if ran > 0 {
			r.Samples += fmt.Sprintf("; mean %s each", usd.Format(r.Cost/float64(ran)))
		}
	}
	if d != nil {
		r.Summary = Of(d, norm)
	}
	return r
}

// ScoreText is a variant's score: with one sample "0.80 (base 0.40,
// +0.40)", with several their mean and its 95 % interval, "0.67 [0.21,
// 0.94] (base 0.40)".
func ScoreText(samples int, mean, low, high, base float64) string {
	if samples > 1 {
		return fmt.Sprintf("%.2f [%.2f, %.2f] (base %.2f)", mean, low, high, base)
	}
	return fmt.Sprintf("%.2f (base %.2f, %+.2f)", mean, base, mean-base)
}

func pad(s string, n int) string {
	if k := len([]rune(s)); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

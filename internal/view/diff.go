package view

import (
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// This file holds every use of the run diff's API, so that the page follows
// the diff wherever it lives.

// differ compares variants with one base run.
type differ struct{ db *diff.Prepared }

func newDiffer(base *trace.Trace, basePath string) *differ {
	return &differ{diff.Prepare(base, diff.DisplayPaths(basePath, ""))}
}

// diffSection builds the aligned view of base and variant.
func (d *differ) section(variant *trace.Trace) *diffSection {
	return fromRunDiff(d.db.Diff(variant))
}

// variantResult is the diff of a sweep's variant against the base: the one
// the fork computed, or d's of its bundle; nil when the base is not known.
func variantResult(sv SweepVariant, d *differ) *diff.Result {
	switch {
	case sv.Variant != nil && sv.Variant.Diff != nil:
		return sv.Variant.Diff
	case sv.Variant != nil && sv.Variant.Base != nil:
		return diff.Runs(sv.Variant.Base, sv.Variant.Trace)
	case sv.Variant == nil && sv.Trace != nil && d != nil:
		return d.db.Diff(sv.Trace)
	}
	return nil
}

// diffTwo compares two runs.
func diffTwo(base, variant *trace.Trace) *diffSection {
	return fromRunDiff(diff.Runs(base, variant))
}

// variantDiff is the diff a fork computed against its base (nil when the
// base is not known).
func variantDiff(v *fork.Variant) *diffSection {
	switch {
	case v.Diff != nil:
		return fromRunDiff(v.Diff)
	case v.Base != nil:
		return diffTwo(v.Base, v.Trace)
	}
	return nil
}

// fromRunDiff turns the diff's result into the page's model.
func fromRunDiff(rd *diff.Result) *diffSection {
	s := &diffSection{
		Equivalent: rd.Equivalent(),
		Added:      rd.Added, Removed: rd.Removed, Changed: rd.Changed, Unchanged: rd.Unchanged,
		Base:        summaryOf(&rd.Base),
		Variant:     summaryOf(&rd.Variant),
		TokensDelta: rd.TokensDelta,
		CostDelta:   rd.CostDelta,
		DivIndex:    -1,
		Alignment:   "longest common subsequence",
	}
	if rd.Positional {
		s.Alignment = "position (stepfork's)"
	}
	if dv := rd.Divergence; dv != nil {
		s.DivIndex, s.DivText = dv.Index, dv.String()
	}
	s.Steps = make([]*diffStep, len(rd.Steps))
	for i := range rd.Steps {
		sd := &rd.Steps[i]
		st := &diffStep{I: sd.Index, Kind: string(sd.Kind), Type: string(sd.Type), Label: sd.Label,
			B: sideOf(sd.Base), V: sideOf(sd.Variant), Div: sd.Index == s.DivIndex}
		for _, c := range sd.Changes {
			st.Changes = append(st.Changes, changeOf(c.Path, string(c.Kind), c.Expected, c.Actual))
		}
		switch {
		case sd.Intended != "":
			st.Why = "intended: " + sd.Intended
		case sd.MatchedBy != "":
			st.Why = "matched by " + sd.MatchedBy
		}
		if sd.Base != nil {
			st.BasePayload = sd.Base.Payload
		}
		if sd.Variant != nil {
			st.VariantPayload = sd.Variant.Payload
		}
		s.Steps[i] = st
	}
	if s.DivIndex >= 0 && s.DivIndex < len(s.Steps) {
		s.Div = s.Steps[s.DivIndex]
	}
	for _, sd := range rd.State {
		s.State = append(s.State, changeOf(sd.Key, string(sd.Change), sd.Before, sd.After))
	}
	return s
}

func summaryOf(r *diff.Summary) runSummary {
	return runSummary{Path: r.Path, Agent: r.AgentName, RunID: r.RunID, Status: string(r.Terminal()),
		Events: r.Events, Steps: r.Steps, Tokens: r.Tokens, Cost: r.CostUSD}
}

func sideOf(b *trace.BehaviorStep) *diffSide {
	if b == nil {
		return nil
	}
	sd := &diffSide{Index: b.Index, Type: string(b.Type), Label: b.Label, EventID: b.EventID, Step: b.Step, ResultStep: b.ResultStep, Where: b.Where(), ResultID: b.ResultID}
	if st, ok := b.Payload.Get("status").Str(); ok {
		sd.Status = st
	} else if st, ok := b.Payload.Get("run_status").Str(); ok {
		sd.Status = st
	}
	return sd
}

// ResultPage is the page of a diff computed elsewhere (what a golden file
// of a diff compares): the aligned steps, the first divergence and the
// deltas, without the runs' timelines.
func ResultPage(rd *diff.Result) *Page {
	p := &Page{Kind: "diff", Title: "diff " + rd.Base.AgentName + " · " + rd.Base.RunID + " → " + rd.Variant.RunID}
	p.Diff = fromRunDiff(rd)
	p.knowIDs(rd.Base.Minted, rd.Variant.Minted)
	return p
}

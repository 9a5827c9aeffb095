package view

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/trace"
)

// forkSection is what a fork did: where it was cut, what it changed, what
// the side-effect guard held back, what was served from the recording, and
// what the live tail cost.
type forkSection struct {
	Kind             string // static or counterfactual
	RunID            string
	ParentRunID      string
	ParentPath       string
	ForkPoint        string
	ForkPointStep    int
	ForkPointEventID string
	Chain            []string
	Policy           string
	Memoize          bool
	GroupID          string
	Status           string

	PrefixEvents, TailEvents int
	PrefixCalls, TailCalls   int

	Changes   []forkChange
	Overrides []forkOverride
	Held      []forkHeld
	Served    []forkServed

	// Incurred is known (from the run itself) or derived from the bundle
	// (the tail's model responses that were not served from the base).
	IncurredCost   float64
	IncurredTokens int64
	LiveModelCalls int
	LiveToolCalls  int
	// FromBundle says the facts below the provenance were read back from
	// the saved bundle rather than from the fork as it ran: memo hits can
	// then only be recognised when the base run is given too.
	FromBundle bool
	BaseKnown  bool
	Err        string // fork.json could not be read
}

type forkChange struct {
	Desc    string
	Applied string // "applied at step 7", "unused", or what the bundle cannot tell
	Steps   []int
}

type forkOverride struct {
	EventID string
	Target  string
	Step    int
	Type    string
}

type forkHeld struct {
	Step   int
	Kind   string
	Name   string
	Reason string
}

type forkServed struct {
	Step     int
	Kind     string
	Name     string
	BaseStep int
	How      string // memo hit, replayed by the guard, served from the recording
}

// forkFromInfo fills the provenance.
func forkFromInfo(info *fork.Info) *forkSection {
	fs := &forkSection{Kind: string(info.Kind), RunID: info.RunID, ParentRunID: info.ParentRunID,
		ParentPath: info.ParentTracePath, ForkPoint: info.ForkPoint, ForkPointStep: info.ForkPointStep,
		ForkPointEventID: info.ForkPointEventID, Chain: info.Chain(), Policy: info.Policy,
		Memoize: info.Memoize, GroupID: info.GroupID}
	for _, o := range info.Overrides {
		fs.Overrides = append(fs.Overrides, forkOverride{EventID: o.EventID, Target: o.Target, Step: o.Step, Type: string(o.Type)})
	}
	return fs
}

// countSides counts the events and calls before and after the fork point.
func (fs *forkSection) countSides(tr *trace.Trace) {
	for i := range tr.Events {
		ev := &tr.Events[i]
		call := ev.Type == trace.ToolCall || ev.Type == trace.LLMRequest
		if ev.Step <= fs.ForkPointStep {
			fs.PrefixEvents++
			if call {
				fs.PrefixCalls++
			}
		} else {
			fs.TailEvents++
			if call {
				fs.TailCalls++
			}
		}
	}
}

// forkFromBundle reads a fork's provenance from its fork.json, and what can
// be told from its events (base, when given, is the run it was forked
// from): the guard's holds (tail tool calls answered "Blocked"), forced
// decisions and parameters, and, with the base, the tail calls served from
// the recording. It is nil for a run that is not a fork.
func forkFromBundle(tr, base *trace.Trace) *forkSection {
	info, err := fork.ReadInfo(tr)
	if errors.Is(err, fork.ErrNotFork) {
		return nil
	}
	if err != nil {
		return &forkSection{Err: err.Error(), RunID: tr.RunID, ForkPointStep: -1}
	}
	fs := forkFromInfo(info)
	fs.FromBundle = true
	fs.BaseKnown = base != nil
	fs.Status = string(tr.Status)
	fs.countSides(tr)
	tl := buildTimeline(tr)
	var forced []int
	for _, it := range tl.Rows {
		if it.Step <= fs.ForkPointStep {
			continue
		}
		switch {
		case it.Status == "blocked":
			fs.Held = append(fs.Held, forkHeld{Step: it.Step, Kind: it.Kind, Name: it.Name, Reason: it.Error})
		case it.Note == "forced by the fork":
			forced = append(forced, it.Step)
		}
	}
	if len(fs.Held) > 0 {
		fs.Status = string(fork.StatusBlocked)
	}
	if info.Changes.Len() > 0 {
		wire, _ := trace.RedactValue(info.Changes)
		for n, c := range wire.Elems() {
			fc := forkChange{Desc: describeWire(c), Applied: "where it applied is not recorded in fork.json (written by an older version)"}
			if n < len(info.Applied) {
				u := info.Applied[n]
				fc.Applied, fc.Steps = appliedText(u.Count, u.Steps), u.Steps
				if _, findings := trace.RedactValue(c); u.Description != "" && len(findings) == 0 {
					fc.Desc = u.Description // as the fork described it, unless the wire form had to be redacted
				}
				fs.Changes = append(fs.Changes, fc)
				continue
			}
			if k, _ := c.Get("kind").Str(); k == "decision" || k == "param" {
				if len(forced) > 0 {
					fc.Applied, fc.Steps = "forced values at "+stepList(forced), forced
				} else {
					fc.Applied = "unused (no forced value in the tail)"
				}
			}
			fs.Changes = append(fs.Changes, fc)
		}
	}
	// Served calls: a tail call whose name, input, output and duration equal
	// a base call not yet consumed was answered from the recording (a memo
	// hit or a call the guard replayed); every other tail model call ran live.
	type key struct{ kind, name, in, out string }
	unconsumed := map[key][]int{}
	if base != nil {
		for _, it := range buildTimeline(base).Rows {
			if it.Kind == "tool" || it.Kind == "llm" {
				k := key{it.Kind, it.Name, it.Input.Canonical(), it.Output.Canonical() + durText(it.DurMS)}
				unconsumed[k] = append(unconsumed[k], it.Step)
			}
		}
	}
	for _, it := range tl.Rows {
		if it.Kind != "tool" && it.Kind != "llm" {
			continue
		}
		k := key{it.Kind, it.Name, it.Input.Canonical(), it.Output.Canonical() + durText(it.DurMS)}
		if it.Step <= fs.ForkPointStep {
			if q := unconsumed[k]; len(q) > 0 {
				unconsumed[k] = q[1:]
			}
			continue
		}
		if it.Status == "blocked" {
			continue
		}
		// Only a memoized fork serves model calls, and the guard replays
		// only the tools it does not let run.
		servable := info.Memoize
		if it.Kind == "tool" {
			servable = guardReplays(info.Policy, it.Name)
		}
		if q := unconsumed[k]; servable && len(q) > 0 {
			unconsumed[k] = q[1:]
			how := "memo hit"
			if it.Kind == "tool" {
				how = "replayed by the guard"
			}
			fs.Served = append(fs.Served, forkServed{Step: it.Step, Kind: it.Kind, Name: it.Name, BaseStep: q[0], How: how})
			continue
		}
		if it.Kind == "llm" {
			fs.LiveModelCalls++
			fs.IncurredCost = usd.Sum(fs.IncurredCost, it.Cost)
			fs.IncurredTokens += it.Tokens
		} else {
			fs.LiveToolCalls++
		}
	}
	return fs
}

// guardReplays reports whether the side-effect guard of policy (fork.json's
// form: "replay", "block" or "allow:a,b") serves tool name from the
// recording when the base holds the same call.
func guardReplays(policy, name string) bool {
	switch {
	case policy == "block":
		return false
	case strings.HasPrefix(policy, "allow:"):
		return !slices.Contains(strings.Split(strings.TrimPrefix(policy, "allow:"), ","), name)
	}
	return true
}

func durText(ms *int64) string {
	if ms == nil {
		return "|-"
	}
	return fmt.Sprintf("|%d", *ms)
}

// forkFromVariant is the section of a fork as it ran: every fact is the
// fork's own.
func forkFromVariant(v *fork.Variant) *forkSection {
	info := v.Info
	if info == nil {
		info = &fork.Info{Kind: fork.KindCounterfactual, RunID: v.Trace.RunID, ParentRunID: v.Base.RunID, ForkPoint: v.At.String()}
	}
	fs := forkFromInfo(info)
	fs.Status = string(v.Status)
	if v.Err != nil && fs.Status != string(fork.StatusCompleted) {
		fs.Status += ": " + v.Err.Error()
	}
	fs.BaseKnown = true
	fs.countSides(v.Trace)
	for _, c := range v.Changes {
		fc := forkChange{Desc: describe(c.Change, c.Description), Steps: c.Steps, Applied: appliedText(c.Applied, c.Steps)}
		fs.Changes = append(fs.Changes, fc)
	}
	for _, s := range v.Suppressed {
		fs.Held = append(fs.Held, forkHeld{Step: s.Step, Kind: string(s.Kind), Name: s.Tool, Reason: s.Reason})
	}
	for _, m := range v.MemoHits {
		fs.Served = append(fs.Served, forkServed{Step: m.Step, Kind: string(m.Kind), Name: m.Name, BaseStep: m.BaseStep, How: "memo hit"})
	}
	for _, m := range v.Replayed {
		fs.Served = append(fs.Served, forkServed{Step: m.Step, Kind: string(m.Kind), Name: m.Name, BaseStep: m.BaseStep, How: "replayed by the guard"})
	}
	fs.IncurredCost, fs.IncurredTokens = v.IncurredCost, v.IncurredTokens
	fs.LiveModelCalls, fs.LiveToolCalls = v.LiveModelCalls, v.LiveToolCalls
	return fs
}

// appliedText says where a change applied: n tail calls, the first of them
// at steps.
func appliedText(n int, steps []int) string {
	if n == 0 {
		return "unused: its target matched nothing in the tail"
	}
	s := fmt.Sprintf("applied %d time(s), at %s", n, stepList(steps))
	if n > len(steps) {
		s += fmt.Sprintf(" (+%d more)", n-len(steps))
	}
	return s
}

func stepList(steps []int) string {
	s := "step"
	if len(steps) > 1 {
		s += "s"
	}
	for i, n := range steps {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %d", n)
	}
	return s
}

// markSides marks each item of a fork's timeline as served from the
// recording (prefix) or run in the tail.
func markSides(tl *timeline, forkStep int) {
	for _, it := range tl.Rows {
		if it.Step <= forkStep {
			it.Side = "prefix"
		} else {
			it.Side = "tail"
		}
	}
}

// VariantPage is the page of a counterfactual fork as it ran (what sftest
// writes for a failed assertion): the fork's provenance and facts, the
// diff against its base and the variant's timeline.
func VariantPage(v *fork.Variant) *Page {
	p := &Page{Kind: "fork", Title: "fork " + v.Trace.AgentName + " · " + v.Trace.RunID}
	p.Fork = forkFromVariant(v)
	p.Diff = variantDiff(v)
	p.know(v.Trace, v.Base)
	rs := newRunSection(v.Trace, "variant")
	rs.ForkStep = p.Fork.ForkPointStep
	markSides(rs.Timeline, rs.ForkStep)
	p.Runs = []*runSection{rs}
	return p
}

// markOverrides notes on the items of a static fork which outputs the fork
// replaced.
func markOverrides(tl *timeline, fs *forkSection) {
	over := map[string]bool{}
	for _, o := range fs.Overrides {
		over[o.EventID] = true
	}
	if len(over) == 0 {
		return
	}
	for _, it := range tl.Rows {
		for _, id := range it.IDs {
			if over[id] {
				it.Note = "output overridden by the fork"
			}
		}
	}
}

// describe names a change for people: its own description when its wire
// form holds nothing to redact, else the redacted wire form (a description
// may print a value under a sensitive key that only the wire form's
// redaction can find).
func describe(c fork.Change, desc string) string {
	if c == nil {
		return desc
	}
	w := c.Wire()
	if red, findings := trace.RedactValue(w); len(findings) > 0 {
		return describeWire(red)
	}
	return desc
}

// describeWire renders a change's wire form: its kind, then its fields.
func describeWire(w trace.Value) string {
	kind, _ := w.Get("kind").Str()
	s := kind
	for k, v := range w.Members() {
		if k == "kind" {
			continue
		}
		s += " · " + k + ": " + preview(v)
	}
	return s
}

package diff

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/lcs"
	"github.com/stepfork/stepfork/internal/sharedstart"
	"github.com/stepfork/stepfork/internal/traceindex"
	"github.com/stepfork/stepfork/trace"
)

// Kind says how a step or a field differs between the base and the
// variant run.
type Kind string

// Kinds of difference. Field changes and state deltas are never unchanged.
const (
	Added     Kind = "added"     // only in the variant
	Removed   Kind = "removed"   // only in the base
	Changed   Kind = "changed"   // in both, different
	Unchanged Kind = "unchanged" // in both, equal
)

// value; the side that lacks the key or element is Absent.
type Change struct {
	Path     string
	Kind     Kind // added, removed or changed
	Expected trace.Value
	Actual   trace.Value
}

// Step is one entry of the alignment.
type Step struct {
	Index int            // position in Result.Steps
	Kind  Kind           // added, removed, changed or unchanged
	Type  trace.StepType // the base step's type, or the variant's for an added step
	Label string         // likewise
	// Base and Variant are the aligned steps; Base is nil for an added step
	// and Variant nil for a removed one.
	Base, Variant *trace.BehaviorStep
	// Fields are the sorted payload keys of the two steps (empty for added
	// and removed steps). The slice may be shared between entries: do not
	// modify it.
	Fields  []string
	Changes []Change // in path order; empty unless Kind is changed
	// MatchedBy names the user matcher through which the variant's call
	// matches the base's although their inputs differ; Intended names the
	// intended change that explains the difference (a changed prompt, a
	// substituted result). Either says that the step, though not unchanged,
	// is not a change of behavior. [Result.Mark] sets them; a diff made by
	// [Runs] alone has neither.
	MatchedBy, Intended string
}

// Divergence is where two runs first part: the first step that is not
// unchanged, with one exception. A node's step holds the status the node
// exited with, which follows from what ran inside it; a node that ran in
// both runs and differs only in how it ended is therefore not where they
// part when a later step differs too: that later step is. So the
// divergence of a fork whose changed prompt made a failing node succeed
// is the model call whose input changed, not the node.
type Divergence struct {
	Index int  // position in Result.Steps
	Kind  Kind // added, removed or changed
	// Base and Variant are the two sides of that step; one is nil when only
	// the other run has the step.
	Base, Variant *trace.BehaviorStep
	// BaseIndex and VariantIndex are the positions in each run's behavior
	// steps where the runs part: the index of Base or Variant, or, for the
	// side that lacks the step, the index of that run's next step.
	BaseIndex, VariantIndex int
	// Changes are the step's changes when Kind is changed (the slice of
	// Result.Steps[Index]; do not modify it).
	Changes []Change
}

// divergenceValue is how many characters of each value a Divergence's
// String shows, cut around the first difference of the two.
const divergenceValue = 120

// String describes the divergence in one line, naming the step by its step
// numbers ([trace.BehaviorStep.Where]) in the variant, or in the base for a
// removed step:
//
//	steps 7–8: llm 'fake/fake-1' changed: output.content "refund" → "escalate" (+1 more)
//	steps 11–12: tool 'issue_refund' only in the base
//	steps 9–10: llm 'openai/gpt-4o-mini' became llm 'openai/gpt-4.1'
//
// A changed step whose step numbers differ in the two runs names both
// ("steps 14–15 (base steps 10–11)"). Values are canonical JSON, cut to the
// same window around their first difference. A nil Divergence (equivalent
// runs) is "none: the runs are equivalent".
func (dv *Divergence) String() string {
	if dv == nil {
		return "none: the runs are equivalent"
	}
	switch {
	case dv.Kind == Added && dv.Variant != nil:
		return fmt.Sprintf("%s: %s '%s' only in the variant", dv.Variant.Where(), dv.Variant.Type, dv.Variant.Label)
	case dv.Kind == Removed && dv.Base != nil:
		return fmt.Sprintf("%s: %s '%s' only in the base", dv.Base.Where(), dv.Base.Type, dv.Base.Label)
	case dv.Base == nil || dv.Variant == nil:
		return fmt.Sprintf("step #%d %s", dv.Index, dv.Kind)
	}
	where := dv.Variant.Where()
	if bw := dv.Base.Where(); bw != where {
		where += " (base " + bw + ")"
	}
	if dv.Base.Type != dv.Variant.Type || dv.Base.Label != dv.Variant.Label {
		return fmt.Sprintf("%s: %s '%s' became %s '%s'", where, dv.Base.Type, dv.Base.Label, dv.Variant.Type, dv.Variant.Label)
	}
	text := fmt.Sprintf("%s: %s '%s' changed", where, dv.Variant.Type, dv.Variant.Label)
	if len(dv.Changes) > 0 {
		c := dv.Changes[0]
		before, after := clip.Diff(valueText(c.Expected), valueText(c.Actual), divergenceValue)
		text += fmt.Sprintf(": %s %s → %s", c.Path, before, after)
		if n := len(dv.Changes) - 1; n > 0 {
			text += fmt.Sprintf(" (+%d more)", n)
		}
	}
	return text
}

// valueText is v's canonical JSON, or "(absent)".
func valueText(v trace.Value) string {
	if v.IsAbsent() {
		return "(absent)"
	}
	return v.Canonical()
}

// StateDelta is the difference of one plain state key between the final
// states of the two runs. The final state of a run holds, per key, the
// "after" of its last state_change (an absent "after" deletes the key);
// runtime markers (keys starting with '@') are not state.
type StateDelta struct {
	Key    string
	Change Kind        // added, removed or changed
	Before trace.Value // the base run's final value, Absent when it has none
	After  trace.Value // the variant run's final value, Absent when it has none
	// BytesDelta is the size of After minus the size of Before, in bytes
	// of canonical JSON (0 for Absent).
	BytesDelta int
}

// Summary describes one side of a diff.
type Summary struct {
	// Path is the display path: as given with DisplayPaths, else the
	// trace's Path; "" for an in-memory
	Path      string
	AgentName string
	RunID     string
	Status    trace.RunStatus // the manifest's status
	RunEnd    trace.RunStatus // run_status of the last run_end, "" when there is none
	Events    int             // number of events
	Steps     int             // number of behavior steps
	Tokens    int64           // sum of llm_response total tokens (prompt + completion when total is missing)
	CostUSD   float64         // sum of llm_response cost_usd
	// Minted are the ids the run's model responses minted
	// ([trace.MintedIDs]: id → kind), which [Result.Explain] and other
	// renderings show as placeholders; nil when the run records none.
	Minted map[string]string
}

// Terminal is the status a run ended with: its run_end status, or the
// manifest's status when it has no run_end.
func (s *Summary) Terminal() trace.RunStatus {
	if s.RunEnd != "" {
		return s.RunEnd
	}
	return s.Status
}

// Result is the behavioral difference between a base and a variant run.
type Result struct {
	Positional bool // aligned by position (AlignPosition), not by LCS

	Base, Variant Summary

	Steps                              []Step
	Added, Removed, Changed, Unchanged int
	Divergence                         *Divergence  // nil when equivalent
	State                              []StateDelta // sorted by key
	TokensDelta                        int64        // Variant.Tokens - Base.Tokens
	CostDelta                          float64      // Variant.CostUSD - Base.CostUSD
	// Matched and Intended count the differing steps [Result.Mark] found
	// matched through a user matcher and explained by an intended change.
	Matched, Intended int
}

// Equivalent reports whether the two runs behaved the same: no step was
// added, removed or changed. (Ids, timestamps, durations, tokens and costs
// are not behavior.)
func (d *Result) Equivalent() bool {
	return d.Added == 0 && d.Removed == 0 && d.Changed == 0
}

// Mark asks explain about every step that is not unchanged, in order, and
// records its answer: the user matcher through which the step's call
// matches (matchedBy) or the intended change that explains the difference
// (intended), or neither when the step is a change of behavior. Marking
// again replaces earlier marks. The counts and the divergence stay what the
// alignment found: [Result.Equivalent] is still false for a run whose only
// differences are matched or intended; [Result.BehaviorChange] and
// [Result.OnlyIntended] read the marks.
func (d *Result) Mark(explain func(s *Step) (matchedBy, intended string)) {
	d.Matched, d.Intended = 0, 0
	for i := range d.Steps {
		s := &d.Steps[i]
		s.MatchedBy, s.Intended = "", ""
		if s.Kind == Unchanged || explain == nil {
			continue
		}
		s.MatchedBy, s.Intended = explain(s)
		switch {
		case s.Intended != "":
			s.MatchedBy = ""
			d.Intended++
		case s.MatchedBy != "":
			d.Matched++
		}
	}
}

// BehaviorChange returns where the variant first behaved otherwise than the
// base: the first step that differs and that [Result.Mark] did not find
// matched or intended, as a [Divergence]. It is nil when the runs behave
// alike (every difference, if any, is matched or intended); without marks it
// is [Result.Divergence].
func (d *Result) BehaviorChange() *Divergence {
	if d.Matched == 0 && d.Intended == 0 {
		return d.Divergence
	}
	bi, vi := 0, 0
	for i := range d.Steps {
		s := &d.Steps[i]
		if s.Kind != Unchanged && s.MatchedBy == "" && s.Intended == "" {
			return &Divergence{Index: i, Kind: s.Kind, Base: s.Base, Variant: s.Variant, BaseIndex: bi, VariantIndex: vi, Changes: s.Changes}
		}
		if s.Base != nil {
			bi = s.Base.Index + 1
		}
		if s.Variant != nil {
			vi = s.Variant.Index + 1
		}
	}
	return nil
}

// OnlyIntended reports whether the runs differ and every difference is
// matched or intended, at least one intended: the variant changed only
// where an intended change applies.
func (d *Result) OnlyIntended() bool {
	return d.Intended > 0 && d.BehaviorChange() == nil
}

// Option configures [Runs] and [Prepare].
//
// An Option is made by [AlignPosition] or [DisplayPaths]; no other package
// can implement it.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	positional        bool
	basePath, varPath string
	pathsSet          bool
}

// AlignPosition makes [Runs] behave exactly like stepfork's diff_traces:
// steps are extracted as stepfork does ([trace.Trace.StepforkBehavior]:
// runtime markers are state steps, a model's usage is compared) and
// aligned by position, the two terminal run steps with each other. The
// resulting Result's JSON is byte-identical to `stepfork diff --json`.
func AlignPosition() Option { return optionFunc(func(c *config) { c.positional = true }) }

// DisplayPaths sets the paths reported for the two runs (Summary.Path),
// for example the command-line arguments that named them. Like stepfork,
// which turns its arguments into Python Path objects, the paths are
// normalized the way pathlib prints them: "./a//b/" is reported as "a/b".
// An empty path is an in-memory  Without this option the traces' own
// Path fields are used, normalized the same way.
func DisplayPaths(base, variant string) Option {
	return optionFunc(func(c *config) { c.basePath, c.varPath, c.pathsSet = base, variant, true })
}

// Runs compares the behavior of a base and a variant run.
//
// Each run is reduced to behavior steps ([trace.Trace.Behavior]), one per
// tool call, model call, state change, error and run end, as stepfork's diff
// extracts them, and, in the default mode, one per decision, parameter read
// and entered node; runtime markers are not state steps there, and @now, @id
// and @effect markers are left out (they record nondeterminism whose
// consequences show in the steps that follow); the usage a model reports
// is cost, not behavior, and is left out of its step (the token and cost
// deltas report it). The two
// step lists are aligned, and aligned steps compared field by field.
//
// By default the alignment is a longest common subsequence of the step
// lists, where two steps are equal when their type, label and canonical
// payload are equal, computed with Myers' O((N+M)·D) algorithm in linear
// space. Within each stretch the LCS leaves unmatched, steps with the same
// type and label are paired as changed steps (by an LCS over type and
// label), and what remains is coalesced: an unmatched base
// step directly followed by an unmatched variant step is one substitution.
// So an inserted call is one added step and the later steps stay unchanged.
//
// What is known to be the same is aligned before the LCS: a variant that
// holds events of the base (their ids; a fork's served prefix) is the base
// up to where it departs, and its step there is paired with the base's
// step at that position when both have one type and label (the call the
// fork changed), so that a changed answer in a long run of repeated shapes
// is not matched with an equal answer of the base far later. Two runs that
// share no event are aligned by the LCS alone.
//
// Work done concurrently is compared as a set: when both runs record lanes
// ([trace.LanesFile]), every operation made on a goroutine other than its
// scope's own (a call, a state write, a decision, a parameter, a node) is
// a member of its scope's concurrent group, and goes with everything under
// it: its call's result and the error it failed with, the steps of its
// node, the calls its body made. The members of a group (the same scope
// path) are matched with the base's members of the same group first by
// equal content (everything under them), then by identity (a call's
// input, a state write's value), then by type and label, each first
// within their part of the group (the turns a join separates,
// [trace.JoinsFile]) and then across, wherever they sit relative to the
// other steps; a matched pair is aligned inside the same way. The other
// steps are aligned among themselves as above, and a member's pairs are
// listed together where its base steps are. Two concurrent calls that ran
// in the other order are unchanged, a failed one too; two whose results
// both changed are each paired with the call of their input; a call whose
// input or output changed still shows as changed, one without a
// counterpart as added or removed.
//
// With [AlignPosition], Runs is stepfork's diff_traces exactly: stepfork's
// extraction (runtime markers are ordinary state steps), index i against
// index i, the two terminal run steps compared with each other; its JSON is
// byte-identical to `stepfork diff --json`.
//
// In both modes Runs reports the first divergence, the changes of every
// changed step with paths, the deltas of the final state, both runs'
// terminal status, and the token and cost deltas. A nil trace is compared as
// an empty run.
func Runs(base, variant *trace.Trace, opts ...Option) *Result {
	db := Prepare(base, opts...)
	var evs []trace.Event
	if base != nil {
		evs = base.Events
	}
	// The steps are this call's own: no need to copy them.
	return db.diff(variant, db.steps, evs)
}

// Prepared is the base side of [Runs], computed once by [Prepare]: the base
// run's behavior steps, their numbering for the alignment, its summary and
// its final state. Comparing many variants of one base run (a fork sweep)
// with a Prepared extracts the base once instead of once per variant.
//
// A Prepared is immutable and safe for concurrent use. It is a snapshot:
// changing the base trace after Prepare does not change it.
type Prepared struct {
	cfg     config
	steps   []trace.BehaviorStep // the base's behavior steps; never modified
	shared  *shared              // the base steps' calls, nodes and events (nil with AlignPosition)
	numOnce sync.Once
	numbers *stepNumbers           // the steps numbered for the LCS (numbered), on first use
	summary Summary                // the base's summary, its display path set
	state   map[string]trace.Value // the base's final state; only read
	groups  *groups                // the base steps' concurrent groups (groupsOf); nil without lanes
}

// Prepare computes the base side of Runs(base, variant, opts...) for
// any variant. The options are those of [Runs]; DisplayPaths sets the path of
// the base and of every variant compared with the result. A nil trace is an
// empty run.
//
//	db := diff.Prepare(base)
//	for _, v := range variants {
//		d := db.Diff(v) // the same as diff.Runs(base, v)
//	}
func Prepare(base *trace.Trace, opts ...Option) *Prepared {
	db := &Prepared{}
	for _, o := range opts {
		o.apply(&db.cfg)
	}
	if base == nil {
		base = &trace.Trace{}
	}
	bp := base.Path
	if db.cfg.pathsSet {
		bp = db.cfg.basePath
	}
	if db.cfg.positional {
		db.steps = behavior(base, true)
	} else {
		sh := &shared{events: len(base.Events), calls: base.Calls(), nodes: base.Nodes()}
		db.steps, sh.at = sharedstart.Steps[*trace.Trace, trace.BehaviorStep](base, 0, 0)
		db.shared = sh
		db.groups = groupsOf(base, db.steps, traceindex.Of)
	}
	db.summary = summarize(base, pythonPath(bp), len(db.steps))
	db.state = finalState(base)
	return db
}

// numbered returns the base steps numbered for the LCS, numbering them on
// first use (a variant whose every step is the base's needs no LCS).
func (db *Prepared) numbered() *stepNumbers {
	db.numOnce.Do(func() { db.numbers = numberSteps(db.steps) })
	return db.numbers
}

// Diff compares the variant with the prepared base run. The result is equal,
// field for field, to Runs(base, variant, opts...) with the base and
// options given to Prepare, and owns its steps: its Base steps are
// copies, not shared with other results.
func (db *Prepared) Diff(variant *trace.Trace) *Result {
	// Payloads are immutable Values, so a shallow copy makes the steps the
	// result's own.
	return db.diff(variant, slices.Clone(db.steps), nil)
}

// diff compares variant with the prepared base, whose behavior steps are bs
// (db.steps or a copy). baseEvents, when not nil, are the events db was
// prepared from, unchanged since: the steps of the variant's events that
// are the same as those are bs's (see variantSteps).
func (db *Prepared) diff(variant *trace.Trace, bs []trace.BehaviorStep, baseEvents []trace.Event) *Result {
	cfg := &db.cfg
	if variant == nil {
		variant = &trace.Trace{}
	}
	vp := variant.Path
	if cfg.pathsSet {
		vp = cfg.varPath
	}
	d := &Result{Positional: cfg.positional}
	vs, same := db.variantSteps(variant, baseEvents)
	var vg *groups
	if db.groups != nil {
		vg = groupsOf(variant, vs, traceindex.New)
	}
	d.Base = db.summary
	d.Variant = summarize(variant, pythonPath(vp), len(vs))

	var pairs []stepPair
	switch {
	case cfg.positional:
		pairs = alignPositional(bs, vs)
	case vg != nil:
		pairs = alignGroups(bs, db.groups, vs, vg)
	default:
		if same { // every step is the base's, at its place
			pairs = make([]stepPair, len(vs))
			for i := range pairs {
				pairs[i] = stepPair{b: i, v: i, same: true}
			}
			break
		}
		pairs = alignNumbered(bs, db.numbered(), vs)
	}
	d.addSteps(pairs, bs, vs, func(b, v *trace.BehaviorStep, _, _ int) bool {
		return b.Type == v.Type && b.Label == v.Label && b.Payload == v.Payload
	})
	if !same { // the same events leave the same state
		d.State = stateDeltas(db.state, finalState(variant))
	}
	d.TokensDelta = d.Variant.Tokens - d.Base.Tokens
	d.CostDelta = d.Variant.CostUSD - d.Base.CostUSD
	return d
}

// addSteps fills d.Steps, the counts and the divergence from the alignment
// pairs of the base steps bs and the variant steps vs. equal reports
// whether two aligned steps (and their indexes in bs and vs) are equal
// when the alignment does not already know; unequal ones are compared
// field by field.
func (d *Result) addSteps(pairs []stepPair, bs, vs []trace.BehaviorStep, equal func(b, v *trace.BehaviorStep, bi, vi int) bool) {
	d.Steps = make([]Step, len(pairs))
	bi, vi := 0, 0
	for n, p := range pairs {
		sd := &d.Steps[n]
		sd.Index = n
		switch {
		case p.b < 0:
			v := &vs[p.v]
			sd.Kind, sd.Type, sd.Label, sd.Variant = Added, v.Type, v.Label, v
			d.Added++
		case p.v < 0:
			b := &bs[p.b]
			sd.Kind, sd.Type, sd.Label, sd.Base = Removed, b.Type, b.Label, b
			d.Removed++
		default:
			b, v := &bs[p.b], &vs[p.v]
			sd.Type, sd.Label, sd.Base, sd.Variant = b.Type, b.Label, b, v
			if p.same || equal(b, v, p.b, p.v) {
				sd.Fields = payloadFields(b)
			} else {
				sd.Fields, sd.Changes = compareSteps(b, v)
			}
			if len(sd.Changes) > 0 {
				sd.Kind = Changed
				d.Changed++
			} else {
				sd.Kind = Unchanged
				d.Unchanged++
			}
		}
		if sd.Kind != Unchanged && (d.Divergence == nil || endedOnly(&d.Steps[d.Divergence.Index]) && !endedOnly(sd)) {
			d.Divergence = &Divergence{Index: n, Kind: sd.Kind, Base: sd.Base, Variant: sd.Variant, BaseIndex: bi, VariantIndex: vi, Changes: sd.Changes}
		}
		if p.b >= 0 {
			bi = p.b + 1
		}
		if p.v >= 0 {
			vi = p.v + 1
		}
	}
}

// endedOnly reports whether s is a node's step that ran in both runs and
// differs only in how the node ended (its status or error): a consequence
// of the steps inside it, not where the runs part (see [Divergence]).
func endedOnly(s *Step) bool {
	if s.Kind != Changed || s.Base.Type != trace.StepNode || s.Variant.Type != trace.StepNode {
		return false
	}
	for _, c := range s.Changes {
		if c.Path != "status" && c.Path != "error" && !strings.HasPrefix(c.Path, "error.") {
			return false
		}
	}
	return true
}

func summarize(tr *trace.Trace, displayPath string, steps int) Summary {
	var a summer
	for i := range tr.Events {
		a.add(&tr.Events[i])
	}
	s := a.summary(&tr.Manifest, displayPath, steps)
	s.Minted = trace.MintedIDs(tr)
	return s
}

// summer accumulates what a Summary counts, event by event.
type summer struct {
	runEnd trace.RunStatus
	tokens int64
	totals trace.Totals
}

func (a *summer) add(ev *trace.Event) {
	a.totals.Add(ev)
	switch ev.Type {
	case trace.RunEnd:
		a.runEnd = ev.RunStatus
	case trace.LLMResponse:
		a.tokens += ev.Tokens()
	}
}

// summary returns the Summary of the run of manifest m whose events were
// added.
func (a *summer) summary(m *trace.Manifest, displayPath string, steps int) Summary {
	s := Summary{Path: displayPath, AgentName: m.AgentName, RunID: m.RunID, Status: m.Status,
		Events: a.totals.Events, Steps: steps, RunEnd: a.runEnd, Tokens: a.tokens}
	if c := a.totals.CostUSD; c != nil {
		s.CostUSD = *c
	}
	return s
}

// pythonPath prints p the way Python's str(pathlib.PurePosixPath(p)) does:
// repeated slashes and "." components dropped, no trailing slash, "." for an
// empty relative path. "" stays "" (no path).
func pythonPath(p string) string {
	if p == "" {
		return ""
	}
	lead := ""
	switch {
	case strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "///"):
		lead = "//"
	case strings.HasPrefix(p, "/"):
		lead = "/"
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			parts = append(parts, c)
		}
	}
	if lead == "" && len(parts) == 0 {
		return "."
	}
	return lead + strings.Join(parts, "/")
}

// Sorted payload keys, shared between step diffs.
var (
	fieldsCall     = []string{"input", "output", "status"}
	fieldsState    = []string{"after", "before"}
	fieldsError    = []string{"message"}
	fieldsRun      = []string{"output", "run_status"}
	fieldsDecision = []string{"kind", "value"}
	fieldsValue    = []string{"value"}
	fieldsNode     = []string{"status"}
	fieldsNodeErr  = []string{"error", "status"}
)

// payloadFields returns the sorted keys of s's payload.
func payloadFields(s *trace.BehaviorStep) []string {
	var f []string
	switch s.Type {
	case trace.StepTool, trace.StepLLM:
		f = fieldsCall
	case trace.StepState:
		f = fieldsState
	case trace.StepError:
		f = fieldsError
	case trace.StepRun:
		f = fieldsRun
	case trace.StepDecision:
		f = fieldsDecision
	case trace.StepParam:
		f = fieldsValue
	case trace.StepNode:
		f = fieldsNode
		if !s.Payload.Get("error").IsAbsent() {
			f = fieldsNodeErr
		}
	default:
		for k := range s.Payload.Members() {
			f = append(f, k)
		}
		return f
	}
	return f[:len(f):len(f)]
}

// ---- comparison ----

// compareSteps compares two aligned steps as stepfork does: type, label, then
// every payload key of either side in sorted order.
func compareSteps(b, v *trace.BehaviorStep) (fields []string, changes []Change) {
	if b.Type != v.Type {
		changes = append(changes, Change{"type", Changed, trace.StringValue(string(b.Type)), trace.StringValue(string(v.Type))})
	}
	if b.Label != v.Label {
		changes = append(changes, Change{"label", Changed, trace.StringValue(b.Label), trace.StringValue(v.Label)})
	}
	bf, vf := payloadFields(b), payloadFields(v)
	fields = bf
	if !slices.Equal(bf, vf) {
		fields = append(slices.Clone(bf), vf...)
		slices.Sort(fields)
		fields = slices.Compact(fields)
	}
	for _, k := range fields {
		x, y := b.Payload.Get(k), v.Payload.Get(k)
		switch {
		case x.IsAbsent():
			changes = append(changes, Change{k, Added, trace.Value{}, y})
		case y.IsAbsent():
			changes = append(changes, Change{k, Removed, x, trace.Value{}})
		default:
			if changes == nil {
				changes = make([]Change, 0, 4)
			}
			changes = collectFieldChanges(x, y, k, changes)
		}
	}
	return fields, changes
}

// collectFieldChanges appends every differing leaf of expected and actual
// (stepfork's collect_field_changes): objects recurse per sorted key, arrays
// per shared index with extra elements added or removed, anything else is
// one changed leaf. Comparison is canonical: 1 and 1.0 differ, key order
// does not matter.
func collectFieldChanges(expected, actual trace.Value, p string, out []Change) []Change {
	if expected == actual {
		return out
	}
	ek, ak := expected.Kind(), actual.Kind()
	switch {
	case ek == trace.Object && ak == trace.Object:
		var eb, ab [8]trace.Member // most objects are small: no allocation
		em, am := appendMembers(eb[:0], expected), appendMembers(ab[:0], actual)
		i, j := 0, 0
		for i < len(em) || j < len(am) {
			switch {
			case j == len(am) || (i < len(em) && em[i].Key < am[j].Key):
				out = append(out, Change{childPath(p, em[i].Key), Removed, em[i].Value, trace.Value{}})
				i++
			case i == len(em) || am[j].Key < em[i].Key:
				out = append(out, Change{childPath(p, am[j].Key), Added, trace.Value{}, am[j].Value})
				j++
			default:
				out = collectFieldChanges(em[i].Value, am[j].Value, childPath(p, em[i].Key), out)
				i++
				j++
			}
		}
		return out
	case ek == trace.Array && ak == trace.Array:
		ee, ae := elems(expected), elems(actual)
		n := min(len(ee), len(ae))
		for i := 0; i < n; i++ {
			out = collectFieldChanges(ee[i], ae[i], indexPath(p, i), out)
		}
		for i := n; i < len(ee); i++ {
			out = append(out, Change{indexPath(p, i), Removed, ee[i], trace.Value{}})
		}
		for i := n; i < len(ae); i++ {
			out = append(out, Change{indexPath(p, i), Added, trace.Value{}, ae[i]})
		}
		return out
	}
	return append(out, Change{p, Changed, expected, actual})
}

// FirstDifference returns the first differing leaf of expected and actual,
// as stepfork's first_difference does: the path of dotted keys and [i]
// indices ("a.b[1]"; "$" when the roots themselves are different scalars),
// the expected and the actual value there (Absent for a missing key or
// element), and false when the two are canonically equal.
func FirstDifference(expected, actual trace.Value) (path string, exp, act trace.Value, differ bool) {
	p, e, a, ok := firstDifference(expected, actual, "")
	return p, e, a, ok
}

func firstDifference(expected, actual trace.Value, p string) (string, trace.Value, trace.Value, bool) {
	if expected == actual {
		return "", trace.Value{}, trace.Value{}, false
	}
	ek, ak := expected.Kind(), actual.Kind()
	switch {
	case ek == trace.Object && ak == trace.Object:
		em, am := members(expected), members(actual)
		i, j := 0, 0
		for i < len(em) || j < len(am) {
			switch {
			case j == len(am) || (i < len(em) && em[i].Key < am[j].Key):
				return childPath(p, em[i].Key), em[i].Value, trace.Value{}, true
			case i == len(em) || am[j].Key < em[i].Key:
				return childPath(p, am[j].Key), trace.Value{}, am[j].Value, true
			default:
				if q, e, a, ok := firstDifference(em[i].Value, am[j].Value, childPath(p, em[i].Key)); ok {
					return q, e, a, true
				}
				i++
				j++
			}
		}
		return p, expected, actual, true
	case ek == trace.Array && ak == trace.Array:
		ee, ae := elems(expected), elems(actual)
		n := min(len(ee), len(ae))
		for i := 0; i < n; i++ {
			if q, e, a, ok := firstDifference(ee[i], ae[i], indexPath(p, i)); ok {
				return q, e, a, true
			}
		}
		switch {
		case len(ee) > len(ae):
			return indexPath(p, n), ee[n], trace.Value{}, true
		case len(ae) > len(ee):
			return indexPath(p, n), trace.Value{}, ae[n], true
		}
		return p, expected, actual, true
	}
	if p == "" {
		p = "$"
	}
	return p, expected, actual, true
}

func members(v trace.Value) []trace.Member { return appendMembers(nil, v) }

// appendMembers appends the members of v to ms.
func appendMembers(ms []trace.Member, v trace.Value) []trace.Member {
	for k, x := range v.Members() {
		ms = append(ms, trace.Member{Key: k, Value: x})
	}
	return ms
}

func elems(v trace.Value) []trace.Value {
	var es []trace.Value
	for _, x := range v.Elems() {
		es = append(es, x)
	}
	return es
}

func childPath(p, key string) string {
	if p == "" {
		return key
	}
	return p + "." + key
}

func indexPath(p string, i int) string { return p + "[" + strconv.Itoa(i) + "]" }

// behavior returns the run's behavior steps: [trace.Trace.Behavior], or with
// positional set stepfork's extraction ([trace.Trace.StepforkBehavior]).
func behavior(tr *trace.Trace, positional bool) []trace.BehaviorStep {
	if positional {
		return tr.StepforkBehavior()
	}
	return tr.Behavior()
}

// sanitize is the value stepfork compares: redacted, and null for a missing
// payload.
func sanitize(v trace.Value) trace.Value {
	if v.IsAbsent() {
		return trace.NullValue
	}
	r, _ := trace.RedactValue(v)
	return r
}

// ---- state ----

// finalState returns the last value of every plain state key (markers and
// unnamed changes excluded); an absent "after" deletes the key.
func finalState(tr *trace.Trace) map[string]trace.Value {
	st := make(map[string]trace.Value)
	for i := range tr.Events {
		addState(st, &tr.Events[i])
	}
	return st
}

// addState applies ev to the final state st when it changes a plain key.
func addState(st map[string]trace.Value, ev *trace.Event) {
	if ev.Type != trace.StateChange || ev.Key == "" || ev.IsMarker() {
		return
	}
	if ev.After.IsAbsent() {
		delete(st, ev.Key)
		return
	}
	st[ev.Key] = sanitize(ev.After)
}

// stateDeltas compares the final states of the base and the variant run
// (see finalState); it only reads the two maps.
func stateDeltas(bst, vst map[string]trace.Value) []StateDelta {
	keys := make([]string, 0, len(bst)+len(vst))
	for k := range bst {
		keys = append(keys, k)
	}
	for k := range vst {
		if _, ok := bst[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []StateDelta
	for _, k := range keys {
		b, inB := bst[k]
		v, inV := vst[k]
		change := Changed
		switch {
		case inB && inV && b == v:
			continue
		case !inB:
			change = Added
		case !inV:
			change = Removed
		}
		out = append(out, StateDelta{Key: k, Change: change, Before: b, After: v, BytesDelta: len(v.Canonical()) - len(b.Canonical())})
	}
	return out
}

// ---- alignment ----

// stepPair is one entry of an alignment: indexes into the base and variant
// steps (-1 for the missing side); same is set when the two steps are known
// to be equal.
type stepPair struct {
	b, v int
	same bool
}

// alignPositional is stepfork's alignment: index against index, extra steps
// added or removed, and the terminal run steps of both sides compared with
// each other last.
func alignPositional(bs, vs []trace.BehaviorStep) []stepPair {
	nb, nv := len(bs), len(vs)
	var pairs []stepPair
	positional := func(nb, nv int) {
		for i := 0; i < max(nb, nv); i++ {
			p := stepPair{b: i, v: i}
			if i >= nb {
				p.b = -1
			}
			if i >= nv {
				p.v = -1
			}
			pairs = append(pairs, p)
		}
	}
	if nb > 0 && nv > 0 && bs[nb-1].Type == trace.StepRun && vs[nv-1].Type == trace.StepRun {
		positional(nb-1, nv-1)
		pairs = append(pairs, stepPair{b: nb - 1, v: nv - 1})
		return pairs
	}
	positional(nb, nv)
	return pairs
}

// interner numbers keys so that the alignment compares small integers.
type interner[K comparable] struct{ ids map[K]int32 }

func (in *interner[K]) id(k K) int32 {
	if id, ok := in.ids[k]; ok {
		return id
	}
	id := int32(len(in.ids))
	in.ids[k] = id
	return id
}

// exactKey is a step's exact content: two steps are equal when their keys
// are. The key shares the step's strings: nothing is copied.
type exactKey struct {
	t       trace.StepType
	label   string
	payload string
}

// stepNumbers numbers a run's steps by their exact content, in order of
// first occurrence: ids[i] is the number of step i. A Prepared keeps the
// base's, read-only, for all its variants.
type stepNumbers struct {
	byKey map[exactKey]int32
	ids   []int32
}

func numberSteps(steps []trace.BehaviorStep) *stepNumbers {
	exact := interner[exactKey]{make(map[exactKey]int32, len(steps))}
	ids := make([]int32, len(steps))
	for i := range steps {
		s := &steps[i]
		ids[i] = exact.id(exactKey{s.Type, s.Label, s.Payload.Canonical()})
	}
	return &stepNumbers{exact.ids, ids}
}

// alignLCS aligns the two step lists: a longest common subsequence of equal
// steps (type, label and canonical payload), then, inside every stretch the
// LCS leaves unmatched, an LCS over type and label whose pairs are changed
// steps, and the coalescing of what is left.
func alignLCS(bs, vs []trace.BehaviorStep) []stepPair {
	return alignNumbered(bs, numberSteps(bs), vs)
}

// alignNumbered is alignLCS with the base steps already numbered (bn, which
// it only reads). A variant step equal to a base step has its number; every
// step the base lacks has one number of its own, the same for all of them,
// above the base's: the LCS only ever compares a base step with a variant
// step, so those steps need only differ from every base step, and their
// numbering would cost a map as large as the variant's changed part.
func alignNumbered(bs []trace.BehaviorStep, bn *stepNumbers, vs []trace.BehaviorStep) []stepPair {
	bex, vex := bn.ids, make([]int32, len(vs))
	nids := int32(len(bn.byKey))
	lacked := nids // the number of the steps the base lacks
	for i := range vs {
		s := &vs[i]
		if i < len(bs) {
			// A step equal to the base step at its place (a fork's served
			// prefix, whose payloads are the base's own strings, compares
			// by pointer) has its number: no lookup.
			if b := &bs[i]; b.Type == s.Type && b.Label == s.Label && b.Payload == s.Payload {
				vex[i] = bex[i]
				continue
			}
		}
		id, ok := bn.byKey[exactKey{s.Type, s.Label, s.Payload.Canonical()}]
		if !ok {
			id, nids = lacked, lacked+1
		}
		vex[i] = id
	}

	return alignIDs(bs, vs, bex, vex, nids)
}

// alignIDs is the alignment of alignNumbered, given the numbers of the
// base steps (bex) and of the variant steps (vex) by exact content, below
// nids.
//
// What is known to be the same is aligned before the LCS of the rest. A
// variant derived from the base (a fork: its served prefix holds the base's
// events, with their ids) is the base up to where it departs, and the step
// where it departs stands for the base's step at that position when both
// are of one type and label (the call the fork changed): they are paired
// there, as changed, and only what follows is left to the LCS. The LCS
// alone would pair that step with any later base step equal to it — in a
// long run of repeated shapes, a changed answer "stop" with the base's own
// "stop" a thousand pages later, all between shown as removed. A node's
// step holds how the node ended, so a differing node step is paired and the
// departure looked for again inside it.
func alignIDs(bs, vs []trace.BehaviorStep, bex, vex []int32, nids int32) []stepPair {
	// As many pairs as the longer side has steps, unless steps are
	// added or removed.
	out := make([]stepPair, 0, max(len(bs), len(vs))+8)
	p, derived := 0, false
	for {
		for p < len(bs) && p < len(vs) && bex[p] == vex[p] {
			derived = derived || bs[p].EventID != "" && bs[p].EventID == vs[p].EventID
			out = append(out, stepPair{b: p, v: p, same: true})
			p++
		}
		if !derived || p == len(bs) || p == len(vs) || bs[p].Type != vs[p].Type || bs[p].Label != vs[p].Label {
			break
		}
		out = append(out, stepPair{b: p, v: p})
		p++
		if bs[p-1].Type != trace.StepNode {
			break
		}
	}
	return alignRest(out, p, bs[p:], vs[p:], bex[p:], vex[p:], nids)
}

// alignRest is the alignment of alignIDs by LCS alone, appended to out with
// off added to the indexes of its pairs (bs and vs start at off in the
// runs).
func alignRest(out []stepPair, off int, bs, vs []trace.BehaviorStep, bex, vex []int32, nids int32) []stepPair {
	start := len(out)
	type coarseKey struct {
		t     trace.StepType
		label string
	}
	coarse := interner[coarseKey]{make(map[coarseKey]int32)}
	// coarseKeys is only needed inside the stretches the LCS leaves open.
	coarseKeys := func(steps []trace.BehaviorStep) []int32 {
		co := make([]int32, len(steps))
		for i := range steps {
			co[i] = coarse.id(coarseKey{steps[i].Type, steps[i].Label})
		}
		return co
	}
	var exact, byLabel lcs.Matcher
	// gap aligns the unmatched stretch bs[b0:b1] / vs[v0:v1].
	gap := func(b0, b1, v0, v1 int) {
		if b0 == b1 || v0 == v1 {
			for i := b0; i < b1; i++ {
				out = append(out, stepPair{b: i, v: -1})
			}
			for j := v0; j < v1; j++ {
				out = append(out, stepPair{b: -1, v: j})
			}
			return
		}
		residual := func(b0, b1, v0, v1 int) {
			// Removals first, then insertions; a removal directly followed
			// by an insertion is one substitution.
			i := b0
			for ; i < b1-1; i++ {
				out = append(out, stepPair{b: i, v: -1})
			}
			j := v0
			if i < b1 && j < v1 {
				out = append(out, stepPair{b: i, v: j})
				i++
				j++
			}
			for ; i < b1; i++ {
				out = append(out, stepPair{b: i, v: -1})
			}
			for ; j < v1; j++ {
				out = append(out, stepPair{b: -1, v: j})
			}
		}
		pb, pv := b0, v0
		// The stretch's own numbering: its ids are compared only with
		// each other, and a numbering of the whole run would grow by the
		// stretches' labels, and the LCS's scratch with it.
		if len(coarse.ids) > 64 {
			coarse.ids = make(map[coarseKey]int32)
		} else {
			clear(coarse.ids)
		}
		bco, vco := coarseKeys(bs[b0:b1]), coarseKeys(vs[v0:v1])
		byLabel.Match(bco, vco, len(coarse.ids), coarseCostLimit, func(i, j int) {
			residual(pb, b0+i, pv, v0+j)
			out = append(out, stepPair{b: b0 + i, v: v0 + j})
			pb, pv = b0+i+1, v0+j+1
		})
		residual(pb, b1, pv, v1)
	}
	pb, pv := 0, 0
	exact.Match(bex, vex, int(nids), 0, func(i, j int) {
		gap(pb, i, pv, j)
		out = append(out, stepPair{b: i, v: j, same: true})
		pb, pv = i+1, j+1
	})
	gap(pb, len(bs), pv, len(vs))
	for i := start; off > 0 && i < len(out); i++ {
		if out[i].b >= 0 {
			out[i].b += off
		}
		if out[i].v >= 0 {
			out[i].v += off
		}
	}
	return out
}

// coarseCostLimit bounds the search of the type-and-label pass: it only
// decides which unmatched steps are shown as changed rather than as removed
// and added, so two long unrelated runs need not cost more than a glance.
const coarseCostLimit = 256

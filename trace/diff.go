package trace

import (
	"slices"
	"strconv"
	"strings"
)

// StepType is the kind of a behavior step.
type StepType string

// Behavior step types. The first five are stepfork's; decisions, parameters
// and nodes come from runtime markers and appear only in the LCS mode.
const (
	StepTool     StepType = "tool"     // a tool call with its result
	StepLLM      StepType = "llm"      // a model call with its response
	StepState    StepType = "state"    // a state_change of a plain key
	StepError    StepType = "error"    // an error event
	StepRun      StepType = "run"      // the run_end
	StepDecision StepType = "decision" // an @decision marker
	StepParam    StepType = "param"    // an @param marker
	StepNode     StepType = "node"     // an entered @node, with the status it exited with
)

// DiffKind says how a step or a field differs between the base and the
// variant run.
type DiffKind string

// Kinds of difference. Field changes and state deltas are never unchanged.
const (
	DiffAdded     DiffKind = "added"     // only in the variant
	DiffRemoved   DiffKind = "removed"   // only in the base
	DiffChanged   DiffKind = "changed"   // in both, different
	DiffUnchanged DiffKind = "unchanged" // in both, equal
)

// BehaviorStep is one comparable unit of a run's behavior.
//
// Payload is a JSON object whose members depend on the type (all values
// redacted with RedactValue; a missing payload is null):
//
//	tool, llm  {"input": call input, "output": paired output, "status": "ok"|"error"|"skipped"}
//	state      {"before": …, "after": …}
//	error      {"message": "…"}
//	run        {"output": …, "run_status": "completed"|"failed"|"running"}
//	decision   {"kind": "decision"|"approval", "value": …}
//	param      {"value": …}
//	node       {"status": "ok"|"error"|null} and "error" when the node failed
//
// A tool call is paired with its first tool_result child (or, in bundles
// without parent links, the first later unpaired result of the same name
// before another call of that name), a model call with its first
// llm_response child, else its first error child (output null, status
// error); a call with neither has status skipped. Ids, run ids, timestamps,
// durations, hashes, tokens and costs are not part of a step.
type BehaviorStep struct {
	Index    int      // position among the run's behavior steps
	Type     StepType // tool, llm, state, …
	Label    string   // tool name, provider/model, state key, error type, "run", or the marker's name
	EventID  string   // the event the step comes from (the call; the entering marker of a node)
	Step     int      // that event's step number
	ResultID string   // tool and llm steps: the paired result, response or error event ("" if none)
	Payload  Value    // a JSON object, see above
}

// FieldChange is one differing leaf of two aligned steps.
//
// Path is dotted keys and [i] indices from the payload root
// ("output.price", "input.args[1]"); "type" and "label" name a step whose
// type or label differs. Expected is the base value and Actual the variant
// value; the side that lacks the key or element is Absent.
type FieldChange struct {
	Path     string
	Kind     DiffKind // added, removed or changed
	Expected Value
	Actual   Value
}

// StepDiff is one entry of the alignment.
type StepDiff struct {
	Index int      // position in RunDiff.Steps
	Kind  DiffKind // added, removed, changed or unchanged
	Type  StepType // the base step's type, or the variant's for an added step
	Label string   // likewise
	// Base and Variant are the aligned steps; Base is nil for an added step
	// and Variant nil for a removed one.
	Base, Variant *BehaviorStep
	// Fields are the sorted payload keys of the two steps (empty for added
	// and removed steps). The slice may be shared between entries: do not
	// modify it.
	Fields  []string
	Changes []FieldChange // in path order; empty unless Kind is changed
}

// Divergence is where two runs first part: the first step that is not
// unchanged.
type Divergence struct {
	Index int      // position in RunDiff.Steps
	Kind  DiffKind // added, removed or changed
	// Base and Variant are the two sides of that step; one is nil when only
	// the other run has the step.
	Base, Variant *BehaviorStep
	// BaseIndex and VariantIndex are the positions in each run's behavior
	// steps where the runs part: the index of Base or Variant, or, for the
	// side that lacks the step, the index of that run's next step.
	BaseIndex, VariantIndex int
}

// StateDelta is the difference of one plain state key between the final
// states of the two runs. The final state of a run holds, per key, the
// "after" of its last state_change (an absent "after" deletes the key);
// runtime markers (keys starting with '@') are not state.
type StateDelta struct {
	Key    string
	Change DiffKind // added, removed or changed
	Before Value    // the base run's final value, Absent when it has none
	After  Value    // the variant run's final value, Absent when it has none
	// BytesDelta is the size of After minus the size of Before, in bytes
	// of canonical JSON (0 for Absent).
	BytesDelta int
}

// RunSummary describes one side of a diff.
type RunSummary struct {
	// Path is the display path: as given with DisplayPaths, else the
	// trace's Path; "" for an in-memory trace.
	Path      string
	AgentName string
	RunID     string
	Status    RunStatus // the manifest's status
	RunEnd    RunStatus // run_status of the last run_end, "" when there is none
	Events    int       // number of events
	Steps     int       // number of behavior steps
	Tokens    int64     // sum of llm_response total tokens (prompt + completion when total is missing)
	CostUSD   float64   // sum of llm_response cost_usd
}

// Terminal is the status a run ended with: its run_end status, or the
// manifest's status when it has no run_end.
func (s *RunSummary) Terminal() RunStatus {
	if s.RunEnd != "" {
		return s.RunEnd
	}
	return s.Status
}

// RunDiff is the behavioral difference between a base and a variant run.
type RunDiff struct {
	Positional bool // aligned by position (AlignPosition), not by LCS

	Base, Variant RunSummary

	Steps                              []StepDiff
	Added, Removed, Changed, Unchanged int
	Divergence                         *Divergence  // nil when equivalent
	State                              []StateDelta // sorted by key
	TokensDelta                        int64        // Variant.Tokens - Base.Tokens
	CostDelta                          float64      // Variant.CostUSD - Base.CostUSD
}

// Equivalent reports whether the two runs behaved the same: no step was
// added, removed or changed. (Ids, timestamps, durations, tokens and costs
// are not behavior.)
func (d *RunDiff) Equivalent() bool {
	return d.Added == 0 && d.Removed == 0 && d.Changed == 0
}

// DiffOption configures Diff.
type DiffOption func(*diffConfig)

type diffConfig struct {
	positional        bool
	basePath, varPath string
	pathsSet          bool
}

// AlignPosition makes Diff behave exactly like stepfork's diff_traces:
// steps are extracted as stepfork does (runtime markers are state steps) and
// aligned by position, the two terminal run steps with each other. The
// resulting RunDiff's JSON is byte-identical to `stepfork diff --json`.
func AlignPosition() DiffOption { return func(c *diffConfig) { c.positional = true } }

// DisplayPaths sets the paths reported for the two runs (RunSummary.Path),
// for example the command-line arguments that named them. Like stepfork,
// which turns its arguments into Python Path objects, the paths are
// normalized the way pathlib prints them: "./a//b/" is reported as "a/b".
// An empty path is an in-memory trace. Without this option the traces' own
// Path fields are used, normalized the same way.
func DisplayPaths(base, variant string) DiffOption {
	return func(c *diffConfig) { c.basePath, c.varPath, c.pathsSet = base, variant, true }
}

// Diff compares the behavior of a base and a variant run.
//
// Each run is reduced to behavior steps (see BehaviorStep), one per tool
// call, model call, state change, error and run end, as stepfork's diff
// extracts them (stepfork-format.md §6.1), and, in the default mode, one per
// decision, parameter read and entered node; runtime markers are not state
// steps there, and @now, @id and @effect markers are left out (they record
// nondeterminism whose consequences show in the steps that follow). The two
// step lists are aligned, and aligned steps compared field by field.
//
// By default the alignment is a longest common subsequence of the step
// lists, where two steps are equal when their type, label and canonical
// payload are equal, computed with Myers' O((N+M)·D) algorithm in linear
// space. Within each stretch the LCS leaves unmatched, steps with the same
// type and label are paired as changed steps (by an LCS over type and
// label), and what remains is coalesced as cycgraph does: an unmatched base
// step directly followed by an unmatched variant step is one substitution.
// So an inserted call is one added step and the later steps stay unchanged.
//
// With AlignPosition, Diff is stepfork's diff_traces exactly: stepfork's
// extraction (runtime markers are ordinary state steps), index i against
// index i, the two terminal run steps compared with each other; its JSON is
// byte-identical to `stepfork diff --json`.
//
// In both modes Diff reports the first divergence, the changes of every
// changed step with paths, the deltas of the final state, both runs'
// terminal status, and the token and cost deltas. A nil trace is compared as
// an empty run.
func Diff(base, variant *Trace, opts ...DiffOption) *RunDiff {
	db := PrepareDiff(base, opts...)
	// The steps are this call's own: no need to copy them.
	return db.diff(variant, db.steps)
}

// DiffBase is the base side of Diff, computed once: the base run's behavior
// steps (pairing, redaction, payloads), their numbering for the alignment,
// its summary and its final state.
// Comparing many variants of one base run (a fork sweep) against a DiffBase
// extracts the base once instead of once per variant (cycgraph hazard H9:
// base data shared read-only across variants).
//
// A DiffBase is immutable and safe for concurrent use. It is a snapshot:
// changing the base trace after PrepareDiff does not change it.
type DiffBase struct {
	cfg     diffConfig
	steps   []BehaviorStep   // the base's behavior steps; never modified
	numbers *stepNumbers     // the steps numbered for the LCS (nil with AlignPosition)
	summary RunSummary       // the base's summary, its display path set
	state   map[string]Value // the base's final state; only read
}

// PrepareDiff computes the base side of Diff(base, variant, opts...) for
// any variant. The options are those of Diff; DisplayPaths sets the path of
// the base and of every variant compared with the result. A nil trace is an
// empty run.
//
//	db := trace.PrepareDiff(base)
//	for _, v := range variants {
//		d := db.Diff(v) // the same as trace.Diff(base, v)
//	}
func PrepareDiff(base *Trace, opts ...DiffOption) *DiffBase {
	db := &DiffBase{}
	for _, o := range opts {
		o(&db.cfg)
	}
	if base == nil {
		base = &Trace{}
	}
	bp := base.Path
	if db.cfg.pathsSet {
		bp = db.cfg.basePath
	}
	db.steps = extractBehavior(base, !db.cfg.positional)
	if !db.cfg.positional {
		db.numbers = numberSteps(db.steps)
	}
	db.summary = summarize(base, pythonPath(bp), len(db.steps))
	db.state = finalState(base)
	return db
}

// Diff compares the variant with the prepared base run. The result is equal,
// field for field, to Diff(base, variant, opts...) with the base and
// options given to PrepareDiff, and owns its steps: its Base steps are
// copies, not shared with other results.
func (db *DiffBase) Diff(variant *Trace) *RunDiff {
	// Payloads are immutable Values, so a shallow copy makes the steps the
	// result's own.
	return db.diff(variant, slices.Clone(db.steps))
}

// diff compares variant with the prepared base, whose behavior steps are bs
// (db.steps or a copy).
func (db *DiffBase) diff(variant *Trace, bs []BehaviorStep) *RunDiff {
	cfg := &db.cfg
	if variant == nil {
		variant = &Trace{}
	}
	vp := variant.Path
	if cfg.pathsSet {
		vp = cfg.varPath
	}
	d := &RunDiff{Positional: cfg.positional}
	vs := extractBehavior(variant, !cfg.positional)
	d.Base = db.summary
	d.Variant = summarize(variant, pythonPath(vp), len(vs))

	var pairs []stepPair
	if cfg.positional {
		pairs = alignPositional(bs, vs)
	} else {
		pairs = alignNumbered(bs, db.numbers, vs)
	}
	d.Steps = make([]StepDiff, len(pairs))
	bi, vi := 0, 0
	for n, p := range pairs {
		sd := &d.Steps[n]
		sd.Index = n
		switch {
		case p.b < 0:
			v := &vs[p.v]
			sd.Kind, sd.Type, sd.Label, sd.Variant = DiffAdded, v.Type, v.Label, v
			d.Added++
		case p.v < 0:
			b := &bs[p.b]
			sd.Kind, sd.Type, sd.Label, sd.Base = DiffRemoved, b.Type, b.Label, b
			d.Removed++
		default:
			b, v := &bs[p.b], &vs[p.v]
			sd.Type, sd.Label, sd.Base, sd.Variant = b.Type, b.Label, b, v
			if p.same || (b.Type == v.Type && b.Label == v.Label && b.Payload == v.Payload) {
				sd.Fields = payloadFields(b)
			} else {
				sd.Fields, sd.Changes = compareSteps(b, v)
			}
			if len(sd.Changes) > 0 {
				sd.Kind = DiffChanged
				d.Changed++
			} else {
				sd.Kind = DiffUnchanged
				d.Unchanged++
			}
		}
		if sd.Kind != DiffUnchanged && d.Divergence == nil {
			dv := &Divergence{Index: n, Kind: sd.Kind, Base: sd.Base, Variant: sd.Variant, BaseIndex: bi, VariantIndex: vi}
			d.Divergence = dv
		}
		if p.b >= 0 {
			bi = p.b + 1
		}
		if p.v >= 0 {
			vi = p.v + 1
		}
	}
	d.State = stateDeltas(db.state, finalState(variant))
	d.TokensDelta = d.Variant.Tokens - d.Base.Tokens
	d.CostDelta = d.Variant.CostUSD - d.Base.CostUSD
	return d
}

func summarize(tr *Trace, displayPath string, steps int) RunSummary {
	s := RunSummary{Path: displayPath, AgentName: tr.AgentName, RunID: tr.RunID, Status: tr.Status,
		Events: len(tr.Events), Steps: steps}
	for i := range tr.Events {
		ev := &tr.Events[i]
		switch ev.Type {
		case RunEnd:
			s.RunEnd = ev.RunStatus
		case LLMResponse:
			switch {
			case ev.TotalTokens != nil:
				s.Tokens += *ev.TotalTokens
			default:
				if ev.PromptTokens != nil {
					s.Tokens += *ev.PromptTokens
				}
				if ev.CompletionTokens != nil {
					s.Tokens += *ev.CompletionTokens
				}
			}
			if ev.CostUSD != nil {
				s.CostUSD += *ev.CostUSD
			}
		}
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

// ---- extraction ----

// resultKids records, for one parent event, the indexes of its first child
// of each type a call is paired with (-1: none).
type resultKids struct{ result, response, err int32 }

// extractBehavior walks tr's events in order and returns its behavior steps.
// native selects the LCS mode's extraction (markers as decision, param and
// node steps); otherwise it is stepfork's extract_behavior exactly.
func extractBehavior(tr *Trace, native bool) []BehaviorStep {
	evs := tr.Events
	kids := make(map[string]resultKids, len(evs)/2)
	for i := range evs {
		ev := &evs[i]
		if ev.ParentID == "" || (ev.Type != ToolResult && ev.Type != LLMResponse && ev.Type != ErrorEvent) {
			continue
		}
		k, ok := kids[ev.ParentID]
		if !ok {
			k = resultKids{-1, -1, -1}
		}
		switch {
		case ev.Type == ToolResult && k.result < 0:
			k.result = int32(i)
		case ev.Type == LLMResponse && k.response < 0:
			k.response = int32(i)
		case ev.Type == ErrorEvent && k.err < 0:
			k.err = int32(i)
		}
		kids[ev.ParentID] = k
	}
	kidsOf := func(id string) resultKids {
		if k, ok := kids[id]; ok {
			return k
		}
		return resultKids{-1, -1, -1}
	}

	var legacy *legacyPairing
	paired := make([]bool, len(evs)) // tool results already paired with a call
	steps := make([]BehaviorStep, 0, len(evs)/2+1)
	type openNode struct {
		name string
		step int
	}
	var open []openNode
	add := func(ev *Event, t StepType, label string, payload Value) *BehaviorStep {
		steps = append(steps, BehaviorStep{Index: len(steps), Type: t, Label: label, EventID: ev.ID, Step: ev.Step, Payload: payload})
		return &steps[len(steps)-1]
	}

	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case ToolCall:
			res := int(kidsOf(ev.ID).result)
			if res < 0 {
				if legacy == nil {
					legacy = newLegacyPairing(evs)
				}
				res = legacy.forward(i, ev.Name, paired)
			}
			status, output, resultID := string(StatusSkipped), NullValue, ""
			if res >= 0 {
				r := &evs[res]
				paired[res] = true
				status, output, resultID = string(r.Status), r.Output, r.ID
			}
			s := add(ev, StepTool, ev.Name, callPayload(ev.Input, output, status))
			s.ResultID = resultID
		case LLMRequest:
			k := kidsOf(ev.ID)
			status, output, resultID := string(StatusSkipped), NullValue, ""
			switch {
			case k.response >= 0:
				r := &evs[k.response]
				status, output, resultID = string(r.Status), r.Output, r.ID
			case k.err >= 0:
				status, resultID = string(StatusError), evs[k.err].ID
			}
			s := add(ev, StepLLM, LLMLabel(ev.Provider, ev.Model), callPayload(ev.Input, output, status))
			s.ResultID = resultID
		case StateChange:
			if native && ev.IsMarker() {
				m, _ := ev.Marker()
				switch m.Key {
				case MarkerDecision:
					add(ev, StepDecision, m.Name, object2("kind", optString(m.Kind), "value", sanitize(m.Value)))
				case MarkerParam:
					add(ev, StepParam, m.Name, object1("value", sanitize(m.Value)))
				case MarkerNode:
					if m.Phase != PhaseExit {
						open = append(open, openNode{m.Name, len(steps)})
						add(ev, StepNode, m.Name, object1("status", NullValue))
						break
					}
					payload := nodeExitPayload(m)
					j := len(open) - 1
					for j >= 0 && open[j].name != m.Name {
						j--
					}
					if j < 0 { // an exit without its enter: a step of its own
						add(ev, StepNode, m.Name, payload)
						break
					}
					steps[open[j].step].Payload = payload
					open = slices.Delete(open, j, j+1)
				}
				// @now, @id and @effect record nondeterminism the run read;
				// its consequences show in the steps that follow.
				break
			}
			label := ev.Key
			if label == "" {
				label = "state"
			}
			add(ev, StepState, label, object2("after", sanitize(ev.After), "before", sanitize(ev.Before)))
		case ErrorEvent:
			add(ev, StepError, ev.ErrorType, object1("message", sanitize(StringValue(ev.Message))))
		case RunEnd:
			add(ev, StepRun, "run", object2("output", sanitize(ev.Output), "run_status", StringValue(string(ev.RunStatus))))
		}
	}
	return steps
}

// legacyPairing finds results for tool calls that have no tool_result child
// (bundles without parent links): stepfork's forward scan, the first later
// unpaired tool_result of the same name, stopping at the next tool_call of
// that name. Events are indexed by name once so that many unpaired calls do
// not make the scan quadratic.
type legacyPairing struct {
	evs    []Event
	byName map[string][]int32 // indexes of tool_call and tool_result events, by name
}

func newLegacyPairing(evs []Event) *legacyPairing {
	l := &legacyPairing{evs: evs, byName: make(map[string][]int32)}
	for i := range evs {
		if t := evs[i].Type; t == ToolCall || t == ToolResult {
			l.byName[evs[i].Name] = append(l.byName[evs[i].Name], int32(i))
		}
	}
	return l
}

func (l *legacyPairing) forward(call int, name string, paired []bool) int {
	idx := l.byName[name]
	pos, _ := slices.BinarySearch(idx, int32(call))
	for _, j := range idx[pos+1:] {
		ev := &l.evs[j]
		if ev.Type == ToolCall {
			return -1
		}
		if !paired[j] {
			return int(j)
		}
	}
	return -1
}

// sanitize is the value stepfork compares: redacted, and null for a missing
// payload.
func sanitize(v Value) Value {
	if v.IsAbsent() {
		return NullValue
	}
	r, _ := RedactValue(v)
	return r
}

func optString(s string) Value {
	if s == "" {
		return NullValue
	}
	return StringValue(s)
}

func nodeExitPayload(m Marker) Value {
	status := optString(m.Status)
	if m.Error == "" {
		return object1("status", status)
	}
	return object2("error", sanitize(StringValue(m.Error)), "status", status)
}

// callPayload builds {"input":…,"output":…,"status":…} directly: the keys
// are already in canonical order.
func callPayload(input, output Value, status string) Value {
	in, out := sanitize(input), sanitize(output)
	var b strings.Builder
	b.Grow(len(in.raw) + len(out.raw) + len(status) + 32)
	b.WriteString(`{"input":`)
	b.WriteString(in.raw)
	b.WriteString(`,"output":`)
	b.WriteString(out.raw)
	b.WriteString(`,"status":`)
	if Status(status).Valid() { // nothing to escape
		b.WriteByte('"')
		b.WriteString(status)
		b.WriteString(`"}`)
	} else {
		b.Write(appendQuoted(nil, status))
		b.WriteByte('}')
	}
	return Value{b.String()}
}

// object1 and object2 build small objects whose keys are given in canonical
// order; values are never absent.
func object1(k string, v Value) Value {
	return Value{string(appendQuoted([]byte{'{'}, k)) + ":" + v.raw + "}"}
}

func object2(k1 string, v1 Value, k2 string, v2 Value) Value {
	b := appendQuoted([]byte{'{'}, k1)
	b = append(b, ':')
	b = append(b, v1.raw...)
	b = append(b, ',')
	b = appendQuoted(b, k2)
	b = append(b, ':')
	b = append(b, v2.raw...)
	return Value{string(append(b, '}'))}
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
func payloadFields(s *BehaviorStep) []string {
	var f []string
	switch s.Type {
	case StepTool, StepLLM:
		f = fieldsCall
	case StepState:
		f = fieldsState
	case StepError:
		f = fieldsError
	case StepRun:
		f = fieldsRun
	case StepDecision:
		f = fieldsDecision
	case StepParam:
		f = fieldsValue
	case StepNode:
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
func compareSteps(b, v *BehaviorStep) (fields []string, changes []FieldChange) {
	if b.Type != v.Type {
		changes = append(changes, FieldChange{"type", DiffChanged, StringValue(string(b.Type)), StringValue(string(v.Type))})
	}
	if b.Label != v.Label {
		changes = append(changes, FieldChange{"label", DiffChanged, StringValue(b.Label), StringValue(v.Label)})
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
			changes = append(changes, FieldChange{k, DiffAdded, Value{}, y})
		case y.IsAbsent():
			changes = append(changes, FieldChange{k, DiffRemoved, x, Value{}})
		default:
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
func collectFieldChanges(expected, actual Value, p string, out []FieldChange) []FieldChange {
	if expected == actual {
		return out
	}
	ek, ak := expected.Kind(), actual.Kind()
	switch {
	case ek == Object && ak == Object:
		em, am := members(expected), members(actual)
		i, j := 0, 0
		for i < len(em) || j < len(am) {
			switch {
			case j == len(am) || (i < len(em) && em[i].Key < am[j].Key):
				out = append(out, FieldChange{childPath(p, em[i].Key), DiffRemoved, em[i].Value, Value{}})
				i++
			case i == len(em) || am[j].Key < em[i].Key:
				out = append(out, FieldChange{childPath(p, am[j].Key), DiffAdded, Value{}, am[j].Value})
				j++
			default:
				out = collectFieldChanges(em[i].Value, am[j].Value, childPath(p, em[i].Key), out)
				i++
				j++
			}
		}
		return out
	case ek == Array && ak == Array:
		ee, ae := elems(expected), elems(actual)
		n := min(len(ee), len(ae))
		for i := 0; i < n; i++ {
			out = collectFieldChanges(ee[i], ae[i], indexPath(p, i), out)
		}
		for i := n; i < len(ee); i++ {
			out = append(out, FieldChange{indexPath(p, i), DiffRemoved, ee[i], Value{}})
		}
		for i := n; i < len(ae); i++ {
			out = append(out, FieldChange{indexPath(p, i), DiffAdded, Value{}, ae[i]})
		}
		return out
	}
	return append(out, FieldChange{p, DiffChanged, expected, actual})
}

// FirstDifference returns the first differing leaf of expected and actual,
// as stepfork's first_difference does: the path of dotted keys and [i]
// indices ("a.b[1]"; "$" when the roots themselves are different scalars),
// the expected and the actual value there (Absent for a missing key or
// element), and false when the two are canonically equal.
func FirstDifference(expected, actual Value) (path string, exp, act Value, differ bool) {
	p, e, a, ok := firstDifference(expected, actual, "")
	return p, e, a, ok
}

func firstDifference(expected, actual Value, p string) (string, Value, Value, bool) {
	if expected == actual {
		return "", Value{}, Value{}, false
	}
	ek, ak := expected.Kind(), actual.Kind()
	switch {
	case ek == Object && ak == Object:
		em, am := members(expected), members(actual)
		i, j := 0, 0
		for i < len(em) || j < len(am) {
			switch {
			case j == len(am) || (i < len(em) && em[i].Key < am[j].Key):
				return childPath(p, em[i].Key), em[i].Value, Value{}, true
			case i == len(em) || am[j].Key < em[i].Key:
				return childPath(p, am[j].Key), Value{}, am[j].Value, true
			default:
				if q, e, a, ok := firstDifference(em[i].Value, am[j].Value, childPath(p, em[i].Key)); ok {
					return q, e, a, true
				}
				i++
				j++
			}
		}
		return p, expected, actual, true
	case ek == Array && ak == Array:
		ee, ae := elems(expected), elems(actual)
		n := min(len(ee), len(ae))
		for i := 0; i < n; i++ {
			if q, e, a, ok := firstDifference(ee[i], ae[i], indexPath(p, i)); ok {
				return q, e, a, true
			}
		}
		switch {
		case len(ee) > len(ae):
			return indexPath(p, n), ee[n], Value{}, true
		case len(ae) > len(ee):
			return indexPath(p, n), Value{}, ae[n], true
		}
		return p, expected, actual, true
	}
	if p == "" {
		p = "$"
	}
	return p, expected, actual, true
}

func members(v Value) []Member {
	var ms []Member
	for k, x := range v.Members() {
		ms = append(ms, Member{k, x})
	}
	return ms
}

func elems(v Value) []Value {
	var es []Value
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

// ---- state ----

// finalState returns the last value of every plain state key (markers and
// unnamed changes excluded); an absent "after" deletes the key.
func finalState(tr *Trace) map[string]Value {
	st := make(map[string]Value)
	for i := range tr.Events {
		ev := &tr.Events[i]
		if ev.Type != StateChange || ev.Key == "" || ev.IsMarker() {
			continue
		}
		if ev.After.IsAbsent() {
			delete(st, ev.Key)
			continue
		}
		st[ev.Key] = sanitize(ev.After)
	}
	return st
}

// stateDeltas compares the final states of the base and the variant run
// (see finalState); it only reads the two maps.
func stateDeltas(bst, vst map[string]Value) []StateDelta {
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
		change := DiffChanged
		switch {
		case inB && inV && b == v:
			continue
		case !inB:
			change = DiffAdded
		case !inV:
			change = DiffRemoved
		}
		out = append(out, StateDelta{Key: k, Change: change, Before: b, After: v, BytesDelta: len(v.raw) - len(b.raw)})
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
func alignPositional(bs, vs []BehaviorStep) []stepPair {
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
	if nb > 0 && nv > 0 && bs[nb-1].Type == StepRun && vs[nv-1].Type == StepRun {
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
	t       StepType
	label   string
	payload string
}

// stepNumbers numbers a run's steps by their exact content, in order of
// first occurrence: ids[i] is the number of step i. A DiffBase keeps the
// base's, read-only, for all its variants.
type stepNumbers struct {
	byKey map[exactKey]int32
	ids   []int32
}

func numberSteps(steps []BehaviorStep) *stepNumbers {
	exact := interner[exactKey]{make(map[exactKey]int32, len(steps))}
	ids := make([]int32, len(steps))
	for i := range steps {
		s := &steps[i]
		ids[i] = exact.id(exactKey{s.Type, s.Label, s.Payload.raw})
	}
	return &stepNumbers{exact.ids, ids}
}

// alignLCS aligns the two step lists: a longest common subsequence of equal
// steps (type, label and canonical payload), then, inside every stretch the
// LCS leaves unmatched, an LCS over type and label whose pairs are changed
// steps, and cycgraph's coalescing of what is left.
func alignLCS(bs, vs []BehaviorStep) []stepPair {
	return alignNumbered(bs, numberSteps(bs), vs)
}

// alignNumbered is alignLCS with the base steps already numbered (bn, which
// it only reads). The variant's steps continue the base's numbering, so the
// numbers are those numberSteps gives the base steps followed by the
// variant's.
func alignNumbered(bs []BehaviorStep, bn *stepNumbers, vs []BehaviorStep) []stepPair {
	type coarseKey struct {
		t     StepType
		label string
	}
	coarse := interner[coarseKey]{make(map[coarseKey]int32)}
	// coarseKeys is only needed inside the stretches the LCS leaves open.
	coarseKeys := func(steps []BehaviorStep) []int32 {
		co := make([]int32, len(steps))
		for i := range steps {
			co[i] = coarse.id(coarseKey{steps[i].Type, steps[i].Label})
		}
		return co
	}
	bex, vex := bn.ids, make([]int32, len(vs))
	nids := int32(len(bn.byKey))
	var more map[exactKey]int32 // the variant's steps the base lacks
	for i := range vs {
		s := &vs[i]
		k := exactKey{s.Type, s.Label, s.Payload.raw}
		id, ok := bn.byKey[k]
		if !ok {
			if more == nil {
				more = make(map[exactKey]int32)
			}
			if id, ok = more[k]; !ok {
				id = nids
				more[k] = id
				nids++
			}
		}
		vex[i] = id
	}

	var out []stepPair
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
		bco, vco := coarseKeys(bs[b0:b1]), coarseKeys(vs[v0:v1])
		lcs(bco, vco, len(coarse.ids), coarseCostLimit, func(i, j int) {
			residual(pb, b0+i, pv, v0+j)
			out = append(out, stepPair{b: b0 + i, v: v0 + j})
			pb, pv = b0+i+1, v0+j+1
		})
		residual(pb, b1, pv, v1)
	}
	pb, pv := 0, 0
	lcs(bex, vex, int(nids), 0, func(i, j int) {
		gap(pb, i, pv, j)
		out = append(out, stepPair{b: i, v: j, same: true})
		pb, pv = i+1, j+1
	})
	gap(pb, len(bs), pv, len(vs))
	return out
}

// coarseCostLimit bounds the search of the type-and-label pass: it only
// decides which unmatched steps are shown as changed rather than as removed
// and added, so two long unrelated runs need not cost more than a glance.
const coarseCostLimit = 256

// lcs calls match(i, j), in increasing order, for the pairs of a longest
// common subsequence of a and b, whose elements are ids in [0, nids).
// maxCost, when positive, lowers the bound on D of one bisection (see
// costLimit).
//
// Elements that occur on one side only cannot be part of a common
// subsequence and are set aside first, so that runs differing in a few
// steps cost little more than reading them; the rest is Myers' O((N+M)·D)
// algorithm in linear space (divide and conquer on the middle snake). In a
// part of the problem where D grows past a bound, the search stops at the
// furthest point it reached and splits there, as GNU diff does: the
// alignment stays valid but may there be shorter than the longest.
func lcs(a, b []int32, nids, maxCost int, match func(i, j int)) {
	inA, inB := make([]bool, nids), make([]bool, nids)
	for _, x := range a {
		inA[x] = true
	}
	for _, x := range b {
		inB[x] = true
	}
	fa, ia := keepShared(a, inB)
	fb, ib := keepShared(b, inA)
	m := &myers{a: fa, b: fb, maxCost: maxCost, match: func(i, j int) { match(int(ia[i]), int(ib[j])) }}
	m.diff(0, len(fa), 0, len(fb))
}

// keepShared returns the elements of s whose id is marked in other, and
// their indexes in s.
func keepShared(s []int32, other []bool) (kept, index []int32) {
	kept, index = make([]int32, 0, len(s)), make([]int32, 0, len(s))
	for i, x := range s {
		if other[x] {
			kept = append(kept, x)
			index = append(index, int32(i))
		}
	}
	return kept, index
}

type myers struct {
	a, b    []int32
	v1, v2  []int // scratch for bisect
	maxCost int   // if positive, a lower bound on D than costLimit's
	match   func(i, j int)
}

// diff reports the matches of an LCS of a[aLo:aHi] and b[bLo:bHi].
func (m *myers) diff(aLo, aHi, bLo, bHi int) {
	for aLo < aHi && bLo < bHi && m.a[aLo] == m.b[bLo] {
		m.match(aLo, bLo)
		aLo++
		bLo++
	}
	suffix := 0
	for aHi-suffix > aLo && bHi-suffix > bLo && m.a[aHi-1-suffix] == m.b[bHi-1-suffix] {
		suffix++
	}
	aHi -= suffix
	bHi -= suffix
	if aLo < aHi && bLo < bHi {
		if x, y, ok := m.bisect(aLo, aHi, bLo, bHi); ok {
			m.diff(aLo, x, bLo, y)
			m.diff(x, aHi, y, bHi)
		}
	}
	for k := 0; k < suffix; k++ {
		m.match(aHi+k, bHi+k)
	}
}

// bisect finds a point (x, y) on an optimal edit path of a[aLo:aHi] and
// b[bLo:bHi] by running the forward and the reverse search until they meet
// (Myers 1986, §4b; the formulation of diff-match-patch). ok is false when
// the two have nothing in common.
func (m *myers) bisect(aLo, aHi, bLo, bHi int) (x, y int, ok bool) {
	a, b := m.a[aLo:aHi], m.b[bLo:bHi]
	n, mm := len(a), len(b)
	maxD := (n + mm + 1) / 2
	off := maxD
	vlen := 2 * maxD
	if cap(m.v1) < vlen+2 {
		m.v1, m.v2 = make([]int, vlen+2), make([]int, vlen+2)
	}
	v1, v2 := m.v1[:vlen+2], m.v2[:vlen+2]
	for i := range v1 {
		v1[i], v2[i] = -1, -1
	}
	v1[off+1], v2[off+1] = 0, 0
	delta := n - mm
	front := delta%2 != 0
	k1start, k1end, k2start, k2end := 0, 0, 0, 0
	limit := min(maxD, costLimit(n+mm))
	if m.maxCost > 0 {
		limit = min(limit, m.maxCost)
	}
	bestX, bestY := -1, -1
	for d := 0; d < limit; d++ {
		for k1 := -d + k1start; k1 <= d-k1end; k1 += 2 {
			k1o := off + k1
			var x1 int
			if k1 == -d || (k1 != d && v1[k1o-1] < v1[k1o+1]) {
				x1 = v1[k1o+1]
			} else {
				x1 = v1[k1o-1] + 1
			}
			y1 := x1 - k1
			for x1 < n && y1 < mm && a[x1] == b[y1] {
				x1++
				y1++
			}
			v1[k1o] = x1
			switch {
			case x1 > n:
				k1end += 2
			case y1 > mm:
				k1start += 2
			default:
				if x1+y1 > bestX+bestY {
					bestX, bestY = x1, y1
				}
				if front {
					k2o := off + delta - k1
					if k2o >= 0 && k2o < vlen && v2[k2o] != -1 && x1 >= n-v2[k2o] {
						return aLo + x1, bLo + y1, true
					}
				}
			}
		}
		for k2 := -d + k2start; k2 <= d-k2end; k2 += 2 {
			k2o := off + k2
			var x2 int
			if k2 == -d || (k2 != d && v2[k2o-1] < v2[k2o+1]) {
				x2 = v2[k2o+1]
			} else {
				x2 = v2[k2o-1] + 1
			}
			y2 := x2 - k2
			for x2 < n && y2 < mm && a[n-x2-1] == b[mm-y2-1] {
				x2++
				y2++
			}
			v2[k2o] = x2
			switch {
			case x2 > n:
				k2end += 2
			case y2 > mm:
				k2start += 2
			case !front:
				k1o := off + delta - k2
				if k1o >= 0 && k1o < vlen && v1[k1o] != -1 {
					x1 := v1[k1o]
					y1 := off + x1 - k1o
					if x1 >= n-x2 {
						return aLo + x1, bLo + y1, true
					}
				}
			}
		}
	}
	// Too expensive (or nothing in common): split at the furthest point
	// the forward search reached, if that makes progress.
	if bestX+bestY > 0 && bestX+bestY < n+mm {
		return aLo + bestX, bLo + bestY, true
	}
	return 0, 0, false
}

// costLimit bounds D in one bisection of a problem of the given size:
// beyond it the search settles for a valid, possibly longer, edit path.
func costLimit(size int) int {
	l := 1
	for size > 0 {
		size >>= 2
		l <<= 1
	}
	return max(l*4, 2048)
}

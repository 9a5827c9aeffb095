package fork

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// ErrInvalidChange is matched by the error of a change that cannot be
// applied to the base run (a target that does not exist or lies in the
// served prefix, a value that cannot be recorded, a malformed wire form).
var ErrInvalidChange = errors.New("invalid change")

// ErrConflict is matched by the error of a set of changes in which two
// write the same thing.
var ErrConflict = errors.New("conflicting changes")

// ChangeError is the error of a change that cannot be applied.
type ChangeError struct {
	Change string // the change's description
	Msg    string
}

// Error returns the error message.
func (e *ChangeError) Error() string { return e.Change + ": " + e.Msg }

// Is makes every ChangeError match ErrInvalidChange.
func (e *ChangeError) Is(target error) bool { return target == ErrInvalidChange }

// ConflictError lists the pairs of changes that write the same thing, one
// line each ("prompt of 'write' and prompt of 'write' both write
// prompt:write. Drop one — …").
type ConflictError struct{ Conflicts []string }

// Error returns the error message.
func (e *ConflictError) Error() string {
	return "conflicting changes:\n  " + strings.Join(e.Conflicts, "\n  ")
}

// Is makes every ConflictError match ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// All is the target of a Prompt, Model or Temperature change that applies to
// every model call of the tail.
const All = "*"

// A Change is one thing a counterfactual fork changes about the base run.
// Changes are plain values with a stable wire form (Wire: snake_case JSON
// with a "kind" discriminator, recorded in the variant's fork.json and read
// back by ParseChanges), and they are Options, so they are passed to Run
// directly:
//
//	fork.Run(ctx, base, fork.Failure(), agent, fork.Prompt("decide", "…"), fork.Memoize())
//
// Every change acts on the tail only. Two changes that write the same thing
// are refused before anything runs, naming both. A change whose target
// matches nothing in the tail is reported as unused in Variant.Changes.
type Change interface {
	Option
	// Describe names the change for people: "prompt of 'write'".
	Describe() string
	// Wire is the change's wire form.
	Wire() trace.Value
	bind(ix *index, at Resolved) (*bound, error)
}

// ckind is the kind of a bound change.
type ckind uint8

const (
	ckToolResult ckind = iota
	ckLLMResponse
	ckPrompt
	ckModel
	ckTemperature
	ckState
	ckDecision
	ckParam
	ckHuman
)

// bound is a change resolved against a base run and a fork point: what it
// matches and the value it applies. The counters are per variant run.
type bound struct {
	change Change
	kind   ckind
	desc   string
	claims []string

	label  string // output changes: tool name or model label; agent changes: target
	occ    int    // output changes: occurrence, 0 for every tail call
	value  trace.Value
	text   string
	temp   float64
	name   string // decision, parameter, approval ("" = every approval)
	once   bool
	set    []trace.Member
	delete []string

	applied int
	steps   []int // variant steps where it was applied (up to 8)
}

func (b *bound) hit(step int) {
	b.applied++
	if len(b.steps) < 8 {
		b.steps = append(b.steps, step)
	}
}

// Target addresses a recorded tool or model call for ToolResult and
// LLMResponse: by step or event id of the call (or of its result) in the
// base run, or by name and occurrence. Build it with OnStep, OnEvent or
// OnCall.
type Target struct {
	Step    int  // when HasStep
	HasStep bool //
	EventID string
	// Name is the tool name, or the model label ("provider/model", or the
	// model alone); Occurrence is 1-based among the run's calls of that
	// name, 0 for every call of the tail.
	Name       string
	Occurrence int
}

// OnStep targets the call at step n of the base run (the call event or its
// result).
func OnStep(n int) Target { return Target{Step: n, HasStep: true} }

// OnEvent targets the call with the given event id (the call event or its
// result).
func OnEvent(id string) Target { return Target{EventID: id} }

// OnCall targets call occurrence (1-based; 0 for every call in the tail) of
// the tool or model name.
func OnCall(name string, occurrence int) Target { return Target{Name: name, Occurrence: occurrence} }

// String describes the target ("step 5", "event evt_1", "'search' call 2").
func (t Target) String() string {
	switch {
	case t.HasStep:
		return "step " + strconv.Itoa(t.Step)
	case t.EventID != "":
		return "event " + t.EventID
	case t.Occurrence == 0:
		return fmt.Sprintf("every '%s' call", t.Name)
	}
	return fmt.Sprintf("'%s' call %d", t.Name, t.Occurrence)
}

func (t Target) wire() trace.Value {
	switch {
	case t.HasStep:
		return obj("step", trace.IntValue(int64(t.Step)))
	case t.EventID != "":
		return obj("event_id", trace.StringValue(t.EventID))
	}
	return obj("name", trace.StringValue(t.Name), "occurrence", trace.IntValue(int64(t.Occurrence)))
}

// obj builds a JSON object from key, value pairs.
func obj(kv ...any) trace.Value {
	ms := make([]trace.Member, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1].(trace.Value)
		if v.IsAbsent() {
			continue
		}
		ms = append(ms, trace.Member{Key: kv[i].(string), Value: v})
	}
	o, _ := trace.ObjectValue(ms...)
	return o
}

// toValue converts a change's payload; nil is JSON null.
func toValue(x any) (trace.Value, error) {
	if v, ok := x.(trace.Value); ok {
		if v.IsAbsent() {
			return trace.NullValue, nil
		}
		return v, nil
	}
	return trace.ValueOf(x)
}

func valueOrNull(x any) (trace.Value, error) { return toValue(x) }

// short is a value's canonical JSON cut to 40 characters.
func short(v trace.Value) string {
	s := v.Canonical()
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	n := 0
	for i := range s {
		if n == 40 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// ---- output substitutions ----

// ToolResultChange substitutes what a tool call of the tail returns: the
// call is served Output without executing (and without the side-effect
// guard, since nothing touches the world).
type ToolResultChange struct {
	Target Target
	Output trace.Value
	err    error
}

// ToolResult substitutes output (a trace.Value, or anything trace.ValueOf
// accepts) for what the targeted tool call returns.
func ToolResult(target Target, output any) ToolResultChange {
	v, err := valueOrNull(output)
	return ToolResultChange{Target: target, Output: v, err: err}
}

func (c ToolResultChange) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

// Describe is "tool result of step 5" or "tool result of 'search' call 2".
func (c ToolResultChange) Describe() string { return "tool result of " + c.Target.String() }

// Wire is {"kind":"tool_result","target":{…},"output":…}.
func (c ToolResultChange) Wire() trace.Value {
	return obj("kind", trace.StringValue("tool_result"), "target", c.Target.wire(), "output", c.Output)
}

func (c ToolResultChange) bind(ix *index, at Resolved) (*bound, error) {
	return bindOutput(c, ix, at, replay.KindTool, c.Target, c.Output, c.err)
}

// LLMResponseChange substitutes what a model call of the tail returns (the
// llm_response output, e.g. a replay.Response as JSON for replay.LLM). The
// call is served Output without calling the model.
type LLMResponseChange struct {
	Target Target
	Output trace.Value
	err    error
}

// LLMResponse substitutes output for what the targeted model call returns.
func LLMResponse(target Target, output any) LLMResponseChange {
	v, err := valueOrNull(output)
	return LLMResponseChange{Target: target, Output: v, err: err}
}

func (c LLMResponseChange) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

// Describe is "model response of step 5" or "model response of 'openai/gpt-4o' call 1".
func (c LLMResponseChange) Describe() string { return "model response of " + c.Target.String() }

// Wire is {"kind":"llm_response","target":{…},"output":…}.
func (c LLMResponseChange) Wire() trace.Value {
	return obj("kind", trace.StringValue("llm_response"), "target", c.Target.wire(), "output", c.Output)
}

func (c LLMResponseChange) bind(ix *index, at Resolved) (*bound, error) {
	return bindOutput(c, ix, at, replay.KindLLM, c.Target, c.Output, c.err)
}

func bindOutput(c Change, ix *index, at Resolved, kind replay.CallKind, t Target, out trace.Value, verr error) (*bound, error) {
	desc := c.Describe()
	fail := func(format string, args ...any) (*bound, error) {
		return nil, &ChangeError{Change: desc, Msg: fmt.Sprintf(format, args...)}
	}
	if verr != nil {
		return fail("the output cannot be recorded: %v", verr)
	}
	ck, what, callType, resultType := ckToolResult, "tool", trace.ToolCall, trace.ToolResult
	if kind == replay.KindLLM {
		ck, what, callType, resultType = ckLLMResponse, "model", trace.LLMRequest, trace.LLMResponse
	}
	b := &bound{change: c, kind: ck, value: out}
	evs := ix.tr.Events
	i := -1
	switch {
	case t.HasStep && t.EventID != "":
		return fail("a target is a step or an event id, not both")
	case t.HasStep:
		for j := range evs {
			if evs[j].Step == t.Step {
				i = j
				break
			}
		}
		if i < 0 {
			return fail("no event at step %d in the base run", t.Step)
		}
	case t.EventID != "":
		j, ok := ix.byID[t.EventID]
		if !ok {
			return fail("no event '%s' in the base run", t.EventID)
		}
		i = int(j)
	default:
		if t.Name == "" {
			return fail("the target names no call: use fork.OnStep, fork.OnEvent or fork.OnCall")
		}
		if t.Occurrence < 0 {
			return fail("occurrence %d does not exist: occurrences are 1-based (0 for every call of the tail)", t.Occurrence)
		}
		b.label, b.occ = t.Name, t.Occurrence
		b.desc = fmt.Sprintf("%s result of %s", what, t)
		if kind == replay.KindLLM {
			b.desc = "model response of " + t.String()
		}
		occ := "*"
		if t.Occurrence > 0 {
			occ = strconv.Itoa(t.Occurrence)
		}
		b.claims = []string{fmt.Sprintf("output:%s:%s#%s", kind, t.Name, occ)}
		return b, nil
	}
	call := i
	if evs[i].Type == resultType {
		call = ix.splits(i)
	}
	if call < 0 || evs[call].Type != callType {
		return fail("step %d is a '%s' event, not a %s call or its result", evs[i].Step, evs[i].Type, what)
	}
	if call < at.pos {
		return fail("step %d is in the served prefix (the fork starts at step %d), and a change only acts on the tail. Fork at or before it (fork.Step(%d)) to change it.",
			evs[call].Step, at.Step, evs[call].Step)
	}
	_, b.label = callIdentity(&evs[call])
	b.occ = int(ix.occ[call])
	b.desc = fmt.Sprintf("%s of '%s' call %d (step %d)", strings.TrimSuffix(desc, " of "+t.String()), b.label, b.occ, evs[call].Step)
	b.claims = []string{fmt.Sprintf("output:%s:%s#%d", kind, b.label, b.occ)}
	return b, nil
}

// ---- agent changes: prompt, model, temperature ----

// PromptChange replaces the system prompt of the tail's model calls that
// match Target (a node name, a model label or model, or All).
type PromptChange struct{ Target, Text string }

// Prompt replaces the system prompt of the matching model calls of the tail.
//
// The request is patched, not the agent: for replay.LLM's request the
// "system" field; for raw bodies (replay.LLMRaw) Anthropic's "system", or the
// first message with role "system" of an OpenAI-style "messages" list (one
// is prepended when there is none). A call made inside node target, with the
// model label or model target, or any call for All, matches; when several
// changes of a kind match one call, the node's wins over the label's, which
// wins over All.
func Prompt(target, text string) PromptChange { return PromptChange{Target: target, Text: text} }

func (c PromptChange) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

// Describe is "prompt of 'write'".
func (c PromptChange) Describe() string { return fmt.Sprintf("prompt of '%s'", c.Target) }

// Wire is {"kind":"prompt","target":…,"system_prompt":…}.
func (c PromptChange) Wire() trace.Value {
	return obj("kind", trace.StringValue("prompt"), "target", trace.StringValue(c.Target), "system_prompt", trace.StringValue(c.Text))
}

func (c PromptChange) bind(*index, Resolved) (*bound, error) {
	if c.Target == "" {
		return nil, &ChangeError{Change: c.Describe(), Msg: "the target is empty: name a node, a model, or fork.All"}
	}
	return &bound{change: c, kind: ckPrompt, desc: c.Describe(), label: c.Target, text: c.Text,
		claims: []string{"prompt:" + c.Target}}, nil
}

// ModelChange swaps the model of the tail's model calls that match Target.
type ModelChange struct{ Target, Model string }

// Model makes the matching model calls of the tail use model (the call's
// model, and the "model" field of a raw body). Targets match as for Prompt.
func Model(target, model string) ModelChange { return ModelChange{Target: target, Model: model} }

func (c ModelChange) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

// Describe is "model of 'write' → gpt-4o".
func (c ModelChange) Describe() string { return fmt.Sprintf("model of '%s' → %s", c.Target, c.Model) }

// Wire is {"kind":"model","target":…,"model":…}.
func (c ModelChange) Wire() trace.Value {
	return obj("kind", trace.StringValue("model"), "target", trace.StringValue(c.Target), "model", trace.StringValue(c.Model))
}

func (c ModelChange) bind(*index, Resolved) (*bound, error) {
	switch {
	case c.Target == "":
		return nil, &ChangeError{Change: c.Describe(), Msg: "the target is empty: name a node, a model, or fork.All"}
	case c.Model == "":
		return nil, &ChangeError{Change: c.Describe(), Msg: "the model is empty"}
	}
	return &bound{change: c, kind: ckModel, desc: c.Describe(), label: c.Target, text: c.Model,
		claims: []string{"model:" + c.Target}}, nil
}

// TemperatureChange sets the sampling temperature of the tail's model calls
// that match Target.
type TemperatureChange struct {
	Target      string
	Temperature float64
}

// Temperature sets the "temperature" field of the matching model calls'
// requests (0 ≤ t ≤ 2). Targets match as for Prompt.
func Temperature(target string, t float64) TemperatureChange {
	return TemperatureChange{Target: target, Temperature: t}
}

func (c TemperatureChange) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

// Describe is "temperature of 'write' → 0.7".
func (c TemperatureChange) Describe() string {
	return fmt.Sprintf("temperature of '%s' → %s", c.Target, strconv.FormatFloat(c.Temperature, 'g', -1, 64))
}

// Wire is {"kind":"temperature","target":…,"temperature":…}.
func (c TemperatureChange) Wire() trace.Value {
	t, err := trace.FloatValue(c.Temperature)
	if err != nil {
		t = trace.NullValue
	}
	return obj("kind", trace.StringValue("temperature"), "target", trace.StringValue(c.Target), "temperature", t)
}

func (c TemperatureChange) bind(*index, Resolved) (*bound, error) {
	switch {
	case c.Target == "":
		return nil, &ChangeError{Change: c.Describe(), Msg: "the target is empty: name a node, a model, or fork.All"}
	case math.IsNaN(c.Temperature) || c.Temperature < 0 || c.Temperature > 2:
		return nil, &ChangeError{Change: c.Describe(), Msg: "a temperature is between 0 and 2"}
	}
	return &bound{change: c, kind: ckTemperature, desc: c.Describe(), label: c.Target, temp: c.Temperature,
		claims: []string{"temperature:" + c.Target}}, nil
}

// ---- state, decisions, parameters, approvals ----

// State patches the state the agent reads in the tail: the first
// replay.Read of a key in Set (at or after the fork point) returns the new
// value, and of a key in Delete returns the zero value with the key deleted;
// each is recorded as a state_change. Values are trace.Values or anything
// trace.ValueOf accepts.
type State struct {
	Set    map[string]any
	Delete []string
}

func (c State) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

func (c State) keys() []string {
	keys := make([]string, 0, len(c.Set))
	for k := range c.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Describe is "state set a, b and delete c".
func (c State) Describe() string {
	var parts []string
	if len(c.Set) > 0 {
		parts = append(parts, "set "+strings.Join(c.keys(), ", "))
	}
	if len(c.Delete) > 0 {
		parts = append(parts, "delete "+strings.Join(c.Delete, ", "))
	}
	if len(parts) == 0 {
		return "state (no-op)"
	}
	return "state " + strings.Join(parts, " and ")
}

// Wire is {"kind":"state","set":{…},"delete":[…]}.
func (c State) Wire() trace.Value {
	var set, del trace.Value
	if len(c.Set) > 0 {
		ms := make([]trace.Member, 0, len(c.Set))
		for _, k := range c.keys() {
			v, err := toValue(c.Set[k])
			if err != nil {
				v = trace.NullValue
			}
			ms = append(ms, trace.Member{Key: k, Value: v})
		}
		set, _ = trace.ObjectValue(ms...)
	}
	if len(c.Delete) > 0 {
		es := make([]trace.Value, len(c.Delete))
		for i, k := range c.Delete {
			es[i] = trace.StringValue(k)
		}
		del, _ = trace.ArrayValue(es...)
	}
	return obj("kind", trace.StringValue("state"), "set", set, "delete", del)
}

func (c State) bind(*index, Resolved) (*bound, error) {
	b := &bound{change: c, kind: ckState, desc: c.Describe()}
	fail := func(format string, args ...any) (*bound, error) {
		return nil, &ChangeError{Change: b.desc, Msg: fmt.Sprintf(format, args...)}
	}
	for _, k := range c.keys() {
		if k == "" || strings.HasPrefix(k, "@") {
			return fail("state key %q is not allowed: keys are non-empty and do not start with '@'", k)
		}
		v, err := toValue(c.Set[k])
		if err != nil {
			return fail("the value of '%s' cannot be recorded: %v", k, err)
		}
		b.set = append(b.set, trace.Member{Key: k, Value: v})
		b.claims = append(b.claims, "state:"+k)
	}
	for _, k := range c.Delete {
		if _, both := c.Set[k]; both {
			return fail("'%s' is both set and deleted; keep one", k)
		}
		if k == "" || strings.HasPrefix(k, "@") {
			return fail("state key %q is not allowed: keys are non-empty and do not start with '@'", k)
		}
		b.delete = append(b.delete, k)
		b.claims = append(b.claims, "state:"+k)
	}
	if len(b.claims) == 0 {
		return fail("it sets and deletes nothing")
	}
	return b, nil
}

// DecisionChange forces the value of a decision (replay.Decide) in the tail.
type DecisionChange struct {
	Name     string
	Value    trace.Value
	OnlyOnce bool // force the first decision of that name in the tail only
	err      error
}

// Decision forces every replay.Decide of name in the tail to return value
// (recorded with "forced":true). Use Once to force only the first.
func Decision(name string, value any) DecisionChange {
	v, err := valueOrNull(value)
	return DecisionChange{Name: name, Value: v, err: err}
}

// Once returns the change forcing only the first decision of its name in
// the tail; later ones are made by the agent.
func (c DecisionChange) Once() DecisionChange { c.OnlyOnce = true; return c }

func (c DecisionChange) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

// Describe is `decision 'route' → "premium"`, with ", once" when only the
// first is forced.
func (c DecisionChange) Describe() string {
	d := fmt.Sprintf("decision '%s' → %s", c.Name, short(c.Value))
	if c.OnlyOnce {
		d += ", once"
	}
	return d
}

// Wire is {"kind":"decision","name":…,"value":…} with "once":true when set.
func (c DecisionChange) Wire() trace.Value {
	var once trace.Value
	if c.OnlyOnce {
		once = trace.TrueValue
	}
	return obj("kind", trace.StringValue("decision"), "name", trace.StringValue(c.Name), "value", c.Value, "once", once)
}

func (c DecisionChange) bind(*index, Resolved) (*bound, error) {
	switch {
	case c.Name == "":
		return nil, &ChangeError{Change: c.Describe(), Msg: "the decision name is empty"}
	case c.err != nil:
		return nil, &ChangeError{Change: c.Describe(), Msg: "the value cannot be recorded: " + c.err.Error()}
	}
	return &bound{change: c, kind: ckDecision, desc: c.Describe(), name: c.Name, value: c.Value, once: c.OnlyOnce,
		claims: []string{"decision:" + c.Name}}, nil
}

// ParamChange sets a parameter (replay.Param) the agent reads in the tail.
type ParamChange struct {
	Name  string
	Value trace.Value
	err   error
}

// Param makes every replay.Param of name in the tail return value.
func Param(name string, value any) ParamChange {
	v, err := valueOrNull(value)
	return ParamChange{Name: name, Value: v, err: err}
}

func (c ParamChange) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

// Describe is "param 'max_results' → 5".
func (c ParamChange) Describe() string {
	return fmt.Sprintf("param '%s' → %s", c.Name, short(c.Value))
}

// Wire is {"kind":"param","name":…,"value":…}.
func (c ParamChange) Wire() trace.Value {
	return obj("kind", trace.StringValue("param"), "name", trace.StringValue(c.Name), "value", c.Value)
}

func (c ParamChange) bind(*index, Resolved) (*bound, error) {
	switch {
	case c.Name == "":
		return nil, &ChangeError{Change: c.Describe(), Msg: "the parameter name is empty"}
	case c.err != nil:
		return nil, &ChangeError{Change: c.Describe(), Msg: "the value cannot be recorded: " + c.err.Error()}
	}
	return &bound{change: c, kind: ckParam, desc: c.Describe(), name: c.Name, value: c.Value,
		claims: []string{"param:" + c.Name}}, nil
}

// HumanResponseChange answers approvals (replay.Approve) in the tail.
type HumanResponseChange struct {
	Decision string // the approval's name; "" answers every approval
	Data     trace.Value
	err      error
}

// HumanResponse answers every replay.Approve named decision in the tail
// with data ("" answers every approval). Without it, an approval of the tail
// is served the base run's recorded answer when there is one, and is
// blocked otherwise.
func HumanResponse(decision string, data any) HumanResponseChange {
	v, err := valueOrNull(data)
	return HumanResponseChange{Decision: decision, Data: v, err: err}
}

func (c HumanResponseChange) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

// Describe is "human response to 'refund' → true".
func (c HumanResponseChange) Describe() string {
	if c.Decision == "" {
		return "human response to every approval → " + short(c.Data)
	}
	return fmt.Sprintf("human response to '%s' → %s", c.Decision, short(c.Data))
}

// Wire is {"kind":"human_response","decision":…,"data":…}.
func (c HumanResponseChange) Wire() trace.Value {
	return obj("kind", trace.StringValue("human_response"), "decision", trace.StringValue(c.Decision), "data", c.Data)
}

func (c HumanResponseChange) bind(*index, Resolved) (*bound, error) {
	if c.err != nil {
		return nil, &ChangeError{Change: c.Describe(), Msg: "the data cannot be recorded: " + c.err.Error()}
	}
	claim := "human_response:" + c.Decision
	if c.Decision == "" {
		claim = "human_response:*"
	}
	return &bound{change: c, kind: ckHuman, desc: c.Describe(), name: c.Decision, value: c.Data,
		claims: []string{claim}}, nil
}

// ---- changes computed from the fork point ----

type changeFunc struct{ f func(Resolved) Change }

// ChangeFunc is a change computed from the resolved fork point, so a change
// can name what the point resolved to without looking it up first:
//
//	fork.ChangeFunc(func(p fork.Resolved) fork.Change { return fork.Model(p.Node, "gpt-4o") })
//
// The variant records the change f returned.
func ChangeFunc(f func(p Resolved) Change) Change { return changeFunc{f} }

func (c changeFunc) apply(cfg *config) { cfg.changes = append(cfg.changes, c) }

// Describe is "a change computed from the fork point".
func (c changeFunc) Describe() string { return "a change computed from the fork point" }

// Wire is {"kind":"function"}: the variant records the change it returned.
func (c changeFunc) Wire() trace.Value { return obj("kind", trace.StringValue("function")) }

func (c changeFunc) bind(ix *index, at Resolved) (*bound, error) {
	if c.f == nil {
		return nil, &ChangeError{Change: c.Describe(), Msg: "the function is nil"}
	}
	got := c.f(at)
	if got == nil {
		return nil, &ChangeError{Change: c.Describe(), Msg: "the function returned no change for " + at.String()}
	}
	if _, nested := got.(changeFunc); nested {
		return nil, &ChangeError{Change: c.Describe(), Msg: "the function returned another ChangeFunc"}
	}
	return got.bind(ix, at)
}

// bindAll binds changes and refuses conflicts, naming both changes of each.
func bindAll(ix *index, at Resolved, changes []Change) ([]*bound, error) {
	out := make([]*bound, 0, len(changes))
	var errs []error
	for _, c := range changes {
		b, err := c.bind(ix, at)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, b)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := conflicts(out); err != nil {
		return nil, err
	}
	return out, nil
}

func conflicts(bs []*bound) error {
	owner := map[string]*bound{}
	var lines []string
	report := func(a, b *bound, claim string) {
		lines = append(lines, fmt.Sprintf("%s and %s both write %s. Drop one — a fork applies changes by kind, not in order, so which would win is not defined.",
			a.desc, b.desc, claim))
	}
	for _, b := range bs {
		for _, claim := range b.claims {
			if a, ok := owner[claim]; ok {
				report(a, b, claim)
				continue
			}
			owner[claim] = b
		}
	}
	// "Every call" output changes overlap the single-call ones of the same
	// name; an approval answer for all overlaps the named ones.
	for _, b := range bs {
		for _, claim := range b.claims {
			family, all := strings.CutSuffix(claim, "#*")
			if !all && claim != "human_response:*" {
				continue
			}
			if claim == "human_response:*" {
				family = "human_response:"
			}
			for _, a := range bs {
				if a == b {
					continue
				}
				for _, ac := range a.claims {
					if ac != claim && strings.HasPrefix(ac, family) && a.kind == b.kind {
						if slices.Index(bs, a) < slices.Index(bs, b) {
							report(a, b, ac)
						} else {
							report(b, a, ac)
						}
					}
				}
			}
		}
	}
	if len(lines) > 0 {
		return &ConflictError{Conflicts: lines}
	}
	return nil
}

// WireChanges is the wire form of a list of changes: a JSON array of their
// Wire values.
func WireChanges(changes []Change) trace.Value {
	es := make([]trace.Value, len(changes))
	for i, c := range changes {
		es[i] = c.Wire()
	}
	v, _ := trace.ArrayValue(es...)
	return v
}

// ParseChanges reads changes back from their wire form (a JSON array of
// Wire values, as fork.json records them). Unknown kinds and fields are
// refused, naming the entry.
func ParseChanges(v trace.Value) ([]Change, error) {
	if v.Kind() != trace.Array {
		return nil, &ChangeError{Change: "changes", Msg: "the wire form is a JSON array of changes, got " + short(v)}
	}
	var out []Change
	for i, e := range v.Elems() {
		c, err := parseChange(e)
		if err != nil {
			return nil, &ChangeError{Change: fmt.Sprintf("changes[%d]", i), Msg: err.Error()}
		}
		out = append(out, c)
	}
	return out, nil
}

func parseChange(v trace.Value) (Change, error) {
	if v.Kind() != trace.Object {
		return nil, fmt.Errorf("a change is a JSON object, got %s", short(v))
	}
	kind, _ := v.Get("kind").Str()
	allowed := map[string][]string{
		"tool_result":    {"target", "output"},
		"llm_response":   {"target", "output"},
		"prompt":         {"target", "system_prompt"},
		"model":          {"target", "model"},
		"temperature":    {"target", "temperature"},
		"state":          {"set", "delete"},
		"decision":       {"name", "value", "once"},
		"param":          {"name", "value"},
		"human_response": {"decision", "data"},
	}
	fields, ok := allowed[kind]
	if !ok {
		return nil, fmt.Errorf("unknown kind %s", short(v.Get("kind")))
	}
	for k := range v.Members() {
		if k != "kind" && !slices.Contains(fields, k) {
			return nil, fmt.Errorf("%s change has no field %q", kind, k)
		}
	}
	str := func(k string) (string, error) {
		s, ok := v.Get(k).Str()
		if !ok {
			return "", fmt.Errorf("%s change: %q must be a string", kind, k)
		}
		return s, nil
	}
	payload := func(k string) trace.Value {
		p := v.Get(k)
		if p.IsAbsent() {
			return trace.NullValue
		}
		return p
	}
	switch kind {
	case "tool_result", "llm_response":
		t, err := parseTarget(v.Get("target"))
		if err != nil {
			return nil, fmt.Errorf("%s change: %w", kind, err)
		}
		if kind == "tool_result" {
			return ToolResultChange{Target: t, Output: payload("output")}, nil
		}
		return LLMResponseChange{Target: t, Output: payload("output")}, nil
	case "prompt", "model":
		target, err := str("target")
		if err != nil {
			return nil, err
		}
		if kind == "prompt" {
			text, err := str("system_prompt")
			return PromptChange{Target: target, Text: text}, err
		}
		m, err := str("model")
		return ModelChange{Target: target, Model: m}, err
	case "temperature":
		target, err := str("target")
		if err != nil {
			return nil, err
		}
		t, ok := v.Get("temperature").Float()
		if !ok {
			return nil, errors.New("temperature change: \"temperature\" must be a number")
		}
		return TemperatureChange{Target: target, Temperature: t}, nil
	case "state":
		var s State
		if set := v.Get("set"); !set.IsAbsent() {
			if set.Kind() != trace.Object {
				return nil, errors.New("state change: \"set\" must be an object")
			}
			s.Set = map[string]any{}
			for k, x := range set.Members() {
				s.Set[k] = x
			}
		}
		if del := v.Get("delete"); !del.IsAbsent() {
			if del.Kind() != trace.Array {
				return nil, errors.New("state change: \"delete\" must be an array of keys")
			}
			for _, k := range del.Elems() {
				ks, ok := k.Str()
				if !ok {
					return nil, errors.New("state change: \"delete\" must be an array of keys")
				}
				s.Delete = append(s.Delete, ks)
			}
		}
		return s, nil
	case "decision":
		name, err := str("name")
		if err != nil {
			return nil, err
		}
		d := DecisionChange{Name: name, Value: payload("value")}
		if o := v.Get("once"); !o.IsAbsent() {
			b, ok := o.BoolOf()
			if !ok {
				return nil, errors.New("decision change: \"once\" must be a boolean")
			}
			d.OnlyOnce = b
		}
		return d, nil
	case "param":
		name, err := str("name")
		return ParamChange{Name: name, Value: payload("value")}, err
	default: // human_response
		d := ""
		if x := v.Get("decision"); !x.IsAbsent() {
			var err error
			if d, err = str("decision"); err != nil {
				return nil, err
			}
		}
		return HumanResponseChange{Decision: d, Data: payload("data")}, nil
	}
}

func parseTarget(v trace.Value) (Target, error) {
	if v.Kind() != trace.Object {
		return Target{}, errors.New("\"target\" must be an object with step, event_id, or name and occurrence")
	}
	if s, ok := v.Get("step").Int(); ok {
		return OnStep(int(s)), nil
	}
	if id, ok := v.Get("event_id").Str(); ok {
		return OnEvent(id), nil
	}
	name, ok := v.Get("name").Str()
	if !ok {
		return Target{}, errors.New("\"target\" must have step, event_id, or name and occurrence")
	}
	occ, _ := v.Get("occurrence").Int()
	return OnCall(name, int(occ)), nil
}

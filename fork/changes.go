package fork

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/valuepath"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// changeError is the error of a change that cannot be applied: the change's
// description, then what is wrong. It matches [ErrInvalidChange].
type changeError struct {
	change string
	msg    string
}

func (e *changeError) Error() string        { return e.change + ": " + e.msg }
func (e *changeError) Is(target error) bool { return target == ErrInvalidChange }

func changeErrf(change, format string, args ...any) *changeError {
	return &changeError{change: change, msg: fmt.Sprintf(format, args...)}
}

// conflictError lists the pairs of changes that write the same thing, one
// line each. It matches [ErrConflict].
type conflictError struct{ lines []string }

func (e *conflictError) Error() string {
	return "conflicting changes:\n  " + strings.Join(e.lines, "\n  ")
}

func (e *conflictError) Is(target error) bool { return target == ErrConflict }

// All is the target of a [Prompt], [Model] or [Temperature] change that
// applies to every model call of the tail.
const All = "*"

// A Change is one thing a counterfactual fork changes about the base run:
// [ToolResult], [LLMResponse], [Prompt], [Model], [Temperature], [State],
// [Decision], [DecisionOnce], [Param], [HumanResponse] or [ChangeFunc].
// Changes are plain values with a stable wire form (snake_case JSON with a
// "kind" discriminator, recorded in the variant's fork.json and read back by
// [Reproduce]), and they are Options, so they are passed to [Run] and
// [Each] directly:
//
//	fork.Run(ctx, base, fork.Failure(), agent, fork.Prompt("decide", "…"), fork.Memoize())
//
// Every change acts on the tail only. Two changes that write the same thing
// are refused before anything runs, naming both. A change whose target
// matches nothing in the tail is reported as unused in [Variant.Changes].
type Change interface {
	Option
	// Describe names the change for people: "prompt of 'write'".
	Describe() string
	// Wire is the change's wire form.
	Wire() trace.Value
	// bind resolves the change against the base run and the fork point;
	// fresh says that its target may be new in the tail (NewInTail).
	bind(ix *index, at Resolved, fresh bool) (*bound, error)
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
	ckCode // CodeFields: writes nothing, explains differences
)

// claimNames are the claim families as conflict messages print them.
var claimNames = [...]string{ckToolResult: "output:tool", ckLLMResponse: "output:llm", ckPrompt: "prompt", ckModel: "model",
	ckTemperature: "temperature", ckState: "state", ckDecision: "decision", ckParam: "param", ckHuman: "human_response", ckCode: "code_fields"}

// claim is one thing a change writes: a kind and what it is keyed by (node
// or model label, tool name, state key, decision, parameter or approval
// name). Output changes also claim an occurrence; every says that the claim
// covers every occurrence (an output of every call of that name) or every
// name (an answer to every approval), and so overlaps the single ones of its
// kind.
type claim struct {
	kind  ckind
	name  string
	occ   int
	every bool
}

// String is the claim as conflict messages print it: "prompt:write",
// "output:tool:search#2", "output:tool:search#*", "human_response:*".
func (c claim) String() string {
	s := claimNames[c.kind] + ":"
	switch {
	case c.kind == ckToolResult || c.kind == ckLLMResponse:
		s += c.name + "#"
		if c.every {
			return s + "*"
		}
		return s + strconv.Itoa(c.occ)
	case c.every:
		return s + "*"
	}
	return s + c.name
}

// overlaps reports whether a claim that covers every occurrence or name of
// its kind (c.every) covers o.
func (c claim) overlaps(o claim) bool {
	if !c.every || c == o || c.kind != o.kind {
		return false
	}
	if c.kind == ckHuman {
		return true
	}
	return c.name == o.name
}

// bound is a change resolved against a base run and a fork point: what it
// matches and the value it applies. The counters are per variant run.
type bound struct {
	change Change
	kind   ckind
	desc   string
	claims []claim

	label string // output changes: tool name or model label; agent changes: target
	occ   int    // output changes: occurrence, 0 for every tail call
	// call is, for an output change aimed at one recorded call, that
	// call's event in the base (0: none, a target new in the tail or
	// every call of a name): it applies to the tail call that stands for
	// that recorded call, whichever goroutine makes it, and when.
	call   int32
	value  trace.Value
	text   string
	temp   float64
	edit   promptEdit // prompt changes
	name   string     // decision, parameter, approval ("" = every approval)
	once   bool
	set    []trace.Member
	delete []string
	paths  []valuepath.Path // code fields

	applied int
	steps   []int // variant steps where it was applied (up to 8)
}

func (b *bound) hit(step int) {
	b.applied++
	if len(b.steps) < 8 {
		b.steps = append(b.steps, step)
	}
}

type targetKind uint8

const (
	targetStep targetKind = iota
	targetEvent
	targetCall
)

// Target addresses a recorded tool or model call: for the output changes
// [ToolResult] and [LLMResponse] of a counterfactual fork, and for the
// [Override]s of a static one. Build it with [OnStep], [OnEvent] or
// [OnCall].
type Target struct {
	kind targetKind
	step int
	id   string
	name string
	occ  int
}

// OnStep targets the call at step n of the base run (the call event or its
// result).
//
// A target that names one recorded call (OnStep, OnEvent, and OnCall with
// an occurrence) is matched in the tail by what identifies that call, never
// by when the call arrives: the change applies to the tail call that stands
// for it, the pending recorded call with the same tool or model and input
// (in a concurrent group, the one its goroutine's history points to, see
// package replay), else the one strict matching would use; only when
// neither is known does the occurrence decide. The substituted result
// replaces that recorded call (it is consumed, as a served call is), so an
// identical call of another goroutine is served its own recorded result.
func OnStep(n int) Target { return Target{kind: targetStep, step: n} }

// OnEvent targets the call with the given event id (the call event or its
// result), matched as [OnStep] says.
func OnEvent(id string) Target { return Target{kind: targetEvent, id: id} }

// OnCall targets call occurrence (1-based; 0 for every call in the tail) of
// the tool name, or of the model label ("provider/model", or the model
// alone). Occurrences count the base run's calls in file order; the call an
// occurrence names is matched as [OnStep] says.
func OnCall(name string, occurrence int) Target {
	return Target{kind: targetCall, name: name, occ: occurrence}
}

// String describes the target ("step 5", "event evt_1", "'search' call 2",
// "every 'search' call").
func (t Target) String() string {
	switch {
	case t.kind == targetStep:
		return "step " + strconv.Itoa(t.step)
	case t.kind == targetEvent:
		return "event " + t.id
	case t.occ == 0:
		return fmt.Sprintf("every '%s' call", t.name)
	}
	return fmt.Sprintf("'%s' call %d", t.name, t.occ)
}

// wire is {"step":…}, {"event_id":…} or {"name":…,"occurrence":…}.
func (t Target) wire() trace.Value {
	switch t.kind {
	case targetStep:
		return obj("step", trace.IntValue(int64(t.step)))
	case targetEvent:
		return obj("event_id", trace.StringValue(t.id))
	}
	return obj("name", trace.StringValue(t.name), "occurrence", trace.IntValue(int64(t.occ)))
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

// obj builds a JSON object from key, value pairs, leaving absent values out.
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

// short is a value's canonical JSON, redacted (a change's description is
// printed), cut to 40 characters.
func short(v trace.Value) string {
	v, _ = trace.RedactValue(v)
	return clip.Head(v.Canonical(), 40)
}

// ---- the wire form ----

// wireFields reads the members of one change's wire form. Each kind's
// parser (next to its type) reads its keys through it, every one
// unconditionally, so the keys a kind accepts are exactly the keys its
// parser reads: parseChange refuses any other.
type wireFields struct {
	v    trace.Value
	kind string
	read []string
	err  error
}

func (f *wireFields) get(k string) trace.Value {
	f.read = append(f.read, k)
	return f.v.Get(k)
}

func (f *wireFields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%s change: "+format, append([]any{f.kind}, args...)...)
	}
}

// str reads a string member; optional ones may be absent ("").
func (f *wireFields) str(k string, optional bool) string {
	x := f.get(k)
	s, ok := x.Str()
	if !ok && !(optional && x.IsAbsent()) {
		f.fail("%q must be a string", k)
	}
	return s
}

// payload reads a JSON value; an absent one is null.
func (f *wireFields) payload(k string) trace.Value {
	p := f.get(k)
	if p.IsAbsent() {
		return trace.NullValue
	}
	return p
}

func (f *wireFields) target() Target {
	t, err := parseTarget(f.get("target"))
	if err != nil {
		f.fail("%v", err)
	}
	return t
}

// changeKinds maps each wire kind to the parser of its type.
var changeKinds = map[string]func(f *wireFields) Change{
	"tool_result":    parseToolResult,
	"llm_response":   parseLLMResponse,
	"prompt":         parsePrompt,
	"prompt_edit":    parsePromptEdit,
	"model":          parseModel,
	"temperature":    parseTemperature,
	"state":          parseState,
	"decision":       parseDecision,
	"param":          parseParam,
	"human_response": parseHumanResponse,
	"code_fields":    parseCodeFields,
}

// wireChanges is the wire form of a list of changes: a JSON array of their
// Wire values.
func wireChanges(changes []Change) trace.Value {
	es := make([]trace.Value, len(changes))
	for i, c := range changes {
		es[i] = c.Wire()
	}
	v, _ := trace.ArrayValue(es...)
	return v
}

// parseChanges reads changes back from their wire form (a JSON array of
// Wire values, as fork.json records them). Unknown kinds and fields are
// refused, naming the entry.
func parseChanges(v trace.Value) ([]Change, error) {
	if v.Kind() != trace.Array {
		return nil, changeErrf("changes", "the wire form is a JSON array of changes, got %s", short(v))
	}
	var out []Change
	for i, e := range v.Elems() {
		c, err := parseChange(e)
		if err != nil {
			return nil, changeErrf(fmt.Sprintf("changes[%d]", i), "%v", err)
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
	parse, ok := changeKinds[kind]
	if !ok {
		return nil, fmt.Errorf("unknown kind %s", short(v.Get("kind")))
	}
	f := &wireFields{v: v, kind: kind, read: []string{"kind", "new_in_tail"}}
	c := parse(f)
	if n := v.Get("new_in_tail"); !n.IsAbsent() {
		if b, ok := n.BoolOf(); !ok {
			f.fail("%q must be a boolean", "new_in_tail")
		} else if b {
			c = NewInTail(c)
		}
	}
	for k := range v.Members() {
		if !slices.Contains(f.read, k) {
			return nil, fmt.Errorf("%s change has no field %q", kind, k)
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	return c, nil
}

// addChange is what every change does as an Option of Run and Each.
func addChange(cfg *config, c Change) { cfg.changes = append(cfg.changes, c) }

// ---- output substitutions ----

// outputChange substitutes what a tool call (ToolResult) or a model call
// (LLMResponse) of the tail returns.
type outputChange struct {
	llm    bool
	target Target
	output trace.Value
	err    error
}

// ToolResult substitutes output (a [trace.Value], or anything
// [trace.ValueOf] accepts) for what the targeted tool call of the tail
// returns: the call is served output without executing, and without the
// side-effect guard, since nothing touches the world, in place of the
// recorded call it stands for (see [OnStep] for how a target is matched).
func ToolResult(target Target, output any) Change {
	v, err := toValue(output)
	return outputChange{target: target, output: v, err: err}
}

// LLMResponse substitutes output for what the targeted model call of the
// tail returns (the llm_response output, e.g. a [replay.Response] as JSON
// for [replay.LLM]): the call is served output without calling the model.
func LLMResponse(target Target, output any) Change {
	v, err := toValue(output)
	return outputChange{llm: true, target: target, output: v, err: err}
}

func (c outputChange) applyRun(cfg *config)  { addChange(cfg, c) }
func (c outputChange) applyEach(cfg *config) { addChange(cfg, c) }

func (c outputChange) wireKind() string {
	if c.llm {
		return "llm_response"
	}
	return "tool_result"
}

// Describe is "tool result of step 5" or "model response of 'openai/gpt-4o' call 1".
func (c outputChange) Describe() string {
	if c.llm {
		return "model response of " + c.target.String()
	}
	return "tool result of " + c.target.String()
}

// Wire is {"kind":"tool_result"|"llm_response","target":{…},"output":…}.
func (c outputChange) Wire() trace.Value {
	return obj("kind", trace.StringValue(c.wireKind()), "target", c.target.wire(), "output", c.output)
}

func parseToolResult(f *wireFields) Change {
	return outputChange{target: f.target(), output: f.payload("output")}
}

func parseLLMResponse(f *wireFields) Change {
	return outputChange{llm: true, target: f.target(), output: f.payload("output")}
}

func (c outputChange) bind(ix *index, at Resolved, fresh bool) (*bound, error) {
	desc := c.Describe()
	fail := func(format string, args ...any) (*bound, error) { return nil, changeErrf(desc, format, args...) }
	if c.err != nil {
		return fail("the output cannot be recorded: %v", c.err)
	}
	ck, what, callType, resultType := ckToolResult, "tool", trace.ToolCall, trace.ToolResult
	if c.llm {
		ck, what, callType, resultType = ckLLMResponse, "model", trace.LLMRequest, trace.LLMResponse
	}
	b := &bound{change: c, kind: ck, value: c.output}
	t := c.target
	evs := ix.tr.Events
	i := -1
	switch t.kind {
	case targetStep:
		for j := range evs {
			if evs[j].Step == t.step {
				i = j
				break
			}
		}
		if i < 0 {
			return fail("no event at step %d in the base run", t.step)
		}
	case targetEvent:
		j, ok := ix.ids.Lookup(t.id)
		if !ok {
			return fail("no event '%s' in the base run", t.id)
		}
		i = int(j)
	default:
		if t.name == "" {
			return fail("the target names no call: give fork.OnCall a tool name or a model label")
		}
		if t.occ < 0 {
			return fail("occurrence %d does not exist: occurrences are 1-based (0 for every call of the tail)", t.occ)
		}
		if !fresh {
			if err := ix.callOccurs(ck, t, at); err != nil {
				return fail("%v", err)
			}
		}
		b.label, b.occ, b.desc = t.name, t.occ, desc
		b.claims = []claim{{kind: ck, name: t.name, occ: t.occ, every: t.occ == 0}}
		if !fresh && t.occ > 0 {
			kind := replay.KindTool
			if c.llm {
				kind = replay.KindLLM
			}
			b.call = ix.calls[callKey(kind, t.name)][t.occ-1]
		}
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
	b.call = int32(call)
	b.desc = fmt.Sprintf("%s of '%s' call %d (step %d)", strings.TrimSuffix(desc, " of "+t.String()), b.label, b.occ, evs[call].Step)
	b.claims = []claim{{kind: ck, name: b.label, occ: b.occ}}
	return b, nil
}

// ---- agent changes: prompt, model, temperature ----

// requestChange patches the requests of the tail's model calls that match
// its target (a node name, a model label or model, or All): the system
// prompt (Prompt), the model (Model) or the temperature (Temperature).
type requestChange struct {
	kind    ckind // ckPrompt, ckModel or ckTemperature
	target  string
	text    string // the prompt (or the text a prompt edit adds) or the model
	temp    float64
	op      promptOp // prompt changes: replace the prompt, or edit it
	passage string   // PromptReplace: the passage replaced
}

// Prompt replaces the system prompt of the matching model calls of the tail.
//
// The request is patched, not the agent, in the field its API reads: for
// [replay.LLM]'s request the "system" field; for the bodies of
// [replay.Transport] and [replay.LLMRaw], an Anthropic "system" (a string,
// or a block array whose first text block takes the prompt, its
// cache_control kept), the first system or developer message of an OpenAI
// chat "messages" list (one with role system is prepended when there is
// none), an OpenAI Responses "instructions" (or the system or developer
// item of its "input"), or Gemini's systemInstruction parts. A call made
// inside node target, with the model label or model target, or any call
// for [All], matches; when several prompt changes match one call, the
// node's wins over the label's, which wins over All. To edit the shipped
// prompt instead of restating it, use [PromptAppend], [PromptPrepend] or
// [PromptReplace].
func Prompt(target, text string) Change {
	return requestChange{kind: ckPrompt, target: target, text: text}
}

// PromptAppend adds text at the end of the system prompt of the matching
// model calls of the tail, as it is written (add the space or newline that
// separates it yourself). Where it lands and which calls match is as for
// [Prompt]; a request without a prompt gets text as its prompt.
//
//	fork.PromptAppend("decide", "\nRefunds above the limit need approval.")
func PromptAppend(target, text string) Change {
	return requestChange{kind: ckPrompt, target: target, text: text, op: promptAppend}
}

// PromptPrepend adds text at the start of the system prompt of the
// matching model calls of the tail; otherwise as [PromptAppend].
func PromptPrepend(target, text string) Change {
	return requestChange{kind: ckPrompt, target: target, text: text, op: promptPrepend}
}

// PromptReplace replaces every occurrence of passage in the system prompt
// of the matching model calls of the tail with text. A call whose prompt
// does not contain passage is left as it is, and a change that finds the
// passage nowhere is reported unused.
func PromptReplace(target, passage, text string) Change {
	return requestChange{kind: ckPrompt, target: target, text: text, op: promptReplace, passage: passage}
}

// Model makes the matching model calls of the tail use model (the call's
// model, and the "model" field of a raw body). Targets match as for
// [Prompt].
func Model(target, model string) Change {
	return requestChange{kind: ckModel, target: target, text: model}
}

// Temperature sets the sampling temperature of the matching model calls'
// requests (0 ≤ t ≤ 2) where the API reads it: the top-level
// "temperature", Gemini's generationConfig.temperature, or the
// config.temperature of a Genkit model request (contrib/genkit). Targets
// match as for [Prompt].
func Temperature(target string, t float64) Change {
	return requestChange{kind: ckTemperature, target: target, temp: t}
}

func (c requestChange) applyRun(cfg *config)  { addChange(cfg, c) }
func (c requestChange) applyEach(cfg *config) { addChange(cfg, c) }

// Describe is "prompt of 'write'", "model of 'write' → gpt-4o" or
// "temperature of 'write' → 0.7".
func (c requestChange) Describe() string {
	switch c.kind {
	case ckPrompt:
		switch c.op {
		case promptAppend:
			return fmt.Sprintf("prompt of '%s' (appended to)", c.target)
		case promptPrepend:
			return fmt.Sprintf("prompt of '%s' (prepended to)", c.target)
		case promptReplace:
			return fmt.Sprintf("prompt of '%s' (a passage replaced)", c.target)
		}
		return fmt.Sprintf("prompt of '%s'", c.target)
	case ckModel:
		model, _ := trace.RedactString(c.text)
		return fmt.Sprintf("model of '%s' → %s", c.target, model)
	}
	return fmt.Sprintf("temperature of '%s' → %s", c.target, strconv.FormatFloat(c.temp, 'g', -1, 64))
}

// Wire is {"kind":"prompt","target":…,"system_prompt":…},
// {"kind":"prompt_edit","target":…,"op":"append"|"prepend","text":…},
// {"kind":"prompt_edit","target":…,"op":"replace","passage":…,"text":…},
// {"kind":"model","target":…,"model":…} or
// {"kind":"temperature","target":…,"temperature":…}.
func (c requestChange) Wire() trace.Value {
	target := trace.StringValue(c.target)
	switch c.kind {
	case ckPrompt:
		switch c.op {
		case promptAppend, promptPrepend:
			return obj("kind", trace.StringValue("prompt_edit"), "target", target, "op", trace.StringValue(promptOps[c.op]), "text", trace.StringValue(c.text))
		case promptReplace:
			return obj("kind", trace.StringValue("prompt_edit"), "target", target, "op", trace.StringValue(promptOps[c.op]),
				"passage", trace.StringValue(c.passage), "text", trace.StringValue(c.text))
		}
		return obj("kind", trace.StringValue("prompt"), "target", target, "system_prompt", trace.StringValue(c.text))
	case ckModel:
		return obj("kind", trace.StringValue("model"), "target", target, "model", trace.StringValue(c.text))
	}
	t, err := trace.FloatValue(c.temp)
	if err != nil {
		t = trace.NullValue
	}
	return obj("kind", trace.StringValue("temperature"), "target", target, "temperature", t)
}

func parsePrompt(f *wireFields) Change {
	return requestChange{kind: ckPrompt, target: f.str("target", false), text: f.str("system_prompt", false)}
}

// promptOps are the wire names of the prompt edits.
var promptOps = [...]string{promptAppend: "append", promptPrepend: "prepend", promptReplace: "replace"}

func parsePromptEdit(f *wireFields) Change {
	c := requestChange{kind: ckPrompt, target: f.str("target", false), text: f.str("text", false)}
	op := f.str("op", false)
	switch op {
	case "append":
		c.op = promptAppend
	case "prepend":
		c.op = promptPrepend
	case "replace":
		c.op = promptReplace
	default:
		f.fail("%q must be \"append\", \"prepend\" or \"replace\", got %q", "op", op)
	}
	c.passage = f.str("passage", c.op != promptReplace)
	if c.op != promptReplace && c.passage != "" {
		f.fail("%q belongs to op \"replace\" only", "passage")
	}
	return c
}

func parseModel(f *wireFields) Change {
	return requestChange{kind: ckModel, target: f.str("target", false), text: f.str("model", false)}
}

func parseTemperature(f *wireFields) Change {
	c := requestChange{kind: ckTemperature, target: f.str("target", false)}
	t, ok := f.get("temperature").Float()
	if !ok {
		f.fail("%q must be a number", "temperature")
	}
	c.temp = t
	return c
}

func (c requestChange) bind(ix *index, _ Resolved, fresh bool) (*bound, error) {
	switch {
	case c.target == "":
		return nil, changeErrf(c.Describe(), "the target is empty: name a node, a model, or fork.All")
	case c.kind == ckModel && c.text == "":
		return nil, changeErrf(c.Describe(), "the model is empty")
	case c.kind == ckTemperature && (math.IsNaN(c.temp) || c.temp < 0 || c.temp > 2):
		return nil, changeErrf(c.Describe(), "a temperature is between 0 and 2")
	case c.kind == ckPrompt && c.op == promptReplace && c.passage == "":
		return nil, changeErrf(c.Describe(), "the passage to replace is empty")
	case !fresh && c.target != All && len(ix.nodes[c.target]) == 0 && len(ix.calls[callKey(replay.KindLLM, c.target)]) == 0:
		return nil, changeErrf(c.Describe(), "no node or model '%s' in the base run. Nodes that ran: %s; models called: %s. If the changed tail reaches it for the first time, wrap the change in fork.NewInTail.",
			c.target, nameList(ix.nodeOrder), nameList(ix.modelNames()))
	}
	return &bound{change: c, kind: c.kind, desc: c.Describe(), label: c.target, text: c.text, temp: c.temp,
		edit:   promptEdit{op: c.op, text: c.text, passage: c.passage},
		claims: []claim{{kind: c.kind, name: c.target}}}, nil
}

// ---- state, decisions, parameters, approvals ----

// State patches the state the agent reads in the tail: the first
// [replay.Read] of a key in Set (at or after the fork point) returns the
// new value, and of a key in Delete returns the zero value with the key
// deleted; each is recorded as a state_change. Later reads of the key
// return the patched value too until the agent writes the key, so
// goroutines that read it concurrently all see it. Values are [trace.Value]s or
// anything [trace.ValueOf] accepts.
//
// A State must set or delete at least one key: State{} changes nothing and
// is refused with an error matching [ErrInvalidChange], as is a key both
// set and deleted. A variant of a sweep that changes nothing (a control) is
// a [Named] with no Changes.
type State struct {
	Set    map[string]any
	Delete []string
}

func (c State) applyRun(cfg *config)  { addChange(cfg, c) }
func (c State) applyEach(cfg *config) { addChange(cfg, c) }

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

func parseState(f *wireFields) Change {
	var s State
	if set := f.get("set"); !set.IsAbsent() {
		if set.Kind() != trace.Object {
			f.fail("%q must be an object", "set")
		}
		s.Set = map[string]any{}
		for k, x := range set.Members() {
			s.Set[k] = x
		}
	}
	if del := f.get("delete"); !del.IsAbsent() {
		if del.Kind() != trace.Array {
			f.fail("%q must be an array of keys", "delete")
		}
		for _, k := range del.Elems() {
			ks, ok := k.Str()
			if !ok {
				f.fail("%q must be an array of keys", "delete")
			}
			s.Delete = append(s.Delete, ks)
		}
	}
	return s
}

func (c State) bind(*index, Resolved, bool) (*bound, error) {
	b := &bound{change: c, kind: ckState, desc: c.Describe()}
	fail := func(format string, args ...any) (*bound, error) { return nil, changeErrf(b.desc, format, args...) }
	for _, k := range c.keys() {
		if k == "" || strings.HasPrefix(k, "@") {
			return fail("state key %q is not allowed: keys are non-empty and do not start with '@'", k)
		}
		v, err := toValue(c.Set[k])
		if err != nil {
			return fail("the value of '%s' cannot be recorded: %v", k, err)
		}
		b.set = append(b.set, trace.Member{Key: k, Value: v})
		b.claims = append(b.claims, claim{kind: ckState, name: k})
	}
	for _, k := range c.Delete {
		if _, both := c.Set[k]; both {
			return fail("'%s' is both set and deleted; keep one", k)
		}
		if k == "" || strings.HasPrefix(k, "@") {
			return fail("state key %q is not allowed: keys are non-empty and do not start with '@'", k)
		}
		b.delete = append(b.delete, k)
		b.claims = append(b.claims, claim{kind: ckState, name: k})
	}
	if len(b.claims) == 0 {
		return fail("it sets and deletes nothing; a variant that changes nothing (a sweep's control) is written with no change at all: fork.Named{Name: \"control\"}")
	}
	return b, nil
}

// valueChange gives a named runtime value of the tail: a decision
// (Decision, DecisionOnce), a parameter (Param) or an approval's answer
// (HumanResponse).
type valueChange struct {
	kind  ckind // ckDecision, ckParam or ckHuman
	name  string
	value trace.Value
	once  bool
	err   error
}

func newValueChange(kind ckind, name string, value any, once bool) valueChange {
	v, err := toValue(value)
	return valueChange{kind: kind, name: name, value: v, once: once, err: err}
}

// Decision forces every [replay.Decide] of name in the tail to return value
// (recorded with "forced":true). [DecisionOnce] forces only the first.
func Decision(name string, value any) Change { return newValueChange(ckDecision, name, value, false) }

// DecisionOnce forces the first [replay.Decide] of name in the tail to
// return value; later ones are made by the agent.
func DecisionOnce(name string, value any) Change {
	return newValueChange(ckDecision, name, value, true)
}

// Param makes every [replay.Param] of name in the tail return value.
func Param(name string, value any) Change { return newValueChange(ckParam, name, value, false) }

// HumanResponse answers every [replay.Approve] of the approval named
// approval in the tail (the name the agent passes to replay.Approve; ""
// answers every approval) with answer, which the approval returns as if a
// person had given it. Without it, an approval of the tail is served the
// base run's recorded answer when there is one, and is blocked otherwise.
func HumanResponse(approval string, answer any) Change {
	return newValueChange(ckHuman, approval, answer, false)
}

func (c valueChange) applyRun(cfg *config)  { addChange(cfg, c) }
func (c valueChange) applyEach(cfg *config) { addChange(cfg, c) }

// Describe is `decision 'route' → "premium"` (with ", once" for
// DecisionOnce), "param 'max_results' → 5" or "human response to 'refund'
// → true".
func (c valueChange) Describe() string {
	switch c.kind {
	case ckDecision:
		d := fmt.Sprintf("decision '%s' → %s", c.name, short(c.value))
		if c.once {
			d += ", once"
		}
		return d
	case ckParam:
		return fmt.Sprintf("param '%s' → %s", c.name, short(c.value))
	}
	if c.name == "" {
		return "human response to every approval → " + short(c.value)
	}
	return fmt.Sprintf("human response to '%s' → %s", c.name, short(c.value))
}

// Wire is {"kind":"decision","name":…,"value":…} (with "once":true for
// DecisionOnce), {"kind":"param","name":…,"value":…} or
// {"kind":"human_response","decision":…,"data":…}.
func (c valueChange) Wire() trace.Value {
	name := trace.StringValue(c.name)
	switch c.kind {
	case ckDecision:
		var once trace.Value
		if c.once {
			once = trace.TrueValue
		}
		return obj("kind", trace.StringValue("decision"), "name", name, "value", c.value, "once", once)
	case ckParam:
		return obj("kind", trace.StringValue("param"), "name", name, "value", c.value)
	}
	return obj("kind", trace.StringValue("human_response"), "decision", name, "data", c.value)
}

func parseDecision(f *wireFields) Change {
	c := valueChange{kind: ckDecision, name: f.str("name", false), value: f.payload("value")}
	if o := f.get("once"); !o.IsAbsent() {
		b, ok := o.BoolOf()
		if !ok {
			f.fail("%q must be a boolean", "once")
		}
		c.once = b
	}
	return c
}

func parseParam(f *wireFields) Change {
	return valueChange{kind: ckParam, name: f.str("name", false), value: f.payload("value")}
}

func parseHumanResponse(f *wireFields) Change {
	return valueChange{kind: ckHuman, name: f.str("decision", true), value: f.payload("data")}
}

func (c valueChange) bind(*index, Resolved, bool) (*bound, error) {
	what := map[ckind]string{ckDecision: "value", ckParam: "value", ckHuman: "data"}[c.kind]
	switch {
	case c.kind == ckDecision && c.name == "":
		return nil, changeErrf(c.Describe(), "the decision name is empty")
	case c.kind == ckParam && c.name == "":
		return nil, changeErrf(c.Describe(), "the parameter name is empty")
	case c.err != nil:
		return nil, changeErrf(c.Describe(), "the %s cannot be recorded: %v", what, c.err)
	}
	return &bound{change: c, kind: c.kind, desc: c.Describe(), name: c.name, value: c.value, once: c.once,
		claims: []claim{{kind: c.kind, name: c.name, every: c.kind == ckHuman && c.name == ""}}}, nil
}

// ---- targets new in the tail ----

// newInTail is a change whose target the base run may never have reached.
type newInTail struct{ c Change }

// NewInTail marks c's target as new in the tail: a node, model or call that
// the changed tail may reach although the base run never did. Without it,
// a change whose target the base run never reached (a node or model name
// that matches no call, an [OnCall] of a name never called or of an
// occurrence past the calls made) is refused before anything runs, naming
// what the run offers instead, so that a misspelt target surfaces before a
// variant costs anything.
func NewInTail(c Change) Change { return newInTail{c} }

func (c newInTail) applyRun(cfg *config)  { addChange(cfg, c) }
func (c newInTail) applyEach(cfg *config) { addChange(cfg, c) }

// Describe is the change's own description.
func (c newInTail) Describe() string {
	if c.c == nil {
		return "a change new in the tail"
	}
	return c.c.Describe()
}

// Wire is the change's own wire form with "new_in_tail":true.
func (c newInTail) Wire() trace.Value {
	if c.c == nil {
		return obj("kind", trace.StringValue("function"), "new_in_tail", trace.TrueValue)
	}
	w := c.c.Wire()
	ms := []trace.Member{{Key: "new_in_tail", Value: trace.TrueValue}}
	for k, v := range w.Members() {
		ms = append(ms, trace.Member{Key: k, Value: v})
	}
	o, _ := trace.ObjectValue(ms...)
	return o
}

func (c newInTail) bind(ix *index, at Resolved, _ bool) (*bound, error) {
	switch c.c.(type) {
	case nil:
		return nil, changeErrf(c.Describe(), "fork.NewInTail was given no change")
	case newInTail:
		return nil, changeErrf(c.Describe(), "the change is marked NewInTail twice")
	}
	b, err := c.c.bind(ix, at, true)
	if b != nil {
		b.change = c
	}
	return b, err
}

// callOccurs checks that the base run made the call t names (kind ck):
// some call of that name, at least t.occ of them, and the one t.occ names
// not in the served prefix.
func (ix *index) callOccurs(ck ckind, t Target, at Resolved) error {
	kind, what, plural := replay.KindTool, "tool", "Tools"
	if ck == ckLLMResponse {
		kind, what, plural = replay.KindLLM, "model", "Models"
	}
	list := ix.calls[callKey(kind, t.name)]
	switch {
	case len(list) == 0:
		return fmt.Errorf("the base run made no %s call '%s'. %s it called: %s. If the changed tail makes it for the first time, wrap the change in fork.NewInTail.",
			what, t.name, plural, nameList(ix.callOrder[kind]))
	case t.occ > len(list):
		return fmt.Errorf("the base run made %d %s call(s) '%s', so there is no call %d. If the changed tail makes more, wrap the change in fork.NewInTail.",
			len(list), what, t.name, t.occ)
	case t.occ > 0 && int(list[t.occ-1]) < at.pos:
		step := ix.tr.Events[list[t.occ-1]].Step
		return fmt.Errorf("'%s' call %d (step %d) is in the served prefix (the fork starts at step %d), and a change only acts on the tail. Fork at or before it (fork.Step(%d)) to change it.",
			t.name, t.occ, step, at.Step, step)
	}
	return nil
}

// modelNames lists the model labels and models the base run called, sorted.
func (ix *index) modelNames() []string {
	var names []string
	prefix := callKey(replay.KindLLM, "")
	for k := range ix.calls {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
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

func (c changeFunc) applyRun(cfg *config)  { addChange(cfg, c) }
func (c changeFunc) applyEach(cfg *config) { addChange(cfg, c) }

// Describe is "a change computed from the fork point".
func (c changeFunc) Describe() string { return "a change computed from the fork point" }

// Wire is {"kind":"function"}: the variant records the change it returned.
func (c changeFunc) Wire() trace.Value { return obj("kind", trace.StringValue("function")) }

func (c changeFunc) bind(ix *index, at Resolved, fresh bool) (*bound, error) {
	if c.f == nil {
		return nil, changeErrf(c.Describe(), "the function is nil")
	}
	got := c.f(at)
	if got == nil {
		return nil, changeErrf(c.Describe(), "the function returned no change for %s", at)
	}
	if _, nested := got.(changeFunc); nested {
		return nil, changeErrf(c.Describe(), "the function returned another ChangeFunc")
	}
	return got.bind(ix, at, fresh)
}

// bindAll binds changes and refuses conflicts, naming both changes of each.
func bindAll(ix *index, at Resolved, changes []Change) ([]*bound, error) {
	out := make([]*bound, 0, len(changes))
	var errs []error
	for _, c := range changes {
		b, err := c.bind(ix, at, false)
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

// conflicts refuses two changes with the same claim, and a claim on every
// occurrence (or every approval) beside a claim on one of them.
func conflicts(bs []*bound) error {
	owner := map[claim]*bound{}
	var lines []string
	report := func(a, b *bound, c claim) {
		lines = append(lines, fmt.Sprintf("%s and %s both write %s. Drop one — a fork applies changes by kind, not in order, so which would win is not defined.",
			a.desc, b.desc, c))
	}
	for _, b := range bs {
		for _, c := range b.claims {
			if a, ok := owner[c]; ok {
				report(a, b, c)
				continue
			}
			owner[c] = b
		}
	}
	for bi, b := range bs {
		for _, c := range b.claims {
			for ai, a := range bs {
				if ai == bi {
					continue
				}
				for _, ac := range a.claims {
					if c.overlaps(ac) {
						if ai < bi {
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
		return &conflictError{lines: lines}
	}
	return nil
}

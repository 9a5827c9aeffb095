package trace

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// StepType is the kind of a behavior step.
type StepType string

// Behavior step types. The first five are stepfork's; decisions, parameters
// and nodes come from runtime markers.
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
// A tool or model step holds its call's input and what answered it, as
// [Trace.Calls] pairs them (output null and status skipped when nothing
// did). Ids, run ids, timestamps, durations, hashes, tokens and costs are not
// part of a step.
//
// The output of a model call (or "http" tool call) recorded by
// replay.Transport, an object with an integer "status" and a "headers"
// object, is compared without its headers and its "ids" (which change on
// every call); when it holds the "message" the response says, only status,
// message, body_error and closed_early are compared: the raw body or
// stream, with its response ids, created times and fingerprints, is not
// behavior.
//
// The usage a model reports is cost, not behavior: in the output of a
// model call, wherever it is, a member named "usage", "usage_metadata" or
// "usageMetadata" that is null or holds token counts (an object with a
// number under a key containing "token", in any case: "prompt_tokens",
// "inputTokens", "promptTokenCount") is left out, and so is one in its
// input (where an adapter's conversation repeats the usage of earlier
// answers). So a model that answers the same thing with more of its prompt
// cached has not behaved differently; its tokens and cost are the events'
// own fields, which package diff reports as deltas.
// ([Trace.StepforkBehavior], stepfork's extraction, keeps them.)
type BehaviorStep struct {
	Index    int      // position among the run's behavior steps
	Type     StepType // tool, llm, state, …
	Label    string   // tool name, provider/model, state key, error type, "run", or the marker's name
	EventID  string   // the event the step comes from (the call; the entering marker of a node)
	Step     int      // that event's step number
	ResultID string   // tool and llm steps: the paired result, response or error event ("" if none)
	// ResultStep is the step number of the ResultID event: a call is made
	// at Step and answered at ResultStep (steps 10 and 11 for a tool_call at
	// step 10 whose tool_result is at step 11). It is Step when nothing
	// answered the call, and for steps of other types.
	ResultStep int
	Payload    Value // a JSON object, see above
}

// Where names the step's events by their step numbers, as the run's
// events, the CLI's --at-step and --override, and fork.Step count them:
// "step 7" for a step of one event, "steps 10–11" for a call made at step
// 10 and answered at step 11.
func (s *BehaviorStep) Where() string {
	if s.ResultStep > s.Step {
		return "steps " + strconv.Itoa(s.Step) + "–" + strconv.Itoa(s.ResultStep)
	}
	return "step " + strconv.Itoa(s.Step)
}

// ---- extraction ----

// Behavior returns the behavior steps of the run, in the order of the events
// they come from: one per tool call, model call, plain state change, error
// and run end, as stepfork's diff extracts them, and one per decision,
// parameter read and entered node (whose payload holds the status the node
// exited with). @now, @id and @effect markers are left out: they record
// nondeterminism whose consequences show in the steps that follow.
//
// The steps are computed on each call and are the caller's own.
func (t *Trace) Behavior() []BehaviorStep {
	return behaviorOf(t.Events, t.Calls(), t.Nodes(), false)
}

// StepforkBehavior returns the behavior steps as stepfork's diff_traces
// extracts them, which a positional diff compares: one per tool call, model
// call, state change (runtime markers included, as the state changes they
// are in the file), error and run end, in event order, with payloads as
// [BehaviorStep] describes them except that the usage in a model call's
// output is kept.
//
// The steps are computed on each call and are the caller's own.
func (t *Trace) StepforkBehavior() []BehaviorStep {
	steps := behaviorOf(t.Events, t.Calls(), t.Nodes(), true)
	// The steps of calls, plain state changes, errors and run ends are the
	// same in both extractions and come in event order; markers become
	// state steps where they occur.
	out := make([]BehaviorStep, 0, len(steps))
	next := 0
	for i := range t.Events {
		ev := &t.Events[i]
		switch ev.Type {
		case StateChange:
			if !ev.IsMarker() {
				break
			}
			out = append(out, BehaviorStep{Index: len(out), Type: StepState, Label: ev.Key,
				EventID: ev.ID, Step: ev.Step, ResultStep: ev.Step, Payload: object2("after", sanitize(ev.After), "before", sanitize(ev.Before))})
			continue
		case ToolCall, LLMRequest, ErrorEvent, RunEnd:
		default:
			continue
		}
		for next < len(steps) && isMarkerStep(steps[next].Type) {
			next++
		}
		s := steps[next]
		next++
		s.Index = len(out)
		out = append(out, s)
	}
	return out
}

func isMarkerStep(t StepType) bool {
	return t == StepDecision || t == StepParam || t == StepNode
}

// behaviorOf returns the behavior steps of the events evs, whose calls and
// nodes are given; withUsage keeps the usage of model outputs (stepfork's
// extraction).
func behaviorOf(evs []Event, calls []Call, nodes []Node, withUsage bool) []BehaviorStep {
	steps, _ := behaviorFrom(evs, 0, 0, calls, nodes, withUsage, false)
	return steps
}

// behaviorFrom returns the behavior steps of the events evs[from:] (their
// calls and nodes those of all of evs, so a call is answered, and a node
// ended, as in the whole run), numbered from index0: the steps of
// behaviorOf that come from evs[from:], when index0 is the number of steps
// before them. With events set it also returns, for each step, the index
// of the event it comes from.
func behaviorFrom(evs []Event, from, index0 int, calls []Call, nodes []Node, withUsage, events bool) ([]BehaviorStep, []int32) {
	// Calls are in event order, nodes in the order of their first marker.
	nextCall, _ := slices.BinarySearchFunc(calls, from, func(c Call, i int) int { return cmp.Compare(c.Event, i) })
	nextNode, _ := slices.BinarySearchFunc(nodes, from, func(n Node, i int) int { return cmp.Compare(n.first(), i) })
	steps := make([]BehaviorStep, 0, stepCount(evs[from:], len(calls)-nextCall, len(nodes)-nextNode))
	var at []int32 // with events: the event of each step
	cur := from    // the event being read
	if events {
		at = make([]int32, 0, cap(steps))
	}
	add := func(ev *Event, t StepType, label string, payload Value) *BehaviorStep {
		steps = append(steps, BehaviorStep{Index: index0 + len(steps), Type: t, Label: label, EventID: ev.ID, Step: ev.Step, ResultStep: ev.Step, Payload: payload})
		if events {
			at = append(at, int32(cur))
		}
		return &steps[len(steps)-1]
	}
	for i := from; i < len(evs); i++ {
		ev := &evs[i]
		cur = i
		switch ev.Type {
		case ToolCall, LLMRequest:
			c := &calls[nextCall]
			nextCall++
			t := StepTool
			if ev.Type == LLMRequest {
				t = StepLLM
			}
			answer := -1
			switch {
			case c.Result >= 0:
				answer = c.Result
			case c.Failure >= 0:
				answer = c.Failure
			}
			s := add(ev, t, c.Label, callStepPayload(t, ev.Name, ev.Input, c.Output, c.Status, withUsage))
			if answer >= 0 {
				s.ResultID, s.ResultStep = evs[answer].ID, evs[answer].Step
			}
		case StateChange:
			if ev.IsMarker() {
				if ev.Key == MarkerNode {
					// A node is one step, where it was entered (or where an
					// exit that closes nothing is), with the status it exited
					// with.
					if nextNode < len(nodes) && (nodes[nextNode].Enter == i || (nodes[nextNode].Enter < 0 && nodes[nextNode].Exit == i)) {
						n := &nodes[nextNode]
						nextNode++
						payload := object1("status", NullValue)
						if n.Exit >= 0 {
							m, _ := evs[n.Exit].Marker()
							payload = nodeExitPayload(m)
						}
						add(ev, StepNode, n.Name, payload)
					}
					break
				}
				m, _ := ev.Marker()
				switch m.Key {
				case MarkerDecision:
					add(ev, StepDecision, m.Name, object2("kind", optString(m.Kind), "value", sanitize(m.Value)))
				case MarkerParam:
					add(ev, StepParam, m.Name, object1("value", sanitize(m.Value)))
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
	return steps, at
}

// stepCount is how many steps behaviorFrom makes of evs, whose calls and
// nodes number calls and nodes: one per call and node, and one per plain
// state change, decision, parameter, error and run end. The steps are
// allocated at once (half the events, the guess it replaces, was short by
// a fifth for a run of nodes that each call a tool and write the state,
// whose steps were copied to a larger array on the way).
func stepCount(evs []Event, calls, nodes int) int {
	n := calls + nodes
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case StateChange:
			switch {
			case !strings.HasPrefix(ev.Key, "@"):
				n++
			case ev.Key == MarkerDecision || ev.Key == MarkerParam:
				n++
			}
		case ErrorEvent, RunEnd:
			n++
		}
	}
	return n
}

// first is the index of the node's first marker.
func (n *Node) first() int {
	if n.Enter >= 0 {
		return n.Enter
	}
	return n.Exit
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

// callStepPayload is the payload of the step of a call of type t (the
// tool's name, or "" for a model call) with its input and its output
// (Call.Output) and status; withUsage keeps the usage in a model's output.
func callStepPayload(t StepType, name string, input, output Value, status Status, withUsage bool) Value {
	if t == StepLLM || name == "http" {
		output = httpBehavior(output)
	}
	if t == StepLLM && !withUsage {
		input, output = withoutUsage(input), withoutUsage(output)
	}
	return callPayload(input, output, string(status))
}

// withoutUsage is a model's output without the usage it reports (see
// BehaviorStep): every member named usage, usage_metadata or usageMetadata
// that is null or holds token counts, at any depth, is left out.
func withoutUsage(v Value) Value {
	if k := v.Kind(); k != Object && k != Array || !strings.Contains(v.raw, `"usage`) {
		return v
	}
	out, _ := dropUsage(v)
	return out
}

// dropUsage is withoutUsage's walk; it reports whether it left anything
// out.
func dropUsage(v Value) (Value, bool) {
	// A value whose text has no `"usage` has no such member at any depth
	// (in canonical form the keys are written as they are): most of a
	// model's output is left unwalked.
	if !strings.Contains(v.raw, `"usage`) {
		return v, false
	}
	switch v.Kind() {
	case Object:
		var ms []Member
		changed := false
		for k, e := range v.Members() {
			if isUsage(k, e) {
				changed = true
				continue
			}
			r, c := dropUsage(e)
			ms, changed = append(ms, Member{Key: k, Value: r}), changed || c
		}
		if changed {
			if out, err := ObjectValue(ms...); err == nil {
				return out, true
			}
		}
	case Array:
		var es []Value
		changed := false
		for _, e := range v.Elems() {
			r, c := dropUsage(e)
			es, changed = append(es, r), changed || c
		}
		if changed {
			if out, err := ArrayValue(es...); err == nil {
				return out, true
			}
		}
	}
	return v, false
}

// isUsage reports whether the member k: v of a model's output is the usage
// it reports: named usage, usage_metadata or usageMetadata, and null or an
// object holding a number under a key that contains "token" in any case.
func isUsage(k string, v Value) bool {
	switch k {
	case "usage", "usage_metadata", "usageMetadata":
	default:
		return false
	}
	if v.IsNull() {
		return true
	}
	if v.Kind() != Object {
		return false
	}
	for mk, mv := range v.Members() {
		if k := mv.Kind(); (k == Int || k == Float) && strings.Contains(strings.ToLower(mk), "token") {
			return true
		}
	}
	return false
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
// order; values are never absent. The keys are plain identifiers: they are
// written as they are, in one allocation.
func object1(k string, v Value) Value {
	b := make([]byte, 0, len(k)+len(v.raw)+5)
	b = append(append(append(b, `{"`...), k...), `":`...)
	b = append(b, v.raw...)
	return Value{owned(append(b, '}'))}
}

func object2(k1 string, v1 Value, k2 string, v2 Value) Value {
	b := make([]byte, 0, len(k1)+len(v1.raw)+len(k2)+len(v2.raw)+9)
	b = append(append(append(b, `{"`...), k1...), `":`...)
	b = append(b, v1.raw...)
	b = append(append(append(b, `,"`...), k2...), `":`...)
	b = append(b, v2.raw...)
	return Value{owned(append(b, '}'))}
}

// httpBehavior is the behavior of an output recorded by replay.Transport
// (see BehaviorStep); any other output is itself.
func httpBehavior(out Value) Value {
	if out.Kind() != Object {
		return out
	}
	if _, ok := out.Get("status").Int(); !ok || out.Get("headers").Kind() != Object {
		return out
	}
	msg := !out.Get("message").IsAbsent()
	ms := make([]Member, 0, 4)
	for k, v := range out.Members() {
		switch {
		case k == "headers" || k == "ids":
		case !msg:
			ms = append(ms, Member{Key: k, Value: v})
		case k == "status" || k == "message" || k == "body_error" || k == "closed_early":
			ms = append(ms, Member{Key: k, Value: v})
		}
	}
	b, err := ObjectValue(ms...)
	if err != nil {
		return out
	}
	return b
}

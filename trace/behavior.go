package trace

import (
	"slices"
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

// ---- extraction ----

// resultKids records, for one parent event, the indexes of its first child
// of each type a call is paired with (-1: none).
type resultKids struct{ result, response, err int32 }

// Behavior returns the behavior steps of the run, in the order of the events
// they come from: one per tool call, model call, plain state change, error
// and run end, as stepfork's diff extracts them, and one per decision,
// parameter read and entered node (whose payload holds the status the node
// exited with). @now, @id and @effect markers are left out: they record
// nondeterminism whose consequences show in the steps that follow.
//
// The steps are computed on each call and are the caller's own.
func (t *Trace) Behavior() []BehaviorStep { return extractBehavior(t) }

// extractBehavior walks tr's events in order and returns its behavior steps.
func extractBehavior(tr *Trace) []BehaviorStep {
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
			if ev.IsMarker() {
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

package explore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// point is a fork point as the page lists it.
type point struct {
	Step        int    `json:"step"`
	Kind        string `json:"kind"`
	Name        string `json:"name,omitempty"`
	Node        string `json:"node,omitempty"`
	Description string `json:"description"`
	// Failure says that fork.Failure() resolves here.
	Failure bool `json:"failure,omitempty"`
}

// choices is what can change at a fork point, with every target resolved
// against the base run as fork resolves it, and prefilled with what the
// base run recorded.
type choices struct {
	Point point `json:"point"`
	// Code is the fork point in Go, as the generated test writes it.
	Code      string         `json:"code"`
	Outputs   []outputChoice `json:"outputs"`
	More      int            `json:"more,omitempty"` // tail calls not offered (see maxOutputs)
	Prompts   []promptChoice `json:"prompts"`
	Decisions []valueChoice  `json:"decisions"`
	Params    []valueChoice  `json:"params"`
	Approvals []valueChoice  `json:"approvals"`
	State     []valueChoice  `json:"state"`
	// Tools are the tools of the base run, those of the tail first, then
	// those the session's runs called: what the policy may let run live.
	Tools []string `json:"tools"`
}

// outputChoice is a recorded call of the tail whose result a change can
// substitute.
type outputChoice struct {
	Kind       string `json:"kind"` // tool_result or llm_response
	Name       string `json:"name"`
	Occurrence int    `json:"occurrence"`
	Step       int    `json:"step"`
	// Resolved is the change as fork binds it: "tool result of
	// 'get_refund_policy' call 1 (step 4)".
	Resolved string `json:"resolved"`
	// Value is the recorded output, redacted, as indented JSON text.
	Value string `json:"value"`
	Note  string `json:"note,omitempty"`
}

// promptChoice is a target of the prompt, model and temperature changes:
// a node whose model calls run in the tail, a model label, or every call.
type promptChoice struct {
	Target      string   `json:"target"`
	What        string   `json:"what"` // node, model or every model call
	Calls       int      `json:"calls"`
	Prompt      string   `json:"prompt"`
	HasPrompt   bool     `json:"has_prompt"`
	Model       string   `json:"model"`
	Temperature *float64 `json:"temperature,omitempty"`
}

// valueChoice is a decision, parameter, approval or state key, with its
// recorded value.
type valueChoice struct {
	Name  string `json:"name"`
	Value string `json:"value"` // redacted, as indented JSON text
	Step  int    `json:"step,omitempty"`
}

// maxOutputs is the most tail calls offered for substitution at a point;
// a change can still name any other with its tool or model and
// occurrence.
const maxOutputs = 100

// points lists the base run's fork points (fork.Points), marking the one
// fork.Failure() resolves to.
func (s *session) listPoints() []point {
	out := make([]point, 0, len(s.points))
	for _, p := range s.points {
		out = append(out, point{Step: p.Step, Kind: p.Kind, Name: p.Name, Node: p.Node, Description: p.Description,
			Failure: p.Step == s.failureStep})
	}
	return out
}

// pointAt is the fork point at step.
func (s *session) pointAt(step int) (fork.PointInfo, bool) {
	i, ok := slices.BinarySearchFunc(s.points, step, func(p fork.PointInfo, step int) int { return p.Step - step })
	if !ok {
		return fork.PointInfo{}, false
	}
	return s.points[i], true
}

// atOf is the fork point at step as a test names it: fork.Failure() where
// it resolves, fork.Start() for the first point, else the named form of
// the point (BeforeNode, AfterNode, BeforeCall, BeforeDecision), else
// fork.Step. A named form is
// used only when fork resolves it to the same step, so the code and the
// run fork at the same place.
func (s *session) atOf(p fork.PointInfo) (fork.At, string) {
	type cand struct {
		at   fork.At
		code string
	}
	var cs []cand
	if p.Step == s.failureStep {
		cs = append(cs, cand{fork.Failure(), "fork.Failure()"})
	}
	if len(s.points) > 0 && p.Step == s.points[0].Step {
		cs = append(cs, cand{fork.Start(), "fork.Start()"})
	}
	q := strconv.Quote(p.Name)
	switch p.Kind {
	case "node_enter":
		cs = append(cs, cand{fork.BeforeNode(p.Name, p.Occurrence), fmt.Sprintf("fork.BeforeNode(%s, %d)", q, p.Occurrence)})
	case "node_exit":
		cs = append(cs, cand{fork.AfterNode(p.Name, p.Occurrence), fmt.Sprintf("fork.AfterNode(%s, %d)", q, p.Occurrence)})
	case string(trace.ToolCall):
		cs = append(cs, cand{fork.BeforeCall(replay.KindTool, p.Name, p.Occurrence), fmt.Sprintf("fork.BeforeCall(replay.KindTool, %s, %d)", q, p.Occurrence)})
	case string(trace.LLMRequest):
		cs = append(cs, cand{fork.BeforeCall(replay.KindLLM, p.Name, p.Occurrence), fmt.Sprintf("fork.BeforeCall(replay.KindLLM, %s, %d)", q, p.Occurrence)})
	case "decision", "approval":
		cs = append(cs, cand{fork.BeforeDecision(p.Name), fmt.Sprintf("fork.BeforeDecision(%s)", q)})
	}
	for _, c := range cs {
		if step, err := resolve(s.cfg.Base, c.at); err == nil && step == p.Step {
			return c.at, c.code
		}
	}
	return fork.Step(p.Step), fmt.Sprintf("fork.Step(%d)", p.Step)
}

// choicesAt lists what can change at the fork point at step.
func (s *session) choicesAt(step int) (*choices, error) {
	p, ok := s.pointAt(step)
	if !ok {
		return nil, fmt.Errorf("step %d is not a fork point of the base run", step)
	}
	at, code := s.atOf(p)
	c := &choices{Point: point{Step: p.Step, Kind: p.Kind, Name: p.Name, Node: p.Node, Description: p.Description,
		Failure: p.Step == s.failureStep}, Code: code,
		Outputs: []outputChoice{}, Prompts: []promptChoice{}, Decisions: []valueChoice{}, Params: []valueChoice{},
		Approvals: []valueChoice{}, State: []valueChoice{}, Tools: []string{}}
	tr := s.cfg.Base
	evs := tr.Events
	pos := s.position(step)

	// Calls: outputs to substitute, and the targets of prompt changes.
	occ := map[string]int{}
	var tailTools, allTools []string
	promptAt := map[string]int{}
	addPrompt := func(target, what string, in trace.Value, model string) {
		if i, ok := promptAt[target]; ok {
			c.Prompts[i].Calls++
			return
		}
		pc := promptChoice{Target: target, What: what, Calls: 1, Model: model}
		pc.Prompt, pc.HasPrompt = systemPrompt(in)
		if t, ok := temperatureOf(in); ok {
			pc.Temperature = &t
		}
		promptAt[target] = len(c.Prompts)
		c.Prompts = append(c.Prompts, pc)
	}
	var labels []int // tail model calls, for the label targets after the nodes
	calls := tr.Calls()
	for k := range calls {
		call := &calls[k]
		ev := &evs[call.Event]
		tool := ev.Type == trace.ToolCall
		key := string(ev.Type) + "\x00" + call.Label
		occ[key]++
		if tool && !slices.Contains(allTools, call.Label) {
			allTools = append(allTools, call.Label)
		}
		if call.Event < pos {
			continue
		}
		if tool && !slices.Contains(tailTools, call.Label) {
			tailTools = append(tailTools, call.Label)
		}
		if !tool {
			if node := s.nodeOf(call.Event); node != "" {
				addPrompt(node, "node", ev.Input, ev.Model)
			}
			labels = append(labels, k)
		}
		if call.Result < 0 {
			continue // nothing recorded to prefill
		}
		if len(c.Outputs) == maxOutputs {
			c.More++
			continue
		}
		oc := outputChoice{Kind: "tool_result", Name: call.Label, Occurrence: occ[key], Step: ev.Step, Value: jsonText(call.Output)}
		var change fork.Change
		if tool {
			change = fork.ToolResult(fork.OnCall(call.Label, oc.Occurrence), call.Output)
		} else {
			oc.Kind = "llm_response"
			change = fork.LLMResponse(fork.OnCall(call.Label, oc.Occurrence), call.Output)
			if !call.Output.Get("stream").IsAbsent() {
				oc.Note = "a streamed response: the agent is served its \"stream\" frames; \"message\" is what they assemble, what the diff compares"
			}
		}
		est, err := fork.Estimate(tr, at, []fork.Named{{Name: "c", Changes: []fork.Change{change}}})
		if err != nil {
			continue // the API refuses this target here (in a concurrent group, say)
		}
		oc.Resolved = est.Variants[0].Changes[0]
		c.Outputs = append(c.Outputs, oc)
	}
	for _, k := range labels {
		ev := &evs[calls[k].Event]
		addPrompt(calls[k].Label, "model", ev.Input, ev.Model)
	}
	if len(labels) > 0 {
		ev := &evs[calls[labels[0]].Event]
		addPrompt(fork.All, "every model call", ev.Input, ev.Model)
		c.Prompts[promptAt[fork.All]].Calls = len(labels)
	}
	c.Tools = append(c.Tools, tailTools...)
	for _, t := range append(allTools, s.runTools()...) {
		if !slices.Contains(c.Tools, t) {
			c.Tools = append(c.Tools, t)
		}
	}

	// Markers and state.
	seen := map[string]bool{}
	stateAt := map[string]int{}
	for i := range evs {
		ev := &evs[i]
		if ev.Type != trace.StateChange {
			continue
		}
		m, isMarker := ev.Marker()
		if !isMarker {
			// The value the agent would read at the fork point: the last
			// write before it, else the first write in the tail.
			j, known := stateAt[ev.Key]
			switch {
			case !known:
				stateAt[ev.Key] = len(c.State)
				c.State = append(c.State, valueChoice{Name: ev.Key, Value: jsonText(ev.After), Step: ev.Step})
			case i < pos:
				c.State[j] = valueChoice{Name: ev.Key, Value: jsonText(ev.After), Step: ev.Step}
			}
			continue
		}
		if i < pos {
			continue
		}
		var list *[]valueChoice
		switch {
		case m.Key == trace.MarkerDecision && m.Kind == trace.KindApproval:
			list = &c.Approvals
		case m.Key == trace.MarkerDecision:
			list = &c.Decisions
		case m.Key == trace.MarkerParam:
			list = &c.Params
		default:
			continue
		}
		if k := m.Key + m.Kind + "\x00" + m.Name; !seen[k] {
			seen[k] = true
			*list = append(*list, valueChoice{Name: m.Name, Value: jsonText(m.Value), Step: ev.Step})
		}
	}
	return c, nil
}

// position is the index of the first base event at step.
func (s *session) position(step int) int {
	evs := s.cfg.Base.Events
	i, _ := slices.BinarySearchFunc(evs, step, func(e trace.Event, step int) int { return e.Step - step })
	return i
}

// nodeOf is the innermost node event i was recorded in ("" at top level):
// the node of the nearest @node enter marker among its ancestors.
func (s *session) nodeOf(i int) string {
	evs := s.cfg.Base.Events
	for n := 0; n < len(evs); n++ { // bounded: parent links may loop in a damaged bundle
		p, ok := s.byID[evs[i].ParentID]
		if !ok || p >= i {
			return ""
		}
		i = p
		if m, ok := evs[i].Marker(); ok && m.Key == trace.MarkerNode && m.Phase == trace.PhaseEnter {
			return m.Name
		}
	}
	return ""
}

// resolve is the step fork resolves at to on base.
func resolve(base *trace.Trace, at fork.At) (int, error) {
	est, err := fork.Estimate(base, at, []fork.Named{{Name: "point"}})
	if err != nil {
		return 0, err
	}
	return est.At.Step, nil
}

// jsonText is v redacted (trace.RedactValue), as indented JSON text: what
// an editor is prefilled with. Redaction comes first, so that a value under
// a sensitive key is never text that the page's pass over strings could
// miss.
func jsonText(v trace.Value) string {
	if v.IsAbsent() {
		v = trace.NullValue
	}
	v, _ = trace.RedactValue(v)
	var b bytes.Buffer
	if err := json.Indent(&b, v.Bytes(), "", "  "); err != nil {
		return v.Canonical()
	}
	return b.String()
}

// runTools are the tools the session's runs called that the base run did
// not, in order.
func (s *session) runTools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.runs {
		if r.V == nil {
			continue
		}
		for _, c := range r.V.Trace.Calls() {
			if r.V.Trace.Events[c.Event].Type == trace.ToolCall && !slices.Contains(out, c.Label) {
				out = append(out, c.Label)
			}
		}
	}
	return out
}

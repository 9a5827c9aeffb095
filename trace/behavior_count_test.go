package trace

import "testing"

// TestStepCountIsExact checks that behaviorFrom allocates its steps at
// once: stepCount is the number of steps it makes, from every event of a
// run with calls, failures, state, decisions, parameters, nested,
// unclosed and unopened nodes.
func TestStepCountIsExact(t *testing.T) {
	t.Parallel()
	b := NewBuilder("count")
	b.RunStart(nil)
	node := func(name, phase string) {
		b.State(MarkerNode, nil, map[string]any{"name": name, "phase": phase, "status": "ok"})
	}
	node("outer", PhaseEnter)
	b.Tool("search", map[string]any{"q": "x"}, map[string]any{"hits": 1})
	node("inner", PhaseEnter)
	b.LLM("openai", "gpt-4o", map[string]any{"p": "hi"}, map[string]any{"text": "yo"})
	b.State(MarkerDecision, nil, map[string]any{"name": "route", "kind": "decision", "value": "a"})
	b.State(MarkerParam, nil, map[string]any{"name": "temp", "value": 0.5})
	b.State(MarkerNow, nil, map[string]any{"name": "t", "value": "2026"})
	node("inner", PhaseExit)
	b.State("k", nil, 1)
	c := b.ToolCall("fetch", map[string]any{"u": 1})
	b.ToolFailure(c, "Timeout", "slow")
	b.ToolCall("lost", nil)
	node("outer", PhaseExit)
	node("ghost", PhaseExit)
	node("open", PhaseEnter)
	b.Error("", "Boom", "bad", nil)
	b.Fail("Boom", "bad")
	tr := b.MustTrace()
	calls, nodes := tr.Calls(), tr.Nodes()
	for from := range len(tr.Events) + 1 {
		steps, at := behaviorFrom(tr.Events, from, 0, calls, nodes, false, true)
		if len(steps) != cap(steps) || len(at) != cap(at) {
			t.Fatalf("from event %d: %d steps in an array of %d", from, len(steps), cap(steps))
		}
	}
}

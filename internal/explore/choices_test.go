package explore

import (
	"strings"
	"testing"

	"github.com/stepfork/stepfork/fork"
)

// At the failure point the page offers what the tail recorded, resolved as
// fork resolves it and prefilled, redacted, with the recorded values.
func TestChoicesAtFailure(t *testing.T) {
	s := newShop()
	base := record(t, s)
	sess, err := newSession(t.Context(), Config{Base: base, Agent: s.run, Test: "TestShop"})
	if err != nil {
		t.Fatal(err)
	}
	if sess.failureStep < 0 {
		t.Fatal("no failure point")
	}
	c, err := sess.choicesAt(sess.failureStep)
	if err != nil {
		t.Fatal(err)
	}
	if c.Code != "fork.Failure()" || !c.Point.Failure || c.Point.Kind != "node_enter" || c.Point.Name != "decide" {
		t.Errorf("point %+v written %s", c.Point, c.Code)
	}
	if len(c.Outputs) != 1 || c.Outputs[0].Kind != "llm_response" || c.Outputs[0].Name != "fake/triage-1" || c.Outputs[0].Occurrence != 1 ||
		c.Outputs[0].Resolved != "model response of 'fake/triage-1' call 1" || !strings.Contains(c.Outputs[0].Value, `"content": "refund"`) {
		t.Errorf("outputs %+v", c.Outputs)
	}
	var targets []string
	for _, p := range c.Prompts {
		targets = append(targets, p.Target+"="+p.What)
		if !p.HasPrompt || p.Prompt != "Refund what the customer asks. Key [REDACTED]." || p.Model != "triage-1" {
			t.Errorf("prompt %+v", p)
		}
	}
	if strings.Join(targets, ",") != "decide=node,fake/triage-1=model,*=every model call" {
		t.Errorf("prompt targets %s", strings.Join(targets, ","))
	}
	if len(c.Decisions) != 1 || c.Decisions[0].Name != "action" || c.Decisions[0].Value != `"refund"` {
		t.Errorf("decisions %+v", c.Decisions)
	}
	if len(c.State) != 1 || c.State[0].Name != "order" || !strings.Contains(c.State[0].Value, `"password": "[REDACTED]"`) {
		t.Errorf("state %+v", c.State)
	}
	if strings.Join(c.Tools, ",") != "lookup_order" {
		t.Errorf("tools %q", c.Tools)
	}
	// Earlier, the lookup's result can change, and the point is named.
	var lookup fork.PointInfo
	for _, p := range sess.points {
		if p.Kind == "tool_call" && p.Name == "lookup_order" {
			lookup = p
		}
	}
	c, err = sess.choicesAt(lookup.Step)
	if err != nil {
		t.Fatal(err)
	}
	if c.Code != `fork.BeforeCall(replay.KindTool, "lookup_order", 1)` || len(c.Outputs) != 2 || c.Outputs[0].Name != "lookup_order" ||
		!strings.Contains(c.Outputs[0].Value, `"api_key": "[REDACTED]"`) {
		t.Errorf("at the lookup: %s, outputs %+v", c.Code, c.Outputs)
	}
	if _, err := sess.choicesAt(-5); err == nil {
		t.Error("a step that is not a point has choices")
	}
}

// Every point is written in the form that names it, and that form
// resolves to the same step.
func TestPointCode(t *testing.T) {
	s := newShop()
	base := record(t, s)
	sess, err := newSession(t.Context(), Config{Base: base, Agent: s.run, Test: "TestShop"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range sess.points {
		at, code := sess.atOf(p)
		step, err := resolve(base, at)
		if err != nil || step != p.Step {
			t.Errorf("%s (step %d) resolves to %d: %v", code, p.Step, step, err)
		}
		seen[strings.SplitN(code, "(", 2)[0]] = true
	}
	for _, want := range []string{"fork.Start", "fork.AfterNode", "fork.BeforeCall", "fork.BeforeDecision", "fork.Failure", "fork.Step"} {
		if !seen[want] {
			t.Errorf("no point written as %s: %v", want, seen)
		}
	}
}

package assert_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// refundOutcome is how a refund run built by refundFork ends.
type refundOutcome int

const (
	refunded refundOutcome = iota // the model says refund, the refund is issued
	approval                      // the model asks for approval, nothing is issued
	declined                      // the refund is issued and refused: the run fails
)

// refundFork builds one run of a refund agent:
//
//	step 0 run_start            1 @node lookup enter   2 tool_call get_order   3 tool_result
//	     4 @node lookup exit    5 @node decide enter   6 llm_request           7 llm_response
//	     8 state decision       9 tool_call issue_refund …
func refundFork(t testing.TB, o refundOutcome) *trace.Trace {
	t.Helper()
	b := trace.NewBuilder("refund-agent")
	b.RunStart(map[string]any{"order": "A1"})
	node := func(name string, body func()) {
		enter := b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: name, Phase: trace.PhaseEnter}))
		b.Push(enter)
		body()
		b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: name, Phase: trace.PhaseExit, Status: trace.NodeStatusOK}))
		b.Pop()
	}
	node("lookup", func() { b.Tool("get_order", map[string]any{"id": "A1"}, map[string]any{"amount": 250}) })
	system, decision := "You handle refunds.", "issue_refund"
	if o == approval {
		system, decision = "Refunds need approval.", "request_approval"
	}
	node("decide", func() {
		b.LLM("fake", "fake-1", map[string]any{"system": system}, map[string]any{"content": decision})
		b.State("decision", nil, decision)
		switch o {
		case refunded:
			b.Tool("issue_refund", map[string]any{"amount": 250}, map[string]any{"refund_id": "rf_A1"})
		case declined:
			call := b.ToolCall("issue_refund", map[string]any{"amount": 250})
			b.ToolFailure(call, "PolicyViolation", "over the limit")
		}
	})
	switch o {
	case refunded:
		b.RunEnd(trace.RunCompleted, map[string]any{"status": "refunded"})
	case approval:
		b.RunEnd(trace.RunCompleted, map[string]any{"status": "awaiting_approval"})
	case declined:
		b.Fail("PolicyViolation", "over the limit")
	}
	return b.MustTrace()
}

// refundVariant is a *fork.Variant made by hand: the approval run as a fork
// of the refunded run, with a prompt change applied at step 6.
func refundVariant(t testing.TB) *fork.Variant {
	t.Helper()
	base, variant := refundFork(t, refunded), refundFork(t, approval)
	return &fork.Variant{Trace: variant, Base: base, Diff: diff.Runs(base, variant), Status: fork.StatusCompleted,
		At:             fork.Resolved{Step: 5, Description: "before 'decide' execution 1", Asked: "BeforeNode(\"decide\", 1)"},
		Changes:        []fork.ChangeReport{{Change: fork.Prompt("decide", "Refunds need approval."), Description: "prompt of 'decide'", Applied: 1, Steps: []int{6}}},
		IncurredCost:   0.002,
		IncurredTokens: 120,
		LiveModelCalls: 1,
	}
}

const refundDivergence = `steps 6–7: llm 'fake/fake-1' changed: input.system "You handle refunds." → "Refunds need approval." (+1 more)`

func TestCounterfactualAssertions(t *testing.T) {
	t.Parallel()
	base, approved, failed := refundFork(t, refunded), refundFork(t, approval), refundFork(t, declined)
	same := diff.Runs(base, refundFork(t, refunded))
	changed := diff.Runs(base, approved)
	broke := diff.Runs(base, failed)
	v := refundVariant(t)
	blocked := refundVariant(t)
	blocked.Status = fork.StatusBlocked
	blocked.Suppressed = []fork.SuppressedEffect{{Step: 9, Kind: replay.KindTool, Tool: "issue_refund",
		Input: trace.MustParse(`{"amount":250}`), Reason: "no recorded call has this input"}}
	unused := refundVariant(t)
	unused.Changes = append(unused.Changes, fork.ChangeReport{Change: fork.Prompt("desicde", "x"), Description: "prompt of 'desicde'"})
	null := refundVariant(t)
	null.Changes = nil

	tests := []struct {
		name string
		a    assertion
		want string
	}{
		{"Equivalent/pass", func(t assert.TestingT) bool { return assert.Equivalent(t, same) }, ""},
		{"Diverged/pass", func(t assert.TestingT) bool { return assert.Diverged(t, v) }, ""},
		{"Diverged/fail", func(t assert.TestingT) bool { return assert.Diverged(t, same) },
			"expected the variant to diverge from the base; it behaved the same (7 steps unchanged)"},

		{"DivergesAtStep/step", func(t assert.TestingT) bool { return assert.DivergesAtStep(t, changed, 6) }, ""},
		{"DivergesAtStep/result step", func(t assert.TestingT) bool { return assert.DivergesAtStep(t, changed, 7) }, ""},
		{"DivergesInNode/node of a variant", func(t assert.TestingT) bool { return assert.DivergesInNode(t, v, "decide") }, ""},
		{"DivergesAtStep/other step", func(t assert.TestingT) bool { return assert.DivergesAtStep(t, changed, 9) },
			"expected the runs to diverge at step 9; they diverged at " + refundDivergence},
		{"DivergesInNode/other node", func(t assert.TestingT) bool { return assert.DivergesInNode(t, v, "lookup") },
			"expected the runs to diverge in node 'lookup'; they diverged at " + refundDivergence + " (in node 'decide')"},
		{"DivergesInNode/node of a diff", func(t assert.TestingT) bool { return assert.DivergesInNode(t, changed, "decide") },
			"expected the runs to diverge in node 'decide'; they diverged at " + refundDivergence + " (outside any node)"},
		{"DivergesAtStep/equivalent", func(t assert.TestingT) bool { return assert.DivergesAtStep(t, same, 6) },
			"expected the runs to diverge at step 6; they are equivalent (7 steps unchanged)"},
		{"DivergesInNode/empty", func(t assert.TestingT) bool { return assert.DivergesInNode(t, v, "") },
			"DivergesInNode: the node name is empty"},

		{"Completed/pass", func(t assert.TestingT) bool { return assert.Completed(t, v) }, ""},
		{"Completed/diff pass", func(t assert.TestingT) bool { return assert.Completed(t, changed) }, ""},
		{"Completed/failed", func(t assert.TestingT) bool { return assert.Completed(t, broke) },
			"expected the variant to complete; it failed: PolicyViolation: over the limit\nfirst divergence: steps 9–10: tool 'issue_refund' changed: output.error_type (absent) → \"PolicyViolation\" (+3 more)"},
		{"Completed/blocked", func(t assert.TestingT) bool { return assert.Completed(t, blocked) },
			"expected the variant to complete; it was blocked: the guard held back step 9 tool 'issue_refund'\nfirst divergence: " + refundDivergence},
		{"Status/pass", func(t assert.TestingT) bool { return assert.Status(t, blocked, fork.StatusBlocked) }, ""},
		{"Status/fail", func(t assert.TestingT) bool { return assert.Status(t, v, fork.StatusBlocked) },
			"expected the variant to end blocked; it completed\nfirst divergence: " + refundDivergence},

		{"StateChanged/pass", func(t assert.TestingT) bool { return assert.StateChanged(t, v, "decision") }, ""},
		{"StateChanged/same", func(t assert.TestingT) bool { return assert.StateChanged(t, same, "decision") },
			"expected state 'decision' to change; it is 'issue_refund' in both runs"},
		{"StateChanged/absent", func(t assert.TestingT) bool { return assert.StateChanged(t, v, "draft") },
			"expected state 'draft' to change; it is absent from both runs; the keys that changed: ['decision']"},
		{"StateUnchanged/pass", func(t assert.TestingT) bool { return assert.StateUnchanged(t, same, "decision") }, ""},
		{"StateUnchanged/fail", func(t assert.TestingT) bool { return assert.StateUnchanged(t, v, "decision") },
			"expected state 'decision' to be unchanged; it changed from 'issue_refund' to 'request_approval'"},
		{"StateEqual/pass", func(t assert.TestingT) bool { return assert.StateEqual(t, v, "decision", "request_approval") }, ""},
		{"StateEqual/unchanged key", func(t assert.TestingT) bool { return assert.StateEqual(t, same, "decision", "issue_refund") }, ""},
		{"StateEqual/fail", func(t assert.TestingT) bool { return assert.StateEqual(t, same, "decision", "request_approval") },
			"state 'decision': expected 'request_approval'; actual 'issue_refund'\nstate 'decision' (-want +got):\n  string(\n- \t\"request_approval\",\n+ \t\"issue_refund\",\n  )"},
		{"StateEqual/missing", func(t assert.TestingT) bool { return assert.StateEqual(t, v, "draft", "x") },
			"state 'draft': expected 'x'; the variant ends without it; the keys that changed: ['decision']"},

		{"PathEqual/pass", func(t assert.TestingT) bool {
			return assert.PathEqual(t, v, []string{"node:lookup", "tool:get_order", "node:decide", "llm:fake/fake-1", "state:decision", "run"})
		}, ""},
		{"PathEqual/with options", func(t assert.TestingT) bool {
			return assert.PathEqual(t, v, []string{"tool:get_order", "llm:fake/fake-1", "state:decision", "run"},
				cmpopts.IgnoreSliceElements(func(s string) bool { return s == "node:lookup" || s == "node:decide" }))
		}, ""},
		{"PathEqual/fail", func(t assert.TestingT) bool {
			return assert.PathEqual(t, changed, []string{"node:lookup", "tool:get_order", "node:decide", "llm:fake/fake-1", "state:decision", "tool:issue_refund", "run"})
		}, "expected the variant's path ['node:lookup', 'tool:get_order', 'node:decide', 'llm:fake/fake-1', 'state:decision', 'tool:issue_refund', 'run']; " +
			"actual ['node:lookup', 'tool:get_order', 'node:decide', 'llm:fake/fake-1', 'state:decision', 'run']\npath (-want +got):\n  []string{\n  \t... // 3 identical elements\n  \t\"llm:fake/fake-1\",\n  \t\"state:decision\",\n- \t\"tool:issue_refund\",\n  \t\"run\",\n  }"},

		{"OutputEqual/pass", func(t assert.TestingT) bool {
			return assert.OutputEqual(t, v, map[string]any{"status": "awaiting_approval"})
		}, ""},
		{"OutputEqual/typed with options", func(t assert.TestingT) bool {
			type outcome struct {
				Status   string `json:"status"`
				RefundID string `json:"refund_id"`
			}
			return assert.OutputEqual(t, v, outcome{Status: "awaiting_approval", RefundID: "ignored"}, cmpopts.IgnoreFields(outcome{}, "RefundID"))
		}, ""},
		{"OutputEqual/fail", func(t assert.TestingT) bool {
			return assert.OutputEqual(t, v, map[string]any{"status": "refunded"}, "after the %s change", "prompt")
		}, "output: expected {'status': 'refunded'}; actual {'status': 'awaiting_approval'}\noutput (-want +got):\n  map[string]any{\n- \t\"status\": string(\"refunded\"),\n+ \t\"status\": string(\"awaiting_approval\"),\n  }\nMessages:   after the prompt change"},
		{"OutputEqual/failed run", func(t assert.TestingT) bool {
			return assert.OutputEqual(t, broke, map[string]any{"status": "refunded"})
		},
			"output: expected {'status': 'refunded'}; the variant failed: PolicyViolation: over the limit, so it has no output\nfirst divergence: steps 9–10: tool 'issue_refund' changed: output.error_type (absent) → \"PolicyViolation\" (+3 more)"},

		{"NoSuppressedEffects/pass", func(t assert.TestingT) bool { return assert.NoSuppressedEffects(t, v) }, ""},
		{"NoSuppressedEffects/fail", func(t assert.TestingT) bool { return assert.NoSuppressedEffects(t, blocked) },
			"expected no suppressed side effects; the guard held back 1 call(s):\n  step 9 tool 'issue_refund' {'amount': 250}: no recorded call has this input"},
		{"IncurredCostAtMost/pass", func(t assert.TestingT) bool { return assert.IncurredCostAtMost(t, v, 0.002) }, ""},
		{"IncurredCostAtMost/fail", func(t assert.TestingT) bool { return assert.IncurredCostAtMost(t, v, 0.001) },
			"expected the variant to incur at most $0.001; it incurred $0.002 (1 live model call(s), 120 tokens)"},
		{"IncurredCostAtMost/negative", func(t assert.TestingT) bool { return assert.IncurredCostAtMost(t, v, -1) },
			"IncurredCostAtMost: the maximum must be a non-negative number of US dollars, got -1"},
		{"TokensAtMost/pass", func(t assert.TestingT) bool { return assert.TokensAtMost(t, v, 120) }, ""},
		{"TokensAtMost/fail", func(t assert.TestingT) bool { return assert.TokensAtMost(t, v, 100) },
			"expected the variant to use at most 100 tokens; it used 120 (1 live model call(s), $0.002)"},
		{"ChangeApplied/pass", func(t assert.TestingT) bool { return assert.ChangeApplied(t, v) }, ""},
		{"ChangeApplied/unused", func(t assert.TestingT) bool { return assert.ChangeApplied(t, unused) },
			"expected every change to be applied; 1 of 2 matched nothing in the tail, which begins at step 5 (before 'decide' execution 1):\n  prompt of 'desicde'"},
		{"ChangeApplied/null fork", func(t assert.TestingT) bool { return assert.ChangeApplied(t, null) },
			"expected the variant to apply a change; it has none (a null fork)"},

		{"nil variant", func(t assert.TestingT) bool { return assert.Completed(t, (*fork.Variant)(nil)) },
			"no counterfactual to check: got a nil *fork.Variant; pass the *fork.Variant of fork.Run or sftest.Fork, or a *diff.Result"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runAssertion(t, tc.a, tc.want)
		})
	}
}

// Equivalent's failure starts with the first divergence and then shows the
// whole diff.
func TestEquivalentFailure(t *testing.T) {
	t.Parallel()
	v := refundVariant(t)
	r := &recorder{}
	if assert.Equivalent(r, v) || len(r.errors) != 1 {
		t.Fatalf("Equivalent passed on a changed variant: %q", r.errors)
	}
	want := "expected the variant to behave like the base; it diverged at " + refundDivergence + "\n" +
		v.Diff.Explain()
	if got := r.errors[0] + "\n"; got != want {
		t.Errorf("message:\n got: %s\nwant: %s", got, want)
	}
	err := assert.CheckEquivalent(v)
	if err == nil || !errors.Is(err, assert.ErrMismatch) {
		t.Errorf("CheckEquivalent = %v, want an error matching ErrMismatch", err)
	}
	if err := assert.CheckEquivalent((*diff.Result)(nil)); !errors.Is(err, assert.ErrInvalid) {
		t.Errorf("CheckEquivalent of a nil *diff.Result = %v, want an error matching ErrInvalid", err)
	}
}

// A variant without a Diff (made by hand) is diffed from its Base and Trace.
func TestVariantWithoutDiff(t *testing.T) {
	t.Parallel()
	v := refundVariant(t)
	v.Diff = nil
	if err := assert.CheckStateEqual(v, "decision", "request_approval"); err != nil {
		t.Errorf("CheckStateEqual = %v", err)
	}
	v.Base = nil
	if err := assert.CheckDiverged(v); !errors.Is(err, assert.ErrInvalid) {
		t.Errorf("CheckDiverged on a variant with no diff and no base = %v, want ErrInvalid", err)
	}
}

// Package assert checks what an agent did in a run: which tools and models it
// called, in what order, with which arguments and outcomes; and it compares
// whole runs with go-cmp.
//
// It follows testify's conventions, so it drops into existing tests: every
// assertion takes a TestingT (anything with Errorf, such as *testing.T or
// testify's *assert.CollectT), returns whether it passed, and ends with
// msgAndArgs. Each assertion X has a checker CheckX that returns an error
// instead, for use outside tests or to combine checks, in the style of
// testing/fstest:
//
//	func TestRefund(t *testing.T) {
//		run, err := trace.Load("testdata/refund.sftrace")
//		if err != nil {
//			t.Fatal(err)
//		}
//		assert.ToolCalled(t, run, "lookup_order")
//		assert.ToolNotCalled(t, run, "issue_refund")
//		assert.Trajectory(t, run, []string{"lookup_order", "escalate"}, assert.InOrder)
//		assert.ToolArguments(t, run, "lookup_order", map[string]any{"order": "A1"})
//		assert.MaxSteps(t, run, 12)
//	}
//
// A run is any value with a RunTrace method (see Run): a *trace.Trace, and the
// results of replays and forks.
//
// # Trajectories
//
// The trajectory of a run is its dependency calls in file order: tool_call
// events, each with the status of its paired tool_result, and llm_request
// events. Runtime markers (state_change events with '@' keys) are not calls.
// The assertions and their failure messages are those of Python stepfork
// (ToolCalled, ToolNotCalled, ToolCallCount, ToolArguments, ToolOrder,
// ToolSequence, MaxSteps), with Go additions: match modes for sequences
// (Trajectory with Strict, InOrder, Unordered, Subset, Superset), call
// outcomes (ToolSucceeded, ToolFailed) and model calls (ModelCalled,
// ModelCallCount). The first line of a failure is stepfork's message; detail
// such as a (-want +got) diff follows on later lines. On a *replay.Result
// that diverged or left recorded calls unconsumed, every trajectory check
// fails first with "stepfork replay diverged: …" or "stepfork replay
// incomplete: …", as in stepfork.
//
// # Counterfactual assertions
//
// On a fork's result (a *fork.Variant, or a *diff.Result; see
// Counterfactual) the assertions say what the change did: Equivalent,
// Diverged, DivergesAtStep, DivergesInNode, Completed, Status, StateChanged,
// StateUnchanged, StateEqual, PathEqual, OutputEqual, NoSuppressedEffects,
// IncurredCostAtMost, TokensAtMost and ChangeApplied; on a scored sweep,
// Beats. Their failures name the first divergence and its step:
//
//	v, err := fork.Run(ctx, base, fork.Failure(), agent, fork.Prompt("decide", "Refunds above the limit need approval."))
//	...
//	assert.Completed(t, v)
//	assert.StateEqual(t, v, "decision", "request_approval")
//	assert.ChangeApplied(t, v)
//
// # Declarative expectations
//
// Expectations holds the same checks as data, loaded from the JSON that
// stepfork's --expect-trajectory reads (LoadExpectations, ParseExpectations),
// so that exported and hand-written tests share one format:
//
//	exp, err := assert.LoadExpectations("testdata/refund.expect.json")
//	...
//	assert.Expect(t, run, exp)
//
// # Comparing runs
//
// TraceEqual compares two runs with cmp.Diff and reports the difference as
// (-want +got). The cmp options IgnoreIDs, IgnoreRunIDs, IgnoreTimestamps,
// IgnoreDurations, CanonicalPayloads and SortConcurrentCalls make two
// recordings of the same behaviour compare equal; TraceOptions bundles the
// usual ones. They work with cmp.Diff directly too.
//
// Comparing assertions (ToolArguments, ToolArgumentsAt, TraceEqual) take their
// cmp options in the trailing arguments: the leading values that are
// cmp.Options are options, the rest are msgAndArgs. That keeps them usable as
// testify's ComparisonAssertionFunc-style table entries.
//
// Secrets never reach a failure message: payloads are redacted (as trace.Save
// would) before they are compared or printed.
package assert

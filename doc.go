// Package stepfork turns recorded AI-agent runs into counterfactual regression
// tests that run inside go test.
//
// A run of an agent is recorded once — its tool calls, model calls, state
// writes and decisions — as a .sftrace bundle, the format of the Python
// stepfork tool, byte for byte. A test then forks that run at a step, changes
// one thing (a tool result, a model response, a prompt, a model, a decision,
// a parameter, a state value, a human's answer), serves the unchanged prefix
// from the recording at no cost, executes the tail for real, and asserts on
// what became different, against golden files and across table-driven sweeps
// of variants.
//
// This package holds no code: it is the overview, and its examples
// (examples_test.go) run the whole cycle on a small refund desk agent.
//
// # The product test
//
// A refund run failed: the model refunded 250 USD and the payment system
// refused, because refunds above the policy limit need a person's approval.
// The fix is a sentence in the prompt of the node that decides. The test that
// proves it, without calling the lookup tools again and without moving any
// money:
//
//	func TestRefundNeedsApproval(t *testing.T) {
//		base := sftest.Load(t, "testdata/refund-failure.sftrace")
//		v := sftest.Fork(t, base, fork.Failure(), agent.Run,
//			fork.Prompt("decide", "Refunds above the policy limit need approval."))
//		assert.Completed(t, v)
//		assert.ToolNotCalled(t, v, "issue_refund")
//		assert.StateChanged(t, v, "decision")
//		sftest.Golden(t, v) // testdata/TestRefundNeedsApproval.golden; go test -update rewrites it
//	}
//
// fork.Failure() is the position before the node that failed; the agent runs
// again from its beginning, every call before that position is served from the
// recording, and the calls after it run under the change. A tool call of the
// tail that the recording does not hold is blocked by the side-effect guard
// unless the test allows it by name, so a fork never refunds anyone. The
// examples module runs this test (examples/refund/refund_test.go) on an agent
// built on the official OpenAI Go SDK.
//
// # How the packages fit
//
// Each package builds on the ones before it:
// trace ← replay ← fork ← assert ← sftest.
//
//   - [github.com/stepfork/stepfork/trace] is the bundle: events, manifest,
//     canonical JSON and hashes, redaction, integrity, streaming reads, and
//     the behavior steps of a run. Pure data.
//   - [github.com/stepfork/stepfork/trace/diff] is the behavioral difference
//     of two runs: diff.Runs aligns their behavior steps and reports the
//     first divergence, field changes, state, token and cost deltas.
//   - [github.com/stepfork/stepfork/replay] is the runtime agent code calls
//     through: replay.Tool, replay.LLM, replay.Node, replay.Decide,
//     replay.Approve, replay.Param, replay.Set, and replay.Transport for
//     agents built on an official model SDK. replay.Record records a run;
//     replay.Replay serves it back (frozen: nothing executes) and reports the
//     first divergence. With no session in the context every wrapper is a
//     plain pass-through, so production code pays nothing.
//   - [github.com/stepfork/stepfork/fork] makes new runs out of recorded
//     ones: fork.Run is a counterfactual fork (prefix served, tail executed
//     under changes, side effects guarded); fork.Each is a sweep of named
//     variants at one point; fork.Trace is a static fork (the run kept
//     through a step, outputs overridden, provenance recorded).
//   - [github.com/stepfork/stepfork/assert] holds trajectory and
//     counterfactual assertions in testify's style (assert.ToolCalled,
//     assert.Completed, assert.StateChanged, …), accepting cmp.Option.
//   - [github.com/stepfork/stepfork/sftest] is the go test glue: Load,
//     Record, Replay, Fork, Sweep, Golden, ForkCheck and Minimize, each taking
//     t and failing it with a readable message that names the step.
//
// The command stepfork (cmd/stepfork) validates, inspects, forks, diffs and
// exports bundles from the shell. The examples module (examples/, its own
// go.mod) holds a realistic refund-triage agent built on the official OpenAI
// Go SDK, with tests that use every sftest helper: cd examples && go test ./...
//
// # A short example
//
// Record a run, replay it frozen, and fork it with a changed prompt:
//
//	rec, err := replay.Record(ctx, "refund-desk", RefundRequest{OrderID: "o_1842", Amount: 250}, desk)
//	// err: recording failed; rec.Err: the agent's own error (a failed run is recorded too)
//	res, err := replay.Replay(ctx, rec.Trace, desk) // res.Executed == 0
//	v, err := fork.Run(ctx, rec.Trace, fork.Failure(), desk,
//		fork.Prompt("resolve", "Refunds above the policy limit need approval."))
//	fmt.Println(v.Status, v.Output) // completed {awaiting_approval }
//	fmt.Println(v.Diff.Explain())   // behavior changed: 5 changed, 0 added, 3 removed, …
package stepfork

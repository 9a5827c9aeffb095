// Package fork makes new runs out of recorded ones. [Run] forks a recorded
// run at a point, changes one thing, serves the unchanged prefix from the
// recording, runs the tail for real and says what became different; [Each]
// does it for a table of named variants; [Trace] makes a static fork, the
// run kept through a step with some recorded outputs replaced.
//
//	base, _ := trace.Load("testdata/refund-failure.sftrace")
//	v, err := fork.Run(ctx, base, fork.Failure(), refund.Agent,
//		fork.Prompt("decide", "Refunds above the policy limit need approval."), fork.Memoize())
//	if err != nil {
//		return err // the point or a change does not resolve, the prefix did not replay, …
//	}
//	fmt.Println(v.Status, v.Diff.Divergence) // completed, and where the variant parted from the base
//
//	sweep, err := fork.Each(ctx, base, fork.Failure(), refund.Agent, []fork.Named{
//		{Name: "stricter", Changes: []fork.Change{fork.Prompt("decide", "…")}},
//		{Name: "higher-limit", Changes: []fork.Change{fork.Param("policy_limit", 500.0)}},
//	}, fork.Memoize(), fork.Samples(3), fork.SaveDir("testdata/out"))
//
// # Counterfactual execution
//
// A fork point ([At]) resolves to one position of the base run's events:
// [Step], [Event], [Start], [Failure] (what Run uses when at is nil, on a
// failed run), [BeforeNode], [AfterNode], [BeforeCall], [BeforeFirstWriteOf],
// [BeforeFirstReadOf], [BeforeDecision], [Where]. [Points] lists every position a run offers. Only
// boundaries are positions: a result or anything inside a tool or model call
// would split the call and is refused, naming it. The agent runs again from
// its beginning under a replay session (package replay, through a
// [replay.Director]): every call before the position is served strictly
// from the recording (no tool or model is touched; those events keep the
// base's ids, payloads and hashes), and the calls from the position on form
// the tail, run under the changes. A call is before the position when the
// recorded call or marker it stands for is (in a concurrent group, the one
// the group matches it with), not by the order in which goroutines reach
// it.
//
// Changes ([Change]) are plain values with a snake_case wire form, recorded
// in fork.json: [ToolResult] and [LLMResponse] substitute what a tail call
// returns, addressed by a [Target] ([OnStep], [OnEvent], [OnCall]);
// [Prompt] (or [PromptAppend], [PromptPrepend] and [PromptReplace], which
// edit the shipped prompt instead of restating it), [Model] and
// [Temperature] patch the requests of matching tail model calls in the
// field each API reads; [State] patches what [replay.Read] returns; [Decision] and
// [DecisionOnce] force a [replay.Decide], [Param] a [replay.Param],
// [HumanResponse] answers a [replay.Approve]; [ChangeFunc] computes a change
// from the resolved point. Two changes writing the same thing are refused
// before anything runs, and a change whose target matched nothing in the
// tail is reported unused.
//
// Tool calls of the tail pass a side-effect guard: under [Replay] (the
// default) a call whose name and canonical input equal a base call not yet
// consumed is served that call's recorded result; anything else is blocked
// (the variant ends "blocked", with a [SuppressedEffect]) unless [Allow]
// names the tool; [Block] blocks every one. Model calls run live through the
// agent's own client, unless [Memoize] serves the ones whose request equals
// an unconsumed base call; served calls are never counted as incurred cost.
// A fork with no changes reproduces its base exactly, at every point.
//
// What a fork needs to know about its base (the index of its events, the
// replay plan with its verified payload hashes, the base side of the diff)
// is built once per base trace and shared, read-only, by every later [Run],
// [Each], [Estimate] and [Points] of it; a base whose Events slice is
// replaced or grown, or whose manifest or extras change, is indexed again,
// but its events must not be changed in place once it has been forked.
//
// [Each] runs its variants concurrently ([Concurrency]), [Samples] times
// each, sharing that read-only index of the base run; [Estimate] predicts a
// sweep's calls and cost from the base run's tail without running anything,
// and a [Budget] refuses a fork or sweep whose prediction exceeds it. A
// [Score] scores every run; a scored sweep gives each variant's mean score
// and pass rate with 95 % intervals ([Entry.Stats]), ranks the variants
// ([Sweep.Ranked]) and says whether one beats another beyond the noise of
// its samples ([Sweep.Beats]).
//
// Every variant has a [Class], its changes taken as intended: unchanged,
// intended (it differs from its base only where its changes apply: the
// request a prompt change patched, the fields [CodeFields] marks as code,
// a substituted result, a forced decision or parameter), changed (its
// behaviour changed; [Variant.BehaviorChange] says where first), or
// repaired (the base failed, the variant completed). [Variant.Diff] is
// marked accordingly ([diff.Step.Intended]).
//
// # Recordings that survive change
//
// [Heal] makes a recording again with the current code: the agent runs
// against it from its start, every call the recording answers is served
// (the memo for models, the guard for tools, matched before [Allow]), and
// from where the agent first departs from it ([Variant.FirstLive]) the
// tail runs live, so re-recording costs the tail, not the run. The changes
// given are the intended ones; a request the code already makes as a
// change would is not patched again. [DryRun] runs nothing live and
// estimates the tail ([Variant.Estimate]); a [Budget] is checked against
// that estimate before anything runs live. The variant's fork.json has
// kind "heal"; saved over the bundle it replaces it, and
// [Reproduce] runs it again.
//
// A change whose target the base run never reached (a node or model that
// no call matches, an [OnCall] of a name never called, or of an occurrence
// past the calls made or in the served prefix) is refused before anything
// runs, naming what the run offers; [NewInTail] marks a target the changed
// tail reaches for the first time. Approvals of the tail are answered by a
// [HumanResponse], else by a [Reviewer] who is present, else with the base
// run's recorded answer. [RunID] names a variant before it runs.
//
// Options are sealed per entry point: an [Option] (a change, a policy,
// Memoize, [Logger], [GroupID]) configures Run and Each alike, a
// [RunOption] only Run ([SaveTo]: the variant's bundle), an [EachOption]
// only Each (Samples, Concurrency, [SaveDir]: a directory of bundles), a
// [TraceOption] only Trace ([Override], SaveTo). An option passed where it
// means nothing does not compile.
//
// # Static forks
//
// [Trace] keeps a run through a [Cut]: [ThroughStep](n) keeps every event
// whose step is at most n (steps are non-decreasing, so this is a prefix: at
// step 5 of a 10-event run, 6 events), [ThroughEvent](id) the events up to
// and including that event. A cut keeps its step as recorded; the
// counterfactual [Step](n) runs it again. The fork gets a new run id,
// carried by its manifest and every event; event ids, parents and payloads
// are kept, and hashes and totals are recomputed. If the fork keeps the
// run's run_end it keeps the manifest's status, failure, cost and duration;
// otherwise it is an unfinished run (status "running", no failure, cost
// summed over the kept model responses, no duration). Either way it passes
// stepfork's strict validation whenever the parent does.
//
//	res, err := fork.Trace("failure.sftrace", fork.ThroughStep(5),
//		fork.Override(fork.OnStep(5), map[string]any{"status": "success", "value": 100}))
//	if err != nil {
//		return err // e.g. "invalid overrides: override targets step 5 (tool_call); …"
//	}
//	fmt.Println(res.Path) // failure-forked.sftrace
//
// An [Override] replaces the output of a tool_result or llm_response event
// (never an input), addressed with [OnStep] or [OnEvent] (the result event)
// or [OnCall] (the result that answers the call); an event-id override beats
// a step override of the same event, which beats a call override, and one
// override at most is applied per event. An overridden event gets status "ok", so that
// a frozen replay of the fork serves the new output. Overrides are validated
// before anything is written; every problem is reported in one error. An
// override of an event the fork does not keep is refused, naming the event
// and the cut.
//
// Trace reads a bundle path as a stream and stops at the cut, copying the
// lines it keeps, so a fork costs in proportion to the cut rather than to
// the trace.
//
// # Provenance: fork.json
//
// Every fork carries its provenance ([Info]) in the bundle file fork.json,
// written as an extra file through [trace.Trace].Extras so that
// integrity.json covers it (Python stepfork ignores it; its manifest and
// events reject unknown keys). [ReadInfo] reads it back from a loaded trace
// and [Reproduce] runs a counterfactual fork again from it. Schema version
// 1:
//
//	{
//	  "schema_version": 1,
//	  "kind": "static",                  // or "counterfactual", or "heal" (Heal)
//	  "run_id": "run_…",                 // the fork; must equal the manifest's
//	  "parent_run_id": "run_…",
//	  "parent_trace_path": "failure.sftrace",   // or null
//	  "fork_point": "step 5",            // as asked: "step N" or "event ID"
//	  "fork_point_step": 5,              // resolved: the last kept parent event
//	  "fork_point_event_id": "evt_…",
//	  "fork_timestamp": "2026-03-14T09:30:00Z",
//	  "overrides_applied": 1,
//	  "overrides": [{"target": "step 5", "step": 5, "event_id": "evt_…",
//	                 "type": "tool_result", "output": {…},
//	                 "output_hash": "…", "original_output_hash": "…"}],
//	  "changes": […],                    // counterfactual only: changes, wire form
//	  "policy": "replay",                // counterfactual only
//	  "group_id": "…",                   // counterfactual only: sweep members
//	  "memoize": true,                   // counterfactual only, when memoized
//	  "ancestors": [{…}, …]              // present when the parent is a fork
//	}
//
// A fork of a fork keeps the whole chain: "ancestors" holds the parent's own
// record, then its parent's, nearest first (each without "ancestors"), so
// ancestors[0].run_id is parent_run_id and the last entry's parent_run_id is
// the original recording. Outputs and changes are redacted before they are
// written, like every payload of a bundle.
package fork

// Package fork makes new runs out of recorded ones: a static fork keeps a
// recorded run up to a step, optionally with some recorded outputs replaced,
// and records where it came from.
//
//	res, err := fork.Trace("failure.sftrace", fork.AtStep(5), fork.Options{
//		Overrides: []fork.Override{
//			fork.OverrideStep(5, map[string]any{"status": "success", "value": 100}),
//		},
//	})
//	if err != nil {
//		return err // e.g. "invalid overrides: override targets step 5 (tool_call); …"
//	}
//	fmt.Println(res.ForkedTracePath) // failure-forked.sftrace
//
// # Static forks
//
// A fork at step N keeps every event whose step is at most N (steps are
// non-decreasing, so this is a prefix: at step 5 of a 10-event run, 6
// events); a fork at an event id keeps the events up to and including that
// event. The fork gets a new run id, carried by its manifest and every event;
// event ids, parents and payloads are kept, and hashes and totals are
// recomputed. If the fork keeps the run's run_end it keeps the manifest's
// status, failure, cost and duration; otherwise it is an unfinished run
// (status "running", no failure, cost summed over the kept model responses,
// no duration). Either way it passes stepfork's strict validation whenever
// the parent does.
//
// Overrides replace the output of tool_result and llm_response events (never
// inputs), chosen by step or event id; an event-id override beats a step
// override of the same event, and one override at most is applied per event.
// An overridden event gets status "ok", so that a frozen replay of the fork
// serves the new output. Overrides are validated before anything is written;
// every problem is reported in one error. An override of an event the fork
// does not keep is refused, naming the event and the fork point.
//
// Trace reads a bundle path as a stream and stops at the fork point, so a fork
// costs in proportion to the fork point rather than to the trace.
//
// # Provenance: fork.json
//
// Every fork carries its provenance in the bundle file fork.json, written as
// an extra file through trace.Trace.Extras so that integrity.json covers it
// (Python stepfork ignores it; its manifest and events reject unknown keys).
// ReadInfo reads it back from a loaded trace. Schema version 1:
//
//	{
//	  "schema_version": 1,
//	  "kind": "static",                  // or "counterfactual"
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
//	  "ancestors": [{…}, …]              // present when the parent is a fork
//	}
//
// A fork of a fork keeps the whole chain: "ancestors" holds the parent's own
// record, then its parent's, nearest first (each without "ancestors"), so
// ancestors[0].run_id is parent_run_id and the last entry's parent_run_id is
// the original recording. Outputs and changes are redacted before they are
// written, like every payload of a bundle.
package fork

// Package sftest is the go test glue of stepfork: it loads, records and
// replays agent runs, forks them, sweeps variants and compares them with
// golden files, reporting every problem as a readable test failure.
//
//	func TestRefundNeedsApproval(t *testing.T) {
//		base := sftest.Load(t, "testdata/refund-failure.sftrace")
//		v := sftest.Fork(t, base, fork.Failure(), refund.Agent,
//			fork.Prompt("decide", "Refunds above the policy limit need approval."))
//		assert.Completed(t, v)
//		assert.ToolNotCalled(t, v, "issue_refund")
//		sftest.Golden(t, v) // testdata/TestRefundNeedsApproval.golden; go test -update rewrites it
//	}
//
// Every helper takes the test's t, calls t.Helper, and fails the test with a
// message that starts with what went wrong (for a divergence, the first one,
// naming its step) and says what to do next.
//
//   - Load loads a committed bundle; Record records one into testdata/ when
//     go test runs with -stepfork.record=REGEXP and replays it otherwise,
//     as httprr does for HTTP traffic; Replay replays a run (frozen by
//     default) and fails on a divergence.
//   - Fork runs a counterfactual fork (fork.Run) and returns the variant for
//     the assertions of package assert; Sweep runs variants side by side,
//     one subtest each, and logs a summary table.
//   - Golden compares a stable rendering of a variant, replay result, diff,
//     trace or sweep (Render) with testdata/<test name>.golden through
//     autogold; go test -update (autogold's flag) rewrites it.
//   - ForkCheck null-forks a run at every fork point and fails a subtest
//     named after each point that does not reproduce the run; Minimize
//     finds the shortest prefix of a failed run that still reproduces its
//     failure, for committing as a small regression trace.
//   - [Corpus] runs a whole directory of recorded runs (one subtest per
//     bundle: a frozen replay, or a check of the caller's such as a fork
//     with a candidate fix) and summarises what replayed, diverged or was
//     repaired; under Bazel's sharding variables Corpus and [Sweep] run
//     only their shard's share, and -stepfork.results writes the outcomes
//     for stepfork report to merge.
//   - After the agent changes, [Intended] says what changed (a prompt, in
//     the words of forks, or the request fields that are code) and Corpus
//     classes each bundle: unchanged, changed only where intended, changed
//     in behaviour (failing with its first behavioural divergence), or
//     repaired; -stepfork.heal ([HealFlag]) then re-records the bundles
//     from where they first depart from the recording, at the cost of the
//     tails, under a [Budget], or estimates that with [DryRun].
//
// # Exploring
//
// go test -run TestRefundNeedsApproval -stepfork.explore=TestRefundNeedsApproval
// makes the test serve, once it has run, an interactive page of the base
// run it gave Fork (or Sweep, Replay, ForkCheck, Minimize, Record), and
// wait: the person picks a fork point, changes what the run recorded
// there, runs the fork with the test's own agent in the test process,
// compares the runs, and takes home the Fork call of any of them with the
// assertions that held, ready to paste or written as a new _test.go file
// next to the test. The page answers on 127.0.0.1 only, behind a random
// token, and shows every value redacted; it refuses to start under CI. See
// ExploreFlag.
//
// # Flags
//
// sftest defines its flags (-stepfork.record, -stepfork.results,
// -stepfork.heal with -stepfork.heal.budget and -stepfork.heal.dryrun, and
// -stepfork.report: where failing tests get an HTML page of what failed,
// see ReportFlag, and -stepfork.explore, see ExploreFlag) only in test
// binaries (testing.Testing). Golden uses autogold's -update, -clean and
// -fail-on-update, which autogold defines (-update only when no other
// package has).
package sftest

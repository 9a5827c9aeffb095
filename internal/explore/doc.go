// Package explore serves the explore page of a test (go test
// -stepfork.explore, see package sftest): an interactive page of a base run
// on which a person picks a fork point, changes what the run recorded there,
// and runs the fork with the test's own agent, in the test process, until
// they end the session.
//
// The page shows the base run as the pages of package view show a run;
// the fork points the run offers (fork.Points), the one fork.Failure
// resolves to marked; and, for a chosen point, what can change there with
// every target resolved as package fork resolves it: the tool results and
// model responses of the tail, prefilled with what was recorded; the prompts
// of the tail's model calls, by node, by model and for every call, to
// replace, append to, prepend to or edit by passage; models and
// temperatures; the decisions, parameters and approvals of the tail; state;
// and the side-effect policy (the guard's default, Block, or tools allowed
// to run live, with a warning) and memoization.
//
// Run calls fork.Run; one fork runs at a time and can be canceled. Each run
// stays in the session's list, opens as the page of its variant (the fork,
// its diff against the base, its timeline), compares with the others as a
// sweep or with one other as a diff, saves as a bundle under the test's
// testdata/explore, and offers its Go: the sftest.Fork call, naming the
// base and the agent as the test does, with the assertions that held on
// what it did, and a test file holding it that is written next to the test
// on request (never over a file, atomically).
//
// The session runs code on request, so it is served by a view.Loopback
// (127.0.0.1 only, requests naming that address in origin form, timeouts,
// a cap on connections) under a random token in the address; a request
// without the token, or changing state other than by a POST carrying it in
// a header with a JSON body and no foreign Origin, is refused. Every string
// the page shows, the generated code included, is redacted first.
package explore

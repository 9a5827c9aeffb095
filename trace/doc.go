// Package trace reads, writes, validates and compares .sftrace bundles: the
// trace format of Python stepfork v0.1, byte for byte.
//
// A bundle is a directory NAME.sftrace holding manifest.json, events.jsonl,
// redactions.json and integrity.json. [Load] reads a whole bundle; [Open]
// streams its events in constant memory; [ReadBehavior] reads a run's
// behavior steps with a digest of each, without keeping the payloads of its
// calls (what comparing two large bundles needs); [Trace.Save] writes one atomically,
// redacting secrets and computing payload hashes first; [Builder] assembles a
// trace in a few lines for tests.
//
//	tr, err := trace.Load("testdata/booking-agent.sftrace")
//	if err != nil {
//		return err
//	}
//	for _, ev := range tr.Events {
//		fmt.Println(ev.Step, ev.Type, ev.Label())
//	}
//	return tr.Save("out.sftrace", trace.Overwrite())
//
// # Values
//
// Payloads (inputs, outputs, state) are [Value]s: immutable JSON held in the
// canonical form stepfork hashes ([CanonicalProfile]). Integers and floats stay
// apart (1 and 1.0 differ), integers keep every digit, and the zero Value is
// Absent, which is not the same as an explicit null.
//
// # Validation, integrity and redaction
//
// [Validate] checks a trace in memory and [ValidateBundle] a bundle on disk,
// streaming its events once: every check and message of stepfork validate
// (duplicate ids, parents, run ids, steps, event count, strict run_start and
// error rules), payload hashes and file digests with [CheckIntegrity], and
// checks stepfork lacks (manifest status vs run_end, totals, failure.step,
// run_end last, tool call/result pairing) reported as warnings, or errors
// with [Pedantic]. All issues are collected; [Report.ExitCode] gives the
// CLI's 0/1/2/3. [VerifyIntegrity] checks integrity.json alone, including
// extra files
// such as fork.json that it lists.
//
// Redaction runs before hashing and writing: values under sensitive keys
// (api_key, accessToken, password, …) and credentials in any string
// (stepfork's Bearer tokens, sk-, ghp_, gho_, github_pat_; what secret
// scanners catch: AWS, Google, Slack, Stripe, GitLab, npm, Hugging Face
// keys, JWTs, PEM private keys; HTTP Basic credentials, passwords in URLs
// and DSNs, api_key=… and password: … in free text; see [RedactString])
// become "[REDACTED]", recorded as JSON Pointers in redactions.json and in
// each event's redactions list. A credential is found glued to the word
// before it, after an escape of JSON text, and in an object's key (the
// member is kept under the redacted key). A credential in a field that
// cannot be redacted without breaking the trace (an id, the run id) is
// [ErrProtectedField]: the trace is not written.
//
// # Calls, nodes and behavior
//
// [Trace.Calls] pairs every tool_call and llm_request with what answered it
// (its result, or the error it failed with), by one rule that every package
// of the module uses; [Trace.Nodes] matches node exits to their enters;
// [TotalsOf] counts a list of events and sums its cost; [Trace.EventLanes]
// says which goroutine made each operation, relative to its scope, from the
// bundle's [LanesFile], and so which events belong to a concurrent group,
// whose order is not behavior. [Trace.Behavior]
// reduces a run to its behavior steps: tool and model calls
// with their results, state changes, errors, decisions, parameters, the node
// path and the run end, without ids, times, tokens or costs. Package
// [github.com/stepfork/stepfork/trace/diff] aligns the behavior of two runs.
//
// # Which code made a run
//
// A run recorded by a Go agent carries [BuildFile] (build.json), an extra
// file covered by integrity.json: the agent's module, version, VCS revision
// and commit time ([Build], [Trace.Build]), so that a corpus can tell which
// bundles older code recorded.
//
// # Runtime markers
//
// Go agents record named phases, decisions, knobs and nondeterminism as
// state_change events with reserved keys (@node, @decision, @param, @now,
// @id, @effect), so bundles stay valid stepfork v0.1 (user state keys must
// not start with '@'). The table of their payloads is at [MarkerNode];
// [Event.Marker] decodes one and [MarkerEvent] builds one.
//
// # Input limits and decisions
//
// Bad input is an error that names the file (and, for events.jsonl, the line:
// "events.jsonl:17: …"), never a panic and never a silently repaired value.
// Where Python stepfork is lenient or silent, this package decides:
//
//   - CRLF line endings are accepted (Python reads in universal-newline mode);
//     the events and payload hashes are those of the same file with LF. A lone
//     CR is not a line ending.
//   - A UTF-8 byte order mark is refused: stepfork never writes one.
//   - Blank and whitespace-only lines are refused ("blank JSONL line"), as in
//     Python; a 0-byte events.jsonl is a valid empty run.
//   - NaN, Infinity, -Infinity and floats that overflow are refused (Python
//     reads them but cannot hash them), as are invalid UTF-8, lone UTF-16
//     surrogates and duplicate object keys.
//   - An event without id, run_id or timestamp is refused (Python invents
//     them), and no lax coercion is made: "step": "3", a float token count or
//     a Unix-number timestamp are errors. Timestamps must carry a time zone
//     and at most microsecond precision.
//   - Payloads may nest at most [MaxDepth] arrays and objects; a line of
//     events.jsonl may be at most [MaxLineBytes] long, not counting its line
//     ending. Longer input is refused with its line number.
//   - Files of the bundle may be symbolic links to files inside the bundle;
//     a link that leads outside it is refused, as is a FIFO, a device or a
//     directory in place of a file. manifest.json and integrity.json may be
//     at most 1 MiB, redactions.json and each extra file 16 MiB, and the
//     extra files integrity.json lists at most 32, of 32 MiB in all; sizes
//     are checked before a byte is read.
//   - Every reader opens a bundle once: a directory is opened once and
//     each of its files relative to it, so that a reader sees one bundle or
//     the other while [Trace.Save] replaces it (the two directories are
//     exchanged), never the files of both; a packed bundle is read once,
//     from its start, under the rules and budgets at [PackedSuffix].
package trace

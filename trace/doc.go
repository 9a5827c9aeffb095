// Package trace reads, writes, validates and compares .sftrace bundles: the
// trace format of Python stepfork v0.1, byte for byte.
//
// A bundle is a directory NAME.sftrace holding manifest.json, events.jsonl,
// redactions.json and integrity.json. Load reads a whole bundle; Open streams
// its events in constant memory; Save writes one atomically, redacting
// secrets and computing payload hashes first.
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
// Payloads (inputs, outputs, state) are Values: immutable JSON held in the
// canonical form stepfork hashes (CanonicalProfile). Integers and floats stay
// apart (1 and 1.0 differ), integers keep every digit, and the zero Value is
// Absent, which is not the same as an explicit null.
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
//   - Payloads may nest at most MaxDepth arrays and objects; a line of
//     events.jsonl may be at most MaxLineBytes long, not counting its line
//     ending. Longer input is refused with its line number.
//   - Files of the bundle may be symbolic links to files inside the bundle;
//     a link that leads outside it is refused.
package trace

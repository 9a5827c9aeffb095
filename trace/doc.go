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
package trace

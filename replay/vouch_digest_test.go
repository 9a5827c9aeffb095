package replay

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/internal/vouch"
	"github.com/stepfork/stepfork/trace"
)

// digestFields are the fields of an event eventDigest covers, each as a
// getter and a setter of its text.
var digestFields = []struct {
	name string
	get  func(ev *trace.Event) string
	set  func(ev *trace.Event, s string)
}{
	{"type", func(ev *trace.Event) string { return string(ev.Type) }, func(ev *trace.Event, s string) { ev.Type = trace.EventType(s) }},
	{"input_hash", func(ev *trace.Event) string { return ev.InputHash }, func(ev *trace.Event, s string) { ev.InputHash = s }},
	{"output_hash", func(ev *trace.Event) string { return ev.OutputHash }, func(ev *trace.Event, s string) { ev.OutputHash = s }},
	{"provider", func(ev *trace.Event) string { return ev.Provider }, func(ev *trace.Event, s string) { ev.Provider = s }},
	{"model", func(ev *trace.Event) string { return ev.Model }, func(ev *trace.Event, s string) { ev.Model = s }},
	{"name", func(ev *trace.Event) string { return ev.Name }, func(ev *trace.Event, s string) { ev.Name = s }},
	{"key", func(ev *trace.Event) string { return ev.Key }, func(ev *trace.Event, s string) { ev.Key = s }},
	{"error_type", func(ev *trace.Event) string { return ev.ErrorType }, func(ev *trace.Event, s string) { ev.ErrorType = s }},
	{"message", func(ev *trace.Event) string { return ev.Message }, func(ev *trace.Event, s string) { ev.Message = s }},
	{"input", func(ev *trace.Event) string { return ev.Input.Canonical() }, func(ev *trace.Event, s string) { ev.Input = jsonString(s) }},
	{"output", func(ev *trace.Event) string { return ev.Output.Canonical() }, func(ev *trace.Event, s string) { ev.Output = jsonString(s) }},
	{"before", func(ev *trace.Event) string { return ev.Before.Canonical() }, func(ev *trace.Event, s string) { ev.Before = jsonString(s) }},
	{"after", func(ev *trace.Event) string { return ev.After.Canonical() }, func(ev *trace.Event, s string) { ev.After = jsonString(s) }},
	{"details", func(ev *trace.Event) string { return ev.Details.Canonical() }, func(ev *trace.Event, s string) { ev.Details = jsonString(s) }},
}

// jsonString is the value whose canonical text is s when s is canonical
// JSON, and otherwise a string value (a different text, which is all a
// change needs).
func jsonString(s string) trace.Value {
	if v, err := trace.ParseValue([]byte(s)); err == nil && v.Canonical() == s {
		return v
	}
	return trace.StringValue(s)
}

// TestEventDigestSeesEveryField changes one covered field of every event
// of a recording at a time, in the ways a test edits a recorded trace (a
// byte changed in place, a byte added or removed, the text moved to the
// next field): each change changes the digest, so the event loses its
// vouch. A field left out (ids, statuses) does not change it.
func TestEventDigestSeesEveryField(t *testing.T) {
	t.Parallel()
	res, err := Record(context.Background(), "vouch", nil, vouchAgent)
	require.NoError(t, err)
	for i := range res.Trace.Events {
		ev := res.Trace.Events[i]
		sum := vouch.Digest(&ev)
		require.Equal(t, sum, vouch.Digest(&ev), "the digest is a function of the event")
		for f, fd := range digestFields {
			text := fd.get(&ev)
			variants := []string{text + "x", "x" + text}
			if len(text) > 0 {
				b := []byte(text)
				b[len(b)/2] ^= 1
				variants = append(variants, string(b), text[:len(text)-1], text[1:])
			}
			for _, v := range variants {
				changed := ev
				fd.set(&changed, v)
				if fd.get(&changed) == text {
					continue // the setter could not express v
				}
				require.NotEqual(t, sum, vouch.Digest(&changed), "event %d, field %s changed to %q", i, fd.name, v)
			}
			if f+1 < len(digestFields) && len(text) > 0 {
				// The last byte of this field moved to the start of the next.
				next := digestFields[f+1]
				changed := ev
				fd.set(&changed, text[:len(text)-1])
				next.set(&changed, text[len(text)-1:]+next.get(&ev))
				if fd.get(&changed)+next.get(&changed) == text+next.get(&ev) {
					require.NotEqual(t, sum, vouch.Digest(&changed), "event %d: a byte of %s moved to %s", i, fd.name, next.name)
				}
			}
		}
		outside := ev
		outside.ID, outside.ParentID, outside.Status = "other", "other", trace.StatusError
		require.Equal(t, sum, vouch.Digest(&outside), "ids and statuses are not digested")
	}
}

// FuzzEventDigest checks that two events whose covered fields differ have
// different digests (a 64-bit collision aside, which the fuzzer will not
// find), and that equal fields give equal digests.
func FuzzEventDigest(f *testing.F) {
	f.Add("tool_call", "ab", "", "n", "k", "x", "y")
	f.Add("tool_call", "a", "b", "", "", "", "")
	f.Add("state_change", "", "", `{"a":1}`, `{"a":1}`, "k", "")
	f.Fuzz(func(t *testing.T, typ, a, b, c, d, e, g string) {
		mk := func(typ, a, b, c, d, e, g string) trace.Event {
			ev := trace.Event{Type: trace.EventType(typ), Name: a, Key: b, Message: e, ErrorType: g}
			ev.Input, ev.After = jsonString(c), jsonString(d)
			return ev
		}
		x := mk(typ, a, b, c, d, e, g)
		// The same fields, the text shifted by one byte between neighbours.
		shifts := [][7]string{{typ, a + b, "", c, d, e, g}, {typ, a, b + c, "", d, e, g}, {typ, a, b, c + d, "", e, g}, {typ + a, "", b, c, d, e, g}}
		sum := vouch.Digest(&x)
		same := mk(typ, a, b, c, d, e, g)
		if vouch.Digest(&same) != sum {
			t.Fatal("equal events, different digests")
		}
		for _, s := range shifts {
			y := mk(s[0], s[1], s[2], s[3], s[4], s[5], s[6])
			equal := true
			for _, fd := range digestFields {
				if fd.get(&x) != fd.get(&y) {
					equal = false
				}
			}
			if !equal && vouch.Digest(&y) == sum {
				t.Fatalf("events %+v and %+v differ but have one digest", x, y)
			}
		}
	})
}

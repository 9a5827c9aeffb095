package vouch

import (
	"testing"

	"github.com/stepfork/stepfork/trace"
)

func events(n int) []trace.Event {
	evs := make([]trace.Event, n)
	for i := range evs {
		evs[i] = trace.Event{Type: trace.ToolResult, Name: "search", Output: trace.StringValue(string(rune('a' + i%26)))}
		evs[i].SetHashes()
	}
	return evs
}

// TestFor checks what For records: nothing for bits or sums of another
// length, a vouch only for the same backing array and length, the bits as
// given (clean nil: nothing clean), and a vouch that holds only while the
// event keeps its digest.
func TestFor(t *testing.T) {
	t.Parallel()
	const n = 70 // two words of bits
	bits := []uint64{1<<0 | 1<<5, 1 << (65 - 64)}
	for _, tc := range []struct {
		name               string
		sum, hashed, clean []uint64
	}{
		{"short sums", make([]uint64, n-1), bits, nil},
		{"one word of hashed bits", make([]uint64, n), bits[:1], nil},
		{"three words of clean bits", make([]uint64, n), bits, []uint64{0, 0, 0}},
	} {
		evs := events(n)
		For(evs, tc.sum, tc.hashed, tc.clean)
		if Of(evs) != nil {
			t.Errorf("%s: recorded a vouch", tc.name)
		}
	}

	evs := events(n)
	For(evs, Sums(evs, bits), bits, nil)
	v := Of(evs)
	if v == nil {
		t.Fatal("no vouch for the array vouched for")
	}
	if Of(append([]trace.Event(nil), evs...)) != nil || Of(evs[:n-1]) != nil || Of(evs[1:]) != nil {
		t.Error("a copy or a shorter slice of the array is vouched for")
	}
	for i := range evs {
		want := i == 0 || i == 5 || i == 65
		if v.IsHashed(i) != want || v.IsClean(i) {
			t.Errorf("event %d: hashed %v clean %v, want hashed %v and not clean", i, v.IsHashed(i), v.IsClean(i), want)
		}
		if want && !v.Holds(i, &evs[i]) {
			t.Errorf("event %d does not hold its vouch", i)
		}
	}
	evs[5].Output = trace.StringValue("changed")
	if v.Holds(5, &evs[5]) {
		t.Error("a changed payload holds its vouch")
	}

	clean := []uint64{1 << 5, 0}
	For(evs, Sums(evs, bits), bits, clean)
	if v := Of(evs); v == nil || !v.IsClean(5) || v.IsClean(0) || !v.Holds(5, &evs[5]) {
		t.Error("a second For does not replace the vouch")
	}
}

package sftest

import (
	"slices"
	"testing"
	"time"
)

// TestProgressThrottled: nothing before the first period is over, then at
// most a line per period, never for the last unit of a known total.
func TestProgressThrottled(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	var got []string
	p := &progress{t: t, log: func(_ testing.TB, line string) { got = append(got, line) }, what: "sftest.Corpus", unit: "bundle(s) of 10",
		total: 10, every: 5 * time.Second, now: func() time.Time { return clock }}
	p.start, p.due = clock, clock.Add(p.every)
	// Units finish at 1s, 2s, … 10s.
	for range 10 {
		clock = clock.Add(time.Second)
		p.step()
	}
	want := []string{"sftest.Corpus: 5 bundle(s) of 10 done (5s)"}
	if !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q (the 10th unit at 10s is the last: not logged)", got, want)
	}
	got = nil
	p.total, p.done, p.due = 0, 0, clock.Add(p.every)
	for range 12 {
		clock = clock.Add(2 * time.Second)
		p.step()
	}
	want = []string{"sftest.Corpus: 3 bundle(s) of 10 done (16s)", "sftest.Corpus: 6 bundle(s) of 10 done (22s)", "sftest.Corpus: 9 bundle(s) of 10 done (28s)", "sftest.Corpus: 12 bundle(s) of 10 done (34s)"}
	if !slices.Equal(got, want) {
		t.Errorf("with no total logged %q, want %q", got, want)
	}
}

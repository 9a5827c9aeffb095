package trace

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestLookupField checks the key switch of the event decoder against the
// field names, and that near misses are unknown.
func TestLookupField(t *testing.T) {
	t.Parallel()
	for i, name := range fieldNames {
		if f, ok := lookupField([]byte(name)); !ok || f != eventField(i) {
			t.Errorf("lookupField(%q) = %d, %v; want %d, true", name, f, ok, i)
		}
	}
	for _, name := range []string{"", "ID", "run-id", "inputs", "step ", "cost", "usd"} {
		if f, ok := lookupField([]byte(name)); ok {
			t.Errorf("lookupField(%q) = %d, true; want unknown", name, f)
		}
	}
}

// TestAppendTimestampDigits checks the hand-written date and time digits
// of appendTimestamp against time.Format, over years from before 0 to
// after 9999, fractions and zones.
func TestAppendTimestampDigits(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	east := time.FixedZone("east", 5*3600+30*60)
	times := []time.Time{
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(-1, 6, 15, 12, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 9, 7, 5, 3, 120_000, east),
	}
	for range 2000 {
		times = append(times, time.Unix(rng.Int64N(400_000_000_000)-100_000_000_000, rng.Int64N(1e9)).In([]*time.Location{time.UTC, east}[rng.IntN(2)]))
	}
	for _, tm := range times {
		tm = tm.Truncate(time.Microsecond)
		want := tm.Format("2006-01-02T15:04:05")
		if us := tm.Nanosecond() / 1000; us != 0 {
			want += fmt.Sprintf(".%06d", us)
		}
		if _, off := tm.Zone(); off == 0 {
			want += "Z"
		} else {
			want += tm.Format("-07:00")
		}
		if got := string(appendTimestamp(nil, tm)); got != want {
			t.Errorf("appendTimestamp(%v) = %q, want %q", tm, got, want)
		}
	}
}

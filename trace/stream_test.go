package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// streamed is what a loop over Reader.Events sees.
type streamed struct {
	IDs      []string
	Lines    []int
	Saved    []bool
	Raw      []string
	Payloads []string // After as yielded, then as Decode gives it
	Err      string
	Digest   string
}

// streamBundle reads the bundle at p with the given Reader settings,
// stopping after limit events when limit > 0.
func streamBundle(t *testing.T, p string, workers int, skipPayloads, skipDigest bool, limit int) streamed {
	t.Helper()
	opts := []OpenOption{checkSavedForm(), Workers(workers)}
	if skipPayloads {
		opts = append(opts, SkipPayloads())
	}
	if !skipDigest {
		opts = append(opts, hashEvents())
	}
	r, err := Open(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got streamed
	for ev, err := range r.Events() {
		if err != nil {
			got.Err = err.Error()
			break
		}
		var full Event
		if err := r.Decode(&full); err != nil {
			t.Fatalf("Decode at line %d: %v", r.line(), err)
		}
		got.IDs = append(got.IDs, ev.ID)
		got.Lines = append(got.Lines, r.line())
		line, saved := r.rawLine()
		got.Saved = append(got.Saved, saved)
		got.Raw = append(got.Raw, string(line))
		got.Payloads = append(got.Payloads, ev.After.Canonical()+" "+full.After.Canonical())
		if limit > 0 && len(got.IDs) == limit {
			return got
		}
	}
	if got.Err == "" {
		got.Digest = r.eventsDigest()
	}
	return got
}

// TestReaderWorkers checks that decoding on workers yields what the
// sequential reader yields (events, lines, saved form, errors, digest), in
// every mode, on bundles with errors and hand-edited lines at and across
// batch boundaries.
func TestReaderWorkers(t *testing.T) {
	t.Parallel()
	long := func(b *Builder) {
		b.RunStart(map[string]any{"task": "stream"})
		for i := range 400 {
			b.State("k", i, i+1)
		}
		b.RunEnd(RunCompleted, nil)
	}
	tests := []struct {
		name string
		edit func(string) string
	}{
		{"clean", func(s string) string { return s }},
		{"lines not in saved form", func(s string) string {
			s = editLine(127, replace(`{"`, `{ "`))(s)
			s = editLine(128, replace(`"after":`, `"after": `))(s)
			return editLine(300, replace(`"key":"k"`, `"key":"sk-`+strings.Repeat("a", 24)+`"`))(s)
		}},
		{"blank line in the second batch", editLine(249, func(string) string { return "" })},
		{"bad event at a batch boundary", editLine(128, replace(`"type":"state_change"`, `"type":"nope"`))},
		{"two errors, the first wins", func(s string) string {
			s = editLine(300, func(string) string { return "{" })(s)
			return editLine(5, func(string) string { return "[]" })(s)
		}},
		{"truncated last line", func(s string) string { return strings.TrimSuffix(s, "\n")[:len(s)-20] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := bundleOf(t, built(t, long))
			editFile(t, p, EventsFile, tt.edit)
			data, err := os.ReadFile(filepath.Join(p, EventsFile))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			for _, skipPayloads := range []bool{false, true} {
				want := streamBundle(t, p, 0, skipPayloads, false, 0)
				if want.Err == "" && want.Digest != hex.EncodeToString(sum[:]) {
					t.Errorf("digest %s, want that of the file", want.Digest)
				}
				if tt.name == "lines not in saved form" {
					for _, i := range []int{127, 128, 300} {
						if want.Saved[i] {
							t.Errorf("line %d is reported in saved form", i+1)
						}
					}
					if !want.Saved[126] || !want.Saved[129] {
						t.Errorf("lines 127 and 130 are not reported in saved form")
					}
				}
				for _, workers := range []int{1, 2, 3, 8} {
					for _, skipDigest := range []bool{false, true} {
						got := streamBundle(t, p, workers, skipPayloads, skipDigest, 0)
						if diff := cmp.Diff(want, got); diff != "" {
							t.Errorf("skipPayloads=%v, %d workers, skipDigest=%v differ from the sequential reader (-want +got):\n%s",
								skipPayloads, workers, skipDigest, diff)
						}
					}
				}
				if n := len(want.IDs); n >= 150 {
					got := streamBundle(t, p, 2, skipPayloads, true, 150)
					if diff := cmp.Diff(want.Raw[:150], got.Raw); diff != "" {
						t.Errorf("stopping after 150 events (-want +got):\n%s", diff)
					}
				}
			}
		})
	}
}

// TestReaderEventsDigestAfterClose checks that, without the running
// digest, eventsDigest reads the file opened again, and that once the
// Reader is closed it gives nothing rather than read another bundle that
// may be at the path by then.
func TestReaderEventsDigestAfterClose(t *testing.T) {
	t.Parallel()
	p := bundleOf(t, built(t, func(b *Builder) {
		b.RunStart("x")
		b.Tool("search", map[string]any{"q": "a"}, []any{1, 2})
		b.RunEnd(RunCompleted, "done")
	}))
	data, err := os.ReadFile(filepath.Join(p, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	for _, workers := range []int{0, 2} {
		r, err := Open(p, Workers(workers))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := range r.Events() {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if got := r.eventsDigest(); got != hex.EncodeToString(sum[:]) || n != 4 {
			t.Errorf("%d workers: %d events, digest %s; want 4 events and %x", workers, n, got, sum)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if got := r.eventsDigest(); got != "" {
			t.Errorf("%d workers: digest after Close = %s, want none", workers, got)
		}
	}
}

// TestReaderWorkersEndItsGoroutines stops loops early, by break and by a
// panic in the loop body, and checks that no goroutine outlives them. It
// does not run in parallel, so the goroutine count is its own.
func TestReaderWorkersEndItsGoroutines(t *testing.T) {
	p := bundleOf(t, built(t, func(b *Builder) {
		b.RunStart("x")
		for i := range 2000 {
			b.State("k", i, i+1)
		}
		b.RunEnd(RunCompleted, nil)
	}))
	before := runtime.NumGoroutine()
	stopAt := func(n int, panics bool) {
		defer func() {
			if v := recover(); (v != nil) != panics {
				t.Errorf("recovered %v, want a panic: %v", v, panics)
			}
		}()
		r, err := Open(p, Workers(2))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		k := 0
		for _, err := range r.Events() {
			if err != nil {
				t.Fatal(err)
			}
			if k++; k == n {
				if panics {
					panic("stop")
				}
				break
			}
		}
		for range r.Events() {
			t.Fatal("Events yielded again after the loop stopped early")
		}
	}
	stopAt(1, false)
	stopAt(700, false)
	stopAt(10, true)
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the loops, %d before", n, before)
	}
}

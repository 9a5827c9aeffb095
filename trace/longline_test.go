package trace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// longLineBundle saves a bundle whose one tool result is a line of about
// size bytes: a string payload, or an array of small objects.
func longLineBundle(tb testing.TB, size int, array bool) string {
	tb.Helper()
	b := NewBuilder("long")
	b.RunStart(map[string]any{"q": 1})
	var out any = map[string]any{"text": strings.Repeat("abcdefgh", size/8)}
	if array {
		items := make([]any, size/10)
		for i := range items {
			items[i] = map[string]any{"k": i % 10}
		}
		out = map[string]any{"items": items}
	}
	b.Tool("search", map[string]any{"to": "x"}, out)
	b.RunEnd(RunCompleted, "done")
	path := filepath.Join(tb.TempDir(), "long.sftrace")
	if err := b.MustTrace().Save(path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkLongLine reads a bundle with one line of 63 MB (within
// MaxLineBytes) as a fork does: every event decoded, checked for saved
// form, and its line written to a new bundle. B/op over the line's size is
// what one line costs in memory. It checks that each copy has the four
// events, that the longest line read is the source's longest, and that
// the last copy's events.jsonl is the source's, byte for byte.
//
//	go test ./trace -run '^$' -bench LongLine -benchtime 3x
func BenchmarkLongLine(b *testing.B) {
	for _, kind := range []struct {
		name  string
		array bool
	}{{"string", false}, {"array", true}} {
		b.Run(kind.name, func(b *testing.B) {
			path := longLineBundle(b, 63<<20, kind.array)
			var lineBytes int
			var copied string
			b.ReportAllocs()
			for b.Loop() {
				r, err := Open(path, checkSavedForm())
				if err != nil {
					b.Fatal(err)
				}
				copied = filepath.Join(b.TempDir(), "copy.sftrace")
				w, err := NewBundleWriter(copied, r.Manifest())
				if err != nil {
					b.Fatal(err)
				}
				events := 0
				for ev, err := range r.Events() {
					events++
					if err != nil {
						b.Fatal(err)
					}
					line, saved := r.rawLine()
					lineBytes = max(lineBytes, len(line))
					if saved {
						err = w.writeRaw(ev, line)
					} else {
						err = w.WriteEvent(ev)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				r.Close()
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				if events != 4 { // run_start, the tool's call and result, run_end
					b.Fatalf("%d events copied, want 4", events)
				}
			}
			src, err := os.ReadFile(filepath.Join(path, EventsFile))
			if err != nil {
				b.Fatal(err)
			}
			longest := 0 // without its newline, as rawLine gives it
			for line := range bytes.Lines(src) {
				longest = max(longest, len(bytes.TrimSuffix(line, []byte("\n"))))
			}
			if lineBytes != longest {
				b.Fatalf("the longest line read is %d bytes, want %d", lineBytes, longest)
			}
			sameFile(b, filepath.Join(copied, EventsFile), filepath.Join(path, EventsFile))
			b.ReportMetric(float64(lineBytes)/(1<<20), "line-MB")
		})
	}
}

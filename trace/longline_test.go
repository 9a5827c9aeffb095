package trace

import (
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
// what one line costs in memory.
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
			b.ReportAllocs()
			for b.Loop() {
				r, err := Open(path, checkSavedForm())
				if err != nil {
					b.Fatal(err)
				}
				w, err := NewBundleWriter(filepath.Join(b.TempDir(), "copy.sftrace"), r.Manifest())
				if err != nil {
					b.Fatal(err)
				}
				for ev, err := range r.Events() {
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
			}
			b.ReportMetric(float64(lineBytes)/(1<<20), "line-MB")
		})
	}
}

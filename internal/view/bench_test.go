package view

import (
	"io"
	"testing"

	"github.com/stepfork/stepfork/internal/view/viewtest"
)

// BenchmarkRunPage100k is the generation of the page of a run of 100k
// events: the timeline built, everything redacted, the data encoded and
// the page written.
func BenchmarkRunPage100k(b *testing.B) {
	tr := viewtest.LargeRun(100_000)
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		cw := &countWriter{}
		if err := RunPage(tr).Render(cw); err != nil {
			b.Fatal(err)
		}
		n = cw.n
	}
	b.ReportMetric(float64(n)/(1<<20), "MiB/page")
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)

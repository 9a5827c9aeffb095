package view

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/internal/view/viewtest"
	"github.com/stepfork/stepfork/trace"
)

// BenchmarkRunPage100k is the generation of the page of a run of 100k
// events: the timeline built, everything redacted, the data encoded and
// the page written. It checks the page against one rendered before the
// loop (the run shown, its secret redacted): byte for byte on the first
// iteration, by size on the others.
func BenchmarkRunPage100k(b *testing.B) {
	tr := viewtest.LargeRun(100_000)
	var ref bytes.Buffer
	if err := RunPage(tr).Render(&ref); err != nil {
		b.Fatal(err)
	}
	if page := ref.String(); !strings.Contains(page, tr.RunID) || !strings.Contains(page, trace.Redacted) ||
		strings.Contains(page, viewtest.Secret) {
		b.Fatal("the page does not show the run, or shows its secret")
	}
	b.ReportAllocs()
	var n int64
	first := true
	for b.Loop() {
		cw := &countWriter{}
		if first {
			cw.want, first = ref.Bytes(), false
		}
		if err := RunPage(tr).Render(cw); err != nil {
			b.Fatal(err)
		}
		if cw.n != int64(ref.Len()) || cw.differs {
			b.Fatalf("a page of %d bytes, want the %d of the page rendered before", cw.n, ref.Len())
		}
		n = cw.n
	}
	b.ReportMetric(float64(n)/(1<<20), "MiB/page")
}

// countWriter counts what is written to it and, when want is set, checks
// that it is want.
type countWriter struct {
	n       int64
	want    []byte
	differs bool
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.want != nil && !c.differs {
		c.differs = c.n+int64(len(p)) > int64(len(c.want)) || !bytes.Equal(p, c.want[c.n:c.n+int64(len(p))])
	}
	c.n += int64(len(p))
	return len(p), nil
}

var _ io.Writer = (*countWriter)(nil)

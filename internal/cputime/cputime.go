// Package cputime measures what a benchmark process uses: CPU time, peak
// resident memory and page faults. The benchmarks report CPU time per operation
// (cpu-ns/op) next to ns/op because wall time is unreliable on a shared,
// loaded machine (see BENCHMARKS.md at the module root).
package cputime

import (
	"testing"
	"time"
)

// Report reports the CPU time used since start, per operation, as
// cpu-ns/op.
func Report(b *testing.B, start time.Duration) {
	b.Helper()
	b.ReportMetric(float64(Used()-start)/float64(b.N), "cpu-ns/op")
}

package cputime

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// First is what the first operation of a fresh process costs, next to the
// same operation once the process is warm: what [MeasureFirst] measures in
// a child and [RunFirst] reads back. A fresh process takes a page fault on
// the first touch of each page its heap grows into, and pays every
// once-per-process set-up (compiled patterns, reflection caches, build
// information) in its first operation.
type First struct {
	CPU    time.Duration // the first operation's CPU time
	Faults int64         // its minor page faults
	Bytes  int64         // the bytes it allocated
	Steady time.Duration // the median CPU time of the later half of the operations after it
}

// firstPrefix starts the line a child prints and RunFirst reads.
const firstPrefix = "first-process "

// MeasureFirst runs op once as the first operation of this process, then
// steady times more, and writes what it measured to w as the line
// [RunFirst] reads. Call it before the process has done anything else that
// op does.
func MeasureFirst(w io.Writer, steady int, op func()) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu, faults := Used(), Faults()
	op()
	cpu, faults = Used()-cpu, Faults()-faults
	runtime.ReadMemStats(&after)
	times := make([]time.Duration, max(steady, 2))
	for i := range times {
		start := Used()
		op()
		times[i] = Used() - start
	}
	times = times[len(times)/2:]
	slices.Sort(times)
	fmt.Fprintf(w, "%scpu=%d faults=%d bytes=%d steady=%d\n", firstPrefix,
		cpu.Nanoseconds(), faults, after.TotalAlloc-before.TotalAlloc, times[len(times)/2].Nanoseconds())
}

// RunFirst starts this test binary again, running only the benchmark
// child (a benchmark that calls [MeasureFirst] when the environment
// variable env is set, and skips itself otherwise) with env set to spec,
// and returns what the child measured. A child that fails, or reports
// nothing, is an error holding its output.
func RunFirst(child, env, spec string) (First, error) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$", "-test.bench", "^"+child+"$", "-test.benchtime", "1x")
	cmd.Env = append(os.Environ(), env+"="+spec)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return First{}, fmt.Errorf("%s with %s=%q: %v\n%s", child, env, spec, err, out.Bytes())
	}
	for line := range strings.Lines(out.String()) {
		rest, ok := strings.CutPrefix(line, firstPrefix)
		if !ok {
			continue
		}
		var cpu, steady int64
		var f First
		if _, err := fmt.Sscanf(rest, "cpu=%d faults=%d bytes=%d steady=%d", &cpu, &f.Faults, &f.Bytes, &steady); err != nil {
			return First{}, fmt.Errorf("%s with %s=%q reported %q: %v", child, env, spec, line, err)
		}
		f.CPU, f.Steady = time.Duration(cpu), time.Duration(steady)
		return f, nil
	}
	return First{}, fmt.Errorf("%s with %s=%q reported nothing:\n%s", child, env, spec, out.Bytes())
}

// ReportFirst runs a child per iteration of b (see [RunFirst]) and reports
// the means of what they measured: the first operation's CPU time
// (cpu-ns/op), page faults (faults/op) and bytes (first-B/op), the steady
// state's CPU time (steady-cpu-ns/op) and the ratio of the two
// (first/steady). ns/op is each child's whole run: read the others.
func ReportFirst(b *testing.B, child, env, spec string) {
	b.Helper()
	var sum First
	for b.Loop() {
		f, err := RunFirst(child, env, spec)
		if err != nil {
			b.Fatal(err)
		}
		sum.CPU += f.CPU
		sum.Faults += f.Faults
		sum.Bytes += f.Bytes
		sum.Steady += f.Steady
	}
	n := float64(b.N)
	b.ReportMetric(float64(sum.CPU)/n, "cpu-ns/op")
	b.ReportMetric(float64(sum.Faults)/n, "faults/op")
	b.ReportMetric(float64(sum.Bytes)/n, "first-B/op")
	b.ReportMetric(float64(sum.Steady)/n, "steady-cpu-ns/op")
	if sum.Steady > 0 {
		b.ReportMetric(float64(sum.CPU)/float64(sum.Steady), "first/steady")
	}
}

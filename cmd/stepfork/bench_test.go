package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepfork/stepfork/internal/cputime"
	"github.com/stepfork/stepfork/internal/pybundle"
)

// Benchmarks of workload B of issue 13: `stepfork diff --json` and
// `stepfork validate --verify-integrity` of large bundles of the shape
// Python stepfork's recorder writes (internal/pybundle): 10,000 calls
// (20,002 events, ~17.6 MB) against its changed copy (1 % of tool outputs
// changed), and validation of that bundle and of one of 100,000 calls
// (200,002 events, ~177 MB). The bundles are generated once per test
// binary, only when a benchmark asks for them, into a temporary directory
// that TestMain removes.
//
// BenchmarkCLIDiffJSON and BenchmarkCLIValidateIntegrity run the command in
// process (run, as main calls it, output to io.Discard) and report CPU time
// per operation (cpu-ns/op: user + system time of the process, which stays
// meaningful on a shared machine) and allocations. BenchmarkCLIProcess runs
// the built binary and reports the whole process: wall time, CPU time and
// peak RSS (maxrss-MiB, the largest of the runs). Commands and figures: BENCHMARKS.md at the module root.

var benchBundles struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

// benchBundle returns the path of the generated bundle of calls calls (the
// changed copy with changed set), generating it on first use.
func benchBundle(b *testing.B, calls int, changed bool) string {
	b.Helper()
	benchBundles.Lock()
	defer benchBundles.Unlock()
	name := fmt.Sprintf("run_%d_calls.sftrace", calls)
	if changed {
		name = fmt.Sprintf("run_%d_calls.changed.sftrace", calls)
	}
	if p, ok := benchBundles.paths[name]; ok {
		return p
	}
	if benchBundles.dir == "" {
		dir, err := os.MkdirTemp("", "stepfork-cli-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchBundles.dir, benchBundles.paths = dir, map[string]string{}
	}
	p := filepath.Join(benchBundles.dir, name)
	if err := pybundle.Write(p, calls, changed); err != nil {
		b.Fatal(err)
	}
	benchBundles.paths[name] = p
	return p
}

// removeBenchBundles removes what benchBundle generated; TestMain calls it.
func removeBenchBundles() {
	if benchBundles.dir != "" {
		os.RemoveAll(benchBundles.dir)
	}
}

// timeCmd is GNU time, which BenchmarkCLIProcess runs the binary under.
const timeCmd = "/usr/bin/time"

// outputEnds is a command's standard output as the benchmarks keep it: its
// first and its last bytes, up to the capacity of head and tail, enough to
// check the output without keeping or copying it whole (writing to it
// costs next to what writing to io.Discard does, and allocates nothing).
type outputEnds struct{ head, tail []byte }

func newOutputEnds() *outputEnds {
	return &outputEnds{head: make([]byte, 0, 4096), tail: make([]byte, 0, 4096)}
}

func (o *outputEnds) reset() { o.head, o.tail = o.head[:0], o.tail[:0] }

func (o *outputEnds) Write(p []byte) (int, error) {
	n := len(p)
	o.head = append(o.head, p[:min(cap(o.head)-len(o.head), len(p))]...)
	if len(p) > cap(o.tail) {
		p = p[len(p)-cap(o.tail):]
	}
	if drop := len(o.tail) + len(p) - cap(o.tail); drop > 0 {
		o.tail = o.tail[:copy(o.tail, o.tail[drop:])]
	}
	o.tail = append(o.tail, p...)
	return n, nil
}

// An outputCheck says what is wrong with a command's output, or nil.
type outputCheck func(o *outputEnds) error

// diffJSONOutput checks the output of `stepfork diff --json` of the
// 10,000-call bundle and its changed copy: not equivalent, 50 steps
// changed (every pybundle.ChangedEvery-th of the 5,000 tool calls) and the
// other 9,951 of the 10,001 unchanged.
func diffJSONOutput(o *outputEnds) error {
	if !bytes.HasPrefix(o.head, []byte(`{"alignment":"lcs","equivalent":false,`)) ||
		!bytes.HasSuffix(o.tail, []byte(`"added":0,"removed":0,"changed":50,"unchanged":9951}`+"\n")) {
		return fmt.Errorf("not the diff of 50 changed steps:\n%s\n…\n%s", o.head, o.tail)
	}
	return nil
}

// validatedOutput checks the output of `stepfork validate
// --verify-integrity` of a bundle of events events: all of them read, the
// integrity verified, the validation passed.
func validatedOutput(events int) outputCheck {
	line := []byte(fmt.Sprintf("\nEvents    %d\n", events))
	return func(o *outputEnds) error {
		if !bytes.Contains(o.head, line) || !bytes.Contains(o.head, []byte("\nIntegrity: VERIFIED\n")) ||
			!bytes.HasSuffix(o.tail, []byte("\nValidation passed.\n")) {
			return fmt.Errorf("not a passed validation of %d events with the integrity verified:\n%s\n…\n%s", events, o.head, o.tail)
		}
		return nil
	}
}

// runInProcess runs the stepfork command line args as main does, its
// standard output kept in out and its standard error discarded, and fails
// b unless it exits with want and its output passes check.
func runInProcess(b *testing.B, out *outputEnds, want int, check outputCheck, args ...string) {
	b.Helper()
	out.reset()
	if code := run(args, newEnv(out, io.Discard, func(string) string { return "" })); code != want {
		b.Fatalf("stepfork %v: exit code %d, want %d", args, code, want)
	}
	if err := check(out); err != nil {
		b.Fatalf("stepfork %v: %v", args, err)
	}
}

// BenchmarkCLIDiffJSON is `stepfork diff --json` of the 10,000-call bundle
// against its changed copy. It checks the exit code and the output
// (diffJSONOutput).
func BenchmarkCLIDiffJSON(b *testing.B) {
	base, changed := benchBundle(b, 10_000, false), benchBundle(b, 10_000, true)
	out := newOutputEnds()
	b.ReportAllocs()
	defer cputime.Report(b, cputime.Used())
	for b.Loop() {
		runInProcess(b, out, exitDifferent, diffJSONOutput, "diff", "--json", base, changed)
	}
}

// BenchmarkCLIValidateIntegrity is `stepfork validate --verify-integrity`
// of the 10,000- and 100,000-call bundles. It checks the exit code and the
// output (validatedOutput).
func BenchmarkCLIValidateIntegrity(b *testing.B) {
	for _, calls := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("events=%d", pybundle.Events(calls)), func(b *testing.B) {
			p := benchBundle(b, calls, false)
			out, check := newOutputEnds(), validatedOutput(pybundle.Events(calls))
			b.ReportAllocs()
			defer cputime.Report(b, cputime.Used())
			for b.Loop() {
				runInProcess(b, out, exitOK, check, "validate", "--verify-integrity", p)
			}
		})
	}
}

// BenchmarkCLIProcess runs the built binary (TestMain builds it) on the
// commands of the other two benchmarks, and reports for the whole process
// its wall time (ns/op), CPU time (cpu-ns/op) and peak resident set
// (maxrss-MiB, the largest of the runs). The binary runs under GNU time
// (timeCmd): a child started directly by the test process would report
// the test process's own peak RSS as its own, since Linux keeps the high
// water mark across the exec of a child that shares the parent's memory
// until then (vfork), as os/exec's children do. time's wall and CPU
// figures have a resolution of 10 ms. It checks each run's exit code and
// output as the in-process benchmarks do.
func BenchmarkCLIProcess(b *testing.B) {
	if _, err := os.Stat(timeCmd); err != nil {
		b.Skipf("%s is needed to measure a process's peak RSS: %v", timeCmd, err)
	}
	for _, c := range []struct {
		name  string
		want  int
		check outputCheck
		args  func(b *testing.B) []string
	}{
		{"diff-json/events=20002", exitDifferent, diffJSONOutput, func(b *testing.B) []string {
			return []string{"diff", "--json", benchBundle(b, 10_000, false), benchBundle(b, 10_000, true)}
		}},
		{"validate-integrity/events=20002", exitOK, validatedOutput(20_002), func(b *testing.B) []string {
			return []string{"validate", "--verify-integrity", benchBundle(b, 10_000, false)}
		}},
		{"validate-integrity/events=200002", exitOK, validatedOutput(200_002), func(b *testing.B) []string {
			return []string{"validate", "--verify-integrity", benchBundle(b, 100_000, false)}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			args := c.args(b)
			var cpu time.Duration
			var maxRSS int64
			out := filepath.Join(b.TempDir(), "time.txt")
			stdout := newOutputEnds()
			for b.Loop() {
				cmd := exec.Command(timeCmd, append([]string{"-f", "%M %U %S", "-o", out, binary}, args...)...)
				stdout.reset()
				cmd.Stdout, cmd.Stderr = stdout, io.Discard
				err := cmd.Run()
				if code := cmd.ProcessState.ExitCode(); code != c.want {
					b.Fatalf("stepfork %v: exit code %d (%v), want %d", args, code, err, c.want)
				}
				if err := c.check(stdout); err != nil {
					b.Fatalf("stepfork %v: %v", args, err)
				}
				var rss int64
				var user, sys float64
				if data, err := os.ReadFile(out); err != nil {
					b.Fatal(err)
				} else if _, err := fmt.Sscanf(lastLine(string(data)), "%d %f %f", &rss, &user, &sys); err != nil {
					b.Fatalf("%s: %q: %v", timeCmd, data, err)
				}
				cpu += time.Duration((user + sys) * float64(time.Second))
				maxRSS = max(maxRSS, rss) // KiB
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(maxRSS)/1024, "maxrss-MiB")
		})
	}
}

// lastLine returns the last line of s, which GNU time writes its figures
// on (after a line "Command exited with non-zero status 1").
func lastLine(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// BenchmarkCLIStart runs the built binary on the cheapest commands, whose
// cost is mostly the process's start (the runtime's, then every package
// initializer of the binary, whichever command runs): --help, which reads
// nothing, and validate --verify-integrity of a one-call bundle (4
// events). It reports the CPU time of the process (cpu-ns/op, from its
// rusage, to the microsecond) and, from one run under
// GODEBUG=inittrace=1, what the package initializers allocated before
// main: init-allocs/op and init-B/op, which unlike the times do not
// depend on the machine's load. It checks each run's exit code (0) and
// output: the usage, or the validation passed (validatedOutput).
func BenchmarkCLIStart(b *testing.B) {
	for _, c := range []struct {
		name  string
		check outputCheck
		args  func(b *testing.B) []string
	}{
		{"help", helpOutput, func(*testing.B) []string { return []string{"--help"} }},
		{"validate-integrity/events=4", validatedOutput(4), func(b *testing.B) []string {
			return []string{"validate", "--verify-integrity", benchBundle(b, 1, false)}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			args := c.args(b)
			allocs, bytes := initAllocs(b, args)
			var cpu time.Duration
			stdout := newOutputEnds()
			for b.Loop() {
				cmd := exec.Command(binary, args...)
				stdout.reset()
				cmd.Stdout, cmd.Stderr = stdout, io.Discard
				if err := cmd.Run(); err != nil {
					b.Fatalf("stepfork %v: %v", args, err)
				}
				if err := c.check(stdout); err != nil {
					b.Fatalf("stepfork %v: %v", args, err)
				}
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(allocs), "init-allocs/op")
			b.ReportMetric(float64(bytes), "init-B/op")
		})
	}
}

// helpOutput checks the output of `stepfork --help`: the usage.
func helpOutput(o *outputEnds) error {
	if !bytes.HasPrefix(o.head, []byte("stepfork: ")) || !bytes.Contains(o.head, []byte("\nUsage:")) {
		return fmt.Errorf("not the usage:\n%s", o.head)
	}
	return nil
}

// initAllocs runs the binary with args under GODEBUG=inittrace=1 and
// returns the allocations and bytes its package initializers made, summed
// over the lines the runtime writes for them ("init PKG @… ms, … ms clock,
// N bytes, M allocs").
func initAllocs(b *testing.B, args []string) (allocs, bytes int64) {
	b.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("stepfork %v: %v\n%s", args, err, stderr.String())
	}
	lines := 0
	for line := range strings.Lines(stderr.String()) {
		if !strings.HasPrefix(line, "init ") {
			continue
		}
		_, counts, ok := strings.Cut(line, " clock, ")
		var n, m int64
		if !ok {
			b.Fatalf("inittrace line %q", line)
		} else if _, err := fmt.Sscanf(counts, "%d bytes, %d allocs", &n, &m); err != nil {
			b.Fatalf("inittrace line %q: %v", line, err)
		}
		bytes, allocs, lines = bytes+n, allocs+m, lines+1
	}
	if lines == 0 {
		b.Fatalf("stepfork %v under GODEBUG=inittrace=1 wrote no init lines:\n%s", args, stderr.String())
	}
	return allocs, bytes
}

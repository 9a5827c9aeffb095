package fork

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepfork/stepfork/internal/cputime"
	"github.com/stepfork/stepfork/trace"
)

// firstProcessEnv tells a test process started by
// BenchmarkChainFirstProcess what to measure: "op,n" for a chain this
// process records, "op,n,path" for one it loads from the bundle at path.
const firstProcessEnv = "STEPFORK_BENCH_FIRST_PROCESS"

// firstProcessSteady is how many operations a child runs after its first
// one; the median CPU time of the later half is its steady state (the
// heap has grown to its size by then).
const firstProcessSteady = 20

// BenchmarkChainFirstProcess measures the first operation in a fresh
// process, the figure issue 24 was filed with: what a test pays that
// records its fixture (recorded) or loads it from disk (loaded) and then
// replays or forks it once. BenchmarkChainFirst works on a fresh base in a
// warm process, whose heap has already grown; a fresh process has not,
// and takes a page fault on the first touch of each page it allocates.
//
// Each iteration starts this test binary again (BenchmarkChainFirstProcessChild),
// which records the chain of 1,000 nodes or loads it, runs the operation
// once, then 20 times more, and reports the first operation's CPU time,
// minor page faults and bytes allocated, and the median CPU time of the
// last ten. They are reported here as cpu-ns/op, faults/op, first-B/op,
// steady-cpu-ns/op and first/steady. ns/op is each child's whole run (its
// start, the recording or loading, and 21 operations): read the others.
//
//	go test ./fork -run '^$' -bench 'ChainFirstProcess$' -benchtime 10x
func BenchmarkChainFirstProcess(b *testing.B) {
	const n = 1_000
	bundle := filepath.Join(b.TempDir(), "chain.sftrace")
	if err := chainRun(b, n).Save(bundle); err != nil {
		b.Fatal(err)
	}
	for _, base := range []string{"recorded", "loaded"} {
		for _, op := range chainOps {
			b.Run(fmt.Sprintf("%s/%s/N=%d", base, op.name, n), func(b *testing.B) {
				spec := op.name + "," + strconv.Itoa(n)
				if base == "loaded" {
					spec += "," + bundle
				}
				var sum firstProcess
				for b.Loop() {
					fp, err := runFirstProcess(spec)
					if err != nil {
						b.Fatal(err)
					}
					sum.cpu += fp.cpu
					sum.faults += fp.faults
					sum.bytes += fp.bytes
					sum.steady += fp.steady
				}
				per := func(v int64) float64 { return float64(v) / float64(b.N) }
				b.ReportMetric(per(sum.cpu), "cpu-ns/op")
				b.ReportMetric(per(sum.faults), "faults/op")
				b.ReportMetric(per(sum.bytes), "first-B/op")
				b.ReportMetric(per(sum.steady), "steady-cpu-ns/op")
				b.ReportMetric(float64(sum.cpu)/float64(max(sum.steady, 1)), "first/steady")
			})
		}
	}
}

// firstProcess is what a child reports: its first operation's CPU time
// (ns), minor page faults and bytes allocated, and its steady state's CPU
// time (ns).
type firstProcess struct {
	cpu, faults, bytes, steady int64
}

const firstProcessPrefix = "first-process "

// runFirstProcess starts this test binary as a child measuring spec and
// returns what it reports.
func runFirstProcess(spec string) (firstProcess, error) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$", "-test.bench", "^BenchmarkChainFirstProcessChild$", "-test.benchtime", "1x")
	cmd.Env = append(os.Environ(), firstProcessEnv+"="+spec)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return firstProcess{}, fmt.Errorf("child for %q: %v\n%s", spec, err, out.Bytes())
	}
	for line := range strings.Lines(out.String()) {
		rest, ok := strings.CutPrefix(line, firstProcessPrefix)
		if !ok {
			continue
		}
		var fp firstProcess
		if _, err := fmt.Sscanf(rest, "cpu=%d faults=%d bytes=%d steady=%d", &fp.cpu, &fp.faults, &fp.bytes, &fp.steady); err != nil {
			return firstProcess{}, fmt.Errorf("child for %q reported %q: %v", spec, line, err)
		}
		return fp, nil
	}
	return firstProcess{}, fmt.Errorf("child for %q reported nothing:\n%s", spec, out.Bytes())
}

// BenchmarkChainFirstProcessChild is the child BenchmarkChainFirstProcess
// starts; run on its own, it is skipped.
func BenchmarkChainFirstProcessChild(b *testing.B) {
	spec := os.Getenv(firstProcessEnv)
	if spec == "" {
		b.Skip("started by BenchmarkChainFirstProcess")
	}
	if b.N > 1 {
		return // measured once, in the first run
	}
	fields := strings.Split(spec, ",")
	if len(fields) < 2 {
		b.Fatalf("%s=%q: want op,n[,bundle]", firstProcessEnv, spec)
	}
	n, err := strconv.Atoi(fields[1])
	if err != nil {
		b.Fatalf("%s=%q: %v", firstProcessEnv, spec, err)
	}
	i := -1
	for k := range chainOps {
		if chainOps[k].name == fields[0] {
			i = k
		}
	}
	if i < 0 {
		b.Fatalf("%s=%q: no operation %q", firstProcessEnv, spec, fields[0])
	}
	var base *trace.Trace
	if len(fields) > 2 {
		if base, err = trace.Load(fields[2]); err != nil {
			b.Fatal(err)
		}
	} else {
		base = chainRun(b, n)
	}
	run := chainOps[i].run
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu, faults := cputime.Used(), cputime.Faults()
	run(b, base, n)
	cpu, faults = cputime.Used()-cpu, cputime.Faults()-faults
	runtime.ReadMemStats(&after)
	steady := make([]time.Duration, firstProcessSteady)
	for k := range steady {
		start := cputime.Used()
		run(b, base, n)
		steady[k] = cputime.Used() - start
	}
	steady = steady[len(steady)/2:]
	slices.Sort(steady)
	fmt.Printf("%scpu=%d faults=%d bytes=%d steady=%d\n", firstProcessPrefix,
		cpu.Nanoseconds(), faults, after.TotalAlloc-before.TotalAlloc, steady[len(steady)/2].Nanoseconds())
}

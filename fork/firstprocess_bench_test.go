package fork

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
// once, then 20 times more; see cputime.ReportFirst for what is reported.
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
				cputime.ReportFirst(b, "BenchmarkChainFirstProcessChild", firstProcessEnv, spec)
			})
		}
	}
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
	cputime.MeasureFirst(os.Stdout, firstProcessSteady, func() { run(b, base, n) })
}

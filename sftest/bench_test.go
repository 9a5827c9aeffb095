package sftest_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/cputime"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// productGolden returns the golden file of the product test
// (TestRefundNeedsApproval): the known-good rendering of its variant.
func productGolden(b *testing.B) string {
	b.Helper()
	want, err := os.ReadFile("testdata/TestRefundNeedsApproval.golden")
	if err != nil {
		b.Fatal(err)
	}
	return string(want)
}

// BenchmarkRender renders the variant of the product test, as Golden does
// on every run. It checks that the last rendering is the product test's
// golden file.
func BenchmarkRender(b *testing.B) {
	base := loadRefund(b)
	v, err := fork.Run(context.Background(), base, fork.Failure(), refund.Agent,
		fork.Prompt("decide", "Refunds above the policy limit need approval."))
	if err != nil {
		b.Fatal(err)
	}
	want := productGolden(b)
	b.ReportAllocs()
	var got string
	for b.Loop() {
		if got, err = sftest.Render(v); err != nil {
			b.Fatal(err)
		}
	}
	if got != want {
		b.Fatalf("the rendering is not testdata/TestRefundNeedsApproval.golden:\n%s", got)
	}
}

// BenchmarkNullForks null-forks the recorded refund failure at its 12 fork
// points, as ForkCheck does. It checks that every null fork reproduces the
// base and that the agent ran once per fork point.
func BenchmarkNullForks(b *testing.B) {
	base := loadRefund(b)
	points := len(fork.Points(base))
	if points != 12 {
		b.Fatalf("%d fork points, want 12", points)
	}
	var runs atomic.Int64
	agent := replay.Agent(func(ctx context.Context, in trace.Value) (any, error) {
		runs.Add(1)
		return refund.Agent(ctx, in)
	})
	b.ReportAllocs()
	for b.Loop() {
		if fails := sftest.NullForks(context.Background(), base, agent); len(fails) != 0 {
			b.Fatal(fails[0].Err)
		}
	}
	if got, want := runs.Load(), int64(points*b.N); got != want {
		b.Fatalf("the agent ran %d times, want %d (once per fork point)", got, want)
	}
}

// productTest runs the product test of the README (TestRefundNeedsApproval)
// once, as `go test` runs it: load and verify the fixture, fork it at the
// failure with a new prompt, check the variant. It returns the variant's
// rendering, which Golden compares with its golden file.
func productTest(b *testing.B) string {
	b.Helper()
	base := sftest.Load(b, "testdata/refund-failure.sftrace")
	v := sftest.Fork(b, base, fork.Failure(), refund.Agent,
		fork.Prompt("decide", "Refunds above the policy limit need approval."))
	assert.Completed(b, v)
	assert.ToolNotCalled(b, v, "issue_refund")
	got, err := sftest.Render(v)
	if err != nil {
		b.Fatal(err)
	}
	return got
}

// BenchmarkProductTest runs the product test once per iteration
// (productTest). It checks the variant as the test does and the last
// rendering against the golden file.
func BenchmarkProductTest(b *testing.B) {
	want := productGolden(b)
	b.ReportAllocs()
	var got string
	for b.Loop() {
		got = productTest(b)
	}
	if got != want {
		b.Fatalf("the rendering is not testdata/TestRefundNeedsApproval.golden:\n%s", got)
	}
}

// productFirstEnv is set for the child BenchmarkProductTestFirstProcess
// starts.
const productFirstEnv = "STEPFORK_BENCH_PRODUCT_FIRST"

// BenchmarkProductTestFirstProcess runs the product test as the first
// thing a fresh test process does, as `go test` runs a package whose first
// test forks its fixture: what every run of such a package pays once, on
// top of what BenchmarkProductTest measures. Each iteration starts this
// test binary again (BenchmarkProductTestFirstProcessChild), which runs
// the product test once and then 20 times more; see cputime.ReportFirst
// for what is reported. The child checks every rendering against the
// golden file.
//
//	go test ./sftest -run '^$' -bench 'ProductTestFirstProcess$' -benchtime 20x
func BenchmarkProductTestFirstProcess(b *testing.B) {
	cputime.ReportFirst(b, "BenchmarkProductTestFirstProcessChild", productFirstEnv, "1")
}

// BenchmarkProductTestFirstProcessChild is the child
// BenchmarkProductTestFirstProcess starts; run on its own, it is skipped.
func BenchmarkProductTestFirstProcessChild(b *testing.B) {
	if os.Getenv(productFirstEnv) == "" {
		b.Skip("started by BenchmarkProductTestFirstProcess")
	}
	if b.N > 1 {
		return // measured once, in the first run
	}
	var renderings []string
	cputime.MeasureFirst(os.Stdout, 20, func() { renderings = append(renderings, productTest(b)) })
	want := productGolden(b)
	for i, got := range renderings {
		if got != want {
			b.Fatalf("rendering %d is not testdata/TestRefundNeedsApproval.golden:\n%s", i, got)
		}
	}
}

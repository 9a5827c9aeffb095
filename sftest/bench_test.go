package sftest_test

import (
	"context"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/sftest"
)

// BenchmarkRender renders the variant of the product test, as Golden does
// on every run.
func BenchmarkRender(b *testing.B) {
	base := loadRefund(b)
	v, err := fork.Run(context.Background(), base, fork.Failure(), refund.Agent,
		fork.Prompt("decide", "Refunds above the policy limit need approval."))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sftest.Render(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNullForks null-forks the recorded refund failure at its 12 fork
// points, as ForkCheck does.
func BenchmarkNullForks(b *testing.B) {
	base := loadRefund(b)
	b.ReportAllocs()
	for b.Loop() {
		if fails := sftest.NullForks(context.Background(), base, refund.Agent); len(fails) != 0 {
			b.Fatal(fails[0].Err)
		}
	}
}

// BenchmarkProductTest runs the product test of the README once per
// iteration, as `go test` runs it: load and verify the fixture, fork it at
// the failure with a new prompt, check the variant, render its golden.
func BenchmarkProductTest(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		base := sftest.Load(b, "testdata/refund-failure.sftrace")
		v := sftest.Fork(b, base, fork.Failure(), refund.Agent,
			fork.Prompt("decide", "Refunds above the policy limit need approval."))
		assert.Completed(b, v)
		assert.ToolNotCalled(b, v, "issue_refund")
		if _, err := sftest.Render(v); err != nil {
			b.Fatal(err)
		}
	}
}

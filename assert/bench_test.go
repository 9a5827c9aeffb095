package assert_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/assert"
)

const bigRun = "stepfork-recorded/run_1000_calls.sftrace"

// BenchmarkExpectationsCheck applies one of every check to a recorded run of
// 1,000 dependency calls (2,002 events).
func BenchmarkExpectationsCheck(b *testing.B) {
	tr := loadVector(b, bigRun)
	exp, err := assert.ParseExpectations([]byte(`{
		"called": ["get_weather"], "not_called": ["nope"], "counts": {"get_weather": 332},
		"arguments": [{"name": "search_flights", "value": {"none": 1}}],
		"order": [["lookup_customer", "search_flights"]],
		"sequence": ["lookup_customer", "search_flights", "get_weather"], "match": "superset",
		"max_steps": 1000
	}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = exp.Check(tr)
	}
}

// BenchmarkToolCalled is one trajectory assertion on the same run.
func BenchmarkToolCalled(b *testing.B) {
	tr := loadVector(b, bigRun)
	b.ReportAllocs()
	for b.Loop() {
		_ = assert.CheckToolCalled(tr, "nope")
	}
}

// BenchmarkTraceOptionsEqual compares the run with a second copy under
// TraceOptions.
func BenchmarkTraceOptionsEqual(b *testing.B) {
	want, got := loadVector(b, bigRun), loadVector(b, bigRun)
	b.ReportAllocs()
	for b.Loop() {
		if !cmp.Equal(want, got, assert.TraceOptions()) {
			b.Fatal("not equal")
		}
	}
}

// BenchmarkSortConcurrentCalls adds the reordering transform.
func BenchmarkSortConcurrentCalls(b *testing.B) {
	want, got := loadVector(b, bigRun), loadVector(b, bigRun)
	b.ReportAllocs()
	for b.Loop() {
		if !cmp.Equal(want, got, assert.TraceOptions(), assert.SortConcurrentCalls()) {
			b.Fatal("not equal")
		}
	}
}

// BenchmarkCheckTraceEqual is the assertion on two equal runs (a recording
// and its re-recording), with the usual options and with
// SortConcurrentCalls: what a passing TraceEqual costs.
func BenchmarkCheckTraceEqual(b *testing.B) {
	want := loadVector(b, bigRun)
	got := rerecord(b, want)
	for _, c := range []struct {
		name string
		opts []cmp.Option
	}{{"TraceOptions", nil}, {"SortConcurrentCalls", []cmp.Option{assert.SortConcurrentCalls()}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := assert.CheckTraceEqual(want, got, c.opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

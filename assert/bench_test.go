package assert_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/assert"
)

const bigRun = "stepfork-recorded/run_1000_calls.sftrace"

// BenchmarkExpectationsCheck applies one of every check to a recorded run of
// 1,000 dependency calls (2,002 events). Two of them fail, so the failure
// messages are part of the cost: get_weather is called 166 times, not 332,
// and no search_flights call has the arguments given. It checks that each
// Check fails with these two errors, and nothing else.
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
		err = exp.Check(tr)
		if errs, ok := err.(interface{ Unwrap() []error }); !ok || len(errs.Unwrap()) != 2 {
			b.Fatalf("want the two failed expectations, got %v", err)
		}
	}
	errs := err.(interface{ Unwrap() []error }).Unwrap()
	for i, want := range []string{"tool 'get_weather': expected 332 call(s), got 166", "tool 'search_flights': expected arguments {'none': 1}; actual: "} {
		if got := errs[i].Error(); !strings.HasPrefix(got, want) {
			b.Fatalf("failed expectation %d: %.200s, want %s…", i, got, want)
		}
	}
}

// BenchmarkToolCalled is one trajectory assertion on the same run, which
// fails: no tool "nope" was called. It checks that each fails, with that
// message.
func BenchmarkToolCalled(b *testing.B) {
	tr := loadVector(b, bigRun)
	b.ReportAllocs()
	var err error
	for b.Loop() {
		if err = assert.CheckToolCalled(tr, "nope"); err == nil {
			b.Fatal(`CheckToolCalled(tr, "nope") passed`)
		}
	}
	if want := "expected tool 'nope' to be called; actual: ['search_flights', "; !strings.HasPrefix(err.Error(), want) {
		b.Fatalf("%.200s, want %s…", err, want)
	}
}

// BenchmarkTraceOptionsEqual compares the run with a second copy under
// TraceOptions. It checks that they are equal.
func BenchmarkTraceOptionsEqual(b *testing.B) {
	want, got := loadVector(b, bigRun), loadVector(b, bigRun)
	b.ReportAllocs()
	for b.Loop() {
		if !cmp.Equal(want, got, assert.TraceOptions()) {
			b.Fatal("not equal")
		}
	}
}

// BenchmarkSortConcurrentCalls adds the reordering transform. It checks
// that the copies are equal.
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

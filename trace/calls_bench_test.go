package trace

import "testing"

// BenchmarkCalls measures the call model of a run of 4,000 events (1,000
// model and 1,000 tool calls): computing it (pairCalls, what the first
// Calls of a trace costs) and reading it back from the cache.
//
//	go test ./trace -run '^$' -bench BenchmarkCalls -benchmem
func BenchmarkCalls(b *testing.B) {
	tr := benchTrace(4002)
	b.Run("compute", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(pairCalls(tr.Events)) != 2000 {
				b.Fatal("wrong number of calls")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		tr.Calls()
		for b.Loop() {
			if len(tr.Calls()) != 2000 {
				b.Fatal("wrong number of calls")
			}
		}
	})
}

package tracecache

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

type derived struct{ events int }

func newTrace(t *testing.T, n int) *trace.Trace {
	t.Helper()
	b := trace.NewBuilder("cache")
	b.RunStart(nil)
	for i := range n {
		b.Tool("step", map[string]any{"i": i}, map[string]any{"v": i})
	}
	b.RunEnd(trace.RunCompleted, nil)
	return b.MustTrace()
}

func TestGetBuildsOncePerTrace(t *testing.T) {
	t.Parallel()
	var c Cache[derived]
	var builds atomic.Int64
	build := func(tr *trace.Trace) *derived {
		builds.Add(1)
		return &derived{events: len(tr.Events)}
	}
	tr := newTrace(t, 3)
	var wg sync.WaitGroup
	got := make([]*derived, 16)
	for i := range got {
		wg.Go(func() { got[i] = c.Get(tr, build) })
	}
	wg.Wait()
	for _, g := range got {
		if g != got[0] {
			t.Fatal("concurrent Gets of one trace returned different values")
		}
	}
	if n := builds.Load(); n != 1 {
		t.Fatalf("built %d times, want once", n)
	}
	if other := c.Get(newTrace(t, 3), build); other == got[0] {
		t.Fatal("another trace with equal content shared the value")
	}
}

func TestGetRebuildsAChangedTrace(t *testing.T) {
	t.Parallel()
	changes := []struct {
		name   string
		change func(tr *trace.Trace)
	}{
		{"events grown", func(tr *trace.Trace) { tr.Events = append(tr.Events, tr.Events[len(tr.Events)-1]) }},
		{"events replaced", func(tr *trace.Trace) { tr.Events = append([]trace.Event(nil), tr.Events...) }},
		{"events cut", func(tr *trace.Trace) { tr.Events = tr.Events[:2] }},
		{"manifest", func(tr *trace.Trace) { tr.Status = trace.RunFailed }},
		{"path", func(tr *trace.Trace) { tr.Path = "elsewhere.sftrace" }},
		{"extra added to the same map", func(tr *trace.Trace) {
			if tr.Extras == nil {
				tr.Extras = map[string][]byte{}
			}
			tr.Extras[trace.LanesFile] = []byte(`{}`)
		}},
		{"redactions", func(tr *trace.Trace) {
			tr.Redactions = append(tr.Redactions, trace.RedactionEntry{EventID: "x", Path: "/input"})
		}},
	}
	for _, tc := range changes {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c Cache[derived]
			builds := 0
			build := func(tr *trace.Trace) *derived { builds++; return &derived{events: len(tr.Events)} }
			tr := newTrace(t, 3)
			first := c.Get(tr, build)
			if again := c.Get(tr, build); again != first || builds != 1 {
				t.Fatalf("unchanged trace rebuilt (%d builds)", builds)
			}
			tc.change(tr)
			if got := c.Get(tr, build); got == first || builds != 2 || got.events != len(tr.Events) {
				t.Fatalf("after the change: value %+v after %d builds, want a new one for %d events", got, builds, len(tr.Events))
			}
		})
	}
}

// TestValueDoesNotPinTheTrace checks that build gets a copy, not the
// caller's trace, and that a collected trace's entry goes away.
func TestValueDoesNotPinTheTrace(t *testing.T) {
	var c Cache[trace.Trace]
	tr := newTrace(t, 2)
	got := c.Get(tr, func(cp *trace.Trace) *trace.Trace { return cp })
	if got == tr {
		t.Fatal("build was handed the caller's trace: the value would keep it alive")
	}
	tr = nil
	for range 200 {
		runtime.GC()
		n := 0
		c.m.Range(func(any, any) bool { n++; return true })
		if n == 0 {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("the entry of a collected trace is still cached")
}

// TestGetFromPassesTheCallersTrace checks that GetFrom builds from a copy
// and hands the caller's trace along, once.
func TestGetFromPassesTheCallersTrace(t *testing.T) {
	t.Parallel()
	var c Cache[derived]
	tr := newTrace(t, 2)
	builds := 0
	build := func(snap, orig *trace.Trace) *derived {
		builds++
		if snap == tr || orig != tr || len(snap.Events) != len(tr.Events) || &snap.Events[0] != &tr.Events[0] {
			t.Fatalf("built from %p (caller's %p, passed %p)", snap, tr, orig)
		}
		return &derived{events: len(snap.Events)}
	}
	v := c.GetFrom(tr, build)
	if c.GetFrom(tr, build) != v || builds != 1 {
		t.Fatalf("built %d times, want once", builds)
	}
}

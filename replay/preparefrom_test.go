package replay

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/trace"
)

// planShape is what prepare derives from a trace's structure, to compare
// plans.
type planShape struct {
	Input         trace.Value
	Calls         []rec
	CallAt        []int32
	Markers       []markerRec
	MarkerAt      []int32
	QueueID       map[[2]string]int32
	Queues        [][]int32
	Kids, KidAt   []int32
	Parent        []int32
	RootID        string
	Index         map[string]int32
	Tools, Models map[string]bool
	Laned, Reads  bool
	Writes        int
	Minted        map[string][]trace.MintedID
	OpsSet        bool
}

func shapeOf(p *Prepared) planShape {
	return planShape{p.input, p.calls, p.callAt, p.markers, p.markerAt, p.queueID, p.queues, p.kids, p.kidAt,
		p.parent, p.rootID, idsOf(p), p.tools, p.models, p.laned, p.reads, p.writes, p.minted, p.ops != nil}
}

// idsOf is p's index of the base's events by id, as a map.
func idsOf(p *Prepared) map[string]int32 {
	m := map[string]int32{}
	for i := range p.base.Events {
		id := p.base.Events[i].ID
		if j, ok := p.ids.Lookup(id); ok {
			m[id] = j
		}
	}
	return m
}

// lanedAgent calls a tool on three goroutines, then once more.
func lanedAgent(ctx context.Context, _ trace.Value) (any, error) {
	fetch := Tool("fetch", func(_ context.Context, i int) (int, error) { return i * i, nil })
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { _, _ = fetch(ctx, i) })
	}
	wg.Wait()
	return fetch(ctx, 9)
}

// TestPrepareFromTheCallersCalls checks that Prepare, which pairs the
// calls of the trace it is given (trace.Trace.Calls cached on the
// caller's pointer, as a fork index has them), plans what prepare of a
// fresh copy plans from the copy's own calls; also after the caller's
// trace had its calls paired already, and for a copy whose links were
// broken (results without parents, paired by the legacy rule).
func TestPrepareFromTheCallersCalls(t *testing.T) {
	t.Parallel()
	var traces []*trace.Trace
	for _, agent := range []Agent{vouchAgent, lanedAgent} {
		res, err := Record(context.Background(), "plan", nil, agent)
		require.NoError(t, err)
		traces = append(traces, res.Trace)
		unlinked := *res.Trace
		unlinked.Events = append([]trace.Event(nil), res.Trace.Events...)
		for i := range unlinked.Events {
			if i%3 == 0 {
				unlinked.Events[i].ParentID = ""
			}
		}
		traces = append(traces, &unlinked)
	}
	require.True(t, prepare(traces[2]).laned, "the concurrent calls are laned")
	for i, tr := range traces {
		for _, pairedFirst := range []bool{false, true} {
			c := *tr
			if pairedFirst {
				_ = c.Calls()
				_ = c.EventLanes()
			}
			fresh := c
			want := prepare(&fresh)
			got := Prepare(&c)
			require.Equal(t, shapeOf(want), shapeOf(got), "trace %d, calls paired first: %v", i, pairedFirst)
		}
	}
}

package explore

import (
	"context"
	"testing"

	"github.com/stepfork/stepfork/internal/view/viewtest"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// BenchmarkChoices100k is what picking a point costs on a run of 100k
// events: the fork points listed once, then the changes offered at the
// first point (the whole run is its tail: the first 100 calls offered,
// each resolved as fork resolves it).
func BenchmarkChoices100k(b *testing.B) {
	base := viewtest.LargeRun(100_000)
	agent := replay.Agent(func(context.Context, trace.Value) (any, error) { return nil, nil })
	s, err := newSession(context.Background(), Config{Base: base, Agent: agent, Test: "BenchmarkChoices100k"})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d fork points", len(s.listPoints()))
	first := s.points[0].Step
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.choicesAt(first); err != nil {
			b.Fatal(err)
		}
	}
}

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
// each resolved as fork resolves it). It checks that each offer is for
// that point, holds 100 recorded calls and counts the others as more.
func BenchmarkChoices100k(b *testing.B) {
	base := viewtest.LargeRun(100_000)
	agent := replay.Agent(func(context.Context, trace.Value) (any, error) { return nil, nil })
	s, err := newSession(context.Background(), Config{Base: base, Agent: agent, Test: "BenchmarkChoices100k"})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d fork points", len(s.listPoints()))
	first := s.points[0].Step
	recorded := 0 // the calls of the tail with a recorded result
	for _, c := range base.Calls() {
		if c.Result >= 0 && base.Events[c.Event].Step >= first {
			recorded++
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := s.choicesAt(first)
		if err != nil {
			b.Fatal(err)
		}
		if c.Point.Step != first || len(c.Outputs) != maxOutputs || len(c.Outputs)+c.More != recorded {
			b.Fatalf("at step %d: %d outputs offered and %d more; want %d and %d more at step %d",
				c.Point.Step, len(c.Outputs), c.More, maxOutputs, recorded-maxOutputs, first)
		}
	}
}

package fork

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace/diff"
)

// TestVariantDiffTakesTheServedPrefixFromTheBase: a fork's diff, which takes
// the base's steps for the events its variant shares with the base (the
// served prefix; every event of a memoized null fork), is the diff that
// extracts the whole variant, for forks at every kind of point (before a
// node, inside one, before a call, at the start) with and without changes:
// the same steps, step numbers, changes, divergence and texts.
func TestVariantDiffTakesTheServedPrefixFromTheBase(t *testing.T) {
	t.Parallel()
	const n = 12
	rec, err := replay.Record(context.Background(), "chain", n, newChainAgent().agent)
	if err != nil {
		t.Fatal(err)
	}
	base := rec.Trace
	points := []At{Start(), BeforeNode("n0", 1), BeforeNode("n5", 1), BeforeNode(chainNodeName(n-1), 1),
		BeforeCall(replay.KindTool, "step", 4), AfterNode("n7", 1)}
	for s := 2; s < len(base.Events); s += 3 {
		points = append(points, Step(base.Events[s].Step))
	}
	checked := 0
	for pi, at := range points {
		for ci, opts := range [][]RunOption{
			{Memoize()},
			{Allow("step")},
			{ToolResult(OnCall("step", n/2+1), chainValue{V: -1, Tag: "changed"}), Allow("step")},
			{ToolResult(OnCall("step", n), chainValue{V: 7, Tag: "last"})},
		} {
			c := newChainAgent()
			v, err := Run(context.Background(), base, at, c.agent, opts...)
			if err != nil {
				continue // a point inside a call, or a change before the point
			}
			name := fmt.Sprintf("point %d (%s), options %d", pi, v.At.Description, ci)
			got := indexOf(base).diffVariant(v.Trace)
			want := diff.Prepare(base).Diff(v.Trace) // the whole variant extracted
			if g, w := string(got.JSON()), string(want.JSON()); g != w {
				t.Fatalf("%s: JSON differs:\nwant %s\ngot  %s", name, w, g)
			}
			if g, w := got.Explain(), want.Explain(); g != w {
				t.Fatalf("%s: Explain differs:\nwant %s\ngot  %s", name, w, g)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("%s: diff differs (-full +fast):\n%s", name, d)
			}
			// The variant's own diff, marked with what explains it.
			want.Mark(func(s *diff.Step) (string, string) { return "", v.Diff.Steps[s.Index].Intended })
			if d := cmp.Diff(want, v.Diff); d != "" {
				t.Fatalf("%s: the variant's diff differs (-full +variant):\n%s", name, d)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Fatalf("only %d forks ran: the test checks too little", checked)
	}
	t.Logf("%d forks", checked)
}

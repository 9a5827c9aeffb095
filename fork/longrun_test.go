package fork

import (
	"context"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace/diff"
)

// pagedReader reads pages, each in a node "page": fetch_page answers the
// same text every time and the model says "continue", until page stopAt
// where it says "stop". A long run of one repeated shape.
func pagedReader(stopAt int) replay.Agent {
	fetch := replay.Tool("fetch_page", func(context.Context, string) (string, error) {
		return "the same text on every page", nil
	})
	return replay.Typed(func(ctx context.Context, pages int) (int, error) {
		for i := range pages {
			var stop bool
			if err := replay.Node(ctx, "page", func(ctx context.Context) error {
				text, err := fetch(ctx, "next")
				if err != nil {
					return err
				}
				resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "reader",
					Messages: []replay.Message{{Role: "user", Content: "More? " + text}}}, func(context.Context, replay.Request) (replay.Response, error) {
					if i >= stopAt {
						return replay.Response{Content: "stop"}, nil
					}
					return replay.Response{Content: "continue"}, nil
				})
				stop = resp.Content == "stop"
				return err
			}); err != nil || stop {
				return i, err
			}
		}
		return pages, nil
	})
}

// TestRunLongRepetitiveRunDiff: the fork of a 9,000-event run of repeated
// pages whose model is made to say "stop" on page 500 — as the base's says
// on its last page, 1,000 — shows the changed answer where the fork
// departs and the base's later pages removed; the LCS alone paired the
// fork's answer with the base's on page 1,000 and called the base's call
// on page 500 removed.
func TestRunLongRepetitiveRunDiff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, err := replay.Record(ctx, "reader", 2000, pagedReader(1499))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Run(ctx, base.Trace, BeforeCall(replay.KindLLM, "fake/reader", 500), pagedReader(1499),
		LLMResponse(OnCall("fake/reader", 500), replay.Response{Content: "stop"}))
	if err != nil {
		t.Fatal(err)
	}
	d := v.Diff
	dv := d.Divergence
	if dv == nil || dv.Kind != diff.Changed || dv.Base.Step != dv.Variant.Step {
		t.Fatalf("divergence %v", dv)
	}
	if want := `llm 'fake/reader' changed: output.content "continue" → "stop"`; !strings.Contains(dv.String(), want) {
		t.Errorf("divergence %q, want %q", dv, want)
	}
	// Each page is a node, a tool call and a model call: the base's pages
	// 501–1,500 are removed, 3 steps each, and the run's end differs.
	if d.Added != 0 || d.Removed != 3*1000 {
		t.Errorf("changed %d, added %d, removed %d; want 0 added, %d removed", d.Changed, d.Added, d.Removed, 3*1000)
	}
	if n := len(base.Trace.Events); n < 9000 {
		t.Errorf("the base has %d events", n)
	}
}

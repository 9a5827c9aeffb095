package assert_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// TestReplayResults runs the assertions on replay results: a faithful replay
// is checked like its trace; a diverged or incomplete one fails every
// trajectory check first, with stepfork's prefix.
func TestReplayResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	search := replay.Tool("search", func(_ context.Context, q string) (string, error) { return "found " + q, nil })
	book := replay.Tool("book", func(_ context.Context, f string) (bool, error) { return true, nil })
	agent := func(tools ...string) replay.Agent {
		return func(ctx context.Context, _ trace.Value) (any, error) {
			for _, name := range tools {
				switch name {
				case "search":
					if _, err := search(ctx, "KTM"); err != nil {
						return nil, err
					}
				case "book":
					if _, err := book(ctx, "QR1"); err != nil {
						return nil, err
					}
				}
			}
			return "done", nil
		}
	}
	rec, err := replay.Record(ctx, "booker", "go", agent("search", "book"))
	if err != nil {
		t.Fatal(err)
	}
	assert.ToolSequence(t, rec, []string{"search", "book"})

	same, err := replay.Replay(ctx, rec.Trace, agent("search", "book"))
	if err != nil {
		t.Fatal(err)
	}
	assert.ToolSequence(t, same, []string{"search", "book"})
	assert.ToolArguments(t, same, "search", "KTM")

	diverged, _ := replay.Replay(ctx, rec.Trace, agent("book"))
	incomplete, _ := replay.Replay(ctx, rec.Trace, agent("search"))
	tests := []struct {
		name   string
		run    *replay.Result
		prefix string
		cause  error
	}{
		{"diverged", diverged, "stepfork replay diverged: call #1: expected tool 'search' but the agent called 'book'", replay.ErrDiverged},
		{"incomplete", incomplete, "stepfork replay incomplete: replay ended before consuming 1 recorded dependency call(s): #2 tool book", nil},
	}
	for _, tc := range tests {
		err := assert.CheckToolCalled(tc.run, "search")
		if err == nil || !strings.HasPrefix(err.Error(), tc.prefix) || !errors.Is(err, assert.ErrMismatch) {
			t.Errorf("%s: CheckToolCalled = %v; want prefix %q", tc.name, err, tc.prefix)
		}
		if tc.cause != nil && !errors.Is(err, tc.cause) {
			t.Errorf("%s: %v does not wrap %v", tc.name, err, tc.cause)
		}
		exp := &assert.Expectations{Called: []string{"search"}, MaxSteps: new(9)}
		if err := exp.Check(tc.run); err == nil || !strings.HasPrefix(err.Error(), tc.prefix) {
			t.Errorf("%s: Expectations.Check = %v; want prefix %q", tc.name, err, tc.prefix)
		}
	}
}

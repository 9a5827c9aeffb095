package mcp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sfmcp "github.com/stepfork/stepfork/contrib/mcp"
	"github.com/stepfork/stepfork/replay"
)

// Tool calls from several goroutines share one lazily opened connection,
// and replay (concurrency is matched by default) serves them without connecting.
func TestConcurrentCallsConnectOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	agent := func(c *sfmcp.Client) replay.Agent {
		return replay.Typed(func(ctx context.Context, _ any) (int, error) {
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Go(func() {
					_, errs[i] = c.CallTool(ctx, &mcp.CallToolParams{Name: "add_label",
						Arguments: map[string]any{"issue": i, "label": fmt.Sprint("l", i)}})
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return 0, err
				}
			}
			return len(errs), nil
		})
	}
	newClient := func() *sfmcp.Client {
		return sfmcp.New("", mcp.NewClient(&mcp.Implementation{Name: "t"}, nil), inMemory{calls: w.calls, starts: &w.starts})
	}
	c := newClient()
	rec, err := replay.Record(context.Background(), "labels", nil, agent(c))
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if w.starts.Load() != 1 || w.calls.Get("add_label") != 8 {
		t.Fatalf("recording: %d starts and %d calls, want 1 and 8", w.starts.Load(), w.calls.Get("add_label"))
	}
	c = newClient()
	defer c.Close()
	if _, err := replay.Replay(context.Background(), rec.Trace, agent(c)); err != nil {
		t.Fatal(err)
	}
	if w.starts.Load() != 1 || c.Connected() {
		t.Errorf("the replay connected (%d starts in all)", w.starts.Load())
	}
}

package mcp_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stepfork/stepfork/assert"
	sfmcp "github.com/stepfork/stepfork/contrib/mcp"
	"github.com/stepfork/stepfork/contrib/mcp/internal/fakeserver"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// inMemory is an mcp.Transport that starts an in-process fake tracker when
// the client connects, counting the starts.
type inMemory struct {
	calls  *fakeserver.Calls
	starts *atomic.Int32
}

func (m inMemory) Connect(ctx context.Context) (mcp.Connection, error) {
	m.starts.Add(1)
	st, ct := mcp.NewInMemoryTransports()
	if _, err := fakeserver.New("tracker", m.calls).Connect(ctx, st, nil); err != nil {
		return nil, err
	}
	return ct.Connect(ctx)
}

// world is one test's servers: the fake model and the in-process tracker.
type world struct {
	model  *fakeModel
	calls  *fakeserver.Calls
	starts atomic.Int32
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return &world{model: newFakeModel(t), calls: &fakeserver.Calls{}}
}

// agent is the triage agent with a fresh, unconnected client per run, as a
// process starting up would have.
func (w *world) agent(server string) replay.Agent {
	return triageAgent(w.model, func() *sfmcp.Client {
		return sfmcp.New(server, mcp.NewClient(&mcp.Implementation{Name: "triage"}, nil),
			inMemory{calls: w.calls, starts: &w.starts})
	})
}

const report = "the CLI crashes on empty input"

func record(t *testing.T, w *world, server string) *trace.Trace {
	t.Helper()
	rec, err := replay.Record(context.Background(), "triage", report, w.agent(server))
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	return rec.Trace
}

func TestRecordAndFrozenReplay(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := record(t, w, "")

	if got := w.starts.Load(); got != 1 {
		t.Fatalf("recording started the server %d times, want 1", got)
	}
	for _, name := range []string{"tools/list", "resources/read", "search_issues", "add_label", "assign"} {
		if w.calls.Get(name) != 1 {
			t.Errorf("recording: the server answered %s %d times, want 1", name, w.calls.Get(name))
		}
	}
	assert.Trajectory(t, base, []string{"tools/list", "resources/read", "search_issues", "add_label", "assign"}, assert.Strict)
	assert.ToolSucceeded(t, base, "add_label")
	assert.ToolFailed(t, base, "assign") // IsError: true
	assert.ToolArguments(t, base, "add_label", map[string]any{"issue": 42, "label": "bug"})
	assert.ModelCallCount(t, base, "openai/gpt-4o-mini", 3)
	var tokens int64
	for _, e := range base.Events {
		if e.Type == trace.LLMResponse && e.TotalTokens != nil {
			tokens += *e.TotalTokens
		}
	}
	if tokens == 0 {
		t.Error("the recorded model responses carry no token counts")
	}

	models, serverCalls := w.model.Requests(), w.calls.Total()
	res, err := replay.Replay(context.Background(), base, w.agent(""))
	if err != nil {
		t.Fatalf("frozen Replay: %v", err)
	}
	if got := w.starts.Load(); got != 1 {
		t.Errorf("frozen replay connected to the server (%d starts in all, want the recording's 1)", got)
	}
	if w.calls.Total() != serverCalls || w.model.Requests() != models {
		t.Errorf("frozen replay reached the servers: MCP %d→%d requests, model %d→%d", serverCalls, w.calls.Total(), models, w.model.Requests())
	}
	if res.Executed != 0 {
		t.Errorf("frozen replay executed %d calls", res.Executed)
	}
	if res.Output != "Issue 42 triaged. Assignment is disabled." {
		t.Errorf("frozen replay output %q: the served IsError result did not reach the agent as it did live", res.Output)
	}
	assert.TraceEqual(t, base, res, assert.TraceOptions())
}

func TestMemoizedNullFork(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := record(t, w, "")
	for _, p := range fork.Points(base) {
		v, err := fork.Run(context.Background(), base, p.At(), w.agent(""), fork.Memoize())
		if err != nil {
			t.Fatalf("%s: %v", p.At(), err)
		}
		assert.Equivalent(t, v, p.At().String())
	}
	if got := w.starts.Load(); got != 1 {
		t.Errorf("memoized null forks connected to the server (%d starts in all, want the recording's 1)", got)
	}
}

// The tail runs the model live: fresh response and tool-call ids come back,
// the agent sends the new tool-call ids in its next request, and since the
// model answers the same, the fork is equivalent to its base; its MCP calls
// are served by the guard (same names and arguments), so the server is
// never contacted. The live calls have a cost from the transport's prices.
func TestLiveTailWithFreshIDsIsEquivalent(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := record(t, w, "")
	if base.Totals.CostUSD == nil || *base.Totals.CostUSD <= 0 {
		t.Errorf("the recording has no cost: %v", base.Totals.CostUSD)
	}
	before := w.model.Requests()
	v, err := fork.Run(context.Background(), base, fork.BeforeCall(replay.KindLLM, "openai/gpt-4o-mini", 2), w.agent(""))
	if err != nil {
		t.Fatal(err)
	}
	if n := w.model.Requests() - before; n != 2 || v.LiveModelCalls != 2 {
		t.Fatalf("the tail sent %d requests (%d live model calls), want 2", n, v.LiveModelCalls)
	}
	assert.Equivalent(t, v)
	assert.NoSuppressedEffects(t, v)
	if w.starts.Load() != 1 {
		t.Errorf("the tail connected to the MCP server (%d starts in all)", w.starts.Load())
	}
	if v.IncurredCost <= 0 || v.IncurredTokens <= 0 {
		t.Errorf("the live tail incurred cost %v and %d tokens, want both > 0", v.IncurredCost, v.IncurredTokens)
	}
	assert.IncurredCostAtMost(t, v, 0.001)
}

func TestPromptChangeReachesSystemMessage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := record(t, w, "")
	const prompt = "You triage bug reports. Label nothing; report what you found."
	v, err := fork.Run(context.Background(), base, fork.BeforeCall(replay.KindLLM, "openai/gpt-4o-mini", 2), w.agent(""),
		fork.Prompt(fork.All, prompt))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.model.LastSystem(); got != prompt {
		t.Errorf("the model received system message %q, want the fork's prompt %q", got, prompt)
	}
	assert.ChangeApplied(t, v)
	if v.LiveModelCalls == 0 || v.IncurredTokens == 0 {
		t.Errorf("the tail ran %d live model calls for %d tokens; want both > 0", v.LiveModelCalls, v.IncurredTokens)
	}
}

func TestGuardBlocksUnrecordedTool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		server, tool string
	}{{"", "close_issue"}, {"tracker", "tracker/close_issue"}} {
		w := newWorld(t)
		base := record(t, w, tc.server)
		at := fork.BeforeCall(replay.KindLLM, "openai/gpt-4o-mini", 2)
		change := fork.Prompt(fork.All, "Close duplicates.")

		v, err := fork.Run(context.Background(), base, at, w.agent(tc.server), change)
		if err != nil {
			t.Fatal(err)
		}
		assert.Status(t, v, fork.StatusBlocked)
		if len(v.Suppressed) != 1 || v.Suppressed[0].Tool != tc.tool {
			t.Errorf("server %q: suppressed %+v, want one call of %s", tc.server, v.Suppressed, tc.tool)
		}
		if n := w.calls.Get("close_issue"); n != 0 {
			t.Errorf("server %q: the blocked close_issue reached the server %d times", tc.server, n)
		}

		v, err = fork.Run(context.Background(), base, at, w.agent(tc.server), change, fork.Allow(tc.tool))
		if err != nil {
			t.Fatal(err)
		}
		assert.Completed(t, v)
		assert.ToolCalled(t, v, tc.tool)
		if n := w.calls.Get("close_issue"); n != 1 {
			t.Errorf("server %q: the allowed close_issue reached the server %d times, want 1", tc.server, n)
		}
	}
}

func TestIsErrorIsAFailedCall(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := sfmcp.New("", mcp.NewClient(&mcp.Implementation{Name: "t"}, nil), inMemory{calls: w.calls, starts: &w.starts})
	defer c.Close()
	agent := replay.Typed(func(ctx context.Context, _ any) (bool, error) {
		res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "assign", Arguments: map[string]any{"issue": 7}})
		if err != nil {
			return false, err
		}
		return res.IsError, nil
	})
	rec, err := replay.Record(context.Background(), "assign", nil, agent)
	if err != nil {
		t.Fatal(err)
	}
	assert.ToolFailed(t, rec.Trace, "assign")
	var failure *trace.Event
	for i := range rec.Trace.Events {
		if e := &rec.Trace.Events[i]; e.Type == trace.ErrorEvent {
			failure = e
		}
	}
	if failure == nil || failure.ErrorType != sfmcp.ToolErrorType || failure.Message != "issue 7: assignment is disabled in this project" {
		t.Fatalf("failure event %+v, want error_type %s with the result's text", failure, sfmcp.ToolErrorType)
	}
	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	if err != nil || res.Output != true {
		t.Fatalf("replay: output %v, err %v; want the served result with IsError", res.Output, err)
	}
}

func TestConnectFailure(t *testing.T) {
	t.Parallel()
	c := sfmcp.New("broken", mcp.NewClient(&mcp.Implementation{Name: "t"}, nil), failing{})
	_, err := c.ListTools(context.Background(), nil)
	if !errors.Is(err, errRefused) {
		t.Fatalf("err = %v, want the transport's error", err)
	}
	if c.Connected() {
		t.Error("Connected after a failed connection")
	}
}

var errRefused = errors.New("connection refused")

type failing struct{}

func (failing) Connect(context.Context) (mcp.Connection, error) { return nil, errRefused }

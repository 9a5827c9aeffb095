package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var warnedRuns atomic.Int64

// TestSessionlessCallIsWarnedOnce: a tool that calls another wrapper with
// context.Background() while a run is recorded runs it live and unrecorded,
// and the process is told once, naming the wrapper. (Not parallel: it
// replaces slog's default logger.)
func TestSessionlessCallIsWarnedOnce(t *testing.T) {
	var logs lockedBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)

	// A name of its own each time (the warning is once per process).
	name := fmt.Sprintf("warned_inner_%d", warnedRuns.Add(1))
	inner := replay.Tool(name, func(_ context.Context, q string) (string, error) { return "inner:" + q, nil })
	outer := replay.Tool("warned_outer", func(_ context.Context, q string) (string, error) {
		return inner(context.Background(), q) // the bug: a fresh context
	})
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		for range 3 {
			if _, err := outer(ctx, "q"); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	rec, err := replay.Record(context.Background(), "agent", nil, agent)
	require.NoError(t, err, "without StrictContext the call runs live")
	require.NoError(t, rec.Err)
	assert.Equal(t, 3, rec.Trace.Totals.ToolCalls, "only the outer calls are recorded")
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, `the tool \"`+name+`\" (replay.Tool) was called with a context that carries no session`), out)
	assert.Contains(t, out, "replay.StrictContext() makes this an error")

	// With no session running, a sessionless call is production: silent.
	_, err = inner(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(logs.String(), name))
}

// TestStrictContext: under StrictContext every wrapper called without the
// session on a goroutine of the run fails with a *ContextError, and Record,
// Replay and fork.Run return it.
func TestStrictContext(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }))
	defer srv.Close()
	client := &http.Client{Transport: replay.Transport(nil)}
	bg := context.Background()
	cases := []struct {
		name    string
		wrapper string
		call    func() error // the sessionless call, made from inside a tool
	}{
		{"Tool", `the tool "strict_inner" (replay.Tool)`, func() error {
			_, err := replay.Tool("strict_inner", func(context.Context, int) (int, error) { return 1, nil })(bg, 1)
			return err
		}},
		{"LLM", `the model call fake/m (replay.LLM)`, func() error {
			_, err := replay.LLM(bg, replay.Request{Provider: "fake", Model: "m"}, func(context.Context, replay.Request) (replay.Response, error) { return replay.Response{}, nil })
			return err
		}},
		{"LLMRaw", `the model call fake/m (replay.LLMRaw)`, func() error {
			_, err := replay.LLMRaw(bg, "fake", "m", trace.NullValue, func(context.Context, trace.Value) (trace.Value, error) { return trace.NullValue, nil })
			return err
		}},
		{"Node", `the node "plan" (replay.Node)`, func() error { return replay.Node(bg, "plan", func(context.Context) error { return nil }) }},
		{"Set", `the state write "cart" (replay.Set)`, func() error { return replay.Set(bg, "cart", 1) }},
		{"Read", `the state read "cart" (replay.Read)`, func() error { replay.Read(bg, "cart", 1); return nil }},
		{"Decide", `the decision "route" (replay.Decide)`, func() error { replay.Decide(bg, "route", "a"); return nil }},
		{"Param", `the parameter "limit" (replay.Param)`, func() error { replay.Param(bg, "limit", 3); return nil }},
		{"Now", `replay.Now`, func() error { replay.Now(bg); return nil }},
		{"NewID", `replay.NewID`, func() error { replay.NewID(bg); return nil }},
		{"SideEffect", `the side effect "shard" (replay.SideEffect)`, func() error {
			_, err := replay.SideEffect(bg, "shard", func() (int, error) { return 1, nil })
			return err
		}},
		{"Approve", `the approval "refund" (replay.Approve)`, func() error {
			_, err := replay.Approve(bg, "refund", func(context.Context) (bool, error) { return true, nil })
			return err
		}},
		{"Transport", `the request POST ` + srv.URL + `/v1/embeddings (replay.Transport)`, func() error {
			req, _ := http.NewRequestWithContext(bg, http.MethodPost, srv.URL+"/v1/embeddings?key=secret", strings.NewReader("{}"))
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var callErr error
			outer := replay.Tool("outer", func(context.Context, string) (string, error) {
				callErr = tc.call()
				return "done", nil
			})
			agent := func(ctx context.Context, _ trace.Value) (any, error) { return outer(ctx, "q") }
			ctx := context.Background()
			rec, err := replay.Record(ctx, "agent", nil, agent, replay.StrictContext())
			require.ErrorIs(t, err, replay.ErrNoSession)
			assert.Contains(t, err.Error(), "replay.Record: the recording misses a call: replay: "+tc.wrapper+" was called with a context that carries no session")
			assert.NotContains(t, err.Error(), "secret")
			var ce *replay.ContextError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.wrapper, ce.Wrapper)
			if callErr != nil {
				assert.ErrorIs(t, callErr, replay.ErrNoSession, "a wrapper that returns an error returns it")
			}
			require.NotNil(t, rec.Trace)

			// The replay serves the outer tool: the inner call does not run.
			_, err = replay.Replay(ctx, rec.Trace, agent, replay.StrictContext())
			require.NoError(t, err)
			// A fork's tail that runs it again reports it.
			v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent, fork.Allow("outer"), fork.StrictContext())
			require.ErrorIs(t, err, replay.ErrNoSession)
			require.NotNil(t, v)
			assert.Contains(t, err.Error(), "fork: the variant's trace misses a call")
		})
	}
}

// TestStrictContextLeavesOtherGoroutinesAlone: a strict run does not fail
// the sessionless calls of goroutines it never saw (another test, another
// request of the process).
func TestStrictContextLeavesOtherGoroutinesAlone(t *testing.T) {
	t.Parallel()
	inner := replay.Tool("elsewhere", func(context.Context, int) (int, error) { return 1, nil })
	started, finish := make(chan struct{}), make(chan struct{})
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		close(started)
		<-finish
		return nil, nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := replay.Record(context.Background(), "agent", nil, agent, replay.StrictContext())
		done <- err
	}()
	<-started
	_, err := inner(context.Background(), 1) // this test's goroutine, not the run's
	close(finish)
	require.NoError(t, err)
	require.NoError(t, <-done)
}

// TestPassThroughStaysFree: with no session in the context, and none
// running, a wrapped tool allocates nothing. (Not parallel:
// AllocsPerRun.)
func TestPassThroughStaysFree(t *testing.T) {
	search := replay.Tool("free", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() { _, _ = search(ctx, 1) })
	assert.Zero(t, allocs)
}

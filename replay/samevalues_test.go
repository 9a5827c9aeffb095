package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// sawAll records, for every way a call is answered (recorded live, served
// by a frozen replay, run again in a fork's live tail), what the agent got.
func sawAll[T any](t *testing.T, agent func(seen *[]T) replay.Agent) []T {
	t.Helper()
	var seen []T
	ctx := context.Background()
	rec, err := replay.Record(ctx, "agent", nil, agent(&seen))
	require.NoError(t, err)
	require.NoError(t, rec.Err)
	res, err := replay.Replay(ctx, rec.Trace, agent(&seen))
	require.NoError(t, err)
	require.NoError(t, res.Err)
	v, err := fork.Run(ctx, rec.Trace, fork.Start(), agent(&seen), fork.Allow("lookup"))
	require.NoError(t, err)
	require.NoError(t, v.Err)
	require.Len(t, seen, 3)
	return seen
}

// TestToolSeesTheSameValuesLiveAndServed: a tool whose output is a
// map[string]any holding a []string hands the agent the same Go values
// live and served, so a type assertion that holds in the recording holds in
// the replay and in a fork's live tail.
func TestToolSeesTheSameValuesLiveAndServed(t *testing.T) {
	t.Parallel()
	lookup := replay.Tool("lookup", func(context.Context, string) (map[string]any, error) {
		return map[string]any{"tags": []string{"a", "b"}, "n": 3, "at": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, nil
	})
	seen := sawAll(t, func(seen *[]map[string]any) replay.Agent {
		return func(ctx context.Context, _ trace.Value) (any, error) {
			out, err := lookup(ctx, "q")
			if err != nil {
				return nil, err
			}
			*seen = append(*seen, out)
			tags := out["tags"].([]any) // panics unless every run sees []any
			return len(tags), nil
		}
	})
	want := map[string]any{"tags": []any{"a", "b"}, "n": float64(3), "at": "2026-01-02T03:04:05Z"}
	for i, s := range seen {
		assert.Equal(t, want, s, "run %d", i)
	}
}

type withTime struct {
	At   time.Time       `json:"at"`
	Raw  json.RawMessage `json:"raw"`
	Note string          `json:"note"`
}

type plainOut struct {
	Price float64           `json:"price"`
	Tags  []string          `json:"tags"`
	By    map[string]int    `json:"by"`
	Next  *plainOut         `json:"next,omitempty"`
	Skip  string            `json:"-"`
	Rates map[int][]float64 `json:"rates"`
}

// TestOutputsAsRecorded checks, for outputs of several types, that the
// agent sees what a replay serves: the same value after recording and
// decoding, whether the type survives JSON (served as is) or not.
func TestOutputsAsRecorded(t *testing.T) {
	t.Parallel()
	at := time.Now() // with a monotonic reading, which JSON drops
	cases := []struct {
		name string
		out  any
		run  func(t *testing.T, out any) []any
	}{
		{"struct with time and raw JSON", withTime{At: at, Raw: json.RawMessage(`{ "a" : 1 }`), Note: "x"}, runTool[withTime]},
		{"struct of plain fields", plainOut{Price: 1.5, Tags: []string{"x"}, By: map[string]int{"a": 1}, Next: &plainOut{Price: 2}, Rates: map[int][]float64{3: {0.1}}}, runTool[plainOut]},
		{"a field left out with a dash tag", plainOut{Price: 1, Skip: "not recorded"}, runTool[plainOut]},
		{"a string with invalid UTF-8", "caf\xe9", runTool[string]},
		{"any", []string{"x"}, runTool[any]},
		{"a trace.Value", trace.StringValue("v"), runTool[trace.Value]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seen := tc.run(t, tc.out)
			for i := range seen[1:] {
				assert.Equal(t, seen[0], seen[i+1], "live (0) and served (%d) differ", i+1)
			}
		})
	}
}

func runTool[T any](t *testing.T, out any) []any {
	lookup := replay.Tool("lookup", func(context.Context, string) (T, error) { return out.(T), nil })
	seen := sawAll(t, func(seen *[]T) replay.Agent {
		return func(ctx context.Context, _ trace.Value) (any, error) {
			v, err := lookup(ctx, "q")
			*seen = append(*seen, v)
			return nil, err
		}
	})
	var out2 []any
	for _, s := range seen {
		out2 = append(out2, s)
	}
	return out2
}

type stringer interface{ String() string }

type named string

func (n named) String() string { return string(n) }

// TestUnservableOutputFailsWhenRecorded: an output whose JSON does not
// decode back into the tool's type could never be served; the recording
// says so at once, as the call's failure, and a replay serves that failure.
func TestUnservableOutputFailsWhenRecorded(t *testing.T) {
	t.Parallel()
	type out struct{ S stringer }
	lookup := replay.Tool("lookup", func(context.Context, string) (out, error) { return out{S: named("x")}, nil })
	var errs []error
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		_, err := lookup(ctx, "q")
		errs = append(errs, err)
		return nil, nil
	}
	ctx := context.Background()
	rec, err := replay.Record(ctx, "agent", nil, agent)
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], replay.ErrNotRecordable)
	assert.Contains(t, errs[0].Error(), "does not decode back into replay_test.out, so a replay could not serve it")
	_, err = replay.Replay(ctx, rec.Trace, agent)
	require.NoError(t, err)
	require.ErrorIs(t, errs[1], replay.ErrRecordedFailure)
	assert.Equal(t, errs[0].Error(), errs[1].Error(), "a replay serves the failure the recording saw")
}

// TestLLMSeesTheSameValuesLiveAndServed: replay.LLM's Response (Extra,
// tool-call arguments) reaches the agent as a replay serves it.
func TestLLMSeesTheSameValuesLiveAndServed(t *testing.T) {
	t.Parallel()
	call := func(context.Context, replay.Request) (replay.Response, error) {
		return replay.Response{Content: "ok", Extra: map[string]any{"ids": []string{"a"}},
			ToolCalls: []replay.ToolCall{{ID: "call_1", Name: "lookup", Arguments: json.RawMessage(`{ "q" : "x" }`)}}}, nil
	}
	var seen []replay.Response
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m", Messages: []replay.Message{{Role: "user", Content: "hi"}}}, call)
		seen = append(seen, resp)
		return fmt.Sprint(resp.Extra["ids"].([]any)...), err
	}
	ctx := context.Background()
	rec, err := replay.Record(ctx, "agent", nil, agent)
	require.NoError(t, err)
	require.NoError(t, rec.Err)
	_, err = replay.Replay(ctx, rec.Trace, agent)
	require.NoError(t, err)
	_, err = replay.Replay(ctx, rec.Trace, agent, replay.Live())
	require.NoError(t, err)
	require.Len(t, seen, 3)
	assert.Equal(t, seen[0], seen[1])
	assert.Equal(t, seen[0], seen[2])
	assert.JSONEq(t, `{"q":"x"}`, string(seen[0].ToolCalls[0].Arguments))
}

// TestSideEffectAndParamAsRecorded: SideEffect and Param hand back what a
// replay would serve.
func TestSideEffectAndParamAsRecorded(t *testing.T) {
	t.Parallel()
	type seen struct {
		at    time.Time
		param map[string]any
	}
	var got []seen
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		at, err := replay.SideEffect(ctx, "clock", func() (time.Time, error) { return time.Now(), nil })
		p := replay.Param(ctx, "limits", map[string]any{"tiers": []string{"gold"}})
		got = append(got, seen{at, p})
		return nil, err
	}
	ctx := context.Background()
	rec, err := replay.Record(ctx, "agent", nil, agent)
	require.NoError(t, err)
	_, err = replay.Replay(ctx, rec.Trace, agent)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, got[0], got[1], "the time without its monotonic reading, the []string as []any")
	assert.Equal(t, []any{"gold"}, got[0].param["tiers"])
}

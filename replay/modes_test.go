package replay_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

func TestConstructionErrors(t *testing.T) {
	t.Parallel()
	tr := base(t)
	cases := []struct {
		name string
		opts []replay.ReplayOption
		want string
	}{
		{"hybrid without models", []replay.ReplayOption{replay.Hybrid()},
			`replay.Hybrid: no model was named; name the models that run live, as "provider/model" (the trace has ['fake/m1'])`},
		{"empty live model", []replay.ReplayOption{replay.Hybrid("")},
			`replay.Hybrid: a model label is empty; name models as "provider/model"`},
		{"empty live tool", []replay.ReplayOption{replay.Live("")}, "replay.Live: a tool name is empty"},
		{"unknown live tool", []replay.ReplayOption{replay.Live("delete_db", "book", "drop")},
			"replay.Live: tools not found in the trace: ['delete_db', 'drop'] (the trace has ['book', 'search'])"},
		{"unknown live model", []replay.ReplayOption{replay.Hybrid("m1")},
			"replay.Hybrid: models not found in the trace: ['m1'] (the trace has ['fake/m1'])"},
		{"two modes", []replay.ReplayOption{replay.Hybrid("fake/m1"), replay.Live()},
			"replay: both Hybrid and Live were given; a replay has one mode"},
		{"two modes, the other way", []replay.ReplayOption{replay.Live(), replay.Hybrid("fake/m1")},
			"replay: both Live and Hybrid were given; a replay has one mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ran := false
			res, err := replay.Replay(context.Background(), tr, func(context.Context, trace.Value) (any, error) { ran = true; return nil, nil }, tc.opts...)
			require.ErrorIs(t, err, replay.ErrInvalidOptions)
			assert.EqualError(t, err, tc.want)
			assert.Nil(t, res)
			assert.False(t, ran, "the agent must not run")
		})
	}
}

// modelWorld is an agent with one tool and two models, counting executions.
type modelWorld struct {
	tools, fast, slow int
}

func (w *modelWorld) agent(prompt string) replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, q string) (string, error) { w.tools++; return "fact about " + q, nil })
	return func(ctx context.Context, _ trace.Value) (any, error) {
		fact, err := lookup(ctx, "tea")
		if err != nil {
			return nil, err
		}
		a, err := replay.LLM(ctx, replay.Request{Provider: "p", Model: "fast", Messages: []replay.Message{{Role: "user", Content: prompt + fact}}},
			func(_ context.Context, r replay.Request) (replay.Response, error) {
				w.fast++
				return replay.Response{Content: "fast says " + r.Messages[0].Content}, nil
			})
		if err != nil {
			return nil, err
		}
		b, err := replay.LLM(ctx, replay.Request{Provider: "p", Model: "slow", Messages: []replay.Message{{Role: "user", Content: "judge"}}},
			func(context.Context, replay.Request) (replay.Response, error) {
				w.slow++
				return replay.Response{Content: "slow verdict"}, nil
			})
		if err != nil {
			return nil, err
		}
		return a.Content + " / " + b.Content, nil
	}
}

func TestHybridRunsNamedModelsLive(t *testing.T) {
	t.Parallel()
	var rw modelWorld
	rec, err := replay.Record(context.Background(), "hybrid", nil, rw.agent("say: "))
	require.NoError(t, err)

	// The fast model runs live with a changed prompt; the tool and the slow
	// model are served.
	var w modelWorld
	res, err := replay.Replay(context.Background(), rec.Trace, w.agent("shout: "),
		replay.Hybrid("p/fast"))
	require.NoError(t, err)
	assert.Equal(t, modelWorld{fast: 1}, w)
	assert.Equal(t, "fast says shout: fact about tea / slow verdict", res.Output)
	assert.Equal(t, []replay.Outcome{replay.Served, replay.Executed, replay.Served}, outcomes(res))
	assert.NoError(t, res.VerifyComplete())
	// The new trace records the live call as it happened.
	assert.Equal(t, `{"content":"fast says shout: fact about tea"}`, res.Trace.Events[4].Output.Canonical())

	// A changed prompt for a model that is not live diverges.
	_, err = replay.Replay(context.Background(), rec.Trace, w.agent("shout: "),
		replay.Hybrid("p/slow"))
	require.ErrorIs(t, err, replay.ErrDiverged)
	assert.Contains(t, err.Error(), "call #2: llm 'p/fast' input diverged from the recording")
}

func TestLiveMode(t *testing.T) {
	t.Parallel()
	var rw modelWorld
	rec, err := replay.Record(context.Background(), "live", nil, rw.agent("say: "))
	require.NoError(t, err)

	// Models run live; the tool only when allowed.
	var w modelWorld
	res, err := replay.Replay(context.Background(), rec.Trace, w.agent("say: "),
		replay.Live("lookup"))
	require.NoError(t, err)
	assert.Equal(t, modelWorld{tools: 1, fast: 1, slow: 1}, w)
	assert.Equal(t, 3, res.Executed)
	assert.NoError(t, res.VerifyComplete())

	// Not allowed: refused before the body runs, the cursor stays put.
	var w2 modelWorld
	var toolErr error
	res, err = replay.Replay(context.Background(), rec.Trace, func(ctx context.Context, in trace.Value) (any, error) {
		_, toolErr = replay.Tool("lookup", func(_ context.Context, q string) (string, error) { w2.tools++; return "", nil })(ctx, "tea")
		return nil, toolErr
	}, replay.Live())
	require.ErrorIs(t, err, replay.ErrDiverged)
	var pe *replay.PolicyError
	require.ErrorAs(t, toolErr, &pe)
	assert.Equal(t, 0, w2.tools)
	assert.EqualError(t, res.VerifyComplete(),
		"replay ended before consuming 3 recorded dependency call(s): #1 tool lookup, #2 llm p/fast, #3 llm p/slow\n  recorded event: "+rec.Trace.Events[1].ID+" (step 1)")
}

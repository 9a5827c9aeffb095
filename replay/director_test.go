package replay_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// pipeline makes five tool calls and a model call whose prompt depends on
// them, then a decision; it counts what really executed.
type pipeline struct {
	tools, models int
	route         string
}

type pipeOut struct {
	Sum    int    `json:"sum"`
	Answer string `json:"answer"`
	Route  string `json:"route"`
	Limit  int    `json:"limit"`
	Tone   string `json:"tone"`
}

func (p *pipeline) agent() replay.Agent {
	square := replay.Tool("square", func(_ context.Context, n int) (int, error) { p.tools++; return n * n, nil })
	return func(ctx context.Context, _ trace.Value) (any, error) {
		var o pipeOut
		o.Limit = replay.Param(ctx, "limit", 5)
		for i := 1; i <= o.Limit; i++ {
			v, err := square(ctx, i)
			if err != nil {
				return nil, err
			}
			o.Sum += v
		}
		temp := 0.0
		resp, err := replay.LLM(ctx, replay.Request{Provider: "p", Model: "small", System: "be brief",
			Messages: []replay.Message{{Role: "user", Content: fmt.Sprint("sum=", o.Sum)}}, Temperature: &temp},
			func(_ context.Context, r replay.Request) (replay.Response, error) {
				p.models++
				return replay.Response{Content: fmt.Sprintf("%s|%s|%s", r.Model, r.System, r.Messages[0].Content)}, nil
			})
		if err != nil {
			return nil, err
		}
		o.Answer = resp.Content
		o.Route = replay.Decide(ctx, "route", p.route)
		o.Tone = replay.Read(ctx, "tone", "neutral")
		return o, nil
	}
}

func recordPipeline(t *testing.T) *trace.Trace {
	t.Helper()
	p := &pipeline{route: "a"}
	rec, err := replay.Record(context.Background(), "pipeline", nil, p.agent())
	require.NoError(t, err)
	require.Equal(t, pipeOut{Sum: 55, Answer: "small|be brief|sum=55", Route: "a", Limit: 5, Tone: "neutral"}, rec.Output)
	return rec.Trace
}

func TestDirectorSwitchesToLiveAndSubstitutes(t *testing.T) {
	t.Parallel()
	tr := recordPipeline(t)
	// Serve the first two calls strictly, substitute the third tool's
	// result, run everything after live.
	var seen []replay.Call
	d := replay.DirectorFunc(func(c *replay.Call) replay.Action {
		seen = append(seen, *c)
		switch {
		case c.Kind != replay.KindTool && c.Kind != replay.KindLLM:
			return replay.Strict()
		case c.Position <= 2:
			return replay.Strict()
		case c.Position == 3:
			return replay.Serve(trace.IntValue(100))
		}
		return replay.Execute()
	})
	p := &pipeline{route: "a"}
	res, err := replay.Replay(context.Background(), tr, p.agent(), replay.WithDirector(d))
	require.NoError(t, err)
	assert.Equal(t, pipeOut{Sum: 1 + 4 + 100 + 16 + 25, Answer: "small|be brief|sum=146", Route: "a", Limit: 5, Tone: "neutral"}, res.Output)
	assert.Equal(t, 2, p.tools)
	assert.Equal(t, 1, p.models)
	assert.Equal(t, []replay.Outcome{replay.Served, replay.Served, replay.Served, replay.Executed, replay.Executed, replay.Executed}, outcomes(res))
	assert.Equal(t, 3, res.Served)
	assert.Equal(t, 3, res.Executed)
	assert.Nil(t, res.Divergence)

	// The Director saw each call with its position, occurrence, step and
	// cursor.
	require.Len(t, seen, 9) // param, 5 tools, model, decision, state read
	third := seen[3]
	assert.Equal(t, replay.KindTool, third.Kind)
	assert.Equal(t, "square", third.Name)
	assert.Equal(t, 3, third.Position)
	assert.Equal(t, 3, third.Occurrence)
	assert.Equal(t, `3`, third.Input.Canonical())
	require.NotNil(t, third.Cursor)
	assert.Equal(t, tr.Events[6].ID, third.Cursor.Call.ID)
	require.NotNil(t, third.Match)
	assert.Equal(t, third.Cursor.Call.ID, third.Match.Call.ID)
	assert.Equal(t, 6, third.Step, "the step the call's event gets")
	assert.Equal(t, tr.Events[6].Step, third.Step)

	// The new trace: the prefix keeps the base's ids; the substituted
	// result and what follows differ.
	got := res.Trace
	for i := 0; i <= 6; i++ {
		assert.Equal(t, tr.Events[i].ID, got.Events[i].ID, "prefix event %d", i)
	}
	assert.Equal(t, "100", got.Events[7].Output.Canonical())
	assert.NotEqual(t, tr.Events[7].ID, got.Events[7].ID)
	report := trace.Validate(context.Background(), got)
	require.True(t, report.Valid(), "%v", report.Issues)
}

func TestDirectorPatchesForcesBlocksAndMemoizes(t *testing.T) {
	t.Parallel()
	tr := recordPipeline(t)
	d := replay.DirectorFunc(func(c *replay.Call) replay.Action {
		switch {
		case c.Kind == replay.KindParam:
			return replay.Serve(trace.IntValue(4)) // one call fewer
		case c.Kind == replay.KindTool && c.Match != nil:
			return replay.ServeMatch() // memoized: served from the base call with this input
		case c.Kind == replay.KindLLM:
			in := trace.MustParse(`{"messages":[{"content":"sum=30","role":"user"}],"system":"be verbose","temperature":0.7}`)
			return replay.Execute().WithInput(in).WithModel("large")
		case c.Kind == replay.KindDecision:
			return replay.Serve(trace.StringValue("b"))
		case c.Kind == replay.KindState:
			return replay.Serve(trace.StringValue("warm"))
		}
		return replay.Strict()
	})
	p := &pipeline{route: "a"}
	res, err := replay.Replay(context.Background(), tr, p.agent(), replay.WithDirector(d))
	require.NoError(t, err)
	assert.Equal(t, pipeOut{Sum: 30, Answer: "large|be verbose|sum=30", Route: "b", Limit: 4, Tone: "warm"}, res.Output)
	assert.Equal(t, 0, p.tools, "every tool call was served from an equal base call")
	assert.Equal(t, 1, p.models)
	assert.Equal(t, 4, res.Served)
	assert.Equal(t, 1, res.Executed)
	assert.EqualError(t, res.VerifyComplete(),
		"replay ended before consuming 2 recorded dependency call(s): #5 tool square, #6 llm p/small\n  recorded event: "+tr.Events[10].ID+" (step 10)")

	evs := res.Trace.Events
	param, _ := evs[1].Marker()
	assert.Equal(t, trace.Marker{Key: "@param", Name: "limit", Value: trace.IntValue(4), Forced: true}, param)
	req := find(t, res.Trace, trace.LLMRequest, "large")
	assert.Equal(t, "p", req.Provider)
	assert.Equal(t, `{"messages":[{"content":"sum=30","role":"user"}],"system":"be verbose","temperature":0.7}`, req.Input.Canonical())
	decision := evs[len(evs)-4]
	m, _ := decision.Marker()
	assert.Equal(t, trace.Marker{Key: "@decision", Name: "route", Kind: "decision", Value: trace.StringValue("b"), Forced: true}, m)
	// Where the agent read the key, then the patch of what it read.
	read, _ := evs[len(evs)-3].Marker()
	assert.Equal(t, trace.Marker{Key: "@read", Name: "tone"}, read)
	state := evs[len(evs)-2]
	assert.Equal(t, "tone", state.Key)
	assert.Equal(t, `"neutral"`, state.Before.Canonical())
	assert.Equal(t, `"warm"`, state.After.Canonical())

	// Blocking and failing.
	boom := errors.New("refused by policy")
	blockAll := replay.DirectorFunc(func(c *replay.Call) replay.Action {
		switch {
		case c.Kind == replay.KindTool && c.Position == 1:
			return replay.Block("tail tool with no recorded twin")
		case c.Kind == replay.KindTool:
			return replay.Fail(boom)
		}
		return replay.Strict()
	})
	var blockErr, failErr error
	res, err = replay.Replay(context.Background(), tr, func(ctx context.Context, _ trace.Value) (any, error) {
		sq := replay.Tool("square", func(context.Context, int) (int, error) { t.Error("ran"); return 0, nil })
		_, blockErr = sq(ctx, 1)
		_, failErr = sq(ctx, 2)
		return nil, nil
	}, replay.WithDirector(blockAll))
	require.NoError(t, err, "a Director's run reports no outcome difference")
	var be *replay.BlockedError
	require.ErrorAs(t, blockErr, &be)
	assert.ErrorIs(t, blockErr, replay.ErrBlocked)
	assert.Equal(t, "tool call 'square' was blocked: tail tool with no recorded twin", be.Error())
	assert.Same(t, boom, failErr)
	assert.Equal(t, []replay.Outcome{replay.Blocked, replay.Failed}, outcomes(res))
	assert.Equal(t, 1, res.Blocked)
	blocked := res.Trace.Events[2]
	assert.Equal(t, trace.StatusSkipped, blocked.Status)
	assert.Equal(t, `{"error_type":"Blocked","message":"tail tool with no recorded twin"}`, blocked.Output.Canonical())
	report := trace.Validate(context.Background(), res.Trace)
	require.True(t, report.Valid(), "%v", report.Issues)
}

func TestServeMatchWithoutMatchDiverges(t *testing.T) {
	t.Parallel()
	tr := recordPipeline(t)
	d := replay.DirectorFunc(func(c *replay.Call) replay.Action { return replay.ServeMatch() })
	_, err := replay.Replay(context.Background(), tr, script(tool("square", 9)), replay.WithDirector(d))
	require.ErrorIs(t, err, replay.ErrDiverged)
	assert.EqualError(t, err, "call #1: no unconsumed recorded tool call 'square' has this input\n  actual: tool name='square'\n  actual input fingerprint: "+fp(9))
}

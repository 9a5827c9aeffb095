package replay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// step is one call a scripted agent makes.
type step func(ctx context.Context) error

func tool(name string, in any) step {
	return func(ctx context.Context) error {
		_, err := replay.Tool(name, func(context.Context, any) (any, error) { return "live " + name, nil })(ctx, in)
		return err
	}
}

func llm(provider, model string, in any) step {
	return func(ctx context.Context) error {
		_, err := replay.LLMRaw(ctx, provider, model, trace.MustValueOf(in), func(context.Context, trace.Value) (trace.Value, error) {
			return trace.MustParse(`"live"`), nil
		})
		return err
	}
}

// script is an agent making the steps in order and stopping at the first
// error.
func script(steps ...step) replay.Agent {
	return func(ctx context.Context, _ trace.Value) (any, error) {
		for _, s := range steps {
			if err := s(ctx); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
}

// base is a recorded run: a tool call, a model call, a second tool call.
func base(t *testing.T, edit ...func(tr *trace.Trace)) *trace.Trace {
	t.Helper()
	b := trace.NewBuilder("matcher")
	b.RunStart(nil)
	b.Tool("search", map[string]any{"q": "lisbon"}, map[string]any{"hits": 3})
	b.LLM("fake", "m1", map[string]any{"prompt": "hi"}, map[string]any{"text": "hello"})
	b.Tool("book", map[string]any{"id": 7}, nil)
	b.RunEnd(trace.RunCompleted, nil)
	tr := b.MustTrace()
	for _, e := range edit {
		e(tr)
	}
	return tr
}

// diffQ stands for the cmp.Diff of {"q":"lisbon"} and {"q":"porto"}.
const diffQ = "<diff of q>"

func fp(x any) string { return trace.Hash(trace.MustValueOf(x)) }

func modelFP(provider any, model string) string {
	return fp(map[string]any{"model": model, "provider": provider})
}

var (
	searchIn = map[string]any{"q": "lisbon"}
	llmIn    = map[string]any{"prompt": "hi"}
	bookIn   = map[string]any{"id": 7}
)

func TestStrictMismatchMessages(t *testing.T) {
	t.Parallel()
	m1 := fmt.Sprintf("llm provider='fake' model='m1' model_fingerprint=%s", modelFP("fake", "m1"))
	cases := []struct {
		name  string
		edit  func(*trace.Trace)
		steps []step
		opts  []replay.ReplayOption
		is    error
		want  string // the whole error text
	}{{
		name:  "kind differs",
		steps: []step{llm("fake", "m1", llmIn)},
		is:    replay.ErrDiverged,
		want: "call #1: expected tool 'search' but the agent made a llm call 'm1'\n" +
			"  recorded: tool name='search'\n  actual:   " + m1 + "\n" +
			"  recorded event: evt_002 (step 1)",
	}, {
		name:  "tool name differs",
		steps: []step{tool("find", searchIn)},
		is:    replay.ErrDiverged,
		want: "call #1: expected tool 'search' but the agent called 'find'\n" +
			"  recorded: tool name='search'\n  actual:   tool name='find'\n" +
			"  recorded event: evt_002 (step 1)",
	}, {
		name:  "model differs",
		steps: []step{tool("search", searchIn), llm("fake", "m2", llmIn)},
		is:    replay.ErrDiverged,
		want: "call #2: expected LLM model 'm1' but the agent used 'm2'\n" +
			"  recorded: " + m1 + "\n" +
			"  actual:   llm provider='fake' model='m2' model_fingerprint=" + modelFP("fake", "m2") + "\n" +
			"  recorded model fingerprint: " + modelFP("fake", "m1") + "\n" +
			"  actual model fingerprint: " + modelFP("fake", "m2") + "\n" +
			"  recorded event: evt_004 (step 3)",
	}, {
		name:  "provider differs",
		steps: []step{tool("search", searchIn), llm("", "m1", llmIn)},
		is:    replay.ErrDiverged,
		want: "call #2: expected provider 'fake' but the agent used None\n" +
			"  recorded: " + m1 + "\n" +
			"  actual:   llm provider=None model='m1' model_fingerprint=" + modelFP(nil, "m1") + "\n" +
			"  recorded model fingerprint: " + modelFP("fake", "m1") + "\n" +
			"  actual model fingerprint: " + modelFP(nil, "m1") + "\n" +
			"  recorded event: evt_004 (step 3)",
	}, {
		name:  "input diverged",
		steps: []step{tool("search", map[string]any{"q": "porto"})},
		is:    replay.ErrDiverged,
		want: "call #1: tool 'search' input diverged from the recording\n" +
			"  recorded input fingerprint: " + fp(searchIn) + "\n" +
			"  actual input fingerprint: " + fp(map[string]any{"q": "porto"}) + "\n" +
			`  recorded: {"q":"lisbon"}` + "\n" +
			`  actual:   {"q":"porto"}` + "\n" +
			"  recorded event: evt_002 (step 1)\n" +
			"  diff (-recorded +actual):\n" + diffQ,
	}, {
		name:  "input diverged, no stored hash",
		edit:  func(tr *trace.Trace) { tr.Events[1].InputHash = "" },
		steps: []step{tool("search", map[string]any{"q": "porto"})},
		is:    replay.ErrDiverged,
		want: "call #1: tool 'search' input diverged from the recording\n" +
			"  recorded input fingerprint: " + fp(searchIn) + " (computed; recording had no stored input_hash)\n" +
			"  actual input fingerprint: " + fp(map[string]any{"q": "porto"}) + "\n" +
			`  recorded: {"q":"lisbon"}` + "\n" +
			`  actual:   {"q":"porto"}` + "\n" +
			"  recorded event: evt_002 (step 1)\n" +
			"  diff (-recorded +actual):\n" + diffQ,
	}, {
		name:  "invalid input fingerprint",
		edit:  func(tr *trace.Trace) { tr.Events[1].InputHash = strings.Repeat("0", 64) },
		steps: []step{tool("search", searchIn)},
		is:    replay.ErrDiverged,
		want: "call #1: recorded tool 'search' has an invalid input fingerprint\n" +
			"  recorded input fingerprint: " + strings.Repeat("0", 64) + "\n" +
			"  computed input fingerprint: " + fp(searchIn) + "\n" +
			"  run `stepfork validate --verify-integrity` on the trace; legacy or tampered recordings cannot be used for strict replay\n" +
			"  recorded event: evt_002 (step 1)",
	}, {
		name:  "invalid output fingerprint",
		edit:  func(tr *trace.Trace) { tr.Events[2].Output = trace.MustParse(`{"hits":4}`) },
		steps: []step{tool("search", searchIn)},
		is:    replay.ErrDiverged,
		want: "call #1: recorded tool 'search' has an invalid output fingerprint\n" +
			"  recorded output fingerprint: " + fp(map[string]any{"hits": 3}) + "\n" +
			"  computed output fingerprint: " + fp(map[string]any{"hits": 4}) + "\n" +
			"  run `stepfork validate --verify-integrity` on the trace; legacy or tampered recordings cannot be used for strict replay\n" +
			"  recorded event: evt_002 (step 1)",
	}, {
		name:  "missing result",
		edit:  func(tr *trace.Trace) { tr.Events = append(tr.Events[:2:2], tr.Events[3:]...) },
		steps: []step{tool("search", searchIn)},
		is:    replay.ErrDiverged,
		want:  "no captured result for recorded tool call 'search' at position 1\n  recorded event: evt_002 (step 1)",
	}, {
		name:  "recorded policy forbidden",
		edit:  func(tr *trace.Trace) { tr.Events[1].ReplayPolicy = trace.PolicyForbidden },
		steps: []step{tool("search", searchIn)},
		is:    replay.ErrDiverged,
		want:  "recorded tool call 'search' forbids automatic replay",
	}, {
		name:  "recorded policy manual",
		edit:  func(tr *trace.Trace) { tr.Events[3].ReplayPolicy = trace.PolicyManual },
		steps: []step{tool("search", searchIn), llm("fake", "m1", llmIn)},
		is:    replay.ErrDiverged,
		want:  "recorded llm call 'fake/m1' requires manual approval before replay",
	}, {
		name:  "exhausted",
		steps: []step{tool("search", searchIn), llm("fake", "m1", llmIn), tool("book", bookIn), tool("pay", map[string]any{"eur": 5})},
		is:    replay.ErrDiverged,
		want: "unexpected tool call 'pay': all 3 recorded dependency call(s) were already consumed\n" +
			"  actual: tool name='pay'\n  actual input fingerprint: " + fp(map[string]any{"eur": 5}),
	}, {
		name:  "live tool not authorized",
		steps: []step{tool("search", searchIn)},
		opts:  []replay.ReplayOption{replay.Live("book")},
		is:    replay.ErrDiverged,
		want:  `live tool 'search' requires explicit authorization; pass allow_live_tools={'search'} (replay.Live("search"))`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := base(t)
			if tc.edit != nil {
				tc.edit(tr)
			}
			res, err := replay.Replay(context.Background(), tr, script(tc.steps...), tc.opts...)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.is)
			if strings.HasSuffix(tc.want, diffQ) {
				// cmp.Diff's layout is not stable; check its lines, not its spacing.
				prefix := strings.TrimSuffix(tc.want, diffQ)
				require.True(t, strings.HasPrefix(err.Error(), prefix), err.Error())
				diff := err.Error()[len(prefix):]
				assert.Regexp(t, `(?m)^    -\s+"q": string\("lisbon"\),$`, diff)
				assert.Regexp(t, `(?m)^    \+\s+"q": string\("porto"\),$`, diff)
				return
			}
			assert.Equal(t, tc.want, err.Error())
			assert.Equal(t, err, res.Divergence, "the divergence is kept")
			assert.Equal(t, 0, res.Served+res.Executed-len(tc.steps)+1, "every call before the failing one was answered")
		})
	}
}

func TestRecordedFailureIsServedAsRecordedError(t *testing.T) {
	t.Parallel()
	tr, err := trace.Load("../testdata/vectors/stepfork/failed_tool_run.sftrace")
	require.NoError(t, err)
	var toolErr error
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		_, toolErr = replay.Tool("flight_search", func(context.Context, map[string]string) (any, error) {
			t.Error("the tool ran during a frozen replay")
			return nil, nil
		})(ctx, map[string]string{"api_key": "sk-real-secret-123456", "query": "Kathmandu flights"})
		return nil, toolErr
	}
	res, err := replay.Replay(context.Background(), tr, agent)
	require.NoError(t, err, "the failed run is reproduced: same failure type")
	var re *replay.RecordedError
	require.ErrorAs(t, toolErr, &re)
	assert.ErrorIs(t, toolErr, replay.ErrRecordedFailure)
	assert.NotErrorIs(t, toolErr, replay.ErrDiverged)
	assert.Equal(t, &replay.RecordedError{Kind: replay.KindTool, Label: "flight_search", Type: "ToolTimeout", Message: "flight_search timed out"}, re)
	assert.Equal(t, "recorded tool failure for 'flight_search': ToolTimeout: flight_search timed out", re.Describe())
	assert.Equal(t, "flight_search timed out", re.Error())
	assert.Nil(t, res.Divergence)
	assert.Equal(t, trace.RunFailed, res.Trace.Status)
	assert.Equal(t, "ToolTimeout", res.Trace.Failure.Type)
	// The re-recorded call holds the recorded failure, and no secret.
	for _, ev := range res.Trace.Events {
		assert.NotContains(t, ev.Input.Canonical(), "sk-real-secret")
	}
}

func TestRecordedFailureDefaults(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("x")
	b.RunStart(nil)
	call := b.ToolCall("t", nil)
	b.Add(trace.Event{Type: trace.ToolResult, Name: "t", ParentID: call, Status: trace.StatusError, Output: trace.MustParse(`{"reason":"?"}`)})
	b.RunEnd(trace.RunCompleted, nil)
	var got error
	_, _ = replay.Replay(context.Background(), b.MustTrace(), func(ctx context.Context, _ trace.Value) (any, error) {
		_, got = replay.Tool("t", func(context.Context, any) (any, error) { return nil, nil })(ctx, nil)
		return nil, nil
	})
	var re *replay.RecordedError
	require.ErrorAs(t, got, &re)
	assert.Equal(t, "recorded tool failure for 't': DependencyError: recorded dependency failure", re.Describe())
}

func TestFailedModelCallIsServed(t *testing.T) {
	t.Parallel()
	tr, err := trace.Load("../testdata/vectors/stepfork/failed_llm_run.sftrace")
	require.NoError(t, err)
	req := tr.Events[1]
	var callErr error
	_, err = replay.Replay(context.Background(), tr, func(ctx context.Context, _ trace.Value) (any, error) {
		_, callErr = replay.LLMRaw(ctx, req.Provider, req.Model, req.Input, func(context.Context, trace.Value) (trace.Value, error) {
			return trace.Value{}, errors.New("must not run")
		})
		return nil, callErr
	})
	require.NoError(t, err)
	var re *replay.RecordedError
	require.ErrorAs(t, callErr, &re)
	assert.Equal(t, replay.KindLLM, re.Kind)
	assert.Equal(t, trace.LLMLabel(req.Provider, req.Model), re.Label)
}

func TestNullIsHashedLikeAnyValue(t *testing.T) {
	t.Parallel()
	// A tool that returned null and a model call with a null input: stepfork
	// fingerprints null as "<none>" and cannot replay them; here they replay.
	rec, err := replay.Record(context.Background(), "nulls", nil, func(ctx context.Context, _ trace.Value) (any, error) {
		if _, err := replay.Tool("noop", func(context.Context, any) (any, error) { return nil, nil })(ctx, nil); err != nil {
			return nil, err
		}
		return replay.LLMRaw(ctx, "", "m", trace.NullValue, func(context.Context, trace.Value) (trace.Value, error) { return trace.NullValue, nil })
	})
	require.NoError(t, err)
	tr, err := rec.Trace.Prepared()
	require.NoError(t, err)
	null := trace.Hash(trace.NullValue)
	assert.Equal(t, "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b", null)
	assert.Equal(t, null, tr.Events[1].InputHash)
	assert.Equal(t, null, tr.Events[2].OutputHash)
	assert.Equal(t, null, tr.Events[3].InputHash)
	res, err := replay.Replay(context.Background(), tr, func(ctx context.Context, _ trace.Value) (any, error) {
		if _, err := replay.Tool("noop", func(context.Context, any) (any, error) { return nil, errors.New("ran") })(ctx, nil); err != nil {
			return nil, err
		}
		return replay.LLMRaw(ctx, "", "m", trace.NullValue, func(context.Context, trace.Value) (trace.Value, error) { return trace.Value{}, errors.New("ran") })
	})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Served)
}

func TestSecretsMatchRedactedRecording(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("x")
	b.RunStart(nil)
	b.Tool("call_api", map[string]any{"api_key": trace.Redacted, "note": "Bearer [REDACTED]"}, "ok")
	b.RunEnd(trace.RunCompleted, nil)
	_, err := replay.Replay(context.Background(), b.MustTrace(),
		script(tool("call_api", map[string]any{"api_key": "live-secret", "note": "Bearer abcdefghijkl"})))
	require.NoError(t, err)
	// A different secret-free field still diverges, and the message quotes no
	// secret.
	_, err = replay.Replay(context.Background(), b.MustTrace(),
		script(tool("call_api", map[string]any{"api_key": "live-secret-xyz", "note": "other"})))
	require.ErrorIs(t, err, replay.ErrDiverged)
	assert.NotContains(t, err.Error(), "live-secret-xyz")
}

func TestVerifyComplete(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("many")
	b.RunStart(nil)
	for i := range 8 {
		if i%2 == 0 {
			b.Tool("x", i, i)
		} else {
			b.LLM("fake", "model", i, i)
		}
	}
	b.RunEnd(trace.RunCompleted, nil)
	res, err := replay.Replay(context.Background(), b.MustTrace(), script(tool("x", 0)))
	require.Error(t, err)
	want := "replay ended before consuming 7 recorded dependency call(s): #2 llm fake/model, #3 tool x, #4 llm fake/model, #5 tool x, #6 llm fake/model (+2 more)"
	assert.Equal(t, want, res.VerifyComplete().Error()[:len(want)])
	assert.ErrorIs(t, err, replay.ErrDiverged)
	assert.True(t, strings.HasPrefix(err.Error(), want), err.Error())
	assert.Nil(t, res.Divergence, "leaving calls unconsumed is an outcome difference, not a divergence of a call")
}

func TestOutcomeDifferences(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("out")
	b.RunStart(nil)
	b.RunEnd(trace.RunCompleted, map[string]any{"answer": 42, "items": []any{1, 2}})
	completed := b.MustTrace()
	fb := trace.NewBuilder("out")
	fb.RunStart(nil)
	fb.Fail("ValueError", "bad")
	failed := fb.MustTrace()
	returning := func(out any, err error) replay.Agent {
		return func(context.Context, trace.Value) (any, error) { return out, err }
	}
	cases := []struct {
		name  string
		tr    *trace.Trace
		agent replay.Agent
		want  string // "" = reproduced
	}{
		{"same output", completed, returning(map[string]any{"items": []any{1, 2}, "answer": 42}, nil), ""},
		{"other output", completed, returning(map[string]any{"answer": 42, "items": []any{1, 3}}, nil),
			"final result differs from recorded output at '$.items[1]': recorded 2, actual 3. Possible causes include untraced nondeterminism or changed local logic."},
		{"error instead of completion", completed, returning(nil, errors.New("boom")),
			"entrypoint raised error: boom but the trace recorded status completed"},
		{"completion instead of failure", failed, returning("fine", nil),
			"trace recorded a failed run but the entrypoint completed without raising"},
		{"other failure type", failed, returning(nil, errors.New("boom")),
			"entrypoint raised error: boom but the trace recorded status failed (failure ValueError)"},
		{"same failure type", failed, returning(nil, typedErr{"ValueError"}), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := replay.Replay(context.Background(), tc.tr, tc.agent)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, replay.ErrDiverged)
			assert.Equal(t, tc.want, strings.SplitN(err.Error(), "\n", 2)[0])
		})
	}
}

type typedErr struct{ typ string }

func (e typedErr) Error() string     { return "typed " + e.typ }
func (e typedErr) ErrorType() string { return e.typ }

func TestDivergenceKeptWhenSwallowed(t *testing.T) {
	t.Parallel()
	tr := base(t)
	var seen []error
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		for _, s := range []step{tool("search", map[string]any{"q": "rome"}), tool("search", searchIn), llm("fake", "m1", llmIn), tool("book", bookIn)} {
			if err := s(ctx); err != nil {
				seen = append(seen, err) // swallowed
			}
		}
		return "done", nil
	}
	res, err := replay.Replay(context.Background(), tr, agent)
	require.Error(t, err)
	require.Len(t, seen, 1)
	assert.Same(t, seen[0], res.Divergence)
	assert.Same(t, seen[0], err)
	var me *replay.MismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, 1, me.Call)
	assert.Equal(t, 1, me.Step)
	assert.Equal(t, "evt_002", me.EventID)
	assert.Equal(t, `{"q":"lisbon"}`, me.Recorded.Canonical())
	assert.Equal(t, `{"q":"rome"}`, me.Actual.Canonical())
	assert.Equal(t, "done", res.Output)
	assert.Equal(t, 3, res.Served)
	assert.Equal(t, []replay.Outcome{replay.Failed, replay.Served, replay.Served, replay.Served}, outcomes(res))
}

func outcomes(res *replay.Result) []replay.Outcome {
	var out []replay.Outcome
	for _, c := range res.Calls {
		out = append(out, c.Outcome)
	}
	return out
}

func TestNestedCallsUnderServedCallsAreSkipped(t *testing.T) {
	t.Parallel()
	// The recorded outer tool called an inner tool from its body. Frozen, the
	// outer body does not run, so the inner call is not expected.
	inner := replay.Tool("inner", func(context.Context, int) (int, error) { return 2, nil })
	var outerRuns int
	outer := replay.Tool("outer", func(ctx context.Context, n int) (int, error) {
		outerRuns++
		v, err := inner(ctx, n)
		return v * 10, err
	})
	agent := func(ctx context.Context, _ trace.Value) (any, error) { return outer(ctx, 1) }
	rec, err := replay.Record(context.Background(), "nest", nil, agent)
	require.NoError(t, err)
	require.Equal(t, rec.Trace.Events[1].ID, rec.Trace.Events[2].ParentID, "inner call hangs under the outer call")
	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	require.NoError(t, err)
	assert.Equal(t, 1, outerRuns)
	assert.Equal(t, 20, res.Output)
	assert.NoError(t, res.VerifyComplete())
}

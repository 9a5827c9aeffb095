package fork

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

func TestChangeWireForms(t *testing.T) {
	t.Parallel()
	changes := []Change{
		ToolResult(OnStep(4), map[string]any{"ok": true}),
		ToolResult(OnCall("search", 2), []string{"x"}),
		LLMResponse(OnEvent("evt_1"), replay.Response{Content: "hi"}),
		Prompt("write", "Be terse."),
		PromptAppend("write", " Cite sources."),
		PromptPrepend(All, "Today is Monday. "),
		PromptReplace("write", "terse", "brief"),
		Model("write", "gpt-4o"),
		Temperature(All, 0.7),
		State{Set: map[string]any{"tone": "formal", "a": 1}, Delete: []string{"old"}},
		DecisionOnce("route", "publish"),
		Param("max_words", 50),
		HumanResponse("publish", false),
		HumanResponse("", true),
	}
	want := `[{"kind":"tool_result","output":{"ok":true},"target":{"step":4}},` +
		`{"kind":"tool_result","output":["x"],"target":{"name":"search","occurrence":2}},` +
		`{"kind":"llm_response","output":{"content":"hi"},"target":{"event_id":"evt_1"}},` +
		`{"kind":"prompt","system_prompt":"Be terse.","target":"write"},` +
		`{"kind":"prompt_edit","op":"append","target":"write","text":" Cite sources."},` +
		`{"kind":"prompt_edit","op":"prepend","target":"*","text":"Today is Monday. "},` +
		`{"kind":"prompt_edit","op":"replace","passage":"terse","target":"write","text":"brief"},` +
		`{"kind":"model","model":"gpt-4o","target":"write"},` +
		`{"kind":"temperature","target":"*","temperature":0.7},` +
		`{"delete":["old"],"kind":"state","set":{"a":1,"tone":"formal"}},` +
		`{"kind":"decision","name":"route","once":true,"value":"publish"},` +
		`{"kind":"param","name":"max_words","value":50},` +
		`{"data":false,"decision":"publish","kind":"human_response"},` +
		`{"data":true,"decision":"","kind":"human_response"}]`
	wire := wireChanges(changes)
	assert.Equal(t, want, wire.Canonical())
	back, err := parseChanges(wire)
	require.NoError(t, err)
	assert.Equal(t, wire, wireChanges(back), "the wire form round-trips")

	descs := []string{
		"tool result of step 4", "tool result of 'search' call 2", "model response of event evt_1", "prompt of 'write'",
		"prompt of 'write' (appended to)", "prompt of '*' (prepended to)", "prompt of 'write' (a passage replaced)",
		"model of 'write' → gpt-4o", "temperature of '*' → 0.7", "state set a, tone and delete old",
		`decision 'route' → "publish", once`, "param 'max_words' → 50", "human response to 'publish' → false",
		"human response to every approval → true",
	}
	for i, c := range changes {
		assert.Equal(t, descs[i], c.Describe())
	}

	for _, bad := range []string{`{}`, `[{"kind":"nope"}]`, `[{"kind":"prompt","target":"w","text":"x"}]`,
		`[{"kind":"prompt_edit","target":"w","op":"swap","text":"x"}]`, `[{"kind":"prompt_edit","target":"w","op":"append","text":"x","passage":"y"}]`,
		`[{"kind":"prompt_edit","target":"w","op":"replace","text":"x"}]`, `[{"kind":"tool_result","target":3}]`, `[1]`} {
		_, err := parseChanges(trace.MustParse(bad))
		assert.ErrorIs(t, err, ErrInvalidChange, bad)
	}
}

func TestChangeErrors(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "research")
	tests := []struct {
		name    string
		at      At
		changes []RunOption
		want    string
		is      error
	}{
		{"conflict", Start(), []RunOption{Prompt("write", "a"), Prompt("write", "b")},
			"conflicting changes:\n  prompt of 'write' and prompt of 'write' both write prompt:write. Drop one — a fork applies changes by kind, not in order, so which would win is not defined.", ErrConflict},
		{"every call overlaps one call", Start(), []RunOption{ToolResult(OnCall("search", 0), 1), ToolResult(OnStep(4), 2)},
			"conflicting changes:\n  tool result of every 'search' call and tool result of 'search' call 1 (step 4) both write output:tool:search#1. Drop one — a fork applies changes by kind, not in order, so which would win is not defined.", ErrConflict},
		{"state key twice", Start(), []RunOption{State{Set: map[string]any{"tone": "a"}}, State{Delete: []string{"tone"}}},
			"conflicting changes:\n  state set tone and state delete tone both write state:tone. Drop one — a fork applies changes by kind, not in order, so which would win is not defined.", ErrConflict},
		{"target in prefix", BeforeNode("write", 1), []RunOption{ToolResult(OnStep(4), 1)},
			"tool result of step 4: step 4 is in the served prefix (the fork starts at step 14), and a change only acts on the tail. Fork at or before it (fork.Step(4)) to change it.", ErrInvalidChange},
		{"target of another kind", Start(), []RunOption{ToolResult(OnStep(15), 1)},
			"tool result of step 15: step 15 is a 'llm_request' event, not a tool call or its result", ErrInvalidChange},
		{"no such step", Start(), []RunOption{LLMResponse(OnStep(99), 1)},
			"model response of step 99: no event at step 99 in the base run", ErrInvalidChange},
		{"set and delete", Start(), []RunOption{State{Set: map[string]any{"tone": "a"}, Delete: []string{"tone"}}},
			"state set tone and delete tone: 'tone' is both set and deleted; keep one", ErrInvalidChange},
		{"empty state", Start(), []RunOption{State{}},
			`state (no-op): it sets and deletes nothing; a variant that changes nothing (a sweep's control) is written with no change at all: fork.Named{Name: "control"}`, ErrInvalidChange},
		{"temperature", Start(), []RunOption{Temperature("write", 3)},
			"temperature of 'write' → 3: a temperature is between 0 and 2", ErrInvalidChange},
		{"empty target", Start(), []RunOption{Prompt("", "x")},
			"prompt of '': the target is empty: name a node, a model, or fork.All", ErrInvalidChange},
		{"nil change func", Start(), []RunOption{ChangeFunc(func(Resolved) Change { return nil })},
			"a change computed from the fork point: the function returned no change for step 1 (from the start)", ErrInvalidChange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &world{}
			_, err := Run(context.Background(), base, tt.at, c.agent(w), tt.changes...)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.ErrorIs(t, err, tt.is)
			assert.Zero(t, w.tools.Load()+w.models.Load(), "nothing runs before the changes are checked")
		})
	}
}

// requestOf returns the input of the n-th llm_request of the model label.
func requestOf(t *testing.T, tr *trace.Trace, label string, n int) *trace.Event {
	t.Helper()
	for i := range tr.Events {
		ev := &tr.Events[i]
		if ev.Type == trace.LLMRequest && trace.LLMLabel(ev.Provider, ev.Model) == label {
			n--
			if n == 0 {
				return ev
			}
		}
	}
	t.Fatalf("no llm_request %d of %s", n, label)
	return nil
}

func TestChangesInTheTail(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "research")
	ctx := context.Background()

	t.Run("tool result changes the input of a later tool: guarded by fingerprint (H4)", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, BeforeNode("research", 1), c.agent(w), ToolResult(OnCall("search", 2), []string{"other"}), Memoize())
		require.NoError(t, err)
		assert.Equal(t, StatusBlocked, v.Status)
		require.Len(t, v.Suppressed, 1)
		assert.Equal(t, "publish", v.Suppressed[0].Tool)
		assert.Equal(t, replay.KindTool, v.Suppressed[0].Kind)
		assert.Zero(t, w.published.Load(), "a publish with a changed input is never served stale nor executed")
		assert.Equal(t, 1, v.Changes[0].Applied)
		require.Len(t, v.Replayed, 1, "the first search has its recorded input and is served")
		assert.Equal(t, 4, v.Replayed[0].BaseStep)
		assert.ErrorIs(t, v.Err, replay.ErrBlocked)
		assert.Contains(t, v.Explain(), "  blocked   step 27 tool 'publish': the base run has no unconsumed call of tool 'publish' with this input")
	})
	t.Run("allow runs the tool for real", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, BeforeNode("research", 1), c.agent(w), ToolResult(OnCall("search", 2), []string{"other"}), Allow("publish"))
		require.NoError(t, err)
		assert.Equal(t, StatusCompleted, v.Status)
		assert.Equal(t, int64(1), w.published.Load())
		assert.Equal(t, 1, v.LiveToolCalls)
		assert.Equal(t, "allow:publish", v.Info.Policy)
	})
	t.Run("block never executes", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, Start(), c.agent(w), Block())
		require.NoError(t, err)
		assert.Equal(t, StatusBlocked, v.Status)
		assert.Equal(t, "the side-effect policy is Block", v.Suppressed[0].Reason)
		assert.Zero(t, w.tools.Load())
	})
	t.Run("llm response and forced route", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, BeforeNode("write", 1), c.agent(w), LLMResponse(OnCall("fake/fake-1", 1), replay.Response{Content: "short"}), Allow("publish"))
		require.NoError(t, err)
		require.Equal(t, StatusCompleted, v.Status, v.Explain())
		assert.Equal(t, "publish", v.Output.(Report).Route)
		assert.Zero(t, w.models.Load(), "the substituted call is not made and write runs once")
		assert.Zero(t, v.IncurredCost)
	})
	t.Run("decision forced once", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, BeforeDecision("route"), c.agent(w), DecisionOnce("route", "publish"), Allow("publish"))
		require.NoError(t, err)
		assert.Equal(t, "publish", v.Output.(Report).Route)
		m, _ := v.Trace.Events[19].Marker()
		assert.True(t, m.Forced)
		assert.Equal(t, []int{19}, v.Changes[0].Steps)
	})
	t.Run("prompt of a raw OpenAI body, memoized elsewhere", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, Start(), c.agent(w), Prompt("title", "Titles in capitals."), Memoize())
		require.NoError(t, err)
		require.Equal(t, StatusCompleted, v.Status, v.Explain())
		req := requestOf(t, v.Trace, "openai/gpt-4o-mini", 1)
		var msgs []map[string]string
		require.NoError(t, req.Input.Get("messages").Decode(&msgs))
		assert.Equal(t, "Titles in capitals.", msgs[0]["content"])
		assert.Equal(t, int64(1), w.models.Load(), "only the changed call runs; the write calls are memo hits")
		assert.Len(t, v.MemoHits, 2)
		assert.Equal(t, 1, v.LiveModelCalls)
	})
	t.Run("model and temperature patch the request", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, BeforeNode("write", 1), c.agent(w), Model("write", "fake-2"), Temperature(All, 0.9), Allow("publish"))
		require.NoError(t, err)
		req := requestOf(t, v.Trace, "fake/fake-2", 1)
		assert.Equal(t, "0.9", req.Input.Get("temperature").Canonical())
		assert.Equal(t, StatusCompleted, v.Status)
		assert.InDelta(t, 0.004, v.IncurredCost, 1e-9, "two live write calls at $0.002")
		assert.Equal(t, int64(240), v.IncurredTokens)
		assert.Equal(t, 2, v.Changes[0].Applied)
	})
	t.Run("model from a change function", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, BeforeNode("write", 2), c.agent(w),
			ChangeFunc(func(p Resolved) Change { return Model(p.Node, "fake-3") }), Allow("publish"))
		require.NoError(t, err)
		assert.Equal(t, "model of 'write' → fake-3", v.Changes[0].Description)
		assert.Equal(t, `[{"kind":"model","model":"fake-3","target":"write"}]`, v.Info.Changes.Canonical())
		requestOf(t, v.Trace, "fake/fake-3", 1)
	})
	t.Run("state patch applies at the first read in the tail", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, Step(10), c.agent(w), State{Set: map[string]any{"tone": "formal"}}, Allow("publish"))
		require.NoError(t, err)
		assert.Equal(t, 1, v.Changes[0].Applied)
		assert.Equal(t, `"You write in a formal tone."`, requestOf(t, v.Trace, "fake/fake-1", 1).Input.Get("system").Canonical())
	})
	t.Run("a change that matches nothing in the tail is unused", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, BeforeNode("write", 1), c.agent(w), State{Set: map[string]any{"tone": "formal"}}, Param("nope", 1), Memoize())
		require.NoError(t, err)
		require.Len(t, v.Unused(), 2)
		assert.Equal(t, "state set tone", v.Unused()[0].Description)
		assert.Contains(t, v.Explain(), "  change    param 'nope' → 1 (unused: its target matched nothing in the tail)")
		assert.True(t, v.Diff.Equivalent())
	})
	t.Run("param and human response", func(t *testing.T) {
		t.Parallel()
		w := &world{}
		v, err := Run(ctx, base, Start(), c.agent(w), Param("max_words", 50), HumanResponse("publish", false), Memoize())
		require.NoError(t, err)
		require.Equal(t, StatusCompleted, v.Status, v.Explain())
		rep := v.Output.(Report)
		assert.Equal(t, 50, rep.MaxWords)
		assert.Empty(t, rep.URL, "publishing was refused")
		assert.Zero(t, w.published.Load())
		for _, ch := range v.Changes {
			assert.Equal(t, 1, ch.Applied, ch.Description)
		}
	})
}

func TestRefundProductExample(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "refund")
	w := &world{}
	v, err := Run(context.Background(), base, Failure(), c.agent(w),
		Prompt("decide", "Refunds above the policy limit need approval."), Memoize())
	require.NoError(t, err)
	assert.Equal(t, StatusCompleted, v.Status)
	assert.Equal(t, RefundOutcome{Status: "escalated"}, v.Output)
	assert.Zero(t, w.tools.Load(), "issue_refund is never called")
	assert.Equal(t, int64(1), w.models.Load())
	assert.InDelta(t, 0.002, v.IncurredCost, 1e-12)
	require.Len(t, v.Diff.State, 1)
	assert.Equal(t, "decision", v.Diff.State[0].Key)
	header := "fork " + shortID(v.Trace.RunID) + " of " + shortID(base.RunID) + " at step 6 (before the failing node ('decide', execution 1))\n" +
		"  change    prompt of 'decide' (applied at step 7)\n" +
		"  policy    replay, memoize\n" +
		"  status    completed\n"
	assert.Contains(t, v.Explain(), header)
	assert.Equal(t, v.Trace, v.RunTrace())

	// Provenance: saved, reproducible from its own bundle.
	path := t.TempDir() + "/fix.sftrace"
	v2, err := Run(context.Background(), base, nil, c.agent(w), Prompt("decide", "Refunds above the policy limit need approval."), SaveTo(path))
	require.NoError(t, err)
	assert.Equal(t, path, v2.Path)
	saved, err := trace.Load(path)
	require.NoError(t, err)
	info, err := ReadInfo(saved)
	require.NoError(t, err)
	assert.Equal(t, KindCounterfactual, info.Kind)
	assert.Equal(t, base.RunID, info.ParentRunID)
	assert.Equal(t, "../testdata/refund-failure.sftrace", info.ParentTracePath)
	assert.Equal(t, 5, info.ForkPointStep)
	assert.Equal(t, "Failure(): step 6 (before the failing node ('decide', execution 1))", info.ForkPoint)
	assert.Equal(t, "replay", info.Policy)
	// Where each change applied is recorded, for a page of the saved fork.
	assert.Equal(t, []ChangeUse{{Description: "prompt of 'decide'", Count: 1, Steps: []int{7}}}, info.Applied)
	v3, err := Reproduce(context.Background(), saved, base, c.agent(w))
	require.NoError(t, err)
	assert.True(t, diff.Runs(v2.Trace, v3.Trace).Equivalent())
	assert.Equal(t, []any{v2.At.Step, v2.At.EventID, v2.At.Node}, []any{v3.At.Step, v3.At.EventID, v3.At.Node})
}

func TestPrefixDivergence(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "refund")
	w := &world{}
	inner := c.agent(w)
	changed := func(ctx context.Context, in trace.Value) (any, error) {
		replay.Tool("audit", func(context.Context, string) (string, error) { return "ok", nil })(ctx, "x")
		return inner(ctx, in)
	}
	_, err := Run(context.Background(), base, Failure(), changed)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrPrefixDiverged))
	assert.Contains(t, err.Error(), "the agent made tool call 'audit' (call #1) where the base run recorded tool call 'get_order' (step 2)")
}

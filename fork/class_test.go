package fork

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// triage is a small completed run for the class tests: a model decides
// (escalating when its prompt speaks of approval, answering "ok" otherwise),
// and a tool acts on the decision.
func triage(w *world) replay.Agent {
	model := func(_ context.Context, req replay.Request) (replay.Response, error) {
		w.models.Add(1)
		answer := "ok"
		if strings.Contains(req.System, "approval") {
			answer = "escalate"
		}
		return replay.Response{Content: answer, Usage: replay.Usage{PromptTokens: 10, CompletionTokens: 1, CostUSD: 0.001}}, nil
	}
	act := replay.Tool("act", func(_ context.Context, what string) (string, error) {
		w.tools.Add(1)
		return "done: " + what, nil
	})
	return func(ctx context.Context, in trace.Value) (any, error) {
		var answer string
		err := replay.Node(ctx, "decide", func(ctx context.Context) error {
			resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "fake-1", System: "Be helpful.",
				Messages: []replay.Message{{Role: "user", Content: "ticket 7"}}}, model)
			answer = resp.Content
			return err
		})
		if err != nil {
			return nil, err
		}
		limit := replay.Param(ctx, "limit", 100)
		return act(ctx, answer+" under "+strconv.Itoa(limit))
	}
}

// TestClass: a variant's class, its changes taken as intended.
func TestClass(t *testing.T) {
	t.Parallel()
	rec, err := replay.Record(context.Background(), "triage", nil, triage(&world{}))
	require.NoError(t, err)
	_, refund := caseNamed(t, "refund")
	tests := []struct {
		name     string
		base     *trace.Trace
		opts     []RunOption
		want     Class
		intended string // a step's Intended mark, when want is ClassIntended
		first    string // the path of the first change of behaviour, when want is ClassChanged
	}{
		{"null fork", rec.Trace, []RunOption{Memoize()}, ClassUnchanged, "", ""},
		{"prompt the model answers the same", rec.Trace, []RunOption{Memoize(), Prompt("decide", "Be helpful and brief.")},
			ClassIntended, "prompt of 'decide'", ""},
		{"code fields beside a prompt", rec.Trace, []RunOption{Memoize(), Prompt("decide", "Be kind."), CodeFields("fake-1", "system")},
			ClassIntended, "prompt of 'decide'", ""}, // the prompt change explains it alone
		{"prompt that changes the answer", rec.Trace, []RunOption{Memoize(), Prompt("decide", "Ask for approval."), Allow("act")},
			ClassChanged, "", "output.content"},
		{"param that changes a tool's input", rec.Trace, []RunOption{Memoize(), Param("limit", 50), Allow("act")},
			ClassChanged, "", "input"},
		{"tool result substituted", rec.Trace, []RunOption{Memoize(), ToolResult(OnCall("act", 1), "done: elsewhere")},
			ClassChanged, "", "output"}, // the run's output carries it
		{"failed run repaired", refund, []RunOption{Memoize(), PromptReplace("decide", "Approve what customers ask for.", "Refunds need approval.")},
			ClassRepaired, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &world{}
			agent := triage(w)
			if tt.base == refund {
				agent = w.refundAgent()
			}
			v, err := Run(context.Background(), tt.base, Start(), agent, tt.opts...)
			require.NoError(t, err)
			if v.Class != tt.want {
				t.Fatalf("class %s, want %s\n%s", v.Class, tt.want, v.Diff.Explain())
			}
			switch tt.want {
			case ClassIntended:
				var marks []string
				for _, s := range v.Diff.Steps {
					if s.Intended != "" {
						marks = append(marks, s.Intended)
					}
				}
				if v.Diff.BehaviorChange() != nil || len(marks) != 1 || marks[0] != tt.intended || !v.Diff.OnlyIntended() {
					t.Errorf("marks %q, behaviour change %v; want one step intended by %q", marks, v.Diff.BehaviorChange(), tt.intended)
				}
				if !strings.Contains(v.Diff.Explain(), "behavior changed only where intended: 1 intended") || !strings.Contains(v.Diff.Explain(), "— intended: "+tt.intended) {
					t.Errorf("Explain:\n%s", v.Diff.Explain())
				}
				if w.models.Load() != 1 {
					t.Errorf("%d live model calls, want the edited request only", w.models.Load())
				}
			case ClassChanged:
				dv := v.BehaviorChange()
				if dv == nil || len(dv.Changes) == 0 || dv.Changes[0].Path != tt.first {
					t.Errorf("first change of behaviour %v, want one at %s", dv, tt.first)
				}
			}
		})
	}
}

// TestClassCodeAlreadyEdited: the agent's code carries the edit the change
// describes (the sentence appended to the prompt): the request is not
// patched again, and the variant changed only where intended.
func TestClassCodeAlreadyEdited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	model := func(_ context.Context, req replay.Request) (replay.Response, error) {
		return replay.Response{Content: "ok"}, nil
	}
	agent := func(system string) replay.Agent {
		return func(ctx context.Context, in trace.Value) (any, error) {
			resp, err := replay.LLM(ctx, replay.Request{Model: "m", System: system, Messages: []replay.Message{{Role: "user", Content: "hi"}}}, model)
			return resp.Content, err
		}
	}
	rec, err := replay.Record(ctx, "echo", nil, agent("Be terse."))
	require.NoError(t, err)
	for _, c := range []Change{PromptAppend("m", " Be kind."), Prompt("m", "Be terse. Be kind."), CodeFields(All, "system")} {
		v, err := Heal(ctx, rec.Trace, agent("Be terse. Be kind."), c)
		require.NoError(t, err)
		if v.Class != ClassIntended {
			t.Errorf("%s: class %s, want intended\n%s", c.Describe(), v.Class, v.Diff.Explain())
		}
		req := v.Trace.Events[1].Input.Get("system")
		if s, _ := req.Str(); s != "Be terse. Be kind." {
			t.Errorf("%s: the request sent %s: the change was applied twice", c.Describe(), req)
		}
		if v.Changes[0].Applied != 1 {
			t.Errorf("%s: applied %d times, want 1", c.Describe(), v.Changes[0].Applied)
		}
	}
	// Without an intent the same edit is a change of behaviour.
	v, err := Heal(ctx, rec.Trace, agent("Be terse. Be kind."))
	require.NoError(t, err)
	if v.Class != ClassChanged {
		t.Errorf("no intent: class %s, want changed", v.Class)
	}
}

// TestCodeFieldsWire: CodeFields round-trips through fork.json, and bad
// ones are refused naming the problem.
func TestCodeFieldsWire(t *testing.T) {
	t.Parallel()
	c := CodeFields(All, "system", `messages[*].content`)
	back, err := parseChanges(wireChanges([]Change{c}))
	require.NoError(t, err)
	if len(back) != 1 || back[0].Describe() != "code fields system, messages[*].content of '*'" || back[0].Wire() != c.Wire() {
		t.Errorf("round trip: %v", back)
	}
	_, base := caseNamed(t, "refund")
	for _, tt := range []struct {
		change Change
		want   string
	}{
		{CodeFields(""), "the target is empty"},
		{CodeFields(All), "no field is named"},
		{CodeFields(All, "a..b"), "an empty member name"},
		{CodeFields("nowhere", "x"), "no node, model or tool 'nowhere' in the base run"},
		{CodeFields("get_order", "id"), ""},
	} {
		change, want := tt.change, tt.want
		_, err := Run(context.Background(), base, Start(), (&world{}).refundAgent(), change, Allow("issue_refund"))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", change.Describe(), err)
		case want != "" && (!errors.Is(err, ErrInvalidChange) || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: err %v, want ErrInvalidChange with %q", change.Describe(), err, want)
		}
	}
}

// TestHealDryRunAndBudget: a dry run runs nothing live and says where the
// tail would start and what it would cost; a budget below that refuses
// the heal before anything runs live; a heal records kind heal and is
// reproduced.
func TestHealDryRunAndBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, base := caseNamed(t, "refund")
	w := &world{}
	edit := Prompt("decide", "You handle refunds. Refunds need approval.") // the escalation repairs the run
	dry, err := Heal(ctx, base, w.refundAgent(), edit, DryRun())
	require.NoError(t, err)
	if w.models.Load() != 0 || w.tools.Load() != 0 {
		t.Fatalf("a dry run executed %d model and %d tool calls", w.models.Load(), w.tools.Load())
	}
	if dry.Status != StatusDryRun || dry.FirstLive == nil || dry.FirstLive.Kind != replay.KindLLM || dry.Estimate == nil ||
		dry.Estimate.ModelCalls != 1 || dry.Estimate.CostUSD != 0.002 || dry.Path != "" {
		t.Fatalf("dry run: status %s, first live %v, estimate %+v", dry.Status, dry.FirstLive, dry.Estimate)
	}
	_, err = Heal(ctx, base, w.refundAgent(), edit, Budget(0.001))
	if !errors.Is(err, ErrOverBudget) || w.models.Load() != 0 || !strings.Contains(err.Error(), "fork.Heal") {
		t.Fatalf("a heal over budget: err %v, %d live model calls", err, w.models.Load())
	}
	p := filepath.Join(t.TempDir(), "healed.sftrace")
	v, err := Heal(ctx, base, w.refundAgent(), edit, Budget(0.01), SaveTo(p))
	require.NoError(t, err)
	if v.Class != ClassRepaired || v.LiveModelCalls != 1 || v.FirstLive.String() != "model call 'fake/fake-1' at step "+strconv.Itoa(dry.FirstLive.Step) {
		t.Errorf("heal: class %s, %d live model calls, first live %v", v.Class, v.LiveModelCalls, v.FirstLive)
	}
	healed, err := trace.Load(p)
	require.NoError(t, err)
	info, err := ReadInfo(healed)
	require.NoError(t, err)
	if info.Kind != KindHeal || info.ParentRunID != base.RunID || !info.Memoize {
		t.Errorf("provenance %+v", info)
	}
	again, err := Reproduce(ctx, healed, base, w.refundAgent())
	require.NoError(t, err)
	if again.Info.Kind != KindHeal || again.Class != ClassRepaired {
		t.Errorf("reproduced: kind %s, class %s", again.Info.Kind, again.Class)
	}
	if res := trace.VerifyIntegrity(p); res.Status != trace.IntegrityVerified {
		t.Errorf("integrity %s", res.Status)
	}
	if _, err := replay.Replay(ctx, healed, (&world{}).refundAgentPrompt("You handle refunds. Refunds need approval.")); err != nil {
		t.Errorf("the healed run does not replay frozen against the edited agent: %v", err)
	}
}

// TestMatchTimeInPrompt: an agent that writes the current time into its
// prompt. With a matcher that ignores timestamps, a memoized null fork
// makes no live model call, its class is unchanged and its diff marks the
// request matched, never silently equal; the matcher is named in fork.json,
// and Reproduce asks for it. Without the matcher, the memo misses.
func TestMatchTimeInPrompt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	model := func(_ context.Context, req replay.Request) (replay.Response, error) {
		calls++
		return replay.Response{Content: "ok"}, nil
	}
	agent := func(now func() time.Time) replay.Agent {
		return func(ctx context.Context, in trace.Value) (any, error) {
			resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m", System: "Now: " + now().UTC().Format(time.RFC3339Nano),
				Messages: []replay.Message{{Role: "user", Content: "hi"}}}, model)
			return resp.Content, err
		}
	}
	rec, err := replay.Record(ctx, "clock", nil, agent(func() time.Time { return time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC) }))
	require.NoError(t, err)
	calls = 0
	ignore := replay.IgnoreTimestamps().Model("fake/m")

	v, err := Run(ctx, rec.Trace, Start(), agent(time.Now), Memoize(), Match(ignore))
	require.NoError(t, err)
	if calls != 0 || len(v.MemoHits) != 1 || v.MemoHits[0].MatchedBy != "ignore timestamps (model 'fake/m')" {
		t.Fatalf("%d live calls, memo hits %+v; want the request served through the matcher", calls, v.MemoHits)
	}
	if v.Class != ClassUnchanged || v.Diff.Matched != 1 || v.Diff.Equivalent() {
		t.Errorf("class %s, %d matched, equivalent %v; want unchanged with the request marked matched\n%s", v.Class, v.Diff.Matched, v.Diff.Equivalent(), v.Diff.Explain())
	}
	if !strings.Contains(v.Diff.Explain(), "— matched by ignore timestamps (model 'fake/m')") {
		t.Errorf("Explain does not say the request matched through the matcher:\n%s", v.Diff.Explain())
	}
	if len(v.Info.Matchers) != 1 || v.Info.Matchers[0] != ignore.String() {
		t.Errorf("fork.json matchers %q", v.Info.Matchers)
	}
	p := filepath.Join(t.TempDir(), "v.sftrace")
	require.NoError(t, v.Trace.Save(p))
	saved, err := trace.Load(p)
	require.NoError(t, err)
	if _, err := Reproduce(ctx, saved, rec.Trace, agent(time.Now)); err == nil || !strings.Contains(err.Error(), "pass the same with fork.Match") {
		t.Errorf("Reproduce without the matcher: %v", err)
	}
	if again, err := Reproduce(ctx, saved, rec.Trace, agent(time.Now), Match(ignore)); err != nil || again.Class != ClassUnchanged {
		t.Errorf("Reproduce with the matcher: %v", err)
	}
	// A fork at the model call's step: the prefix is served through the
	// matcher too (here, the whole run).
	if _, err := Run(ctx, rec.Trace, Step(len(rec.Trace.Events)-1), agent(time.Now), Match(ignore)); err != nil {
		t.Errorf("a fork whose prefix holds the request: %v", err)
	}
	calls = 0
	w, err := Run(ctx, rec.Trace, Start(), agent(time.Now), Memoize())
	require.NoError(t, err)
	if calls != 1 || w.Class != ClassChanged {
		t.Errorf("without the matcher: %d live calls, class %s; want the memo to miss", calls, w.Class)
	}
}

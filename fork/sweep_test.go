package fork

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// noLeak fails the test when goroutines started during it outlive it. It
// compares runtime.NumGoroutine before and after, with a short retry loop
// for goroutines that are finishing.
func noLeak(t *testing.T) func() {
	t.Helper()
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutine(s) outlived the call:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	}
}

// explosive wraps an agent so that a forced parameter "explode" makes it
// panic after its run.
func explosive(inner replay.Agent) replay.Agent {
	return func(ctx context.Context, in trace.Value) (any, error) {
		out, err := inner(ctx, in)
		if replay.Param(ctx, "explode", false) {
			panic("boom")
		}
		return out, err
	}
}

func TestEach(t *testing.T) {
	// Not parallel: the goroutine count must not move under it.
	c, base := caseNamed(t, "refund")
	w := &world{}
	check := noLeak(t)
	dir := t.TempDir()
	var logs bytes.Buffer
	sw, err := Each(context.Background(), base, Failure(), explosive(c.agent(w)), []Named{
		{Name: "control"},
		{Name: "approval", Changes: []Change{Prompt("decide", "Refunds above the policy limit need approval.")}},
		{Name: "broken", Changes: []Change{Param("explode", true)}},
		{Name: "escalate", Changes: []Change{LLMResponse(OnCall("fake/fake-1", 1), replay.Response{Content: "escalate"})}},
	}, Memoize(), Concurrency(2), SaveDir(dir), GroupID("g-1"), Logger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	check()
	require.Len(t, sw.Entries, 4)
	names := []string{}
	for _, e := range sw.Entries {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"control", "approval", "broken", "escalate"}, names, "entries keep the order given")

	control := sw.Entry("control")
	require.NoError(t, control.Err)
	assert.Equal(t, StatusFailed, control.Variant.Status)
	assert.Zero(t, control.Variant.IncurredCost)
	assert.Equal(t, StatusCompleted, sw.Entry("approval").Variant.Status)
	assert.InDelta(t, 0.002, sw.Entry("approval").MeanCost(), 1e-12)
	assert.Equal(t, StatusCompleted, sw.Entry("escalate").Variant.Status)
	broken := sw.Entry("broken")
	assert.Nil(t, broken.Variant)
	assert.ErrorIs(t, broken.Err, ErrAgentPanicked)
	assert.Nil(t, sw.Entry("nope"))
	assert.InDelta(t, 0.002, sw.TotalCost(), 1e-12)

	for _, name := range []string{"control", "approval", "escalate"} {
		e := sw.Entry(name)
		assert.Equal(t, dir+"/"+name+".sftrace", e.Variant.Path)
		tr, err := trace.Load(e.Variant.Path)
		require.NoError(t, err)
		info, err := ReadInfo(tr)
		require.NoError(t, err)
		assert.Equal(t, "g-1", info.GroupID)
		assert.True(t, info.Memoize)
	}
	// Explain says which change did what: each variant's changes, status,
	// cost, its own first divergence, output, tool calls added or lost.
	want := "sweep of " + shortID(base.RunID) + " at step 6 (before the failing node ('decide', execution 1)): 4 variant(s)\n" +
		"  control   failed     $0.00   none (the control)\n" +
		"      diverged  step 15: param 'explode' only in the variant\n" +
		"      output    as in the base\n" +
		"      saved     " + dir + "/control.sftrace\n" +
		"  approval  completed  $0.002  prompt of 'decide'\n" +
		"      diverged  steps 7–8: llm 'fake/fake-1' changed: input.system \"You handle refunds. Approve what customers ask for.\" → \"Refunds above the policy limit need approval.\" (+1 more)\n" +
		"      output    {\"status\":\"escalated\"} (base: null)\n" +
		"      tools     -issue_refund\n" +
		"      saved     " + dir + "/approval.sftrace\n" +
		"  broken    error: fork: the agent panicked in the variant of " + base.RunID + ": boom\n" +
		"  escalate  completed  $0.00   model response of 'fake/fake-1' call 1\n" +
		"      diverged  steps 7–8: llm 'fake/fake-1' changed: output.content \"refund\" → \"escalate\" (+1 more)\n" +
		"      output    {\"status\":\"escalated\"} (base: null)\n" +
		"      tools     -issue_refund\n" +
		"      saved     " + dir + "/escalate.sftrace\n" +
		"  total                $0.002\n"
	assert.Equal(t, want, sw.Explain())
	for _, msg := range []string{"sweep started", "fork started", "change applied", "memo hit", "variant finished", "sweep finished"} {
		assert.Contains(t, logs.String(), "msg=\""+msg+"\"", msg)
	}
}

func TestEachSamplesAndErrors(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "refund")
	w := &world{}
	sw, err := Each(context.Background(), base, Failure(), c.agent(w), []Named{
		{Name: "a", Changes: []Change{Prompt("decide", "approval")}},
		{Name: "b"},
	}, Samples(3), Concurrency(3))
	require.NoError(t, err)
	assert.Len(t, sw.Entry("a").Samples, 3)
	assert.Equal(t, int64(6), w.models.Load(), "3 samples × 2 variants, live")
	assert.Contains(t, sw.Explain(), ", 3 samples each\n")
	assert.Contains(t, sw.Explain(), "  a      3/3 completed  $0.006  prompt of 'decide'\n")
	assert.Contains(t, sw.Explain(), "      samples   3: 3 completed; mean $0.002 each\n")

	w = &world{}
	_, err = Each(context.Background(), base, Failure(), c.agent(w), []Named{
		{Name: "ok"}, {Name: "bad", Changes: []Change{ToolResult(OnStep(2), 1)}}, {Name: "ok"},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "variant 'bad': tool result of step 2: step 2 is in the served prefix")
	assert.Contains(t, err.Error(), "variant 'ok' is named twice")
	assert.Zero(t, w.models.Load()+w.tools.Load(), "nothing runs")

	_, err = Each(context.Background(), base, Failure(), c.agent(w), nil)
	assert.EqualError(t, err, "fork.Each: no variants given, so there is nothing to compare")
}

func TestCancellation(t *testing.T) {
	c, base := caseNamed(t, "research")
	check := noLeak(t)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sw, err := Each(ctx, base, Start(), c.agent(&world{}), []Named{{Name: "a"}, {Name: "b"}}, Memoize())
	require.ErrorIs(t, err, context.Canceled)
	for _, e := range sw.Entries {
		assert.ErrorIs(t, e.Err, context.Canceled, e.Name)
	}

	// Canceled while the tail runs: the next call fails and the run stops.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	w := &world{}
	inner := c.agent(w)
	stopper := func(ctx context.Context, in trace.Value) (any, error) {
		replay.Tool("stop", func(context.Context, int) (int, error) { cancel(); return 0, nil })(ctx, 1)
		return inner(ctx, in)
	}
	v, err := Run(ctx, base, Start(), stopper, Allow("stop"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled))
	require.NotNil(t, v)
	assert.Equal(t, StatusCanceled, v.Status)
	assert.Zero(t, w.tools.Load(), "nothing runs after the cancellation")
	check()
}

func TestEstimate(t *testing.T) {
	t.Parallel()
	_, base := caseNamed(t, "refund")
	est, err := Estimate(base, Failure(), []Named{
		{Name: "control"},
		{Name: "served", Changes: []Change{LLMResponse(OnCall("fake/fake-1", 1), replay.Response{Content: "escalate"}), Param("nope", 1)}},
	})
	require.NoError(t, err)
	require.Len(t, est.Variants, 2)
	assert.Equal(t, VariantEstimate{Name: "control", ModelCalls: 1, ToolCalls: 1, CostUSD: 0.002, Tokens: 120}, est.Variants[0])
	s := est.Variants[1]
	assert.Equal(t, 0, s.ModelCalls)
	assert.InDelta(t, 0, s.CostUSD, 1e-12)
	assert.Equal(t, []string{"param 'nope' → 1"}, s.Unmatched)
	assert.InDelta(t, 0.002, est.CostUSD, 1e-12)
	assert.Contains(t, est.Explain(), "  control  ~$0.002 over 1 model call(s) and 1 tool call(s)\n")
	assert.Contains(t, est.Explain(), "; unmatched: param 'nope' → 1\n")

	_, err = Estimate(base, Failure(), []Named{{Name: "bad", Changes: []Change{Temperature("decide", -1)}}})
	assert.ErrorIs(t, err, ErrInvalidChange)
	_, err = Estimate(base, Failure(), nil)
	assert.EqualError(t, err, "fork.Estimate: no variants given, so there is nothing to compare")
}

// TestEstimateSamples: an estimate takes the options the sweep will run
// with: Samples multiplies the prediction, changes given there join every
// variant's, and the explanation names each variant's changes.
func TestEstimateSamples(t *testing.T) {
	t.Parallel()
	_, base := caseNamed(t, "refund")
	est, err := Estimate(base, Failure(), []Named{
		{Name: "control"},
		{Name: "bigger", Changes: []Change{Model("decide", "fake-2")}},
	}, Samples(3), Temperature(All, 0.5))
	require.NoError(t, err)
	assert.Equal(t, 3, est.Samples)
	assert.InDelta(t, 2*3*0.002, est.CostUSD, 1e-12)
	assert.Equal(t, []string{"temperature of '*' → 0.5", "model of 'decide' → fake-2"}, est.Variants[1].Changes)
	assert.Equal(t, "estimate at step 6 (before the failing node ('decide', execution 1)), 3 samples each\n"+
		"  control  ~$0.002 over 1 model call(s) and 1 tool call(s) per sample; temperature of '*' → 0.5\n"+
		"  bigger   ~$0.002 over 1 model call(s) and 1 tool call(s) per sample; temperature of '*' → 0.5, model of 'decide' → fake-2\n"+
		"  total    ~$0.012\n", est.Explain())
}

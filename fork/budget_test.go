package fork

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
)

// TestBudget: a fork or sweep whose estimated tail cost exceeds its budget
// is refused before anything runs, unless the budget is ignored.
func TestBudget(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "refund")
	ctx := context.Background()
	w := &world{}
	_, err := Run(ctx, base, Failure(), c.agent(w), Budget(0.001))
	require.ErrorIs(t, err, ErrOverBudget)
	assert.Equal(t, "fork.Run: the tail is estimated at $0.002 (1 model call(s) as recorded), over the budget of $0.001. Raise fork.Budget, fork later, substitute the calls, or pass fork.IgnoreBudget() to run anyway.", err.Error())
	sw, err := Each(ctx, base, Failure(), c.agent(w), []Named{{Name: "a"}, {Name: "b"}}, Samples(2), Budget(0.005))
	require.ErrorIs(t, err, ErrOverBudget)
	assert.Nil(t, sw)
	assert.Equal(t, "fork.Each: the sweep is estimated at $0.008 (2 variant(s) × 2 sample(s)), over the budget of $0.005. Raise fork.Budget, fork later, substitute the calls, or pass fork.IgnoreBudget() to run anyway.", err.Error())
	assert.Zero(t, w.tools.Load()+w.models.Load(), "nothing runs over budget")

	v, err := Run(ctx, base, Failure(), c.agent(w), Budget(0.002))
	require.NoError(t, err, "a budget the estimate meets")
	assert.NotNil(t, v)
	_, err = Run(ctx, base, Failure(), c.agent(w), Budget(0.001), IgnoreBudget())
	require.NoError(t, err)
	_, err = Run(ctx, base, Failure(), c.agent(w), Budget(-1))
	assert.ErrorIs(t, err, ErrInvalidChange)
}

// TestReviewer: a reviewer answers the approvals of the tail as the tail
// reaches them; a HumanResponse for the same approval wins; a reviewer's
// error fails the variant.
func TestReviewer(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "research")
	ctx := context.Background()
	var asked atomic.Int64
	no := Reviewer(func(_ context.Context, approval string) (any, error) {
		asked.Add(1)
		assert.Equal(t, "publish", approval)
		return false, nil
	})
	w := &world{}
	v, err := Run(ctx, base, Start(), c.agent(w), no, Memoize())
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, v.Status, v.Explain())
	assert.Empty(t, v.Output.(Report).URL, "the reviewer refused publishing")
	assert.Equal(t, int64(1), asked.Load())
	assert.Zero(t, w.published.Load())

	v, err = Run(ctx, base, Start(), c.agent(w), no, HumanResponse("publish", true), Memoize())
	require.NoError(t, err)
	assert.NotEmpty(t, v.Output.(Report).URL, "the HumanResponse wins over the reviewer")
	assert.Equal(t, int64(1), asked.Load(), "the reviewer is not asked what a change answers")

	gone := errors.New("the reviewer went home")
	v, err = Run(ctx, base, Start(), c.agent(w), Memoize(),
		Reviewer(func(context.Context, string) (any, error) { return nil, gone }))
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, v.Status)
	assert.ErrorIs(t, v.Err, gone)
}

// namer records the run id an Observer is told at the start of a run.
type namer struct {
	replay.Observer
	started string
}

func (n *namer) StartRun(ctx context.Context, run *replay.RunInfo) context.Context {
	n.started = run.RunID
	return ctx
}
func (n *namer) EndRun(context.Context, *replay.RunInfo, *replay.Result)           {}
func (n *namer) StartCall(ctx context.Context, _ *replay.CallInfo) context.Context { return ctx }
func (n *namer) EndCall(context.Context, *replay.CallInfo)                         {}

// TestRunID: a fork named before it runs carries the name from the start
// of its run, in its trace and in its fork.json.
func TestRunID(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "refund")
	n := &namer{}
	ctx := replay.WithObserver(context.Background(), n)
	v, err := Run(ctx, base, Failure(), c.agent(&world{}), RunID("run_named_before"))
	require.NoError(t, err)
	assert.Equal(t, "run_named_before", n.started, "the observer knew the name when the run started")
	assert.Equal(t, "run_named_before", v.Trace.RunID)
	assert.Equal(t, "run_named_before", v.Info.RunID)
	// The error names the option the caller wrote and matches fork's
	// sentinels, not replay's.
	_, err = Run(context.Background(), base, Failure(), c.agent(&world{}), RunID(base.RunID))
	assert.EqualError(t, err, `fork.Run: fork.RunID("`+base.RunID+`"): it is the run id of the base run; a variant is a new run and needs an id of its own`)
	assert.ErrorIs(t, err, ErrInvalidChange)
	assert.NotErrorIs(t, err, replay.ErrInvalidOptions)
}

package replay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// nondet is an agent made of nothing but recorded nondeterminism; the values
// it reads come from the fields, so a replay can change them.
type nondet struct {
	route    string
	def      int
	dice     int
	effects  int
	asked    int
	approve  bool
	approvEr error
}

type nondetOut struct {
	Now      time.Time `json:"now"`
	ID       string    `json:"id"`
	Limit    int       `json:"limit"`
	Route    string    `json:"route"`
	Dice     int       `json:"dice"`
	Approved bool      `json:"approved"`
}

func (n *nondet) agent() replay.Agent {
	return func(ctx context.Context, _ trace.Value) (any, error) {
		var o nondetOut
		o.Now = replay.Now(ctx)
		o.ID = replay.NewID(ctx)
		o.Limit = replay.Param(ctx, "limit", n.def)
		o.Route = replay.Decide(ctx, "route", n.route)
		var err error
		o.Dice, err = replay.SideEffect(ctx, "dice", func() (int, error) { n.effects++; return n.dice, nil })
		if err != nil {
			return nil, err
		}
		o.Approved, err = replay.Approve(ctx, "refund", func(context.Context) (bool, error) { n.asked++; return n.approve, n.approvEr })
		if err != nil {
			return nil, err
		}
		return o, nil
	}
}

func TestMarkersAreServedOnReplay(t *testing.T) {
	t.Parallel()
	r := &nondet{route: "a", def: 5, dice: 3, approve: true}
	rec, err := replay.Record(context.Background(), "nondet", nil, r.agent())
	require.NoError(t, err)
	want := rec.Output.(nondetOut)
	assert.Equal(t, nondetOut{Now: want.Now, ID: want.ID, Limit: 5, Route: "a", Dice: 3, Approved: true}, want)

	// Everything but the decision changed in the world: replay serves the
	// recorded values and runs no effect and no approval.
	p := &nondet{route: "a", def: 9, dice: 6, approve: false}
	res, err := replay.Replay(context.Background(), rec.Trace, p.agent())
	require.NoError(t, err)
	got := res.Output.(nondetOut)
	assert.Equal(t, want, got)
	assert.True(t, want.Now.Equal(got.Now))
	assert.Equal(t, 0, p.effects)
	assert.Equal(t, 0, p.asked)
	assertEquivalent(t, rec.Trace, res.Trace)

	// A different decision is a divergence, kept though Decide returns no
	// error; the computed value is used.
	d := &nondet{route: "b", def: 5}
	res, err = replay.Replay(context.Background(), rec.Trace, d.agent())
	require.ErrorIs(t, err, replay.ErrDiverged)
	var me *replay.MismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, replay.KindDecision, me.Kind)
	assert.Equal(t, rec.Trace.Events[4].ID, me.EventID)
	assert.Contains(t, err.Error(), "decision 'route' diverged from the recording\n  recorded: \"a\"\n  actual:   \"b\"")
	assert.Equal(t, "b", res.Output.(nondetOut).Route)
}

func TestMarkerMissingFromRecording(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("x")
	b.RunStart(nil)
	b.RunEnd(trace.RunCompleted, nil)
	ran := false
	var effErr error
	res, err := replay.Replay(context.Background(), b.MustTrace(), func(ctx context.Context, _ trace.Value) (any, error) {
		_, effErr = replay.SideEffect(ctx, "coin", func() (bool, error) { ran = true; return true, nil })
		return nil, nil
	})
	require.ErrorIs(t, err, replay.ErrDiverged)
	assert.ErrorIs(t, effErr, replay.ErrDiverged)
	assert.False(t, ran, "a side effect the recording does not have must not run on replay")
	assert.EqualError(t, res.Divergence, "unexpected effect 'coin': all 0 recorded @effect marker(s) of that name were already consumed")
}

func TestRecordedEffectAndApprovalFailures(t *testing.T) {
	t.Parallel()
	r := &nondet{route: "a", def: 1, approvEr: errors.New("reviewer unavailable")}
	rec, err := replay.Record(context.Background(), "nondet", nil, r.agent())
	require.NoError(t, err)
	require.EqualError(t, rec.Err, "reviewer unavailable")
	ev := rec.Trace.Events[len(rec.Trace.Events)-3]
	m, ok := ev.Marker()
	require.True(t, ok)
	assert.Equal(t, trace.Marker{Key: "@decision", Name: "refund", Kind: "approval", Error: "reviewer unavailable", ErrorType: "error"}, m)

	p := &nondet{route: "a", def: 1, approve: true}
	res, err := replay.Replay(context.Background(), rec.Trace, p.agent())
	require.NoError(t, err, "the failure is reproduced")
	assert.ErrorIs(t, res.Err, replay.ErrRecordedFailure)
	assert.Equal(t, "reviewer unavailable", res.Err.Error())
	assert.Equal(t, 0, p.asked)
}

func TestStateWrites(t *testing.T) {
	t.Parallel()
	rec, err := replay.Record(context.Background(), "state", nil, func(ctx context.Context, _ trace.Value) (any, error) {
		require.NoError(t, replay.Set(ctx, "plan", []string{"a"}))
		require.NoError(t, replay.Set(ctx, "plan", []string{"a", "b"}))
		require.NoError(t, replay.Set(ctx, "password", "hunter2"))
		assert.Error(t, replay.Set(ctx, "@node", 1), "reserved key")
		assert.Error(t, replay.Set(ctx, "", 1))
		assert.ErrorIs(t, replay.Set(ctx, "bad", func() {}), replay.ErrNotRecordable)
		return nil, nil
	})
	require.NoError(t, err)
	evs := rec.Trace.Events
	require.Len(t, evs, 5)
	assert.Equal(t, "null", evs[1].Before.Canonical())
	assert.Equal(t, `["a"]`, evs[1].After.Canonical())
	assert.Equal(t, `["a"]`, evs[2].Before.Canonical())
	assert.Equal(t, `["a","b"]`, evs[2].After.Canonical())
	assert.Equal(t, `"[REDACTED]"`, evs[3].After.Canonical(), "a secret is redacted as it is recorded")
	assert.Equal(t, []string{"/after"}, evs[3].Redactions)
	require.Len(t, rec.Trace.Redactions, 1)
	assert.Equal(t, evs[3].ID, rec.Trace.Redactions[0].EventID)
}

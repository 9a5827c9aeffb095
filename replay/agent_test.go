package replay_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// The booking agent used across the tests: tools, model calls, a failing
// tool the agent handles, state writes, a decision, a parameter, nodes and
// recorded nondeterminism. world counts what really executed.

type Trip struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Budget int    `json:"budget"`
}

type SearchInput struct {
	From   string `json:"from"`
	To     string `json:"to"`
	APIKey string `json:"api_key"`
}

type Flight struct {
	ID    string  `json:"id"`
	Price float64 `json:"price"`
}

type HotelInput struct {
	City   string `json:"city"`
	Nights int    `json:"nights"`
}

type Booking struct {
	ID      string `json:"id"`
	Flight  string `json:"flight"`
	Hotel   string `json:"hotel"`
	Route   string `json:"route"`
	Summary string `json:"summary"`
	Limit   int    `json:"limit"`
	Dice    int    `json:"dice"`
}

// HotelError is the failure of the hotel tool.
type HotelError struct{ City string }

func (e *HotelError) Error() string { return "no rooms in " + e.City }

type world struct {
	tools, models atomic.Int64
	secret        string // a real credential handed to the search tool
	flightPrice   float64
	dice          int
}

func newWorld() *world {
	return &world{secret: "sk-live-1234567890abcdef", flightPrice: 320.5, dice: 4}
}

func (w *world) search(_ context.Context, in SearchInput) ([]Flight, error) {
	w.tools.Add(1)
	return []Flight{{ID: "F1", Price: w.flightPrice}, {ID: "F2", Price: 410}}, nil
}

func (w *world) hotel(_ context.Context, in HotelInput) (string, error) {
	w.tools.Add(1)
	return "", &HotelError{City: in.City}
}

func (w *world) model(_ context.Context, req replay.Request) (replay.Response, error) {
	w.models.Add(1)
	last := req.Messages[len(req.Messages)-1].Content
	return replay.Response{Model: req.Model, Content: "summary of " + last,
		Usage: replay.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17, CostUSD: 0.0012}}, nil
}

func (w *world) agent() replay.Agent {
	search := replay.Tool("search_flights", w.search)
	hotel := replay.Tool("book_hotel", w.hotel)
	return replay.Typed(func(ctx context.Context, trip Trip) (Booking, error) {
		var b Booking
		var flights []Flight
		err := replay.Node(ctx, "research", func(ctx context.Context) error {
			var err error
			flights, err = search(ctx, SearchInput{From: trip.From, To: trip.To, APIKey: w.secret})
			return err
		})
		if err != nil {
			return b, err
		}
		b.Limit = replay.Param(ctx, "max_results", 2)
		temp := 0.2
		err = replay.Node(ctx, "write", func(ctx context.Context) error {
			resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "fake-1", System: "You book trips.",
				Messages:    []replay.Message{{Role: "user", Content: fmt.Sprintf("%d flights to %s", len(flights), trip.To)}},
				Temperature: &temp}, w.model)
			if err != nil {
				return err
			}
			b.Summary = resp.Content
			return replay.Set(ctx, "draft", b.Summary)
		})
		if err != nil {
			return b, err
		}
		b.Route = replay.Decide(ctx, "route", map[bool]string{true: "cheap", false: "premium"}[flights[0].Price < float64(trip.Budget)])
		b.Flight = flights[0].ID
		if _, err := hotel(ctx, HotelInput{City: trip.To, Nights: 2}); err != nil {
			b.Hotel = "none: " + err.Error()
		}
		if err := replay.Set(ctx, "draft", b.Summary+" (final)"); err != nil {
			return b, err
		}
		b.ID = replay.NewID(ctx)
		_ = replay.Now(ctx)
		b.Dice, err = replay.SideEffect(ctx, "dice", func() (int, error) { return w.dice, nil })
		return b, err
	})
}

var trip = Trip{From: "KTM", To: "DEL", Budget: 400}

// record records the booking agent and returns the world it ran in.
func record(t *testing.T, opts ...replay.RecordOption) (*replay.Result, *world) {
	t.Helper()
	w := newWorld()
	res, err := replay.Record(context.Background(), "booking agent!", trip, w.agent(), opts...)
	require.NoError(t, err)
	return res, w
}

func TestRecordSaveValidateReplayFrozen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "booking.sftrace")
	rec, w := record(t, replay.SaveTo(path))
	require.Equal(t, path, rec.Path)
	assert.Equal(t, int64(2), w.tools.Load())
	assert.Equal(t, int64(1), w.models.Load())
	assert.Equal(t, 3, rec.Executed)

	report := trace.ValidateBundle(context.Background(), path, trace.CheckIntegrity(), trace.Pedantic())
	require.True(t, report.Valid(), "%v", report.Issues)
	assert.Equal(t, trace.IntegrityVerified, report.Integrity.Status)

	tr, err := trace.Load(path)
	require.NoError(t, err)
	assert.Equal(t, trace.RunCompleted, tr.Status)
	assert.Equal(t, 2, tr.Totals.ToolCalls)
	assert.Equal(t, 1, tr.Totals.LLMCalls)
	require.NotNil(t, tr.Environment.StepforkVersion)
	assert.Equal(t, replay.Version, *tr.Environment.StepforkVersion)
	assert.Nil(t, tr.Environment.Python)
	assert.True(t, strings.HasPrefix(tr.RunID, "run_") && len(tr.RunID) == 36, tr.RunID)
	for _, ev := range tr.Events {
		assert.True(t, strings.HasPrefix(ev.ID, "evt_") && len(ev.ID) == 36, ev.ID)
	}

	// The secret never reached the bundle.
	for _, ev := range tr.Events {
		assert.NotContains(t, ev.Input.Canonical(), w.secret)
	}
	search := find(t, tr, trace.ToolCall, "search_flights")
	assert.Equal(t, `"[REDACTED]"`, search.Input.Get("api_key").Canonical())
	assert.Equal(t, []string{"/input/api_key"}, search.Redactions)

	// Frozen replay: same result, nothing executed.
	live := newWorld()
	res, err := replay.Replay(context.Background(), tr, live.agent())
	require.NoError(t, err)
	assert.Equal(t, int64(0), live.tools.Load(), "tool executions during frozen replay")
	assert.Equal(t, int64(0), live.models.Load(), "model executions during frozen replay")
	assert.Equal(t, rec.Output, res.Output)
	assert.Equal(t, 3, res.Served)
	assert.Equal(t, 0, res.Executed)
	assert.NoError(t, res.VerifyComplete())
	assert.Nil(t, res.Divergence)
	assertEquivalent(t, tr, res.Trace)

	// The replay's own trace is valid and saves.
	p2 := filepath.Join(t.TempDir(), "replayed.sftrace")
	require.NoError(t, res.Trace.Save(p2))
	r2 := trace.ValidateBundle(context.Background(), p2, trace.CheckIntegrity(), trace.Pedantic())
	require.True(t, r2.Valid(), "%v", r2.Issues)
}

// assertEquivalent checks that got has the same events as base: ids, types,
// parents, steps, payloads and hashes; run ids, timestamps and durations may
// differ.
func assertEquivalent(t *testing.T, base, got *trace.Trace) {
	t.Helper()
	bp, err := base.Prepared()
	require.NoError(t, err)
	gp, err := got.Prepared()
	require.NoError(t, err)
	require.Equal(t, len(bp.Events), len(gp.Events), "event count")
	assert.NotEqual(t, bp.RunID, gp.RunID)
	for i := range bp.Events {
		b, g := bp.Events[i].Clone(), gp.Events[i].Clone()
		g.RunID, g.Timestamp, g.DurationMS = b.RunID, b.Timestamp, b.DurationMS
		assert.Equal(t, b, g, "event %d", i)
	}
	assert.Equal(t, bp.Status, gp.Status)
	assert.Equal(t, bp.Failure, gp.Failure)
	assert.Equal(t, bp.Redactions, gp.Redactions)
}

func find(t *testing.T, tr *trace.Trace, typ trace.EventType, label string) *trace.Event {
	t.Helper()
	for i := range tr.Events {
		if ev := &tr.Events[i]; ev.Type == typ && ev.Label() == label {
			return ev
		}
	}
	t.Fatalf("no %s %q in the trace", typ, label)
	return nil
}

func TestRecordedShape(t *testing.T) {
	t.Parallel()
	rec, _ := record(t)
	tr := rec.Trace
	type row struct {
		typ    trace.EventType
		label  string
		parent int // step of the parent, -1 for null
		status trace.Status
	}
	want := []row{
		{trace.RunStart, "run_start", -1, "ok"},
		{trace.StateChange, "@node", 0, "ok"},         // enter research
		{trace.ToolCall, "search_flights", 1, "ok"},   // under the node
		{trace.ToolResult, "search_flights", 2, "ok"}, // under the call
		{trace.StateChange, "@node", 1, "ok"},         // exit research
		{trace.StateChange, "@param", 0, "ok"},        // max_results
		{trace.StateChange, "@node", 0, "ok"},         // enter write
		{trace.LLMRequest, "fake-1", 6, "ok"},         // model call
		{trace.LLMResponse, "fake-1", 7, "ok"},        //
		{trace.StateChange, "draft", 6, "ok"},         // state write in the node
		{trace.StateChange, "@node", 6, "ok"},         // exit write
		{trace.StateChange, "@decision", 0, "ok"},     // route
		{trace.ToolCall, "book_hotel", 0, "ok"},       // failing tool
		{trace.ToolResult, "book_hotel", 12, "error"}, //
		{trace.ErrorEvent, "replay_test.HotelError", 13, "error"},
		{trace.StateChange, "draft", 0, "ok"},
		{trace.StateChange, "@id", 0, "ok"},
		{trace.StateChange, "@now", 0, "ok"},
		{trace.StateChange, "@effect", 0, "ok"},
		{trace.RunEnd, "completed", -1, "ok"},
	}
	require.Len(t, tr.Events, len(want))
	for i, w := range want {
		ev := tr.Events[i]
		parent := -1
		if ev.ParentID != "" {
			_, parent = tr.Event(ev.ParentID)
		}
		assert.Equal(t, w, row{ev.Type, ev.Label(), parent, ev.Status}, "event %d", i)
		assert.Equal(t, i, ev.Step)
	}
	// Payloads of a few of them.
	assert.Equal(t, `{"error_type":"replay_test.HotelError","message":"no rooms in DEL"}`, tr.Events[13].Output.Canonical())
	assert.Equal(t, `"summary of 2 flights to DEL"`, tr.Events[15].Before.Canonical())
	assert.Equal(t, `null`, tr.Events[9].Before.Canonical())
	assert.Equal(t, `{"messages":[{"content":"2 flights to DEL","role":"user"}],"system":"You book trips.","temperature":0.2}`, tr.Events[7].Input.Canonical())
	assert.Equal(t, "fake", tr.Events[7].Provider)
	resp := tr.Events[8]
	require.NotNil(t, resp.TotalTokens)
	assert.Equal(t, int64(17), *resp.TotalTokens)
	require.NotNil(t, resp.CostUSD)
	assert.Equal(t, 0.0012, *resp.CostUSD)
	require.NotNil(t, tr.Totals.CostUSD)
	assert.Equal(t, 0.0012, *tr.Totals.CostUSD)
	m, ok := tr.Events[11].Marker()
	require.True(t, ok)
	assert.Equal(t, trace.Marker{Key: "@decision", Name: "route", Kind: "decision", Value: trace.MustParse(`"cheap"`)}, m)
	m, _ = tr.Events[10].Marker()
	assert.Equal(t, trace.Marker{Key: "@node", Name: "write", Phase: "exit", Status: "ok"}, m)
}

func TestReplayHandsBackTheRecordedInput(t *testing.T) {
	t.Parallel()
	rec, _ := record(t)
	var got Trip
	_, err := replay.Replay(context.Background(), rec.Trace, replay.Typed(func(ctx context.Context, in Trip) (any, error) {
		got = in
		return nil, nil
	}))
	// The agent makes no calls, so the replay does not reproduce the recording.
	require.Error(t, err)
	assert.Equal(t, trip, got)
}

func TestRecordFailedRun(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("the planner gave up")
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		_, err := replay.Tool("lookup", func(ctx context.Context, q string) (string, error) { return "ok", nil })(ctx, "q")
		require.NoError(t, err)
		return nil, fmt.Errorf("plan: %w", errBoom)
	}
	path := filepath.Join(t.TempDir(), "failed.sftrace")
	res, err := replay.Record(context.Background(), "planner", nil, agent, replay.SaveTo(path))
	require.NoError(t, err, "the run was recorded; the agent's error is in the result")
	require.NotNil(t, res)
	assert.ErrorIs(t, res.Err, errBoom)
	tr, lerr := trace.Load(path)
	require.NoError(t, lerr)
	report := trace.ValidateBundle(context.Background(), path, trace.CheckIntegrity(), trace.Pedantic())
	require.True(t, report.Valid(), "%v", report.Issues)

	require.Equal(t, trace.RunFailed, tr.Status)
	n := len(tr.Events)
	runErr, end := tr.Events[n-2], tr.Events[n-1]
	assert.Equal(t, trace.ErrorEvent, runErr.Type)
	assert.Equal(t, tr.Events[0].ID, runErr.ParentID, "the run-level error hangs under run_start")
	assert.Equal(t, "error", runErr.ErrorType, "a chain of errors.New and fmt.Errorf names no type")
	assert.Equal(t, "plan: the planner gave up", runErr.Message)
	assert.Equal(t, &trace.Failure{Type: "error", Message: "plan: the planner gave up", Step: runErr.Step}, tr.Failure)
	assert.Equal(t, trace.RunEnd, end.Type)
	assert.Equal(t, "", end.ParentID)
	assert.Equal(t, trace.RunFailed, end.RunStatus)
	assert.True(t, end.Output.IsNull())

	// Replaying the failed run reproduces it: no error from Replay, the agent's
	// own error in Result.Err.
	rr, err := replay.Replay(context.Background(), tr, agent)
	require.NoError(t, err)
	assert.ErrorIs(t, rr.Err, errBoom)
	assertEquivalent(t, tr, rr.Trace)
}

func TestRecordPanicSavesAndRepanics(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "panic.sftrace")
	func() {
		defer func() {
			assert.Equal(t, "index out of plan", recover())
		}()
		_, _ = replay.Record(context.Background(), "panicky", map[string]any{"n": 1}, func(ctx context.Context, _ trace.Value) (any, error) {
			_ = replay.Node(ctx, "explode", func(ctx context.Context) error { panic("index out of plan") })
			return nil, nil
		}, replay.SaveTo(path))
		t.Fatal("Record returned instead of re-panicking")
	}()
	tr, err := trace.Load(path)
	require.NoError(t, err)
	report := trace.ValidateBundle(context.Background(), path, trace.CheckIntegrity())
	require.True(t, report.Valid(), "%v", report.Issues)
	assert.Equal(t, &trace.Failure{Type: "panic", Message: "index out of plan", Step: 3}, tr.Failure)
	exit, _ := tr.Events[2].Marker()
	assert.Equal(t, trace.Marker{Key: "@node", Name: "explode", Phase: "exit", Status: "error", Error: "index out of plan"}, exit)
}

func TestSaveFailureIsTheErrorAndTheAgentsErrorStaysInTheResult(t *testing.T) {
	t.Parallel()
	errAgent := errors.New("agent failed")
	bad := filepath.Join(t.TempDir(), "not-a-bundle.txt") // wrong suffix: Save refuses it
	res, err := replay.Record(context.Background(), "a", nil, func(context.Context, trace.Value) (any, error) {
		return nil, errAgent
	}, replay.SaveTo(bad))
	require.Error(t, err)
	assert.ErrorIs(t, err, trace.ErrStorage)
	assert.NotErrorIs(t, err, errAgent, "the agent's error is not the recording's")
	assert.True(t, strings.HasPrefix(err.Error(), "replay: trace was not saved: "), err.Error())
	require.NotNil(t, res)
	assert.Equal(t, errAgent, res.Err)
	require.NotNil(t, res.Trace)
	assert.Equal(t, trace.RunFailed, res.Trace.Status)
	assert.Equal(t, "", res.Path)

	// A completed run with a failed save reports the save failure.
	_, err = replay.Record(context.Background(), "a", nil, func(context.Context, trace.Value) (any, error) {
		return "fine", nil
	}, replay.SaveTo(bad))
	require.Error(t, err)
	assert.ErrorIs(t, err, trace.ErrStorage)
}

func TestDefaultSavePath(t *testing.T) {
	t.Parallel()
	assert.Equal(t, ".stepfork/traces/my-agent-run_1.sftrace", replay.DefaultPath("my agent!", "run_1"))
	assert.Equal(t, ".stepfork/traces/agent-run_1.sftrace", replay.DefaultPath("!!!", "run_1"))
	assert.Equal(t, ".stepfork/traces/a.b_c-d-run_2.sftrace", replay.DefaultPath("a.b_c-d", "run_2"))
}

func TestRecordInsideASessionIsInert(t *testing.T) {
	t.Parallel()
	w := newWorld()
	inner := w.agent()
	outer, err := replay.Record(context.Background(), "outer", trip, func(ctx context.Context, in trace.Value) (any, error) {
		res, err := replay.Record(ctx, "inner", trip, inner, replay.SaveTo(filepath.Join(t.TempDir(), "never.sftrace")))
		require.NoError(t, err)
		assert.Nil(t, res.Trace)
		assert.Equal(t, "", res.Path)
		return res.Output, err
	})
	require.NoError(t, err)
	assert.Equal(t, 2, outer.Trace.Totals.ToolCalls, "the inner agent's calls went to the outer recording")
}

func TestRecordErrorsAreRecordingFailures(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, trace.Value) (any, error) { return nil, nil }
	_, err := replay.Record(context.Background(), "a", make(chan int), ok)
	assert.ErrorIs(t, err, replay.ErrNotRecordable)
	_, err = replay.Record(context.Background(), "", nil, ok)
	assert.ErrorIs(t, err, replay.ErrInvalidOptions)
	_, err = replay.Record(context.Background(), "a", nil, nil)
	assert.ErrorIs(t, err, replay.ErrInvalidOptions)

	// An output that cannot be recorded fails the recording; the failed
	// trace is still in the result.
	res, err := replay.Record(context.Background(), "a", nil, func(context.Context, trace.Value) (any, error) { return make(chan int), nil })
	require.ErrorIs(t, err, replay.ErrNotRecordable)
	require.NotNil(t, res)
	require.NoError(t, res.Err, "the agent itself succeeded")
	assert.Equal(t, trace.RunFailed, res.Trace.Status)

	// An agent's error is not a recording failure.
	res, err = replay.Record(context.Background(), "a", nil, func(context.Context, trace.Value) (any, error) { return nil, errors.New("no") })
	require.NoError(t, err)
	assert.EqualError(t, res.Err, "no")
}

func TestPassThroughWithoutSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld()
	out, err := w.agent()(ctx, trace.MustValueOf(trip))
	require.NoError(t, err)
	b := out.(Booking)
	assert.Equal(t, "F1", b.Flight)
	assert.Equal(t, 2, b.Limit)
	assert.Equal(t, "none: no rooms in DEL", b.Hotel)
	assert.Len(t, b.ID, 36)
	assert.Equal(t, int64(2), w.tools.Load())
	assert.Equal(t, int64(1), w.models.Load())
	assert.Equal(t, 7, replay.Read(ctx, "k", 7))
}

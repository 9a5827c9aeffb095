package replay

import (
	"context"
	"encoding/json"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepfork/stepfork/trace"
)

type plainPoint struct {
	X, Y int
	Tag  string `json:"tag"`
	In   [2]struct{ On bool }
	skip string
}

type withMarshaler struct{ N int }

func (w withMarshaler) MarshalJSON() ([]byte, error) { return json.Marshal(w.N * 2) }

type withTextUnmarshaler struct{ S string }

func (w *withTextUnmarshaler) UnmarshalText(b []byte) error { w.S = string(b) + "!"; return nil }

func TestPlainTypes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    any
		want bool
	}{
		{0, true}, {"s", true}, {true, true}, {uint8(1), true}, {[3]int{}, true}, {plainPoint{}, true},
		{1.5, false}, {float32(0), false}, {struct{ F float64 }{}, false},
		{&plainPoint{}, false}, {[]int{}, false}, {map[string]int{}, false}, {struct{ A any }{}, false},
		{struct{ S []string }{}, false}, {[1][]int{}, false},
		{time.Time{}, false}, {withMarshaler{}, false}, {withTextUnmarshaler{}, false},
		{struct{ W withMarshaler }{}, false}, {json.Number("1"), true},
	}
	for _, c := range cases {
		if got := plain(reflect.TypeOf(c.v)); got != c.want {
			t.Errorf("plain(%T) = %v, want %v", c.v, got, c.want)
		}
	}
}

// TestMemoizedReplaysAgree replays one Prepared many times, concurrently,
// with an agent whose values are plain: every replay hands the agent the
// recorded outputs and records the same trace as a replay without memo.
func TestMemoizedReplaysAgree(t *testing.T) {
	t.Parallel()
	var replaying atomic.Bool
	step := Tool("step", func(_ context.Context, in plainPoint) (plainPoint, error) {
		return plainPoint{X: in.X + 1, Y: in.Y * 2, Tag: in.Tag + "+", skip: "live"}, nil
	})
	agent := Typed(func(ctx context.Context, n int) (plainPoint, error) {
		cur := plainPoint{Tag: "t"}
		for i := range n {
			out, err := step(ctx, cur)
			if err != nil {
				return cur, err
			}
			if replaying.Load() && out.skip != "" {
				t.Errorf("call %d: a served output carries the unexported field of a live one", i)
			}
			cur = out
			if err := Set(ctx, "cur", cur); err != nil {
				return cur, err
			}
		}
		return cur, nil
	})
	rec, err := Record(context.Background(), "memo", 20, agent)
	if err != nil {
		t.Fatal(err)
	}
	p := Prepare(rec.Trace)
	replaying.Store(true)
	want := rec.Output.(plainPoint)
	want.skip = "" // not recorded
	results := make(chan *Result, 8)
	for range cap(results) {
		go func() {
			res, err := p.Replay(context.Background(), agent)
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	for range cap(results) {
		res := <-results
		if res == nil {
			continue
		}
		if res.Output != want {
			t.Errorf("replay output %+v, recorded %+v", res.Output, want)
		}
		for i, ev := range res.Trace.Events {
			b := rec.Trace.Events[i]
			if ev.Input != b.Input || ev.Output != b.Output || ev.After != b.After || ev.Before != b.Before {
				t.Fatalf("event %d differs from the recording: %+v vs %+v", i, ev, b)
			}
		}
	}
	if n := p.memo.size.Load(); n == 0 || n > p.memo.limit {
		t.Errorf("memo holds %d entries, want 1 … %d", n, p.memo.limit)
	}
}

// TestMemoStaysBounded fills a memo past its limit.
func TestMemoStaysBounded(t *testing.T) {
	t.Parallel()
	mm := newMemo(4)
	for i := range 100 {
		mm.store(&mm.encoded, i, trace.IntValue(int64(i)))
	}
	if n := mm.size.Load(); n != mm.limit {
		t.Fatalf("memo of limit %d holds %d entries", mm.limit, n)
	}
}

// TestMemoKeepsDistinctValuesApart decodes two recorded texts and encodes
// two values that differ only where a careless key would merge them.
func TestMemoKeepsDistinctValuesApart(t *testing.T) {
	t.Parallel()
	s := &session{plan: &plan{Prepared: &Prepared{memo: newMemo(10)}}}
	a, err := decodeValue[plainPoint](trace.MustParse(`{"X":1,"tag":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeValue[plainPoint](trace.MustParse(`{"X":1,"tag":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Tag != "a" || b.Tag != "b" {
		t.Fatalf("decoded %+v and %+v", a, b)
	}
	type other struct {
		X   int
		Tag string `json:"tag"`
	}
	o, err := decodeValue[other](trace.MustParse(`{"X":1,"tag":"a"}`))
	if err != nil || o.Tag != "a" {
		t.Fatalf("same text into another type: %+v, %v", o, err)
	}
	va, _ := s.valueOf(plainPoint{X: 1, skip: "x"})
	vb, _ := s.valueOf(plainPoint{X: 1, skip: "y"})
	vc, _ := s.valueOf(plainPoint{X: 2})
	if va != vb || va == vc {
		t.Fatalf("encodings %s, %s, %s", va.Canonical(), vb.Canonical(), vc.Canonical())
	}
}

func TestNowIsMicrosecondsInUTC(t *testing.T) {
	t.Parallel()
	before := time.Now().UTC().Truncate(time.Microsecond)
	got := now()
	after := time.Now().UTC().Truncate(time.Microsecond)
	if got.Location() != time.UTC || got.Nanosecond()%1000 != 0 || got.Before(before) || got.After(after) {
		t.Fatalf("now() = %v (%s), want a UTC time in whole microseconds between %v and %v", got, got.Location(), before, after)
	}
	if got != got.Truncate(time.Microsecond) {
		t.Fatalf("now() = %#v is not what Truncate gives", got)
	}
}

// TestMemoKeepsTheTailOut forks nothing but replays a base whose tail the
// agent changes: what the changed tail encodes stays out of the
// Prepared's memo, so that many variants cannot crowd out the prefix. The
// first replay fills nothing, the second the prefix.
func TestMemoKeepsTheTailOut(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	step := Tool("step", func(_ context.Context, in plainPoint) (plainPoint, error) {
		return plainPoint{X: in.X + 1}, nil
	})
	agent := Typed(func(ctx context.Context, n int) (int, error) {
		cur := plainPoint{}
		for i := range n {
			if i == n/2 {
				cur.X += int(offset.Load()) // the tail parts from the base here
			}
			out, err := step(ctx, cur)
			if err != nil {
				return 0, err
			}
			cur = out
			if err := Set(ctx, "x", cur); err != nil {
				return 0, err
			}
		}
		return cur.X, nil
	})
	rec, err := Record(context.Background(), "tail", 40, agent)
	if err != nil {
		t.Fatal(err)
	}
	p := Prepare(rec.Trace)
	if _, err := p.Replay(context.Background(), agent); err != nil {
		t.Fatal(err)
	}
	if got := p.memo.size.Load(); got != 0 {
		t.Fatalf("the first replay filled the memo with %d entries", got)
	}
	if _, err := p.Replay(context.Background(), agent); err != nil {
		t.Fatal(err)
	}
	prefix := p.memo.size.Load()
	if prefix == 0 {
		t.Fatal("the second replay filled nothing")
	}
	for i := range 5 {
		offset.Store(int64(1000 * (i + 1)))
		_, _ = p.Replay(context.Background(), agent, Live("step"))
	}
	// The value a tail parts with is encoded before the session sees it
	// part: one entry per variant at most, not one per tail call.
	if got := p.memo.size.Load(); got > prefix+5 {
		t.Fatalf("memo grew from %d to %d entries over five changed tails of 20 calls", prefix, got)
	}
}

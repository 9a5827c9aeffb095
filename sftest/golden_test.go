package sftest_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// stamped is a lookup result the way services return them: a fresh id, a
// time written as RFC 3339 drops its trailing zeros (so its width varies
// from run to run), and a long text after them that a golden must cut.
type stamped struct {
	At    string `json:"at"`
	ID    string `json:"id"`
	Query string `json:"query"`
	Text  string `json:"text"`
}

// randomTime is a time with 0 to 9 fractional digits, as RFC3339Nano
// writes it (no trailing zero), each call a second later than the last so
// that no two are equal.
func randomTime() string {
	digits := rand.IntN(10)
	frac := 0
	if digits > 0 {
		frac = (rand.IntN(pow10(digits-1))*10 + 1 + rand.IntN(9)) * pow10(9-digits)
	}
	t := time.Now().UTC().Truncate(time.Second).Add(time.Duration(ticks.Add(1)) * time.Second)
	return t.Add(time.Duration(frac)).Format(time.RFC3339Nano)
}

var ticks atomic.Int64

func pow10(n int) int {
	p := 1
	for range n {
		p *= 10
	}
	return p
}

// stampedAgent makes two lookups in flight at once, on two goroutines: the
// second starts once the first is running and the first returns once the
// second is running, so both calls are recorded before either result, and
// their results are recorded in either order (a served call, whose body
// never runs, is over before the other goes on). It also mints an id with replay.NewID and reads the clock with
// replay.Now.
func stampedAgent() replay.Agent {
	lookup := replay.Tool("lookup", func(ctx context.Context, q string) (stamped, error) {
		if s, ok := ctx.Value(signalKey{}).(signal); ok {
			close(s.running)
			select { // the other call is recorded once its body runs, or over if served
			case <-s.otherRunning:
			case <-s.otherDone:
			}
		} else if s, ok := ctx.Value(signalKey{}).(chan struct{}); ok {
			close(s)
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		return stamped{At: randomTime(), ID: uuid.NewString(), Query: q, Text: strings.Repeat("The policy allows refunds. ", 12)}, nil
	})
	return replay.Typed(func(ctx context.Context, q string) (map[string]any, error) {
		ticket := replay.NewID(ctx)
		started := replay.Now(ctx)
		var (
			wg         sync.WaitGroup
			a, b       stamped
			errA, errB error
		)
		aRunning, aDone := make(chan struct{}), make(chan struct{})
		bRunning, bDone := make(chan struct{}), make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(aDone)
			a, errA = lookup(context.WithValue(ctx, signalKey{}, signal{aRunning, bRunning, bDone}), q+" policy")
		}()
		go func() {
			defer wg.Done()
			defer close(bDone)
			select { // a served call never runs its body: then it is over
			case <-aRunning:
			case <-aDone:
			}
			b, errB = lookup(context.WithValue(ctx, signalKey{}, bRunning), q+" history")
		}()
		wg.Wait()
		if errA != nil {
			return nil, errA
		}
		if errB != nil {
			return nil, errB
		}
		return map[string]any{"ticket": ticket, "started": started.Format(time.RFC3339Nano), "policy": a, "history": b}, nil
	})
}

type signalKey struct{}

// signal is what the first lookup is given: it closes running when its body
// runs, then waits until the second lookup's body runs or its call is over.
type signal struct{ running, otherRunning, otherDone chan struct{} }

// A golden of a recorded run is the same run after run although every
// recording has fresh ids, times of another width and results in another
// order: ids and times are normalised before anything is cut. Run it with
// -count=50.
func TestGoldenStable(t *testing.T) {
	t.Parallel()
	res, err := replay.Record(t.Context(), "stamped", "refund", stampedAgent())
	if err != nil || res.Err != nil {
		t.Fatalf("recording: %v, %v", err, res.Err)
	}
	t.Run("trace", func(t *testing.T) {
		t.Parallel()
		sftest.Golden(t, res.Trace)
	})
	t.Run("fork", func(t *testing.T) {
		t.Parallel()
		// The whole run again, live: every id and time differs from the base.
		v := sftest.Fork(t, res.Trace, fork.Start(), stampedAgent(), fork.Allow("lookup"))
		sftest.Golden(t, v)
	})
}

// randomTime writes every width.
func TestRandomTimeWidths(t *testing.T) {
	t.Parallel()
	widths := map[int]bool{}
	for range 1000 {
		s := randomTime()
		w := 0
		if _, frac, ok := strings.Cut(strings.TrimSuffix(s, "Z"), "."); ok {
			w = len(frac)
		}
		widths[w] = true
	}
	if len(widths) != 10 {
		t.Errorf("fractional widths %v, want 0 to 9", widths)
	}
}

// A long value that changed renders on both sides as the same window around
// its first difference, after normalization: the appended sentence shows.
func TestRenderWindowsLongChanges(t *testing.T) {
	t.Parallel()
	prompt := strings.Repeat("Refunds need a receipt (checked 2026-03-14T09:30:00.5Z). ", 6)
	mk := func(system string) *trace.Trace {
		b := trace.NewBuilder("windows")
		b.RunStart(nil)
		b.LLM("fake", "m", map[string]any{"system": system}, map[string]any{"content": "ok"})
		b.RunEnd(trace.RunCompleted, "ok")
		return b.MustTrace()
	}
	text, err := sftest.Render(diff.Runs(mk(prompt), mk(prompt+"Above the limit, ask for approval.")))
	if err != nil {
		t.Fatal(err)
	}
	same := strings.Repeat("Refunds need a receipt (checked <time>). ", 4)
	want := `      input.system: … ` + same + `" → … ` + same + `Above the limit, ask for approval."` + "\n"
	if !strings.Contains(text, want) {
		t.Errorf("rendering:\n%s\nwant it to contain:\n%s", text, want)
	}
}

// The golden of a sweep tells its variants apart: two variants that part
// from the base at the same step but end with different outputs render
// differently (a variant whose output changed did not change the golden),
// and each names its changes.
func TestSweepGoldenShowsWhatEachVariantDid(t *testing.T) {
	t.Parallel()
	build := func(id, action, outcome string) *trace.Trace {
		b := trace.NewBuilder("desk").RunID(id)
		b.RunStart("o_1")
		b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerDecision, Name: "action", Kind: trace.KindDecision, Value: trace.StringValue(action)}))
		b.RunEnd(trace.RunCompleted, map[string]any{"outcome": outcome})
		return b.MustTrace()
	}
	base := build("run_base", "refund", "refunded")
	sweep := func(outcome string) *fork.Sweep {
		v := build("run_v", "escalate", outcome)
		return &fork.Sweep{Base: base, Entries: []fork.Entry{{Name: "escalate",
			Variant: &fork.Variant{Trace: v, Base: base, Status: fork.StatusCompleted, Diff: diff.Runs(base, v),
				Changes: []fork.ChangeReport{{Description: `decision 'action' → "escalate"`, Applied: 1}}},
		}}}
	}
	a, err := sftest.Render(withSamples(sweep("awaiting approval")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := sftest.Render(withSamples(sweep("asked for photos")))
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two variants with different outputs render the same:\n%s", a)
	}
	for _, want := range []string{
		`  escalate  completed  $0.00  decision 'action' → "escalate"`,
		`      diverged  step 1: decision 'action' changed: value "refund" → "escalate"`,
		`      output    {"outcome":"awaiting approval"} (base: {"outcome":"refunded"})`,
	} {
		if !strings.Contains(a, want+"\n") {
			t.Errorf("the golden lacks\n%s\nin:\n%s", want, a)
		}
	}
}

func withSamples(s *fork.Sweep) *fork.Sweep {
	for i := range s.Entries {
		s.Entries[i].Samples = []*fork.Variant{s.Entries[i].Variant}
	}
	return s
}

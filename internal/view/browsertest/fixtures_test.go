package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/internal/view"
	"github.com/stepfork/stepfork/internal/view/viewtest"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// The pages the tests open, written once per test binary.
type fixtures struct {
	dir string

	run, diff, fork, sweep, sampled, secret, large, longFork string // page files

	bookingDiff *diff.Result  // the diff the diff page shows
	sweepRows   []sweepExpect // what the sweep page's table must say
	research    *trace.Trace  // the run of the run page
	variant     *fork.Variant // the fork of the fork page
	travelSweep *fork.Sweep   // the sweep of the sweep page, as it ran
	sampledRun  *fork.Sweep   // the sweep of the sampled page
}

type sweepExpect struct {
	name, status, cost string
}

// The travel agent the fork and the sweep run: it searches flights, a
// model picks one, and booking the expensive one is declined.
type trip struct {
	To string `json:"to"`
}

type flight struct {
	ID    string `json:"id"`
	Price int    `json:"price"`
}

type booking struct {
	Ref    string `json:"ref"`
	Status string `json:"status"`
}

var (
	searchFlights = replay.Tool("search_flights", func(_ context.Context, in trip) ([]flight, error) {
		return []flight{{"F1", 640}, {"F2", 310}}, nil
	})
	bookFlight = replay.Tool("book_flight", func(_ context.Context, f flight) (booking, error) {
		if f.Price > 500 {
			return booking{}, errors.New("card ending 4242 declined: insufficient funds")
		}
		return booking{Ref: "PNR-" + f.ID, Status: "confirmed"}, nil
	})
)

// planner is the fake model: it picks the first flight, or the cheapest
// when the system prompt says so.
func planner(_ context.Context, req replay.Request) (replay.Response, error) {
	var fs []flight
	if err := json.Unmarshal([]byte(req.Messages[0].Content), &fs); err != nil {
		return replay.Response{}, err
	}
	pick := ""
	if len(fs) > 0 {
		pick = fs[0].ID
		if strings.Contains(req.System, "cheapest") {
			for _, f := range fs {
				if f.Price < 400 {
					pick = f.ID
				}
			}
		}
	}
	return replay.Response{Content: pick, Usage: replay.Usage{PromptTokens: 120, CompletionTokens: 8, TotalTokens: 128, CostUSD: 0.0004}}, nil
}

var travelAgent = replay.Typed(func(ctx context.Context, t trip) (booking, error) {
	var fs []flight
	if err := replay.Node(ctx, "search", func(ctx context.Context) (err error) {
		fs, err = searchFlights(ctx, t)
		return err
	}); err != nil {
		return booking{}, err
	}
	var pick flight
	if err := replay.Node(ctx, "decide", func(ctx context.Context) error {
		list, _ := json.Marshal(fs)
		resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "planner-1", System: "Pick the flight that fits best.",
			Messages: []replay.Message{{Role: "user", Content: string(list)}}}, planner)
		for _, f := range fs {
			if f.ID == resp.Content {
				pick = f
			}
		}
		return err
	}); err != nil {
		return booking{}, err
	}
	if pick.ID == "" {
		return booking{}, errors.New("no flight to book")
	}
	var b booking
	err := replay.Node(ctx, "book", func(ctx context.Context) (err error) {
		b, err = bookFlight(ctx, pick)
		return err
	})
	return b, err
})

// secretRun is a run whose call input holds a credential and a password,
// unredacted in memory: the page must show neither.
func secretRun() *trace.Trace {
	b := trace.NewBuilder("leaky-agent")
	b.RunStart(map[string]any{"user": "dana"})
	b.Tool("call_api", map[string]any{"url": "https://api.example.com/v1/orders", "authorization_header": "Bearer " + viewtest.Secret, "password": "hunter2-hunter2"},
		map[string]any{"status": 200})
	b.RunEnd(trace.RunCompleted, map[string]any{"ok": true})
	return b.MustTrace()
}

func buildFixtures(dir string) (*fixtures, error) {
	ctx := context.Background()
	f := &fixtures{dir: dir}
	write := func(name string, p *view.Page) (string, error) {
		path := filepath.Join(dir, name+".html")
		return path, view.WriteFile(path, p)
	}
	var err error
	// A run: the research agent of testdata, with nodes and a decision.
	if f.research, err = trace.Load("../../../testdata/research.sftrace"); err != nil {
		return nil, err
	}
	if f.run, err = write("run", view.RunPage(f.research)); err != nil {
		return nil, err
	}
	// Two runs: the README's fork of the booking agent, its failed payment
	// overridden.
	base, err := trace.Load("../../../testdata/booking-agent.sftrace")
	if err != nil {
		return nil, err
	}
	fixed := filepath.Join(dir, "booking-fixed.sftrace")
	if _, err := fork.Trace("../../../testdata/booking-agent.sftrace", fork.ThroughStep(11),
		fork.Override(fork.OnStep(11), map[string]any{"booking_ref": "PNR-6E1158", "status": "confirmed"}), fork.SaveTo(fixed)); err != nil {
		return nil, err
	}
	variant, err := trace.Load(fixed)
	if err != nil {
		return nil, err
	}
	f.bookingDiff = diff.Runs(base, variant)
	if f.diff, err = write("diff", view.DiffPage(base, variant)); err != nil {
		return nil, err
	}
	// A counterfactual fork and a sweep of the travel agent.
	rec, err := replay.Record(ctx, "travel-agent", trip{To: "LIS"}, travelAgent)
	if err != nil {
		return nil, err
	}
	basePath := filepath.Join(dir, "travel.sftrace")
	if err := rec.Trace.Save(basePath); err != nil {
		return nil, err
	}
	travel, err := trace.Load(basePath)
	if err != nil {
		return nil, err
	}
	f.variant, err = fork.Run(ctx, travel, fork.BeforeNode("decide", 1), travelAgent, fork.Prompt("decide", "Pick the cheapest flight."), fork.Allow("book_flight"))
	if err != nil {
		return nil, err
	}
	if f.fork, err = write("fork", view.VariantPage(f.variant)); err != nil {
		return nil, err
	}
	sweepDir := filepath.Join(dir, "sweep")
	sw, err := fork.Each(ctx, travel, fork.BeforeNode("decide", 1), travelAgent, []fork.Named{
		{Name: "baseline"},
		{Name: "cheapest", Changes: []fork.Change{fork.Prompt("decide", "Pick the cheapest flight.")}},
		{Name: "forced-f2", Changes: []fork.Change{fork.LLMResponse(fork.OnCall("fake/planner-1", 1), replay.Response{Content: "F2"})}},
		{Name: "other-model", Changes: []fork.Change{fork.Model("decide", "planner-2")}},
	}, fork.Allow("book_flight"), fork.SaveDir(sweepDir))
	if err != nil {
		return nil, err
	}
	for _, e := range sw.Entries {
		if e.Err != nil {
			return nil, fmt.Errorf("variant %s: %w", e.Name, e.Err)
		}
		f.sweepRows = append(f.sweepRows, sweepExpect{e.Name, string(e.Variant.Status), usd.Format(e.Variant.IncurredCost)})
	}
	f.travelSweep = sw
	// The same variants, 3 samples each and scored: the page keeps each
	// variant's mean score and its interval.
	confirmed := func(_ *trace.Trace, out trace.Value) float64 {
		if st, _ := out.Get("status").Str(); st == "confirmed" {
			return 1
		}
		return 0
	}
	if f.sampledRun, err = fork.Each(ctx, travel, fork.BeforeNode("decide", 1), travelAgent, []fork.Named{
		{Name: "baseline"},
		{Name: "cheapest", Changes: []fork.Change{fork.Prompt("decide", "Pick the cheapest flight.")}},
	}, fork.Allow("book_flight"), fork.Samples(3), fork.Score(confirmed)); err != nil {
		return nil, err
	}
	if f.sampled, err = write("sampled", view.SweepPage(travel, view.FromSweep(f.sampledRun), nil)); err != nil {
		return nil, err
	}
	site, err := view.Open(basePath, sweepDir)
	if err != nil {
		return nil, err
	}
	if f.sweep, err = write("sweep", site.Page(false)); err != nil {
		return nil, err
	}
	if f.secret, err = write("secret", view.RunPage(secretRun())); err != nil {
		return nil, err
	}
	if f.large, err = write("large", view.RunPage(viewtest.LargeRun(100_000))); err != nil {
		return nil, err
	}
	// A long run of repeated pages forked at its last model call: a tail
	// of a few events after a prefix of thousands.
	long, err := replay.Record(ctx, "reader", 1500, longAgent)
	if err != nil {
		return nil, err
	}
	lv, err := fork.Run(ctx, long.Trace, fork.BeforeCall(replay.KindLLM, "fake/reader", 1500), longAgent,
		fork.LLMResponse(fork.OnCall("fake/reader", 1500), replay.Response{Content: "stop"}))
	if err != nil {
		return nil, err
	}
	if f.longFork, err = write("long-fork", view.VariantPage(lv)); err != nil {
		return nil, err
	}
	return f, nil
}

var fx *fixtures

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // the failing tests of TestFailurePages need no pages
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "stepfork-browsertest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fx, err = buildFixtures(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "browsertest: building the pages:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	stopBrowser()
	os.RemoveAll(dir)
	os.Exit(code)
}

package assert_test

import (
	"fmt"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/trace"
)

// printT is a TestingT that prints failures, standing in for *testing.T.
type printT struct{}

func (printT) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }

// bookingRun is a small recorded run: a model call, a search, a booking.
func bookingRun() *trace.Trace {
	b := trace.NewBuilder("booking-agent")
	b.RunStart(map[string]any{"to": "LIS"})
	b.LLM("openai", "gpt-4o", "plan the trip", "search then book")
	b.Tool("search_flights", map[string]any{"from": "KTM", "to": "LIS"}, map[string]any{"price": 320})
	b.Tool("book_flight", map[string]any{"flight": "QR 1"}, map[string]any{"booked": true})
	b.RunEnd(trace.RunCompleted, "booked")
	return b.MustTrace()
}

func Example() {
	var t printT // in a test: t *testing.T
	run := bookingRun()

	assert.ToolCalled(t, run, "search_flights")
	assert.ToolOrder(t, run, "search_flights", "book_flight")
	assert.ToolArguments(t, run, "search_flights", map[string]any{"from": "KTM", "to": "LIS"})
	assert.ModelCallCount(t, run, "gpt-4o", 1)
	assert.ToolNotCalled(t, run, "book_flight", "the agent must ask before booking")
	// Output:
	// FAIL: expected tool 'book_flight' not to be called; actual: ['search_flights', 'book_flight']
	// Messages:   the agent must ask before booking
}

func ExampleTrajectory() {
	var t printT
	run := bookingRun()

	assert.Trajectory(t, run, []string{"book_flight"}, assert.Superset)
	assert.Trajectory(t, run, []string{"book_flight", "search_flights"}, assert.Unordered)
	assert.Trajectory(t, run, []string{"book_flight", "search_flights"}, assert.InOrder)
	// Output:
	// FAIL: expected ordered tool subsequence ['book_flight', 'search_flights']; actual: ['search_flights', 'book_flight']
	// first unmatched: 'search_flights' (position 2 of 2)
}

func ExampleCheckToolCallCount() {
	err := assert.CheckToolCallCount(bookingRun(), "search_flights", 2)
	fmt.Println(err)
	// Output:
	// tool 'search_flights': expected 2 call(s), got 1
}

func ExampleParseExpectations() {
	exp, err := assert.ParseExpectations([]byte(`{
		"called": ["search_flights"],
		"counts": {"book_flight": 1},
		"sequence": ["search_flights", "book_flight"],
		"max_steps": 2
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(exp.Check(bookingRun()))

	_, err = assert.ParseExpectations([]byte(`{"max_steps": 3, "eval": "os.system('rm -rf /')"}`))
	fmt.Println(err)
	// Output:
	// expected at most 2 dependency step(s), got 3
	// unknown trajectory expectation key(s): ['eval']
}

func ExampleTraceOptions() {
	first := bookingRun()
	// A second recording of the same behaviour: new run id, ids and times.
	second := trace.NewBuilder("booking-agent").RunID("run_2").
		IDs(func(n int) string { return fmt.Sprintf("ev-%d", n) })
	second.RunStart(map[string]any{"to": "LIS"})
	second.LLM("openai", "gpt-4o", "plan the trip", "search then book")
	second.Tool("search_flights", map[string]any{"from": "KTM", "to": "LIS"}, map[string]any{"price": 320})
	second.Tool("book_flight", map[string]any{"flight": "QR 1"}, map[string]any{"booked": true})
	second.RunEnd(trace.RunCompleted, "booked")

	fmt.Println(cmp.Equal(first, second.MustTrace()))
	fmt.Println(cmp.Equal(first, second.MustTrace(), assert.TraceOptions()))
	// Output:
	// false
	// true
}

package fork_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/trace"
)

// Fork the 15-event booking-agent failure at step 2, as
// `stepfork fork failure.sftrace --at-step 2` does.
func Example() {
	dir, err := os.MkdirTemp("", "fork-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	res, err := fork.Trace("../testdata/booking-agent.sftrace", fork.AtStep(2), fork.Options{
		OutputPath: filepath.Join(dir, "failure-forked.sftrace"),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Original Events ", res.OriginalEventCount)
	fmt.Println("Forked Events   ", res.ForkedEventCount)
	fmt.Println("Fork Point Step ", res.ForkPointStep)
	fmt.Println("Fork Point Event", res.ForkPointEventID)
	fmt.Println("Events Excluded ", res.ExcludedEvents())
	fmt.Println("Saved to        ", filepath.Base(res.ForkedTracePath))
	// Output:
	// Original Events  15
	// Forked Events    3
	// Fork Point Step  2
	// Fork Point Event evt_003
	// Events Excluded  12
	// Saved to         failure-forked.sftrace
}

// What if the booking had gone through? Override the failed tool result at
// step 11 and keep the run up to it.
func ExampleTrace_override() {
	tr, err := trace.Load("../testdata/booking-agent.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	res, err := fork.Trace(tr, fork.AtStep(11), fork.Options{
		Overrides: []fork.Override{
			fork.OverrideStep(11, map[string]any{"confirmation": "PNR-7QX2"}),
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ev := res.Trace.Events[11]
	fmt.Println(ev.Type, ev.Name, ev.Status, ev.Output)
	fmt.Println("overrides applied:", res.OverridesApplied)
	// Output:
	// tool_result book_flight ok {"confirmation":"PNR-7QX2"}
	// overrides applied: 1
}

// Invalid overrides are refused before anything is written.
func ExampleTrace_invalidOverride() {
	tr, err := trace.Load("../testdata/booking-agent.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	_, err = fork.Trace(tr, fork.AtStep(5), fork.Options{
		Overrides: []fork.Override{fork.OverrideStep(3, map[string]any{})},
	})
	fmt.Println(err)
	// Output:
	// invalid overrides: override targets step 3 (tool_call); only tool_result and llm_response can be overridden
}

// A fork of a fork remembers every generation.
func ExampleReadInfo() {
	tr, err := trace.Load("../testdata/booking-agent.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	first, _, err := fork.NewEngine(tr, fork.AtStep(9), fork.Options{RunID: "run_first"}).Fork()
	if err != nil {
		log.Fatal(err)
	}
	second, _, err := fork.NewEngine(first, fork.AtStep(4), fork.Options{RunID: "run_second"}).Fork()
	if err != nil {
		log.Fatal(err)
	}
	info, err := fork.ReadInfo(second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Chain())
	fmt.Println(info.Ancestors[0].ForkPoint, "then", info.ForkPoint)
	// Output:
	// [run_second run_first run_booking_agent_0001]
	// step 9 then step 4
}

package diff_test

import (
	"fmt"
	"os"

	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// booking records a small run: a search, a booking, and its end.
func booking(runID string, price int, extraCall bool) *trace.Trace {
	b := trace.NewBuilder("booking-agent").RunID(runID)
	b.RunStart(map[string]any{"to": "LIS"})
	b.Tool("search_flights", map[string]any{"to": "LIS"}, map[string]any{"flight": "TP 1", "price": price})
	if extraCall {
		b.Tool("check_visa", map[string]any{"country": "PT"}, map[string]any{"required": false})
	}
	b.Tool("book", map[string]any{"flight": "TP 1"}, map[string]any{"ok": true})
	b.RunEnd(trace.RunCompleted, map[string]any{"booked": "TP 1"})
	return b.MustTrace()
}

// Runs aligns the two runs by their longest common subsequence: the added
// call is one added step, and the steps after it stay unchanged.
func ExampleRuns() {
	base := booking("run_base", 320, false)
	variant := booking("run_variant", 450, true)

	d := diff.Runs(base, variant)
	fmt.Println("equivalent:", d.Equivalent())
	fmt.Println("diverged at", d.Divergence)
	fmt.Print(d.Explain())
	// Output:
	// equivalent: false
	// diverged at steps 1–2: tool 'search_flights' changed: output.price 320 → 450
	// behavior changed: 1 changed, 1 added, 0 removed, 2 unchanged (4 steps, LCS)
	//   status    completed
	//   diverged  steps 1–2: tool 'search_flights' changed: output.price 320 → 450
	//   path      ~tool:search_flights → +tool:check_visa → tool:book → run
	//             ^ diverged here
	//   ~ #0      tool search_flights (base #0 evt_002 steps 1–2, variant #0 evt_002 steps 1–2)
	//               output.price
	//                 expected: 320
	//                 actual:   450
	//   + #1      tool check_visa (variant #1 evt_004 steps 3–4)
}

// AlignPosition gives stepfork's own diff: positional alignment and the JSON
// of `stepfork diff --json`, byte for byte.
func ExampleAlignPosition() {
	base := booking("run_base", 320, false)
	variant := booking("run_variant", 450, false)

	d := diff.Runs(base, variant, diff.AlignPosition(),
		diff.DisplayPaths("base.sftrace", "variant.sftrace"))
	os.Stdout.Write(append(d.JSON(), '\n'))
	// Output:
	// {"equivalent":false,"baseline":{"path":"base.sftrace","agent_name":"booking-agent","run_id":"run_base","status":"completed","events":6},"candidate":{"path":"variant.sftrace","agent_name":"booking-agent","run_id":"run_variant","status":"completed","events":6},"steps":[{"index":0,"kind":"changed","step_type":"tool","label":"search_flights","fields":["input","output","status"],"changes":[{"path":"output.price","kind":"changed","expected":320,"actual":450}]},{"index":1,"kind":"unchanged","step_type":"tool","label":"book","fields":["input","output","status"],"changes":[]},{"index":2,"kind":"unchanged","step_type":"run","label":"run","fields":["output","run_status"],"changes":[]}],"added":0,"removed":0,"changed":1,"unchanged":2}
}

// FirstDifference names the first differing leaf of two payloads.
func ExampleFirstDifference() {
	path, expected, actual, _ := diff.FirstDifference(
		trace.MustParse(`{"args":["LIS",2],"to":"LIS"}`),
		trace.MustParse(`{"args":["LIS",2.0],"to":"LIS"}`))
	fmt.Println(path, expected, actual)
	// Output: args[1] 2 2.0
}

// Bundles compares two saved runs without loading them: only the payloads
// of the steps that differ are read again.
func ExampleBundles() {
	dir, err := os.MkdirTemp("", "bundles-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	base, variant := dir+"/base.sftrace", dir+"/variant.sftrace"
	if err := booking("run_base", 320, false).Save(base); err != nil {
		panic(err)
	}
	if err := booking("run_variant", 450, false).Save(variant); err != nil {
		panic(err)
	}

	d, err := diff.Bundles(base, variant)
	if err != nil {
		panic(err)
	}
	fmt.Println("equivalent:", d.Equivalent())
	for _, s := range d.Steps {
		for _, c := range s.Changes {
			fmt.Printf("%s %s: %s %s → %s\n", s.Type, s.Label, c.Path, c.Expected, c.Actual)
		}
	}
	// Output:
	// equivalent: false
	// tool search_flights: output.price 320 → 450
}

package trace_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/stepfork/stepfork/trace"
)

// bookingTrace builds a small run for the examples.
func bookingTrace() *trace.Trace {
	b := trace.NewBuilder("booking-agent")
	b.RunStart(map[string]any{"city": "Lisbon"})
	call := b.ToolCall("search_flights", map[string]any{"to": "LIS", "api_key": "k-123"})
	b.ToolResult(call, map[string]any{"price": 320})
	b.LLM("openai", "gpt-4o", map[string]any{"prompt": "book it?"}, map[string]any{"content": "yes"})
	b.RunEnd(trace.RunCompleted, map[string]any{"booked": true})
	return b.MustTrace()
}

// exampleDir is a temporary directory for the bundles of an example.
func exampleDir() string {
	dir, err := os.MkdirTemp("", "trace-example")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// A Builder assembles a trace with the parents, steps, ids and hashes a
// recorder would give it: a stable fixture for tests.
func ExampleBuilder() {
	b := trace.NewBuilder("booking-agent")
	b.RunStart(map[string]any{"city": "Lisbon"})
	call := b.ToolCall("search_flights", map[string]any{"to": "LIS"})
	b.ToolResult(call, map[string]any{"price": 320})
	b.RunEnd(trace.RunCompleted, map[string]any{"booked": true})
	tr, err := b.Trace()
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range tr.Events {
		fmt.Printf("%d %s %s %s parent=%q\n", ev.Step, ev.ID, ev.Type, ev.Label(), ev.ParentID)
	}
	fmt.Println(tr.Totals.Events, "events,", tr.Totals.ToolCalls, "tool call")
	fmt.Println("valid:", trace.Validate(context.Background(), tr).Valid())
	// Output:
	// 0 evt_001 run_start run_start parent=""
	// 1 evt_002 tool_call search_flights parent="evt_001"
	// 2 evt_003 tool_result search_flights parent="evt_002"
	// 3 evt_004 run_end completed parent=""
	// 4 events, 1 tool call
	// valid: true
}

// Save writes a bundle atomically, redacting secrets and computing payload
// hashes first; the trace in memory is not changed (except its Path).
func ExampleTrace_Save() {
	dir := exampleDir()
	defer os.RemoveAll(dir)

	tr := bookingTrace()
	path := filepath.Join(dir, "booking.sftrace")
	if err := tr.Save(path); err != nil {
		log.Fatal(err)
	}
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Saving again over it needs Overwrite.
	fmt.Println(tr.Save(path) != nil, tr.Save(path, trace.Overwrite()))

	saved, err := trace.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("in memory:", tr.Events[1].Input.Get("api_key"))
	fmt.Println("on disk:  ", saved.Events[1].Input.Get("api_key"))
	fmt.Println(saved.Redactions[0].EventID, saved.Redactions[0].Path, saved.Redactions[0].Reason)
	// Output:
	// events.jsonl
	// integrity.json
	// manifest.json
	// redactions.json
	// true <nil>
	// in memory: "k-123"
	// on disk:   "[REDACTED]"
	// evt_002 /input/api_key sensitive_key
}

// Load reads a whole bundle into memory; its errors name the file, and the
// line for events.jsonl.
func ExampleLoad() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "booking.sftrace")
	if err := bookingTrace().Save(path); err != nil {
		log.Fatal(err)
	}

	tr, err := trace.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tr.AgentName, tr.Status, len(tr.Events), "events")
	for _, ev := range tr.Events {
		fmt.Println(ev.Step, ev.Type, ev.Label())
	}

	// A bundle with a broken line is refused, never repaired.
	events := filepath.Join(path, trace.EventsFile)
	data, _ := os.ReadFile(events)
	os.WriteFile(events, append(data, "{not json\n"...), 0o644)
	_, err = trace.Load(path)
	var lerr *trace.LineError
	fmt.Println(errors.Is(err, trace.ErrStorage), errors.As(err, &lerr) && lerr.Line == 7)
	// Output:
	// booking-agent completed 6 events
	// 0 run_start run_start
	// 1 tool_call search_flights
	// 2 tool_result search_flights
	// 3 llm_request gpt-4o
	// 4 llm_response gpt-4o
	// 5 run_end completed
	// true true
}

// LoadVerified loads a bundle and checks the digests integrity.json records
// against the very bytes it loaded, as a test loading its fixture does: an
// edit after the bundle was written shows as a mismatch naming the file.
func ExampleLoadVerified() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "booking.sftrace")
	if err := bookingTrace().Save(path); err != nil {
		log.Fatal(err)
	}
	tr, res, err := trace.LoadVerified(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tr.Events), "events,", res.Status, res.VerifiedFiles)

	// An edit by hand: the bundle still loads, and the result says what
	// changed.
	manifest := filepath.Join(path, trace.ManifestFile)
	data, _ := os.ReadFile(manifest)
	os.WriteFile(manifest, append(data, '\n'), 0o644)
	_, res, err = trace.LoadVerified(path)
	fmt.Println(err, res.Status, res.Issues[0].File, res.Issues[0].Message)
	// Output:
	// 6 events, verified [manifest.json events.jsonl redactions.json]
	// <nil> mismatch manifest.json SHA-256 mismatch.
}

// Open streams the events of a bundle in memory that does not grow with the
// run. With SkipPayloads the payloads are checked but not kept, and Decode
// gives one event in full when it is needed.
func ExampleOpen() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "booking.sftrace")
	if err := bookingTrace().Save(path); err != nil {
		log.Fatal(err)
	}

	r, err := trace.Open(path, trace.SkipPayloads())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println(r.Manifest().AgentName, r.Manifest().Totals.Events, "events")
	for ev, err := range r.Events() {
		if err != nil {
			log.Fatal(err)
		}
		if ev.Type != trace.ToolResult {
			continue
		}
		var full trace.Event
		if err := r.Decode(&full); err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Label(), ev.Output.IsAbsent(), full.Output)
	}
	// Output:
	// booking-agent 6 events
	// search_flights true {"price":320}
}

// ReadBehavior reads a run's behavior steps with a digest of each, without
// keeping the payloads of its calls; LoadPayloads reads the payloads of the
// steps that need them.
func ExampleReadBehavior() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "booking.sftrace")
	if err := bookingTrace().Save(path); err != nil {
		log.Fatal(err)
	}

	events := 0
	run, err := trace.ReadBehavior(path, func(*trace.Event) { events++ })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(events, "events,", len(run.Steps), "steps")
	for i, s := range run.Steps {
		if s.Type != trace.StepTool {
			continue
		}
		fmt.Println(s.Label, s.Payload.IsAbsent(), run.Digests[i] != trace.StepDigest{})
		if err := run.LoadPayloads(i); err != nil {
			log.Fatal(err)
		}
		fmt.Println(run.Steps[i].Payload)
	}
	// Output:
	// 6 events, 3 steps
	// search_flights true true
	// {"input":{"api_key":"[REDACTED]","to":"LIS"},"output":{"price":320},"status":"ok"}
}

// Values hold JSON in the canonical form stepfork hashes: members sorted,
// integers and floats apart, and == is canonical equality.
func ExampleValue() {
	v, err := trace.ParseValue([]byte(`{"b": [1, 1.0, "x"], "a": null}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v)
	fmt.Println(v.Get("b").Len(), v.Get("a").IsNull(), v.Get("missing").IsAbsent())
	for i, el := range v.Get("b").Elems() {
		fmt.Println(i, el.Kind(), el)
	}
	fmt.Println(v == trace.MustParse(`{"a":null,"b":[1,1.0,"x"]}`))
	fmt.Println(trace.IntValue(1) == trace.MustParse("1.0"))

	type price struct {
		EUR int `json:"eur"`
	}
	w, _ := trace.ValueOf(price{EUR: 320})
	var p price
	_ = w.Decode(&p)
	fmt.Println(w, p.EUR, trace.Hash(w)[:12])
	// Output:
	// {"a":null,"b":[1,1.0,"x"]}
	// 3 true true
	// 0 int 1
	// 1 float 1.0
	// 2 string "x"
	// true
	// false
	// {"eur":320} 320 2bd2518500c2
}

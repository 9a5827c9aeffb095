// Package pybundle writes bundles of the shape Python stepfork's recorder
// writes, of any size, for the benchmarks and tests of the commands that
// read large bundles (diff, validate). It is the generator behind the
// bundles of testdata/vectors/stepfork-recorded, scaled: a run of alternating
// model and tool calls (llm_request + llm_response, tool_call +
// tool_result), ~880 bytes per event, with nested objects, floats such as
// 0.61 and 1e-05, non-ASCII text, newlines and quotes in the payloads,
// random 32-hex-digit ids, microsecond timestamps, payload hashes and
// integrity.json, written by [trace.BundleWriter] (byte for byte what Python
// stepfork saves).
//
// It is test support: nothing outside this module's tests uses it.
package pybundle

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// ChangedEvery is how often a tool output is changed in a changed copy
// ([Write] with changed set): every ChangedEvery-th tool call, the first
// one included, so 1 % of them.
const ChangedEvery = 100

// Events returns the number of events of a run of calls calls: run_start,
// two events per call, run_end.
func Events(calls int) int { return 2*calls + 2 }

// Write writes a completed run of calls dependency calls at path (which
// must not exist), as Python stepfork's recorder writes it: call i is a
// model call when i is even and a tool call when it is odd. The run is the
// same for the same calls. With changed set it is the changed copy instead:
// the same run (same ids, timestamps and run id), in which every
// [ChangedEvery]-th tool call, starting with the first, returned an output
// with an extra member "bench_changed": true, its output hash and
// integrity.json updated as Python stepfork writes them.
func Write(path string, calls int, changed bool) error {
	r := rand.New(rand.NewPCG(7, uint64(calls)))
	id := func(prefix string) string {
		return fmt.Sprintf("%s_%016x%016x", prefix, r.Uint64(), r.Uint64())
	}
	start := time.Date(2026, 11, 30, 7, 20, 15, 775041000, time.UTC)
	at := start
	tick := func() time.Time {
		at = at.Add(time.Duration(90+r.IntN(200)) * time.Microsecond)
		return at
	}
	runID := id("run")
	m := trace.Manifest{
		RunID: runID, AgentName: "py-gen-bench", CreatedAt: start, Status: trace.RunCompleted,
		Environment: trace.Environment{Python: ptr("3.11"), OS: ptr("linux"), StepforkVersion: ptr("0.1.0a6")},
	}
	w, err := trace.NewBundleWriter(path, m)
	if err != nil {
		return err
	}
	step := 0
	write := func(ev trace.Event) (string, error) {
		ev.ID, ev.RunID, ev.Step, ev.Timestamp = id("evt"), runID, step, tick()
		step++
		ev.Status, ev.ReplayPolicy = trace.StatusOK, trace.PolicyFrozen
		if ev.Type == trace.ToolResult || ev.Type == trace.LLMResponse {
			ev.DurationMS = ptr(int64(0))
		}
		return ev.ID, w.WriteEvent(&ev)
	}
	root, err := write(trace.Event{Type: trace.RunStart,
		Input: trace.MustParse(fmt.Sprintf(`{"n":%d,"note":"générée — ☃\nsecond line","payload_bytes":256,"seed":7}`, calls))})
	if err != nil {
		return err
	}
	tools := []string{"search_flights", "lookup_customer", "get_weather"}
	for i := range calls {
		if i%2 == 0 {
			req, err := write(trace.Event{Type: trace.LLMRequest, ParentID: root, Provider: "fakeprov", Model: "fake-model-1",
				Input: trace.MustParse(fmt.Sprintf(`{"max_tokens":512,"messages":[{"content":"You are a careful agent.\nAnswer in JSON.","role":"system"},{"content":"step %d: %s","role":"user"}],"stop":null,"temperature":0.61,"top_p":0.00001}`,
					i, text(r, 150)))})
			if err != nil {
				return err
			}
			if _, err := write(trace.Event{Type: trace.LLMResponse, ParentID: req, Model: "fake-model-1",
				Output: trace.MustParse(fmt.Sprintf(`{"choices":[{"finish_reason":"stop","index":0,"logprob":-0.61,"message":{"content":"%s","role":"assistant"}}],"usage":{"completion_tokens":12,"cost":0.00001,"prompt_tokens":%d}}`,
					text(r, 250), 30+r.IntN(30)))}); err != nil {
				return err
			}
			continue
		}
		tool := tools[(i/2)%len(tools)]
		call, err := write(trace.Event{Type: trace.ToolCall, ParentID: root, Name: tool,
			Input: trace.MustParse(fmt.Sprintf(`{"context":"%s","filters":{"epsilon":0.00001,"max_price":450.5,"nested":{"level":3,"none":null,"tags":["a","b","ç"]},"ratio":0.61,"refundable":%v,"stops":[0,1,2]},"page":%d,"query":"q%d — Kathmandu→Lisbon ✈ \"quoted\"\n2nd line"}`,
				text(r, 60+r.IntN(60)), r.IntN(2) == 0, i, i))})
		if err != nil {
			return err
		}
		extra := ""
		if changed && (i/2)%ChangedEvery == 0 {
			extra = `"bench_changed":true,`
		}
		var rows []string
		for j := range 3 {
			rows = append(rows, fmt.Sprintf(`{"id":"r%d-%d","price":%d.%02d,"rank":%d}`, i, j, 100+r.IntN(400), r.IntN(100), j))
		}
		if _, err := write(trace.Event{Type: trace.ToolResult, ParentID: call, Name: tool,
			Output: trace.MustParse(fmt.Sprintf(`{%s"count":%d,"epsilon":0.00001,"large":1234567890123,"meta":{"lines":"a\nb\r\nc","nested":{"deep":{"deeper":[1,2.5,null]}}},"negative":-7,"ok":true,"results":[%s],"score":0.61,"text":"%s","tool":"%s","unicode":"काठमाडौँ 東京 😀"}`,
				extra, i, strings.Join(rows, ","), text(r, 180+r.IntN(80)), tool))}); err != nil {
			return err
		}
	}
	if _, err := write(trace.Event{Type: trace.RunEnd, RunStatus: trace.RunCompleted,
		Output: trace.MustParse(fmt.Sprintf(`{"calls":%d,"eps":0.00001,"last_kind":"dict","ratio":0.61}`, calls))}); err != nil {
		return err
	}
	m.Totals.DurationMS = ptr(at.Sub(start).Milliseconds())
	w.SetManifest(m)
	return w.Close()
}

// words are the words of the payloads' text, as in the recorded vectors:
// ASCII, accented Latin, Devanagari, CJK, emoji, and characters that JSON
// escapes (newlines, tabs, quotes, backslashes).
var words = strings.Fields(`ledger tier-0 alpha bravo x=1;y=2 ☃ Kathmandu Lisbon Zürich façade naïve brûlée crème ünïcödé
	काठमाडौँ 東京 ✈ 😀 emoji🚀 refund checkout timeout retry policy p95 say\"hi\" back\\slash tab\there`)

// text returns about n bytes of words (JSON string content, escapes
// included), with a line break now and then.
func text(r *rand.Rand, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(words[r.IntN(len(words))])
		if r.IntN(8) == 0 {
			sb.WriteString(`\n`)
		} else {
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

func ptr[T any](v T) *T { return &v }

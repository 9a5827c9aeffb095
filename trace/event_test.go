package trace

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// decodeEvent decodes one events.jsonl line.
func decodeEvent(t *testing.T, line string) (Event, error) {
	t.Helper()
	var d eventDecoder
	var ev Event
	err := d.decode([]byte(line), &ev)
	return ev, err
}

// eventLine builds an event line from the common fields plus extra members,
// given as `"key":value` text.
func eventLine(typ string, extra ...string) string {
	parts := append([]string{`"id":"evt_1"`, `"run_id":"run_1"`, `"step":0`, `"type":"` + typ + `"`, `"timestamp":"2026-10-08T10:00:00Z"`}, extra...)
	return "{" + strings.Join(parts, ",") + "}"
}

func TestEnumerations(t *testing.T) {
	t.Parallel()
	for _, p := range []Policy{PolicyFrozen, PolicyLive, PolicyManual, PolicyForbidden, PolicyDerived} {
		if !p.Valid() {
			t.Errorf("%s not valid", p)
		}
		if _, err := decodeEvent(t, eventLine("run_start", `"replay_policy":"`+string(p)+`"`)); err != nil {
			t.Errorf("replay_policy %s: %v", p, err)
		}
	}
	if Policy("surprise").Valid() {
		t.Error("surprise is a valid policy")
	}
	if _, err := decodeEvent(t, eventLine("run_start", `"replay_policy":"surprise"`)); !errors.Is(err, errInvalidEvent) {
		t.Errorf("replay_policy surprise: %v", err)
	}
	want := []EventType{"run_start", "llm_request", "llm_response", "tool_call", "tool_result", "state_change", "error", "run_end"}
	if !slices.Equal(eventTypes, want) {
		t.Errorf("eventTypes = %v", eventTypes)
	}
	for _, typ := range want {
		if !typ.Valid() {
			t.Errorf("%s not valid", typ)
		}
	}
	for _, bad := range []EventType{"", "framework_magic", "RUN_START"} {
		if bad.Valid() {
			t.Errorf("%q is valid", bad)
		}
	}
	for _, s := range []Status{StatusOK, StatusError, StatusSkipped} {
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
	}
	if Status("failed").Valid() || RunStatus("ok").Valid() {
		t.Error("statuses of the wrong kind are valid")
	}
	for _, s := range []RunStatus{RunRunning, RunCompleted, RunFailed} {
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
	}
}

// TestEventBaseRules ports test_trace_models.py's EventBase cases.
func TestEventBaseRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, line, want string
	}{
		{"empty id", strings.Replace(eventLine("run_start"), `"evt_1"`, `""`, 1), "id must be a non-empty string"},
		{"empty run_id", strings.Replace(eventLine("run_start"), `"run_1"`, `""`, 1), "run_id must be a non-empty string"},
		{"negative step", strings.Replace(eventLine("run_start"), `"step":0`, `"step":-1`, 1), "step must be >= 0"},
		{"naive timestamp", strings.Replace(eventLine("run_start"), `00Z"`, `00"`, 1), "timestamp must be timezone-aware"},
		{"negative duration", eventLine("run_start", `"duration_ms":-1`), "duration_ms must be >= 0"},
		{"empty parent_id", eventLine("run_start", `"parent_id":""`), "parent_id must be a non-empty string"},
		{"unknown field", eventLine("run_start", `"extra":true`), `unknown field "extra"`},
		{"empty tool name", eventLine("tool_call", `"name":""`, `"input":{}`), "name must be a non-empty string"},
		{"missing tool name", eventLine("tool_call", `"input":{}`), "tool_call requires a non-empty name"},
		{"llm_request without model", eventLine("llm_request", `"input":null`), "llm_request requires a non-empty model"},
		{"llm_request without input", eventLine("llm_request", `"model":"m"`), "llm_request requires input"},
		{"llm_response without output", eventLine("llm_response"), "llm_response requires output"},
		{"tool_result without output", eventLine("tool_result", `"name":"t"`), "tool_result requires output"},
		{"negative prompt tokens", eventLine("llm_response", `"output":1`, `"prompt_tokens":-1`), "prompt_tokens must be >= 0"},
		{"negative completion tokens", eventLine("llm_response", `"output":1`, `"completion_tokens":-1`), "completion_tokens must be >= 0"},
		{"negative total tokens", eventLine("llm_response", `"output":1`, `"total_tokens":-1`), "total_tokens must be >= 0"},
		{"negative cost", eventLine("llm_response", `"output":1`, `"cost_usd":-0.5`), "cost_usd must be >= 0"},
		{"error without message", eventLine("error", `"error_type":"E"`), "error requires a non-empty error_type and message"},
		{"run_end without run_status", eventLine("run_end"), "run_end requires run_status"},
		{"unknown type", eventLine("framework_magic"), `unknown event type "framework_magic"`},
		{"null id", strings.Replace(eventLine("run_start"), `"evt_1"`, `null`, 1), "id must be a string"},
		{"null model of a request", eventLine("llm_request", `"model":null`, `"input":1`), "llm_request requires a non-empty model"},
	}
	for _, tc := range cases {
		_, err := decodeEvent(t, tc.line)
		if !errors.Is(err, errInvalidEvent) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v; want invalid event %q", tc.name, err, tc.want)
		}
	}
}

// TestEventUnion ports the discriminated-union cases: every type parses,
// with its own fields and defaults.
func TestEventUnion(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 10, 8, 10, 0, 0, 0, time.UTC)
	i64 := func(i int64) *int64 { return &i }
	f64 := func(f float64) *float64 { return &f }
	base := func(typ EventType) Event {
		return Event{ID: "evt_1", RunID: "run_1", Type: typ, Timestamp: ts, Status: StatusOK, ReplayPolicy: PolicyFrozen}
	}
	with := func(typ EventType, f func(*Event)) Event { e := base(typ); f(&e); return e }
	cases := []struct {
		line string
		want Event
	}{
		{eventLine("run_start"), base(RunStart)},
		{eventLine("run_start", `"input":null`), with(RunStart, func(e *Event) { e.Input = NullValue })},
		{eventLine("tool_call", `"name":"search"`, `"input":{"b":2,"a":1}`), with(ToolCall, func(e *Event) { e.Name, e.Input = "search", MustParse(`{"a":1,"b":2}`) })},
		{eventLine("tool_result", `"name":"search"`, `"output":[1,1.0]`), with(ToolResult, func(e *Event) { e.Name, e.Output = "search", MustParse(`[1,1.0]`) })},
		{eventLine("llm_request", `"provider":"openai"`, `"model":"gpt"`, `"input":"hi"`), with(LLMRequest, func(e *Event) { e.Provider, e.Model, e.Input = "openai", "gpt", StringValue("hi") })},
		{eventLine("llm_request", `"provider":null`, `"model":"gpt"`, `"input":null`), with(LLMRequest, func(e *Event) { e.Model, e.Input = "gpt", NullValue })},
		{eventLine("llm_response", `"model":null`, `"output":{}`, `"prompt_tokens":3`, `"completion_tokens":null`, `"total_tokens":5`, `"cost_usd":0.25`),
			with(LLMResponse, func(e *Event) {
				e.Output, e.PromptTokens, e.TotalTokens, e.CostUSD = MustParse(`{}`), i64(3), i64(5), f64(0.25)
			})},
		{eventLine("llm_response", `"output":null`, `"cost_usd":1`), with(LLMResponse, func(e *Event) { e.Output, e.CostUSD = NullValue, f64(1) })},
		{eventLine("state_change", `"key":"draft"`, `"before":null`, `"after":"x"`), with(StateChange, func(e *Event) { e.Key, e.Before, e.After = "draft", NullValue, StringValue("x") })},
		{eventLine("state_change"), base(StateChange)},
		{eventLine("error", `"error_type":"ValueError"`, `"message":"boom"`), with(ErrorEvent, func(e *Event) {
			e.Status, e.ErrorType, e.Message = StatusError, "ValueError", "boom"
		})},
		{eventLine("error", `"status":"ok"`, `"error_type":"E"`, `"message":"m"`, `"details":{"retryable":true}`), with(ErrorEvent, func(e *Event) {
			e.ErrorType, e.Message, e.Details = "E", "m", MustParse(`{"retryable":true}`)
		})},
		{eventLine("run_end", `"run_status":"completed"`), with(RunEnd, func(e *Event) { e.RunStatus = RunCompleted })},
		{eventLine("run_end", `"run_status":"failed"`, `"output":null`, `"parent_id":null`, `"duration_ms":7`, `"redactions":["/output/x"]`, `"status":"skipped"`, `"replay_policy":"live"`),
			with(RunEnd, func(e *Event) {
				e.RunStatus, e.Output, e.DurationMS, e.Redactions, e.Status, e.ReplayPolicy = RunFailed, NullValue, i64(7), []string{"/output/x"}, StatusSkipped, PolicyLive
			})},
	}
	for _, tc := range cases {
		got, err := decodeEvent(t, tc.line)
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		if !got.Timestamp.Equal(tc.want.Timestamp) {
			t.Errorf("%s: timestamp %v", tc.line, got.Timestamp)
		}
		got.Timestamp = tc.want.Timestamp
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", tc.line, got, tc.want)
		}
	}
}

// TestEventPayloads checks that any JSON value is a payload, and that Go
// values that are not JSON are refused.
func TestEventPayloads(t *testing.T) {
	t.Parallel()
	for _, p := range []string{`null`, `"s"`, `1`, `1.5`, `true`, `[1,[2,{"a":[]}]]`, `{"a":{"b":[null,false]}}`} {
		ev, err := decodeEvent(t, eventLine("tool_call", `"name":"t"`, `"input":`+p))
		if err != nil || ev.Input.Canonical() != p {
			t.Errorf("payload %s: %v, %s", p, err, ev.Input)
		}
	}
	for _, x := range []any{func() {}, make(chan int), complex(1, 2), map[int]any{1: struct{ F func() }{}}} {
		if _, err := ValueOf(x); err == nil {
			t.Errorf("ValueOf(%T) succeeded", x)
		}
	}
}

// TestAppendEventKeyOrder checks the exact line of each event type: common
// fields first, then the type's fields in Pydantic's order, nulls included.
func TestAppendEventKeyOrder(t *testing.T) {
	t.Parallel()
	const common = `{"id":"evt_1","run_id":"run_1","parent_id":null,"step":0,"type":"%s","timestamp":"2026-10-08T10:00:00Z","duration_ms":null,"status":"%s","replay_policy":"frozen","input_hash":null,"output_hash":null,"redactions":[]`
	want := map[EventType]string{
		RunStart:    `,"input":null}`,
		LLMRequest:  `,"provider":null,"model":null,"input":null}`,
		LLMResponse: `,"model":null,"output":null,"prompt_tokens":null,"completion_tokens":null,"total_tokens":null,"cost_usd":null}`,
		ToolCall:    `,"name":"","input":null}`,
		ToolResult:  `,"name":"","output":null}`,
		StateChange: `,"key":null,"before":null,"after":null}`,
		ErrorEvent:  `,"error_type":"","message":"","details":null}`,
		RunEnd:      `,"run_status":"","output":null}`,
	}
	for _, typ := range eventTypes {
		status := StatusOK
		if typ == ErrorEvent {
			status = StatusError
		}
		ev := Event{ID: "evt_1", RunID: "run_1", Type: typ, Timestamp: time.Date(2026, 10, 8, 10, 0, 0, 0, time.UTC), Status: status, ReplayPolicy: PolicyFrozen}
		got := string(appendEvent(nil, &ev))
		if w := strings.Replace(strings.Replace(common, "%s", string(typ), 1), "%s", string(status), 1) + want[typ]; got != w {
			t.Errorf("%s:\ngot  %s\nwant %s", typ, got, w)
		}
	}
	// Non-UTC offsets and microseconds are kept.
	ev := Event{ID: "e", RunID: "r", Type: RunStart, Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("", 5*3600+45*60)), Status: StatusOK, ReplayPolicy: PolicyFrozen}
	if got := string(appendEvent(nil, &ev)); !strings.Contains(got, `"timestamp":"2026-01-02T03:04:05.000006+05:45"`) {
		t.Errorf("timestamp written as %s", got)
	}
}

// TestExpectedHashes checks stepfork-format.md §3.3: which payload each type
// hashes, and that absent payloads call for no hash.
func TestExpectedHashes(t *testing.T) {
	t.Parallel()
	a, b := MustParse(`{"a":1}`), MustParse(`[2]`)
	cases := []struct {
		ev      Event
		in, out Value
	}{
		{Event{Type: RunStart, Input: a}, a, Value{}},
		{Event{Type: RunStart}, Value{}, Value{}},
		{Event{Type: LLMRequest, Input: a, Output: b}, a, Value{}},
		{Event{Type: ToolCall, Input: a}, a, Value{}},
		{Event{Type: LLMResponse, Input: a, Output: b}, Value{}, b},
		{Event{Type: ToolResult, Output: b}, Value{}, b},
		{Event{Type: StateChange, Before: a, After: b}, a, b},
		{Event{Type: StateChange, After: b}, Value{}, b},
		{Event{Type: ErrorEvent, Details: a}, Value{}, a},
		{Event{Type: ErrorEvent}, Value{}, Value{}},
		{Event{Type: RunEnd, Output: NullValue}, Value{}, NullValue},
	}
	for _, tc := range cases {
		in, out := tc.ev.ExpectedHashes()
		if in != Hash(tc.in) || out != Hash(tc.out) {
			t.Errorf("%s: ExpectedHashes = (%q, %q), want hashes of (%s, %s)", tc.ev.Type, in, out, tc.in, tc.out)
		}
		ev := tc.ev
		ev.InputHash, ev.OutputHash = "input123", "x"
		ev.SetHashes()
		if ev.InputHash != in || ev.OutputHash != out {
			t.Errorf("%s: SetHashes left (%q, %q)", ev.Type, ev.InputHash, ev.OutputHash)
		}
	}
	if got := Hash(NullValue); got != "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b" {
		t.Errorf("hash of null = %s", got)
	}
}

func TestEventCloneAndLabel(t *testing.T) {
	t.Parallel()
	n, c := int64(3), 0.5
	ev := Event{Type: LLMResponse, Redactions: []string{"/a"}, PromptTokens: &n, CostUSD: &c, DurationMS: &n}
	cl := ev.Clone()
	cl.Redactions[0], *cl.PromptTokens, *cl.CostUSD, *cl.DurationMS = "/b", 9, 9, 9
	if ev.Redactions[0] != "/a" || n != 3 || c != 0.5 {
		t.Error("Clone shares memory with the original")
	}
	labels := []struct {
		ev   Event
		want string
	}{
		{Event{Type: RunStart}, "run_start"},
		{Event{Type: LLMRequest, Provider: "openai", Model: "gpt"}, "gpt"},
		{Event{Type: LLMResponse}, "llm_response"},
		{Event{Type: LLMResponse, Model: "m"}, "m"},
		{Event{Type: ToolCall, Name: "search"}, "search"},
		{Event{Type: ToolResult, Name: "search"}, "search"},
		{Event{Type: StateChange}, "state_change"},
		{Event{Type: StateChange, Key: "k"}, "k"},
		{Event{Type: ErrorEvent, ErrorType: "ValueError"}, "ValueError"},
		{Event{Type: RunEnd, RunStatus: RunFailed}, "failed"},
	}
	for _, l := range labels {
		if got := l.ev.Label(); got != l.want {
			t.Errorf("Label of %s = %q, want %q", l.ev.Type, got, l.want)
		}
	}
	if LLMLabel("", "gpt") != "gpt" || LLMLabel("openai", "gpt") != "openai/gpt" {
		t.Error("LLMLabel")
	}
}

// TestBuilderAddNormalizes ports Trace.add: the event gets the trace's run id
// and its position as step, keeps its parent, and the caller's event is not
// changed.
func TestBuilderAddNormalizes(t *testing.T) {
	t.Parallel()
	b := NewBuilder("agent")
	root := b.RunStart(nil)
	ev := Event{ID: "custom", RunID: "run_other", Step: 42, Type: ToolCall, Name: "t", Input: NullValue, ParentID: root}
	before := ev.Clone()
	id := b.Add(ev)
	if !reflect.DeepEqual(ev, before) {
		t.Error("Add changed the caller's event")
	}
	tr := b.MustTrace()
	got, i := tr.Event(id)
	if got == nil || id != "custom" || got.RunID != "run_agent" || got.Step != 1 || i != 1 || got.ParentID != root {
		t.Errorf("added event = %+v", got)
	}
}

// TestEventCloneCopiesNumbersTogether checks that Clone copies an event's
// numbers in one allocation, each to its own place.
func TestEventCloneCopiesNumbersTogether(t *testing.T) {
	d, p, c, tot, cost := int64(1), int64(2), int64(3), int64(5), 0.25
	ev := Event{Type: LLMResponse, DurationMS: &d, PromptTokens: &p, CompletionTokens: &c, TotalTokens: &tot, CostUSD: &cost}
	var cl Event
	if n := testing.AllocsPerRun(100, func() { cl = ev.Clone() }); n != 1 {
		t.Errorf("Clone made %v allocations, want 1", n)
	}
	*cl.DurationMS, *cl.PromptTokens, *cl.CompletionTokens, *cl.TotalTokens, *cl.CostUSD = 10, 20, 30, 50, 2.5
	if d != 1 || p != 2 || c != 3 || tot != 5 || cost != 0.25 {
		t.Error("Clone shares numbers with the original")
	}
	if *cl.DurationMS != 10 || *cl.PromptTokens != 20 || *cl.CompletionTokens != 30 || *cl.TotalTokens != 50 || *cl.CostUSD != 2.5 {
		t.Error("Clone's numbers share a place")
	}
	if none := (Event{Type: LLMResponse}).Clone(); none.DurationMS != nil || none.PromptTokens != nil || none.CostUSD != nil {
		t.Error("Clone made numbers the event does not have")
	}
}

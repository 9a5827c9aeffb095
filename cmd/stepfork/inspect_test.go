package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepfork/stepfork/trace"
)

func TestInspectGolden(t *testing.T) {
	t.Parallel()
	cases := []goldenCase{
		{"inspect/booking.txt", []string{"inspect", booking}, 0},
		{"inspect/booking.json", []string{"inspect", booking, "--json"}, 0},
		{"inspect/booking-events.txt", []string{"inspect", booking, "--events"}, 0},
		{"inspect/booking-errors.txt", []string{"inspect", "--errors-only", booking}, 0},
		{"inspect/booking-step-missing.txt", []string{"inspect", booking, "--step", "999"}, 1},
		{"inspect/booking-step-missing.json", []string{"inspect", booking, "--step", "999", "--json"}, 1},
		{"inspect/missing.txt", []string{"inspect", "nope.sftrace"}, 2},
		{"inspect/missing.json", []string{"inspect", "nope.sftrace", "--json"}, 2},
	}
	for _, name := range []string{"successful_run", "failed_tool_run", "failed_llm_run", "partial_run", "legacy_v01", "diff_baseline"} {
		cases = append(cases,
			goldenCase{"inspect/" + name + ".txt", []string{"inspect", vectors + name + ".sftrace", "--events"}, 0},
			goldenCase{"inspect/" + name + ".json", []string{"inspect", vectors + name + ".sftrace", "--json"}, 0},
		)
	}
	runGoldenCases(t, cases)
}

// TestInspectJSONShape checks TraceInspection key for key (stepfork-format.md
// §8.2) on a golden vector: key order, +00:00 timestamps, the redacted api key.
func TestInspectJSONShape(t *testing.T) {
	t.Parallel()
	r := stepfork(t, "", nil, "inspect", vectors+"failed_tool_run.sftrace", "--json", "--step", "1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := `{"path":"../../testdata/vectors/stepfork/failed_tool_run.sftrace","agent_name":"golden-tool-agent",` +
		`"run_id":"run_failed_tool_001","schema_version":"0.1","status":"failed","created_at":"2026-10-08T10:00:00+00:00",` +
		`"events":5,"llm_calls":0,"tool_calls":1,"duration_ms":null,` +
		`"failure":{"message":"flight_search timed out","step":3,"type":"ToolTimeout"},"integrity":"verified",` +
		`"timeline":[{"id":"evt_tool_002","step":1,"type":"tool_call","label":"flight_search","status":"ok",` +
		`"parent_id":"evt_tool_001","duration_ms":null,` +
		`"details":{"duration_ms":null,"input":{"api_key":"[REDACTED]","query":"Kathmandu flights"},"name":"flight_search"}}]}` + "\n"
	if r.stdout != want {
		t.Errorf("got\n%s\nwant\n%s", r.stdout, want)
	}
}

// TestInspectRedactsAndEscapes: secrets a trace holds in places the writer
// does not redact (a hand-edited bundle) are redacted on display, and
// control characters cannot reach the terminal.
func TestInspectRedactsAndEscapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := trace.NewBuilder("agent")
	b.RunStart(map[string]any{"q": "hi"})
	b.Tool("search\x1b[2J", map[string]any{"q": "x"}, map[string]any{"ok": true})
	b.RunEnd(trace.RunCompleted, nil)
	tr := b.MustTrace()
	path := filepath.Join(dir, "evil.sftrace")
	if err := tr.Save(path); err != nil {
		t.Fatal(err)
	}
	// Plant a credential in events.jsonl by hand (Save would have redacted it).
	events := filepath.Join(path, trace.EventsFile)
	data, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), `"q":"x"`, `"q":"sk-abcdefghijklmnop"`, 1))
	if err := os.WriteFile(events, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"inspect", path, "--events"}, {"inspect", path, "--json"}} {
		r := stepfork(t, "", nil, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "sk-abcdefghijklmnop") {
			t.Errorf("%v: secret printed:\n%s", args, r.stdout)
		}
		if !strings.Contains(r.stdout, "[REDACTED]") {
			t.Errorf("%v: no [REDACTED] in output:\n%s", args, r.stdout)
		}
		if strings.Contains(r.stdout, "\x1b") {
			t.Errorf("%v: raw ESC reached the output:\n%q", args, r.stdout)
		}
	}
}

func TestInspectShowsMarkers(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("marker-agent")
	b.RunStart(nil)
	b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "triage", Phase: trace.PhaseEnter}))
	b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerDecision, Name: "route", Kind: trace.KindDecision, Value: trace.StringValue("refund")}))
	b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerDecision, Name: "refund", Kind: trace.KindApproval, Value: trace.TrueValue, Forced: true}))
	b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerParam, Name: "max_results", Value: trace.IntValue(5)}))
	b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "triage", Phase: trace.PhaseExit, Status: trace.NodeStatusFail, Error: "boom"}))
	b.State("draft", nil, "hello")
	b.RunEnd(trace.RunCompleted, nil)
	path := filepath.Join(t.TempDir(), "markers.sftrace")
	if err := b.MustTrace().Save(path); err != nil {
		t.Fatal(err)
	}
	r := stepfork(t, "", nil, "inspect", path)
	var rows []string
	for _, line := range strings.Split(r.stdout, "\n") {
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	for _, want := range []string{
		"1 node ▶ triage ok",
		`2 decision route = "refund" ok`,
		"3 approval refund = true (forced) ok",
		"4 param max_results = 5 ok",
		"5 node ◀ triage (error: boom) error",
		"6 state_change draft ok",
	} {
		if !slices.Contains(rows, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	// --errors-only keeps the failed node's exit, and only it.
	r = stepfork(t, "", nil, "inspect", path, "--errors-only")
	if !strings.Contains(r.stdout, "◀ triage (error: boom)") || strings.Contains(r.stdout, "▶ triage") {
		t.Errorf("--errors-only:\n%s", r.stdout)
	}
	r = stepfork(t, "", nil, "inspect", path, "--json")
	var got struct {
		Timeline []struct {
			Label  string          `json:"label"`
			Marker json.RawMessage `json:"marker"`
		} `json:"timeline"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Timeline) != 8 {
		t.Fatalf("timeline has %d events, want 8:\n%s", len(got.Timeline), r.stdout)
	}
	if m := string(got.Timeline[2].Marker); m != `{"key":"@decision","name":"route","kind":"decision","value":"refund"}` {
		t.Errorf("marker JSON = %s", m)
	}
	if got.Timeline[6].Marker != nil || got.Timeline[6].Label != "draft" {
		t.Errorf("plain state change: label %q marker %s", got.Timeline[6].Label, got.Timeline[6].Marker)
	}
}

func TestIsoformat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 10, 8, 10, 0, 0, 0, time.UTC), "2026-10-08T10:00:00+00:00"},
		{time.Date(2026, 10, 9, 11, 17, 32, 980996000, time.UTC), "2026-10-09T11:17:32.980996+00:00"},
		{time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 5*3600+45*60)), "2026-01-01T00:00:00+05:45"},
	}
	for _, tt := range tests {
		if got := isoformat(tt.in); got != tt.want {
			t.Errorf("isoformat(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestInspectShowsBuild: a run recorded by a Go agent says which code made
// it, in the human output and in --json; a Python bundle shows nothing new.
func TestInspectShowsBuild(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("agent")
	b.RunStart(nil)
	b.RunEnd(trace.RunCompleted, nil)
	tr := b.MustTrace()
	data, err := trace.MarshalBuild(trace.Build{Module: "example.com/support", Version: "(devel)",
		Revision: "46b7ad0c4abd65b7e0efec1149cdb0d7ddcb7ecd", Time: time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC), Modified: true, Go: "go1.26.1"})
	if err != nil {
		t.Fatal(err)
	}
	tr.Extras = map[string][]byte{trace.BuildFile: data}
	path := filepath.Join(t.TempDir(), "built.sftrace")
	if err := tr.Save(path); err != nil {
		t.Fatal(err)
	}
	r := stepfork(t, "", nil, "inspect", path)
	if want := "Code:        example.com/support (devel), revision 46b7ad0c4abd of 2026-03-14, modified, go1.26.1\n"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("exit %d, output\n%s\nwant the line %q", r.code, r.stdout, want)
	}
	r = stepfork(t, "", nil, "inspect", path, "--json")
	want := `"integrity":"verified","build":{"module":"example.com/support","version":"(devel)","revision":"46b7ad0c4abd65b7e0efec1149cdb0d7ddcb7ecd","time":"2026-03-14T09:30:00Z","modified":true,"go":"go1.26.1"},"timeline":`
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("exit %d, JSON\n%s\nwant %s", r.code, r.stdout, want)
	}
	if r := stepfork(t, "", nil, "inspect", vectors+"successful_run.sftrace"); strings.Contains(r.stdout, "Code:") {
		t.Errorf("a Python bundle shows a Code line:\n%s", r.stdout)
	}
}

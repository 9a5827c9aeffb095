package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

func TestValidateGolden(t *testing.T) {
	t.Parallel()
	cases := []goldenCase{
		{"validate/booking.txt", []string{"validate", booking}, 0},
		{"validate/booking-strict-integrity.txt", []string{"validate", booking, "--strict", "--verify-integrity"}, 0},
		{"validate/booking.json", []string{"validate", booking, "--json", "--verify-integrity"}, 0},
		{"validate/missing.txt", []string{"validate", "nope.sftrace"}, 2},
		{"validate/missing.json", []string{"validate", "nope.sftrace", "--json"}, 2},
		{"validate/partial_run-strict.txt", []string{"validate", vectors + "partial_run.sftrace"}, 1},
		{"validate/partial_run-partial.txt", []string{"validate", vectors + "partial_run.sftrace", "--partial"}, 0},
		{"validate/partial_run.json", []string{"validate", vectors + "partial_run.sftrace", "--json"}, 1},
		{"validate/legacy_v01-integrity.txt", []string{"validate", vectors + "legacy_v01.sftrace", "--verify-integrity"}, 3},
		{"validate/legacy_v01.txt", []string{"validate", vectors + "legacy_v01.sftrace"}, 0},
		{"validate/diff_baseline.txt", []string{"validate", vectors + "diff_baseline.sftrace", "--verify-integrity"}, 0},
		{"validate/diff_baseline-pedantic.txt", []string{"validate", vectors + "diff_baseline.sftrace", "--pedantic"}, 1},
	}
	for _, name := range []string{"successful_run", "failed_tool_run", "failed_llm_run"} {
		cases = append(cases, goldenCase{"validate/" + name + ".txt", []string{"validate", vectors + name + ".sftrace", "--verify-integrity"}, 0})
	}
	runGoldenCases(t, cases)
}

// TestValidateTampered: a changed byte in events.jsonl is a digest
// mismatch (exit 1); broken integrity metadata is exit 2.
func TestValidateTampered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tampered := filepath.Join(dir, "t.sftrace")
	copyBundle(t, booking, tampered)
	ev := filepath.Join(tampered, trace.EventsFile)
	data, _ := os.ReadFile(ev)
	os.WriteFile(ev, []byte(strings.Replace(string(data), "KTM", "KTX", 1)), 0o644)
	r := stepfork(t, "", nil, "validate", tampered, "--verify-integrity")
	if r.code != 1 || !strings.Contains(r.stdout, "Integrity: MISMATCH") || !strings.Contains(r.stdout, "events.jsonl       SHA-256 mismatch.") ||
		!strings.Contains(r.stdout, "✗ payload_hash_mismatch") {
		t.Errorf("tampered events: exit %d\n%s", r.code, r.stdout)
	}
	badMeta := filepath.Join(dir, "m.sftrace")
	copyBundle(t, booking, badMeta)
	os.WriteFile(filepath.Join(badMeta, trace.IntegrityFile), []byte("{"), 0o644)
	r = stepfork(t, "", nil, "validate", badMeta, "--verify-integrity")
	if r.code != 2 || !strings.Contains(r.stdout, "integrity.json is not valid JSON.") {
		t.Errorf("bad integrity.json: exit %d\n%s", r.code, r.stdout)
	}
}

// TestForkAtStepDocExamples runs every command of the fork-at-step spec's
// CLI section as written, on a copy of testdata/booking-agent.sftrace named
// failure.sftrace (and trace.sftrace), and checks the Fork Report.
func TestForkAtStepDocExamples(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyBundle(t, booking, filepath.Join(dir, "failure.sftrace"))
	copyBundle(t, booking, filepath.Join(dir, "trace.sftrace"))

	// $ stepfork fork failure.sftrace --at-step 2
	r := stepfork(t, dir, nil, "fork", "failure.sftrace", "--at-step", "2")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	golden(t, "fork/doc-example.txt", r.stdout)
	want := `Stepfork Fork

Original trace:  failure.sftrace
Agent:           booking-agent
Events:          15
Fork at step:    2

Forking trace...

╭─────────────── Fork Report ────────────────╮
│   Original Events     15                   │
│   Forked Events       3                    │
│   Fork Point Step     2                    │
│   Fork Point Event    evt_003              │
│   Events Excluded     12                   │
╰────────────────────────────────────────────╯

✓ Forked trace saved to: failure-forked.sftrace
`
	if r.stdout != want {
		t.Errorf("fork report:\n%s\nwant:\n%s", r.stdout, want)
	}
	forked, err := trace.Load(filepath.Join(dir, "failure-forked.sftrace"))
	if err != nil {
		t.Fatal(err)
	}
	if len(forked.Events) != 3 || forked.RunID == "run_booking_agent_0001" {
		t.Errorf("fork has %d events, run id %s", len(forked.Events), forked.RunID)
	}

	// $ stepfork validate forked.sftrace --strict (on the fork just made)
	r = stepfork(t, dir, nil, "validate", "failure-forked.sftrace", "--strict")
	checklist := "✓ Manifest valid\n✓ Event structure valid\n✓ Event IDs unique\n✓ Parent references valid\n✓ Run IDs consistent\n✓ Event count matches\n"
	if r.code != 0 || !strings.Contains(r.stdout, checklist) || !strings.HasSuffix(r.stdout, "\nValidation passed.\n") {
		t.Errorf("validate --strict: exit %d\n%s", r.code, r.stdout)
	}

	// The other command lines of the section.
	for _, tt := range []struct {
		args   []string
		events int
		out    string
	}{
		{[]string{"fork", "failure.sftrace", "--at-step", "5", "--output", "forked.sftrace"}, 6, "forked.sftrace"},
		{[]string{"fork", "trace.sftrace", "--at-event", "evt_005", "-o", "forked-event.sftrace"}, 5, "forked-event.sftrace"},
		{[]string{"fork", "failure.sftrace", "--at-step", "10", "-o", "test-step10.sftrace"}, 11, "test-step10.sftrace"},
		{[]string{"fork", "failure.sftrace", "--at-step", "8", "-o", "minimal.sftrace"}, 9, "minimal.sftrace"},
	} {
		r := stepfork(t, dir, nil, tt.args...)
		if r.code != 0 || !strings.HasSuffix(r.stdout, "✓ Forked trace saved to: "+tt.out+"\n") {
			t.Errorf("%v: exit %d\n%s%s", tt.args, r.code, r.stdout, r.stderr)
			continue
		}
		tr, err := trace.Load(filepath.Join(dir, tt.out))
		if err != nil || len(tr.Events) != tt.events {
			t.Errorf("%v: %v, %d events, want %d", tt.args, err, len(tr.Events), tt.events)
		}
		if v := stepfork(t, dir, nil, "validate", tt.out, "--strict", "--verify-integrity"); v.code != 0 {
			t.Errorf("%v: validate: exit %d\n%s", tt.args, v.code, v.stdout)
		}
	}
}

func TestForkOverridesAndErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyBundle(t, booking, filepath.Join(dir, "b.sftrace"))
	os.WriteFile(filepath.Join(dir, "ov.json"), []byte(`[{"event_id":"evt_003","output":{"plan":[]}}]`), 0o644)
	r := stepfork(t, dir, nil, "fork", "b.sftrace", "--at-step", "6", "-o", "o.sftrace",
		"--override", `4={"flights":[]}`, "--override-file", "ov.json", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	var res struct {
		Success          bool   `json:"success"`
		Path             string `json:"forked_trace_path"`
		ForkedEvents     int    `json:"forked_event_count"`
		OverridesApplied int    `json:"overrides_applied"`
		ParentRunID      string `json:"parent_run_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Path != "o.sftrace" || res.ForkedEvents != 7 || res.OverridesApplied != 2 || res.ParentRunID != "run_booking_agent_0001" {
		t.Errorf("result %+v", res)
	}
	tr, err := trace.Load(filepath.Join(dir, "o.sftrace"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Events[4].Output.Canonical(); got != `{"flights":[]}` {
		t.Errorf("step 4 output %s", got)
	}
	if got := tr.Events[2].Output.Canonical(); got != `{"plan":[]}` {
		t.Errorf("evt_003 output %s", got)
	}

	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"fork", "b.sftrace"}, 2, "stepfork fork: pass --at-step N or --at-event ID"},
		{[]string{"fork", "b.sftrace", "--at-step", "1", "--at-event", "evt_001"}, 2, "pass either --at-step or --at-event, not both"},
		{[]string{"fork", "b.sftrace", "--at-step", "-1"}, 2, `invalid value "-1" for flag -at-step: want a step number ≥ 0`},
		{[]string{"fork", "b.sftrace", "--at-step", "999", "-o", "x.sftrace"}, 2, "Fork failed.\nstep 999 not found in trace\n"},
		{[]string{"fork", "b.sftrace", "--at-step", "5", "-o", "x.sftrace", "--override", "3=1"}, 2,
			"invalid overrides: override targets step 3 (tool_call); only tool_result and llm_response can be overridden"},
		{[]string{"fork", "b.sftrace", "--at-step", "5", "--override", "4={bad"}, 2, "--override 4: the output is not valid JSON"},
		{[]string{"fork", "b.sftrace", "--at-step", "5", "--override", "nothing"}, 2, `--override "nothing": want STEP_OR_EVENT=JSON`},
		{[]string{"fork", "b.sftrace", "--at-step", "5", "--override-file", "missing.json"}, 2, "--override-file missing.json: open missing.json"},
		{[]string{"fork", "b.sftrace", "--at-step", "6", "-o", "o.sftrace"}, 1, "o.sftrace already exists; pass --overwrite to replace it"},
		{[]string{"fork", "nope.sftrace", "--at-step", "1"}, 2, "Unable to read trace."},
	}
	for _, tt := range tests {
		r := stepfork(t, dir, nil, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, tt.code, tt.stderr)
		}
	}
	if r := stepfork(t, dir, nil, "fork", "b.sftrace", "--at-step", "6", "-o", "o.sftrace", "--overwrite"); r.code != 0 {
		t.Errorf("--overwrite: exit %d %s", r.code, r.stderr)
	}
}

func TestDiffGolden(t *testing.T) {
	t.Parallel()
	base, changed := vectors+"diff_baseline.sftrace", vectors+"diff_changed.sftrace"
	runGoldenCases(t, []goldenCase{
		{"diff/golden-position.json", []string{"diff", base, changed, "--align", "position", "--json"}, 1},
		{"diff/golden-position.txt", []string{"diff", base, changed, "--align=position"}, 1},
		{"diff/golden-lcs.txt", []string{"diff", base, changed}, 1},
		{"diff/golden-lcs.json", []string{"diff", base, changed, "--json"}, 1},
		{"diff/same.txt", []string{"diff", booking, booking}, 0},
		{"diff/same-position.json", []string{"diff", booking, booking, "--json", "--align", "position"}, 0},
		{"diff/unreadable.txt", []string{"diff", booking, "nope.sftrace"}, 2},
		{"diff/unreadable.json", []string{"diff", "nope.sftrace", booking, "--json"}, 2},
	})
}

// TestDiffPositionParity: the worked example of stepfork-format.md §6.4,
// byte for byte (with the paths as given on the command line).
func TestDiffPositionParity(t *testing.T) {
	t.Parallel()
	r := stepfork(t, "", nil, "diff", vectors+"diff_baseline.sftrace", vectors+"diff_changed.sftrace", "--align", "position", "--json")
	want := `{"equivalent":false,` +
		`"baseline":{"path":"` + vectors + `diff_baseline.sftrace","agent_name":"golden-diff-agent","run_id":"run_diff_baseline","status":"running","events":4},` +
		`"candidate":{"path":"` + vectors + `diff_changed.sftrace","agent_name":"golden-diff-agent","run_id":"run_diff_changed","status":"running","events":4},` +
		`"steps":[` +
		`{"index":0,"kind":"changed","step_type":"tool","label":"flight_search","fields":["input","output","status"],` +
		`"changes":[{"path":"output.price","kind":"changed","expected":320,"actual":450},` +
		`{"path":"output.selected_flight","kind":"changed","expected":"B","actual":"A"}]},` +
		`{"index":1,"kind":"changed","step_type":"run","label":"run","fields":["output","run_status"],` +
		`"changes":[{"path":"output.selected_flight","kind":"changed","expected":"B","actual":"A"}]}],` +
		`"added":0,"removed":0,"changed":2,"unchanged":0}` + "\n"
	if r.code != 1 || r.stdout != want {
		t.Errorf("exit %d\ngot  %s\nwant %s", r.code, r.stdout, want)
	}
}

func TestDiffOfFork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyBundle(t, booking, filepath.Join(dir, "b.sftrace"))
	if r := stepfork(t, dir, nil, "fork", "b.sftrace", "--at-step", "14", "-o", "same.sftrace"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := stepfork(t, dir, nil, "diff", "b.sftrace", "same.sftrace"); r.code != 0 || !strings.HasSuffix(r.stdout, "Result: BEHAVIOR EQUIVALENT\n") {
		t.Errorf("null fork: exit %d\n%s", r.code, r.stdout)
	}
	if r := stepfork(t, dir, nil, "fork", "b.sftrace", "--at-step", "14", "-o", "changed.sftrace", "--override", `9={"available":false}`); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := stepfork(t, dir, nil, "diff", "b.sftrace", "changed.sftrace")
	if r.code != 1 || !strings.Contains(r.stdout, "output.available") || !strings.Contains(r.stdout, "^ diverged here") {
		t.Errorf("override fork: exit %d\n%s", r.code, r.stdout)
	}
}

func TestPointsGolden(t *testing.T) {
	t.Parallel()
	runGoldenCases(t, []goldenCase{
		{"points/booking.txt", []string{"points", booking}, 0},
		{"points/booking.json", []string{"points", booking, "--json"}, 0},
		{"points/failed_tool_run.txt", []string{"points", vectors + "failed_tool_run.sftrace"}, 0},
		{"points/missing.txt", []string{"points", "nope.sftrace"}, 2},
	})
}

func TestPointsNodesAndOccurrences(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("nodes")
	b.RunStart(nil)
	for range 2 {
		b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "research", Phase: trace.PhaseEnter}))
		b.Tool("search", map[string]any{"q": 1}, map[string]any{"r": 1})
		b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "research", Phase: trace.PhaseExit, Status: trace.NodeStatusOK}))
	}
	b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerDecision, Name: "route", Kind: trace.KindDecision, Value: trace.StringValue("write")}))
	b.RunEnd(trace.RunCompleted, nil)
	tr := b.MustTrace()
	var got []string
	for _, p := range forkPoints(tr) {
		got = append(got, strings.Join([]string{p.kind, p.name, strings.Repeat("#", p.occurrence), p.node}, "|"))
	}
	want := []string{
		"run_start|run_start|#|",
		"node_enter|research|#|", "tool_call|search|#|research", "tool_result|search|#|research", "node_exit|research|#|research",
		"node_enter|research|##|", "tool_call|search|##|research", "tool_result|search|##|research", "node_exit|research|##|research",
		"decision|route|#|", "run_end|completed|#|",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("points:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMinimize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A run that fails at step 5 and keeps working afterwards.
	b := trace.NewBuilder("late-agent")
	start := b.RunStart(map[string]any{"q": "x"})
	call := b.ToolCall("charge", map[string]any{"amount": 5})
	b.ToolFailure(call, "CardDeclined", "declined")
	b.Error(start, "CardDeclined", "run failed: declined", nil)
	b.Tool("notify", map[string]any{"to": "ops"}, map[string]any{"sent": true})
	b.State("retries", 0, 1)
	b.RunEnd(trace.RunCompleted, nil)
	tr := b.MustTrace() // the Builder ends a failed run at its failure, so fail it by hand
	tr.Status, tr.Events[len(tr.Events)-1].RunStatus = trace.RunFailed, trace.RunFailed
	tr.Failure = &trace.Failure{Type: "CardDeclined", Message: "run failed: declined", Step: 4}
	if err := tr.Save(filepath.Join(dir, "late.sftrace")); err != nil {
		t.Fatal(err)
	}
	r := stepfork(t, dir, nil, "minimize", "late.sftrace")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	out := regexp.MustCompile(`run_[0-9a-f]{32}`).ReplaceAllString(r.stdout, "run_X")
	golden(t, "minimize/late.txt", out)
	for _, want := range []string{"Cut 3 events after the failure:", "step 5   tool_call    notify", "step 7   state_change retries",
		"step 1   tool_call    charge", "✓ Minimized trace saved to: late-minimized.sftrace"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	min, err := trace.Load(filepath.Join(dir, "late-minimized.sftrace"))
	if err != nil {
		t.Fatal(err)
	}
	if len(min.Events) != 6 || min.Status != trace.RunFailed || min.Failure == nil || min.Failure.Step != 4 ||
		min.Events[5].Type != trace.RunEnd {
		t.Errorf("minimized: %d events, status %s, failure %+v", len(min.Events), min.Status, min.Failure)
	}
	if v := stepfork(t, dir, nil, "validate", "late-minimized.sftrace", "--verify-integrity", "--pedantic"); v.code != 0 {
		t.Errorf("minimized trace does not validate:\n%s", v.stdout)
	}
	if r := stepfork(t, dir, nil, "minimize", "late.sftrace"); r.code != 1 || !strings.Contains(r.stderr, "already exists; pass --overwrite") {
		t.Errorf("second minimize: exit %d %s", r.code, r.stderr)
	}
	r = stepfork(t, "", nil, "minimize", vectors+"successful_run.sftrace", "-o", filepath.Join(dir, "s.sftrace"))
	if r.code != 2 || !strings.Contains(r.stderr, "did not fail: it has no error event (status completed).") {
		t.Errorf("successful run: exit %d %s", r.code, r.stderr)
	}
	r = stepfork(t, "", nil, "minimize", booking, "-o", filepath.Join(dir, "bk.sftrace"), "--json")
	var res struct {
		Cut   []json.RawMessage `json:"cut"`
		Chain []struct {
			Step int `json:"step"`
		} `json:"causal_chain"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("exit %d %v: %s", r.code, err, r.stdout)
	}
	if len(res.Cut) != 0 || len(res.Chain) != 4 || res.Chain[0].Step != 10 {
		t.Errorf("booking minimize: cut %d, chain %+v", len(res.Cut), res.Chain)
	}
}

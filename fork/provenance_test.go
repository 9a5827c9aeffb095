package fork

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/trace"
)

// TestForkJSONBytes pins the fork.json a static fork writes: the schema the
// package doc describes.
func TestForkJSONBytes(t *testing.T) {
	t.Parallel()
	tr := getValue(t)
	tr.Path = "original.sftrace" // recorded as the parent trace path
	res, err := Trace(tr, ThroughStep(2), testOpts{
		Overrides:  []TraceOption{Override(OnStep(2), map[string]any{"value": 999, "note": "<&>"})},
		OutputPath: filepath.Join(t.TempDir(), "forked.sftrace"),
		RunID:      "run_forked",
		Now:        func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC) },
	}.list()...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(res.Path, infoFile))
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "schema_version": 1,
  "kind": "static",
  "run_id": "run_forked",
  "parent_run_id": "run_test-agent",
  "parent_trace_path": "original.sftrace",
  "fork_point": "step 2",
  "fork_point_step": 2,
  "fork_point_event_id": "evt_003",
  "fork_timestamp": "2026-05-01T12:00:00.123456Z",
  "overrides_applied": 1,
  "overrides": [
    {
      "target": "step 2",
      "step": 2,
      "event_id": "evt_003",
      "type": "tool_result",
      "output": {
        "note": "<&>",
        "value": 999
      },
      "output_hash": "` + trace.Hash(trace.MustParse(`{"note":"<&>","value":999}`)) + `",
      "original_output_hash": "` + trace.Hash(trace.MustParse(`{"value":42}`)) + `"
    }
  ]
}
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("fork.json (-want +got):\n%s", diff)
	}
}

// TestForkOfForkKeepsChain forks a fork of a fork, through paths and loaded
// traces, and checks that every fork keeps the whole chain back to the
// original recording (cycgraph hazard H3: forking a fork must not lose what
// the parent inherited).
func TestForkOfForkKeepsChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	orig := copyBundle(t, bookingAgentPath, dir, "failure.sftrace")

	// fork 1: a path, at step 13, with the failed booking overridden.
	r1, err := Trace(orig, ThroughStep(13), testOpts{Overrides: []TraceOption{Override(OnEvent("evt_012"), map[string]any{"confirmation": "PNR-7QX2"})}}.list()...)
	if err != nil {
		t.Fatal(err)
	}
	// fork 2: the path of fork 1, at step 11.
	r2, err := Trace(r1.Path, ThroughStep(11), testOpts{}.list()...)
	if err != nil {
		t.Fatal(err)
	}
	// fork 3: fork 2 loaded, at an event.
	f2, err := trace.Load(r2.Path)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := Trace(f2, ThroughEvent("evt_006"), testOpts{OutputPath: filepath.Join(dir, "third.sftrace")}.list()...)
	if err != nil {
		t.Fatal(err)
	}
	// fork 4: in memory only, from fork 3's unsaved engine output.
	f4, i4, err := forkMem(r3.Trace, ThroughStep(2), testOpts{})
	if err != nil {
		t.Fatal(err)
	}

	infos := make([]*Info, 3)
	for n, p := range []string{r1.Path, r2.Path, r3.Path} {
		checkStrict(t, p)
		tr, err := trace.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if infos[n], err = ReadInfo(tr); err != nil {
			t.Fatal(err)
		}
	}
	parentRun := "run_booking_agent_0001"
	wantChain := []string{i4.RunID, infos[2].RunID, infos[1].RunID, infos[0].RunID, parentRun}
	if got := i4.Chain(); !slices.Equal(got, wantChain) {
		t.Errorf("chain %v, want %v", got, wantChain)
	}
	// Each ancestor is exactly the provenance its fork wrote, nearest first.
	for n, anc := range i4.Ancestors {
		want := infos[2-n].withoutAncestors()
		if diff := cmp.Diff(want, anc); diff != "" {
			t.Errorf("ancestors[%d] (-fork's own +recorded):\n%s", n, diff)
		}
	}
	if len(i4.Ancestors) != 3 {
		t.Errorf("%d ancestors, want 3", len(i4.Ancestors))
	}
	if infos[1].ParentTracePath != r1.Path || infos[2].ParentTracePath != r2.Path || infos[0].ParentTracePath != orig {
		t.Errorf("parent paths %q %q %q", infos[0].ParentTracePath, infos[1].ParentTracePath, infos[2].ParentTracePath)
	}
	// The override made by fork 1 is still visible in every descendant, both
	// in the events and in the provenance.
	f1, err := trace.Load(r1.Path)
	if err != nil {
		t.Fatal(err)
	}
	if f4.Events[1].Output != f1.Events[1].Output || i4.Ancestors[2].Overrides[0].EventID != "evt_012" {
		t.Errorf("fork 1's override lost down the chain")
	}
	if got := f2.Events[11].Output; got != trace.MustParse(`{"confirmation":"PNR-7QX2"}`) {
		t.Errorf("fork 2 step 11 output %s; want fork 1's override", got)
	}
	// fork 4 round-trips through fork.json.
	p4 := saveTemp(t, f4, "fourth.sftrace")
	tr4, err := trace.Load(p4)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadInfo(tr4)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(i4, back); diff != "" {
		t.Errorf("fork 4 provenance after save and load (-made +read):\n%s", diff)
	}
}

func TestReadInfoNotFork(t *testing.T) {
	t.Parallel()
	tr, err := trace.Load(bookingAgentPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadInfo(tr); !errors.Is(err, ErrNotFork) {
		t.Errorf("ReadInfo of an original: %v; want ErrNotFork", err)
	}
}

// TestInfoRoundTripCounterfactual: the schema carries what a counterfactual
// fork records (kind, changes in wire form, policy, group id).
func TestInfoRoundTripCounterfactual(t *testing.T) {
	t.Parallel()
	in := Info{
		Kind: KindCounterfactual, RunID: "run_v", ParentRunID: "run_b", ParentTracePath: "base.sftrace",
		ForkPoint: "before 'write' execution 1", ForkPointStep: 6, ForkPointEventID: "evt_007",
		ForkTimestamp: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		Changes:       trace.MustParse(`[{"kind":"prompt","target":"write","text":"Be brief."}]`),
		Policy:        "replay", GroupID: "sweep_1",
		Ancestors: []Info{{Kind: KindStatic, RunID: "run_b", ParentRunID: "run_a", ForkPoint: "step 9",
			ForkPointStep: 9, ForkPointEventID: "evt_010", ForkTimestamp: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
	}
	data, err := in.marshal()
	if err != nil {
		t.Fatal(err)
	}
	out, err := parseInfo(data, "run_v")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
}

func TestReadInfoErrors(t *testing.T) {
	t.Parallel()
	good := func() map[string]string {
		return map[string]string{
			"schema_version": `1`, "kind": `"static"`, "run_id": `"run_f"`, "parent_run_id": `"run_p"`,
			"parent_trace_path": `null`, "fork_point": `"step 1"`, "fork_point_step": `1`,
			"fork_point_event_id": `"evt_002"`, "fork_timestamp": `"2026-01-01T00:00:00Z"`,
			"overrides_applied": `0`, "overrides": `[]`,
		}
	}
	encode := func(m map[string]string) string {
		var parts []string
		for k, v := range m {
			parts = append(parts, `"`+k+`":`+v)
		}
		slices.Sort(parts)
		return "{" + strings.Join(parts, ",") + "}"
	}
	with := func(k, v string) string { m := good(); m[k] = v; return encode(m) }
	with2 := func(k1, v1, k2, v2 string) string { m := good(); m[k1], m[k2] = v1, v2; return encode(m) }
	without := func(k string) string { m := good(); delete(m, k); return encode(m) }
	tests := []struct {
		name, data, want string
	}{
		{"not JSON", `{"schema_version": 1`, "fork.json: invalid JSON"},
		{"unknown field", with("extra", "1"), `fork.json: invalid JSON: json: unknown field "extra"`},
		{"newer schema", with("schema_version", "2"), "fork.json: schema_version 2 is not supported (this version of stepfork reads 1)"},
		{"no schema", without("schema_version"), "fork.json: schema_version is missing"},
		{"kind", with("kind", `"magic"`), `fork.json: kind "magic" is not one of "static", "counterfactual"`},
		{"other run", with("run_id", `"run_other"`), "fork.json: it describes run run_other, but the trace is run run_f; it was copied from another bundle"},
		{"no parent", without("parent_run_id"), "fork.json: parent_run_id must be a non-empty string"},
		{"no step", without("fork_point_step"), "fork.json: fork_point_step must be an integer >= 0"},
		{"bad time", with("fork_timestamp", `"yesterday"`), `fork.json: fork_timestamp "yesterday" is not an RFC 3339 time`},
		{"count", with("overrides_applied", "2"), "fork.json: overrides_applied is 2 but 0 overrides are listed"},
		{"override type", with2("overrides_applied", "1", "overrides", `[{"target":"step 1","step":1,"event_id":"evt_002","type":"tool_call","output":1,"output_hash":"","original_output_hash":""}]`),
			`fork.json: overrides[0].type "tool_call" is not tool_result or llm_response`},
		{"override output", with2("overrides_applied", "1", "overrides", `[{"target":"step 1","step":1,"event_id":"evt_002","type":"tool_result","output_hash":"","original_output_hash":""}]`),
			`fork.json: overrides[0] requires event_id and output`},
		{"applied count", with2("changes", `[{"kind":"param","name":"x","value":1}]`, "applied", `[{"description":"param 'x' → 1","count":1,"steps":[3]},{"description":"","count":0,"steps":[]}]`),
			"fork.json: applied lists 2 change(s) but changes lists 1"},
		{"applied steps", with2("changes", `[{"kind":"param","name":"x","value":1}]`, "applied", `[{"description":"param 'x' → 1","count":1,"steps":[3,4]}]`),
			"fork.json: applied[0] says 1 use(s) at 2 step(s)"},
		{"broken chain", with("ancestors", `[{"schema_version":1,"kind":"static","run_id":"run_x","parent_run_id":"run_o","parent_trace_path":null,"fork_point":"step 1","fork_point_step":1,"fork_point_event_id":"e","fork_timestamp":"2026-01-01T00:00:00Z","overrides_applied":0,"overrides":[]}]`),
			"fork.json: ancestors[0] is run run_x, but the chain expects run run_p (the parent of the entry before it)"},
		{"bad ancestor", with("ancestors", `[{"schema_version":1,"kind":"static","run_id":"run_p","parent_run_id":"","parent_trace_path":null,"fork_point":"step 1","fork_point_step":1,"fork_point_event_id":"e","fork_timestamp":"2026-01-01T00:00:00Z","overrides_applied":0,"overrides":[]}]`),
			"fork.json: ancestors[0].parent_run_id must be a non-empty string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := &trace.Trace{Manifest: trace.Manifest{RunID: "run_f"}, Extras: map[string][]byte{infoFile: []byte(tt.data)}}
			_, err := ReadInfo(tr)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("ReadInfo error\n got: %v\nwant prefix: %s", err, tt.want)
			}
		})
	}
	// The good record itself reads.
	tr := &trace.Trace{Manifest: trace.Manifest{RunID: "run_f"}, Extras: map[string][]byte{infoFile: []byte(encode(good()))}}
	if _, err := ReadInfo(tr); err != nil {
		t.Errorf("good record: %v", err)
	}
}

// TestForkJSONIntegrity: fork.json is covered by integrity.json, and a fork of
// a bundle whose fork.json is broken is refused rather than losing the chain.
func TestForkJSONIntegrity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := copyBundle(t, bookingAgentPath, dir, "failure.sftrace")
	res, err := Trace(src, ThroughStep(5), testOpts{}.list()...)
	if err != nil {
		t.Fatal(err)
	}
	fj := filepath.Join(res.Path, infoFile)
	data, err := os.ReadFile(fj)
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(data), `"fork_point_step": 5`, `"fork_point_step": 4`, 1)
	if err := os.WriteFile(fj, []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	ir := trace.VerifyIntegrity(res.Path)
	if ir.Status != trace.IntegrityMismatch || len(ir.Issues) != 1 || ir.Issues[0].File != infoFile {
		t.Errorf("integrity after tampering with fork.json: %+v", ir)
	}
	if err := os.WriteFile(fj, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Trace(res.Path, ThroughStep(2), testOpts{}.list()...)
	if err == nil || !strings.HasPrefix(err.Error(), "cannot fork: the trace's fork.json is invalid: invalid JSON") {
		t.Errorf("fork of a bundle with a broken fork.json: %v", err)
	}
}

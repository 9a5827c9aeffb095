package fork

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// vectorDir holds the shared Python-written bundles (see trace/bundle_test.go).
const vectorDir = "../testdata/vectors"

var fixedNow = func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) }

// tenSteps is the spec's "original trace with 10 events (steps 0-9)":
//
//	0 run_start  1 tool_call lookup  2 tool_result lookup  3 state_change
//	4 tool_call quote  5 tool_result quote  6 llm_request  7 llm_response
//	8 state_change  9 run_end completed
func tenSteps(t testing.TB) *trace.Trace {
	t.Helper()
	b := trace.NewBuilder("ten-agent").RunID("run_ten")
	b.RunStart(map[string]any{"task": "quote a trip"})
	b.Tool("lookup", map[string]any{"city": "Pokhara"}, map[string]any{"id": 7})
	b.State("city", nil, "Pokhara")
	b.Tool("quote", map[string]any{"id": 7}, map[string]any{"status": "error", "value": 0})
	b.LLM("", "gpt-test", map[string]any{"q": "summarize"}, map[string]any{"text": "no quote"})
	b.State("summary", nil, "no quote")
	b.RunEnd(trace.RunCompleted, map[string]any{"answer": "no quote"})
	tr := b.MustTrace()
	if len(tr.Events) != 10 {
		t.Fatalf("tenSteps has %d events", len(tr.Events))
	}
	return tr
}

// getValue is the spec's complete example: get_value(42) recorded.
func getValue(t testing.TB) *trace.Trace {
	t.Helper()
	b := trace.NewBuilder("test-agent")
	b.RunStart(nil)
	b.Tool("get_value", map[string]any{"x": 42}, map[string]any{"value": 42})
	b.RunEnd(trace.RunCompleted, nil)
	return b.MustTrace()
}

// copyBundle copies a bundle directory into dir under name.
func copyBundle(t testing.TB, src, dir, name string) string {
	t.Helper()
	dst := filepath.Join(dir, name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// saveTemp saves tr as a bundle in a temporary directory and returns its path.
func saveTemp(t testing.TB, tr *trace.Trace, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := tr.Save(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkStrict fails the test unless the bundle passes strict validation with
// integrity and payload-hash checks.
func checkStrict(t testing.TB, path string) {
	t.Helper()
	if rep := trace.ValidateBundle(context.Background(), path, trace.CheckIntegrity()); !rep.Valid() {
		t.Errorf("%s is not strictly valid: %v", path, rep.Err())
	}
}

// checkForkOf checks the invariants every fork keeps: a new run id on the
// manifest and every event, the parent's event ids and (unless overridden)
// payloads in order, hashes that match.
func checkForkOf(t testing.TB, parent, forked *trace.Trace, overridden ...string) {
	t.Helper()
	if forked.RunID == parent.RunID || forked.RunID == "" {
		t.Errorf("fork run id %q; want a new one (parent %q)", forked.RunID, parent.RunID)
	}
	for i := range forked.Events {
		f, p := &forked.Events[i], &parent.Events[i]
		if f.RunID != forked.RunID {
			t.Errorf("event %s has run id %s, want the fork's %s", f.ID, f.RunID, forked.RunID)
		}
		if f.ID != p.ID || f.Step != p.Step || f.ParentID != p.ParentID || f.Type != p.Type {
			t.Errorf("event %d is %s/%d/%s, want the parent's %s/%d/%s", i, f.ID, f.Step, f.Type, p.ID, p.Step, p.Type)
		}
		if !slices.Contains(overridden, f.ID) && (f.Output != p.Output || f.Input != p.Input) {
			t.Errorf("event %s payload changed without an override", f.ID)
		}
		if in, out := f.ExpectedHashes(); f.InputHash != in || f.OutputHash != out {
			t.Errorf("event %s hashes not recomputed", f.ID)
		}
	}
	if rep := trace.Validate(context.Background(), forked, trace.CheckIntegrity()); !rep.Valid() {
		t.Errorf("fork is not strictly valid: %v", rep.Err())
	}
}

func TestPointErrors(t *testing.T) {
	t.Parallel()
	tr := tenSteps(t)
	tests := []struct {
		name  string
		point Cut
		want  string
		is    error
	}{
		{"zero cut is step 0", Cut{}, "", nil},
		{"step not found", ThroughStep(999), "step 999 not found in trace", ErrUnresolved},
		{"negative step", ThroughStep(-1), "step -1 not found in trace; steps start at 0", ErrUnresolved},
		{"event not found", ThroughEvent("evt_nope"), "event evt_nope not found in trace", ErrUnresolved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forked, _, err := forkMem(tr, tt.point, testOpts{})
			if tt.is == nil {
				if err != nil || len(forked.Events) != 1 {
					t.Fatalf("fork through the zero Cut: %v; want run_start alone", err)
				}
				return
			}
			checkErr(t, err, tt.want, tt.is)
		})
	}
}

// checkErr checks an error's exact text and its sentinel.
func checkErr(t testing.TB, err error, want string, is error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %q", want)
	}
	if err.Error() != want {
		t.Errorf("error\n got: %s\nwant: %s", err, want)
	}
	if !errors.Is(err, is) {
		t.Errorf("error %q does not match %v", err, is)
	}
}

func TestForkAtStepKeepsPrefix(t *testing.T) {
	t.Parallel()
	tr := tenSteps(t)
	tests := []struct {
		point      Cut
		wantEvents int
		wantStep   int
		wantID     string
		wantStatus trace.RunStatus
	}{
		{ThroughStep(5), 6, 5, "evt_006", trace.RunRunning},
		{ThroughStep(0), 1, 0, "evt_001", trace.RunRunning},
		{ThroughStep(9), 10, 9, "evt_010", trace.RunCompleted},
		{ThroughEvent("evt_004"), 4, 3, "evt_004", trace.RunRunning},
		{ThroughEvent("evt_010"), 10, 9, "evt_010", trace.RunCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.point.String(), func(t *testing.T) {
			t.Parallel()
			forked, info, err := forkMem(tr, tt.point, testOpts{RunID: "run_fork", Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			if len(forked.Events) != tt.wantEvents {
				t.Fatalf("fork has %d events, want %d", len(forked.Events), tt.wantEvents)
			}
			checkForkOf(t, tr, forked)
			if info.ForkPointStep != tt.wantStep || info.ForkPointEventID != tt.wantID {
				t.Errorf("fork point %d/%s, want %d/%s", info.ForkPointStep, info.ForkPointEventID, tt.wantStep, tt.wantID)
			}
			if forked.Status != tt.wantStatus || forked.Totals.Events != tt.wantEvents {
				t.Errorf("manifest status %s, totals.events %d; want %s, %d", forked.Status, forked.Totals.Events, tt.wantStatus, tt.wantEvents)
			}
			if info.ParentRunID != "run_ten" || info.RunID != "run_fork" || forked.RunID != "run_fork" || info.Kind != KindStatic {
				t.Errorf("info %+v", info)
			}
			if !info.ForkTimestamp.Equal(fixedNow()) || info.ForkPoint != tt.point.String() {
				t.Errorf("fork timestamp %v, point %q", info.ForkTimestamp, info.ForkPoint)
			}
			if _, ok := forked.Extras[infoFile]; !ok {
				t.Errorf("the fork has no %s", infoFile)
			}
		})
	}
}

// TestForkBookingAgent is the spec's CLI example: `stepfork fork
// failure.sftrace --at-step 2` of the 15-event booking-agent failure.
func TestForkBookingAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := copyBundle(t, bookingAgentPath, dir, "failure.sftrace")
	res, err := Trace(src, ThroughStep(2), testOpts{}.list()...)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "failure-forked.sftrace")
	if res.Path != want {
		t.Errorf("path %q; want %q", res.Path, want)
	}
	if res.OriginalEventCount != 15 || res.ForkedEventCount != 3 || res.Trace != nil ||
		res.Info.ForkPointStep != 2 || res.Info.ForkPointEventID != "evt_003" || res.Info.OverridesApplied != 0 {
		t.Errorf("result %+v", res)
	}
	checkStrict(t, want)
	got, err := trace.Load(want)
	if err != nil {
		t.Fatal(err)
	}
	parent, err := trace.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	checkForkOf(t, parent, got)
	// The failure happened after step 2: the fork is an unfinished run.
	if got.Status != trace.RunRunning || got.Failure != nil || got.Totals.DurationMS != nil {
		t.Errorf("fork manifest status %s failure %v duration %v; want running, none, null", got.Status, got.Failure, got.Totals.DurationMS)
	}
	if got.Totals.LLMCalls != 1 || got.Totals.ToolCalls != 0 || got.Totals.CostUSD == nil || *got.Totals.CostUSD != 0.000044 {
		t.Errorf("fork totals %+v; want 1 llm call, 0 tool calls, cost 0.000044", got.Totals)
	}
	info, err := ReadInfo(got)
	if err != nil {
		t.Fatal(err)
	}
	if info.ParentTracePath != src || info.ParentRunID != "run_booking_agent_0001" || info.ForkPointEventID != "evt_003" {
		t.Errorf("provenance %+v", info)
	}
	// fork.json is covered by integrity.json.
	ir := trace.VerifyIntegrity(want)
	if ir.Status != trace.IntegrityVerified || !slices.Contains(ir.VerifiedFiles, infoFile) {
		t.Errorf("integrity %+v; want fork.json verified", ir)
	}
}

// TestForkFailedRunKeepsFailure forks the booking-agent at and past its
// failure: with run_end the manifest keeps its failure; with the errors but
// without run_end it is an unfinished run. Both pass strict validation.
func TestForkFailedRunKeepsFailure(t *testing.T) {
	t.Parallel()
	tr, err := trace.Load(bookingAgentPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		step   int
		status trace.RunStatus
	}{{11, trace.RunRunning}, {12, trace.RunRunning}, {13, trace.RunRunning}, {14, trace.RunFailed}} {
		forked, _, err := forkMem(tr, ThroughStep(tt.step), testOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if forked.Status != tt.status || (forked.Failure != nil) != (tt.status == trace.RunFailed) {
			t.Errorf("step %d: status %s failure %v; want %s", tt.step, forked.Status, forked.Failure, tt.status)
		}
		if tt.status == trace.RunFailed && (*forked.Failure != *tr.Failure || *forked.Totals.DurationMS != 14000) {
			t.Errorf("step %d: failure %+v totals %+v; want the parent's", tt.step, forked.Failure, forked.Totals)
		}
		p := saveTemp(t, forked, "f.sftrace")
		checkStrict(t, p)
	}
}

// sources runs a test against both kinds of Source: the loaded trace and the
// path of its bundle. The fork is saved in a temporary directory unless the
// test names an output.
func sources(t *testing.T, tr *trace.Trace, f func(t *testing.T, fork func(Cut, testOpts) (*Result, error))) {
	t.Helper()
	path := saveTemp(t, tr.Clone(), "parent.sftrace") // Save sets Path: keep tr unchanged
	t.Run("trace", func(t *testing.T) {
		t.Parallel()
		f(t, func(p Cut, o testOpts) (*Result, error) {
			if o.OutputPath == "" {
				o.OutputPath = filepath.Join(t.TempDir(), "out.sftrace")
			}
			return Trace(tr, p, o.list()...)
		})
	})
	t.Run("path", func(t *testing.T) {
		t.Parallel()
		f(t, func(p Cut, o testOpts) (*Result, error) {
			if o.OutputPath == "" {
				o.OutputPath = filepath.Join(t.TempDir(), "out.sftrace")
			}
			return Trace(path, p, o.list()...)
		})
	})
}

func TestOverrideErrors(t *testing.T) {
	t.Parallel()
	tr := tenSteps(t)
	tests := []struct {
		name      string
		point     Cut
		overrides []TraceOption
		want      string
		is        error
	}{
		{"step beyond the trace", ThroughStep(5), []TraceOption{Override(OnStep(999), map[string]any{})},
			"invalid overrides: override targets step 999 but trace only has 10 steps", ErrInvalidChange},
		{"not overridable", ThroughStep(5), []TraceOption{Override(OnStep(1), map[string]any{})},
			"invalid overrides: override targets step 1 (tool_call); only tool_result and llm_response can be overridden", ErrInvalidChange},
		{"run_start not overridable", ThroughStep(5), []TraceOption{Override(OnStep(0), 1)},
			"invalid overrides: override targets step 0 (run_start); only tool_result and llm_response can be overridden", ErrInvalidChange},
		{"llm_request not overridable by id", ThroughStep(9), []TraceOption{Override(OnEvent("evt_007"), 1)},
			"invalid overrides: override targets event evt_007 (llm_request); only tool_result and llm_response can be overridden", ErrInvalidChange},
		{"duplicate step", ThroughStep(5), []TraceOption{Override(OnStep(5), 1), Override(OnStep(5), 2)},
			"duplicate override for step 5", ErrConflict},
		{"duplicate event", ThroughStep(5), []TraceOption{Override(OnEvent("evt_006"), 1), Override(OnEvent("evt_006"), 2)},
			"duplicate override for event evt_006", ErrConflict},
		{"unknown event", ThroughStep(5), []TraceOption{Override(OnEvent("evt_nope"), 1)},
			"invalid overrides: override targets event evt_nope, which is not in the trace", ErrInvalidChange},
		{"step beyond the fork point", ThroughStep(2), []TraceOption{Override(OnStep(5), 1)},
			"invalid overrides: override targets step 5 but the fork ends at step 2 (fork point event evt_003); fork at step 5 or later, or drop the override", ErrInvalidChange},
		{"event beyond the fork point", ThroughEvent("evt_003"), []TraceOption{Override(OnEvent("evt_008"), 1)},
			"invalid overrides: override targets event evt_008 (step 7, llm_response) but the fork ends at step 2 (fork point event evt_003); fork at step 7 or later, or drop the override", ErrInvalidChange},
		{"negative step", ThroughStep(5), []TraceOption{Override(OnStep(-2), 1)},
			"invalid overrides: override targets step -2; steps start at 0", ErrInvalidChange},
		{"a call the fork does not keep", ThroughStep(5), []TraceOption{Override(OnCall("quote", 2), 1)},
			"invalid overrides: override targets 'quote' call 2, but the fork keeps 1 such call(s) (the fork ends at step 5 (fork point event evt_006))", ErrInvalidChange},
		{"a call never made", ThroughStep(5), []TraceOption{Override(OnCall("nope", 0), 1)},
			"invalid overrides: override targets every 'nope' call, but the fork keeps 0 such call(s) (the fork ends at step 5 (fork point event evt_006))", ErrInvalidChange},
		{"a call whose result is cut", ThroughStep(4), []TraceOption{Override(OnCall("quote", 1), 1)},
			"invalid overrides: override targets 'quote' call 1, but the fork does not keep its result (the fork ends at step 4 (fork point event evt_005))", ErrInvalidChange},
		{"duplicate call", ThroughStep(5), []TraceOption{Override(OnCall("quote", 1), 1), Override(OnCall("quote", 1), 2)},
			"duplicate override for 'quote' call 1", ErrConflict},
		{"absent output", ThroughStep(5), []TraceOption{Override(OnStep(5), trace.Value{})},
			"invalid overrides: override of step 5 has no output (an absent trace.Value); use trace.NullValue for null", ErrInvalidChange},
		{"every problem reported", ThroughStep(5), []TraceOption{Override(OnStep(1), 1), Override(OnStep(999), 1), Override(OnEvent("evt_x"), 1)},
			"invalid overrides: override targets event evt_x, which is not in the trace; override targets step 1 (tool_call); only tool_result and llm_response can be overridden; override targets step 999 but trace only has 10 steps", ErrInvalidChange},
		{"fork point checked first", ThroughStep(999), []TraceOption{Override(OnStep(999), 1)},
			"step 999 not found in trace", ErrUnresolved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sources(t, tr, func(t *testing.T, fork func(Cut, testOpts) (*Result, error)) {
				out := filepath.Join(t.TempDir(), "never.sftrace")
				res, err := fork(tt.point, testOpts{Overrides: tt.overrides, OutputPath: out})
				checkErr(t, err, tt.want, tt.is)
				if res != nil {
					t.Errorf("result %+v with the error; want nil", res)
				}
				if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a failed fork wrote %s (stat: %v)", out, err)
				}
			})
		})
	}
}

func TestOverrideUnencodableOutput(t *testing.T) {
	t.Parallel()
	_, _, err := forkMem(tenSteps(t), ThroughStep(5), testOpts{Overrides: []TraceOption{Override(OnStep(5), func() {})}})
	if !errors.Is(err, ErrInvalidChange) || !strings.HasPrefix(err.Error(), "invalid overrides: override of step 5: output is not JSON:") {
		t.Errorf("error %v; want invalid overrides naming step 5", err)
	}
}

// TestOverrideApplied is the spec's complete example: get_value(42) forked at
// step 2 with the tool result overridden to {"value": 999}.
func TestOverrideApplied(t *testing.T) {
	t.Parallel()
	sources(t, getValue(t), func(t *testing.T, fork func(Cut, testOpts) (*Result, error)) {
		res, err := fork(ThroughStep(2), testOpts{Overrides: []TraceOption{Override(OnStep(2), map[string]any{"value": 999})}, Now: fixedNow})
		if err != nil {
			t.Fatal(err)
		}
		if res.Info.OverridesApplied != 1 || res.ForkedEventCount != 3 {
			t.Errorf("result %+v; want 1 override, 3 events", res)
		}
		forked, err := trace.Load(res.Path)
		if err != nil {
			t.Fatal(err)
		}
		checkStrict(t, res.Path)
		ev := forked.Events[2]
		if ev.Output != trace.MustParse(`{"value":999}`) || ev.OutputHash != trace.Hash(ev.Output) || ev.Status != trace.StatusOK {
			t.Errorf("event 2 output %s hash %s status %s", ev.Output, ev.OutputHash, ev.Status)
		}
		info, err := ReadInfo(forked)
		if err != nil {
			t.Fatal(err)
		}
		want := AppliedOverride{Target: "step 2", Step: 2, EventID: "evt_003", Type: trace.ToolResult,
			Output: trace.MustParse(`{"value":999}`), OutputHash: trace.Hash(trace.MustParse(`{"value":999}`)),
			OriginalOutputHash: trace.Hash(trace.MustParse(`{"value":42}`))}
		if info.OverridesApplied != 1 || len(info.Overrides) != 1 || info.Overrides[0] != want {
			t.Errorf("provenance overrides %+v; want %+v", info.Overrides, want)
		}
	})
}

// TestOverridePriority: an event-id override beats a step override of the
// same event, and only one is applied.
func TestOverridePriority(t *testing.T) {
	t.Parallel()
	tr := tenSteps(t)
	for _, order := range [][]TraceOption{
		{Override(OnStep(5), "by step"), Override(OnEvent("evt_006"), "by id")},
		{Override(OnEvent("evt_006"), "by id"), Override(OnStep(5), "by step")},
	} {
		forked, info, err := forkMem(tr, ThroughStep(7), testOpts{Overrides: append(order, Override(OnStep(7), "model"))})
		if err != nil {
			t.Fatal(err)
		}
		if got := forked.Events[5].Output; got != trace.StringValue("by id") {
			t.Errorf("step 5 output %s; want the event-id override", got)
		}
		if got := forked.Events[7].Output; got != trace.StringValue("model") {
			t.Errorf("step 7 output %s; want the llm_response override", got)
		}
		if info.OverridesApplied != 2 || info.Overrides[0].Target != "event evt_006" || info.Overrides[1].Target != "step 7" {
			t.Errorf("applied %d: %+v", info.OverridesApplied, info.Overrides)
		}
		checkForkOf(t, tr, forked, "evt_006", "evt_008")
	}
}

// TestOverrideFailedResult: overriding a failed tool result makes it a
// success, drops the redaction pointers of the output it replaced, and
// redacts secrets in the new output, in the events and in fork.json.
func TestOverrideFailedResult(t *testing.T) {
	t.Parallel()
	tr, err := trace.Load(bookingAgentPath)
	if err != nil {
		t.Fatal(err)
	}
	tr.Events[11].Redactions = []string{"/output/message"}
	tr.Redactions = []trace.RedactionEntry{
		{EventID: "evt_012", Path: "/output/message", Reason: trace.ReasonCredentialPattern, Replacement: trace.Redacted},
		{EventID: "evt_014", Path: "/message", Reason: trace.ReasonCredentialPattern, Replacement: trace.Redacted},
	}
	secret := "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	out := filepath.Join(t.TempDir(), "booked.sftrace")
	res, err := Trace(tr, ThroughStep(11), testOpts{OutputPath: out, Overrides: []TraceOption{
		Override(OnStep(11), map[string]any{"confirmation": "PNR-7QX2", "api_key": secret}),
	}}.list()...)
	if err != nil {
		t.Fatal(err)
	}
	checkStrict(t, out)
	got, err := trace.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	ev := got.Events[11]
	if ev.Status != trace.StatusOK || ev.Output.Get("confirmation") != trace.StringValue("PNR-7QX2") ||
		ev.Output.Get("api_key") != trace.StringValue(trace.Redacted) {
		t.Errorf("overridden event: status %s output %s", ev.Status, ev.Output)
	}
	if !slices.Equal(ev.Redactions, []string{"/output/api_key"}) {
		t.Errorf("event redactions %v; want only the new output's", ev.Redactions)
	}
	for _, r := range got.Redactions {
		if r.EventID == "evt_014" || (r.EventID == "evt_012" && r.Path == "/output/message") {
			t.Errorf("stale redaction entry kept: %+v", r)
		}
	}
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if strings.Contains(string(data), secret) {
			t.Errorf("%s holds the secret", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Info.Overrides[0].Output.Get("api_key") != trace.StringValue(trace.Redacted) {
		t.Errorf("provenance output %s is not redacted", res.Info.Overrides[0].Output)
	}
}

// TestNonContiguousSteps: steps may repeat or skip (stepfork only requires
// them non-decreasing). Step N keeps every event of step N.
func TestNonContiguousSteps(t *testing.T) {
	t.Parallel()
	tr := tenSteps(t)
	for i, s := range []int{0, 2, 2, 4, 4, 4, 7, 7, 9, 12} {
		tr.Events[i].Step = s
	}
	tests := []struct {
		name      string
		point     Cut
		overrides []TraceOption
		events    int
		err       string
	}{
		{"repeated step keeps all its events", ThroughStep(2), nil, 3, ""},
		{"point event is the last of its step", ThroughStep(4), []TraceOption{Override(OnEvent("evt_006"), 1)}, 6, ""},
		{"gap", ThroughStep(3), nil, 0, "step 3 not found in trace"},
		{"override of a shared step", ThroughStep(4), []TraceOption{Override(OnStep(4), 1)}, 0,
			"invalid overrides: override targets step 4, which 3 events share: evt_004 (state_change), evt_005 (tool_call), evt_006 (tool_result); target one by event_id"},
		{"override of a gap", ThroughStep(12), []TraceOption{Override(OnStep(10), 1)}, 0,
			"invalid overrides: override targets step 10, but no event of the trace has that step"},
		{"steps counted to the highest", ThroughStep(12), []TraceOption{Override(OnStep(13), 1)}, 0,
			"invalid overrides: override targets step 13 but trace only has 13 steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forked, info, err := forkMem(tr, tt.point, testOpts{Overrides: tt.overrides})
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v; want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(forked.Events) != tt.events || info.ForkPointEventID != forked.Events[len(forked.Events)-1].ID {
				t.Errorf("%d events, point %s", len(forked.Events), info.ForkPointEventID)
			}
			checkForkOf(t, tr, forked, "evt_006")
		})
	}
}

// TestBrokenStructure: a trace whose kept events would not validate is
// refused with a ForkError, never written.
func TestBrokenStructure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(tr *trace.Trace)
		want   string
	}{
		{"parent after child", func(tr *trace.Trace) { tr.Events[2].ParentID = "evt_004" },
			"cannot fork at step 5: event evt_003 (step 2) has parent evt_004, which the fork would not keep before it"},
		{"parent missing", func(tr *trace.Trace) { tr.Events[4].ParentID = "evt_gone" },
			"cannot fork at step 5: event evt_005 (step 4) has parent evt_gone, which the fork would not keep before it"},
		{"steps go back", func(tr *trace.Trace) { tr.Events[3].Step = 1 },
			"cannot fork: event evt_004 step 1 is less than the previous step 2; the trace is invalid (run stepfork validate)"},
		{"repeated id", func(tr *trace.Trace) { tr.Events[3].ID = "evt_002" },
			"cannot fork: event id evt_002 appears more than once; the trace is invalid (run stepfork validate)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := tenSteps(t)
			tt.mutate(tr)
			_, _, err := forkMem(tr, ThroughStep(5), testOpts{})
			checkErr(t, err, tt.want, ErrBrokenTrace)
		})
	}
}

func TestOutputPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := copyBundle(t, bookingAgentPath, dir, "failure.sftrace")

	if got, want := DefaultOutputPath(src+"/"), filepath.Join(dir, "failure-forked.sftrace"); got != want {
		t.Errorf("DefaultOutputPath = %q, want %q", got, want)
	}
	// Forking onto the parent is refused, even with Overwrite.
	_, err := Trace(src, ThroughStep(2), testOpts{OutputPath: src, Overwrite: true}.list()...)
	if err == nil || !strings.Contains(err.Error(), "is the trace being forked") {
		t.Errorf("fork onto itself: %v", err)
	}
	// An existing output needs Overwrite.
	if _, err := Trace(src, ThroughStep(2), testOpts{}.list()...); err != nil {
		t.Fatal(err)
	}
	_, err = Trace(src, ThroughStep(5), testOpts{}.list()...)
	if err == nil || !errors.Is(err, os.ErrExist) || !strings.Contains(err.Error(), "pass trace.Overwrite() to replace it") {
		t.Errorf("second fork without Overwrite: %v", err)
	}
	res, err := Trace(src, ThroughStep(5), testOpts{OutputPath: DefaultOutputPath(src), Overwrite: true}.list()...)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := trace.Load(res.Path); got == nil || len(got.Events) != 6 {
		t.Errorf("overwritten fork does not have 6 events")
	}
	// A loaded trace is saved only when OutputPath is given.
	tr, err := trace.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	res, err = Trace(tr, ThroughStep(3), testOpts{}.list()...)
	if err != nil || res.Path != "" || res.Trace == nil || len(res.Trace.Events) != 4 {
		t.Errorf("fork of a loaded trace: %+v, %v", res, err)
	}
	if res.Info.ParentTracePath != src {
		t.Errorf("parent path %q, want the loaded trace's %q", res.Info.ParentTracePath, src)
	}
	// A wrong suffix is refused before anything is read.
	_, err = Trace(src, ThroughStep(2), testOpts{OutputPath: filepath.Join(dir, "out")}.list()...)
	if !errors.Is(err, trace.ErrStorage) {
		t.Errorf("output without .sftrace: %v", err)
	}
	// An unreadable bundle is a storage error.
	res, err = Trace(filepath.Join(dir, "missing.sftrace"), ThroughStep(2), testOpts{}.list()...)
	if !errors.Is(err, trace.ErrStorage) || res != nil {
		t.Errorf("missing bundle: %+v, %v", res, err)
	}
}

// TestPathForkStreams: forking a path reads only up to the fork point, so a
// damaged line after it does not matter, while a fork past it reports the
// line.
func TestPathForkStreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := copyBundle(t, bookingAgentPath, dir, "failure.sftrace")
	events := filepath.Join(src, trace.EventsFile)
	data, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines[9] = "{not json\n" // step 9
	if err := os.WriteFile(events, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Trace(src, ThroughStep(4), testOpts{}.list()...)
	if err != nil {
		t.Fatal(err)
	}
	if res.ForkedEventCount != 5 || res.OriginalEventCount != 15 {
		t.Errorf("result %+v; want 5 of 15 events (15 from the manifest)", res)
	}
	_, err = Trace(src, ThroughStep(12), testOpts{OutputPath: DefaultOutputPath(src), Overwrite: true}.list()...)
	if err == nil || !strings.Contains(err.Error(), "events.jsonl:10: invalid JSON") {
		t.Errorf("fork past a damaged line: %v", err)
	}
}

// TestGoldenVectorsEveryStep forks every shared golden bundle at every step
// and checks each fork with stepfork's strict validation (with integrity):
// a fork of a valid trace is valid, and a fork never has a problem its parent
// does not have.
func TestGoldenVectorsEveryStep(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join(vectorDir, "stepfork", "*.sftrace"))
	if err != nil || len(paths) < 7 {
		t.Fatalf("found %d golden bundles under %s (%v)", len(paths), vectorDir, err)
	}
	paths = append(paths, bookingAgentPath)
	for _, src := range paths {
		t.Run(filepath.Base(src), func(t *testing.T) {
			t.Parallel()
			parent, err := trace.Load(src)
			if err != nil {
				t.Fatal(err)
			}
			parentCodes := trace.Validate(context.Background(), parent).Codes()
			for i, ev := range parent.Events {
				if i+1 < len(parent.Events) && parent.Events[i+1].Step == ev.Step {
					continue
				}
				out := filepath.Join(t.TempDir(), "fork.sftrace")
				res, err := Trace(src, ThroughStep(ev.Step), testOpts{OutputPath: out}.list()...)
				if err != nil {
					t.Fatalf("step %d: %v", ev.Step, err)
				}
				if res.ForkedEventCount != i+1 {
					t.Errorf("step %d: %d events, want %d", ev.Step, res.ForkedEventCount, i+1)
				}
				rep := trace.ValidateBundle(context.Background(), out, trace.CheckIntegrity())
				for _, code := range rep.Codes() {
					if !slices.Contains(parentCodes, code) {
						t.Errorf("step %d: fork has issue %s that the parent has not: %v", ev.Step, code, rep.Err())
					}
				}
				if len(parentCodes) == 0 && !rep.Valid() {
					t.Errorf("step %d: fork of a valid trace is invalid: %v", ev.Step, rep.Err())
				}
				forked, err := trace.Load(out)
				if err != nil {
					t.Fatal(err)
				}
				checkForkOfLoaded(t, parent, forked)
				// At the last step the fork is the whole run again.
				if i == len(parent.Events)-1 && (forked.Status != parent.Status || !equalFailure(forked.Failure, parent.Failure)) {
					t.Errorf("fork at the last step: status %s failure %v; want the parent's %s %v", forked.Status, forked.Failure, parent.Status, parent.Failure)
				}
			}
		})
	}
}

// checkForkOfLoaded is checkForkOf without strict validation of the fork
// (a fork of an invalid parent shares its problems).
func checkForkOfLoaded(t testing.TB, parent, forked *trace.Trace) {
	t.Helper()
	for i := range forked.Events {
		f, p := &forked.Events[i], &parent.Events[i]
		if f.ID != p.ID || f.RunID != forked.RunID || f.Output != p.Output || f.Input != p.Input {
			t.Errorf("event %d: %s/%s differs from the parent's %s", i, f.ID, f.RunID, p.ID)
		}
	}
	if forked.RunID == parent.RunID {
		t.Errorf("fork kept the parent's run id")
	}
}

func equalFailure(a, b *trace.Failure) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// TestRecordedVectorsSampledSteps forks the 2,002-event recorded runs in
// memory at a spread of steps; every fork is strictly valid.
func TestRecordedVectorsSampledSteps(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join(vectorDir, "stepfork-recorded", "*.sftrace"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("found %d recorded bundles (%v)", len(paths), err)
	}
	for _, src := range paths {
		t.Run(filepath.Base(src), func(t *testing.T) {
			t.Parallel()
			parent, err := trace.Load(src)
			if err != nil {
				t.Fatal(err)
			}
			n := len(parent.Events)
			steps := []int{0, 1, 2, 3, n / 2, n - 2, n - 1}
			for s := 5; s < n; s += 251 {
				steps = append(steps, s)
			}
			for _, s := range steps {
				forked, _, err := forkMem(parent, ThroughStep(s), testOpts{})
				if err != nil {
					t.Fatalf("step %d: %v", s, err)
				}
				if len(forked.Events) != s+1 {
					t.Errorf("step %d: %d events", s, len(forked.Events))
				}
				checkForkOf(t, parent, forked)
			}
		})
	}
}

type valueInput struct {
	X int `json:"x"`
}

// TestFrozenReplayServesOverride records an agent with package replay, forks
// the recording with an override, and replays the fork frozen: the agent is
// served the overridden output, and a failure overridden with a success lets
// the agent complete.
func TestFrozenReplayServesOverride(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	getValue := replay.Tool("get_value", func(_ context.Context, in valueInput) (map[string]int, error) {
		if in.X < 0 {
			return nil, errors.New("negative input")
		}
		return map[string]int{"value": in.X}, nil
	})
	agent := replay.Typed(func(ctx context.Context, in valueInput) (map[string]int, error) { return getValue(ctx, in) })
	tests := []struct {
		name  string
		input valueInput
	}{
		{"success overridden", valueInput{X: 42}},
		{"failure overridden", valueInput{X: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, _ := replay.Record(ctx, "test-agent", tt.input, agent)
			if rec == nil || rec.Trace == nil {
				t.Fatal("nothing recorded")
			}
			res, err := Trace(rec.Trace, ThroughStep(2), testOpts{Overrides: []TraceOption{Override(OnStep(2), map[string]any{"value": 999})}}.list()...)
			if err != nil {
				t.Fatal(err)
			}
			if res.Trace.Events[2].Type != trace.ToolResult {
				t.Fatalf("step 2 is %s, want the tool_result", res.Trace.Events[2].Type)
			}
			rep, err := replay.Replay(ctx, res.Trace, agent)
			if err != nil {
				t.Fatalf("frozen replay of the fork: %v", err)
			}
			got, err := trace.ValueOf(rep.Output)
			if err != nil || got != trace.MustParse(`{"value":999}`) || rep.Err != nil {
				t.Errorf("agent returned %s (err %v); want the override {\"value\":999}", got, rep.Err)
			}
			if rep.Served != 1 || rep.Executed != 0 {
				t.Errorf("served %d, executed %d; want 1 served, 0 executed", rep.Served, rep.Executed)
			}
		})
	}
}

func TestRunIDMustBeNew(t *testing.T) {
	t.Parallel()
	tr := tenSteps(t)
	first, _, err := forkMem(tr, ThroughStep(5), testOpts{RunID: "run_first"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"run_first", "run_ten"} {
		_, _, err := forkMem(first, ThroughStep(3), testOpts{RunID: id})
		if err == nil || !strings.Contains(err.Error(), "a fork needs a new run id") {
			t.Errorf("RunID %s: %v; want it refused", id, err)
		}
	}
}

// TestOverrideOnCall: an OnCall override replaces the result that answers
// the call (every kept call of the name for occurrence 0), exactly as the
// override of that result's step does; a step override of the same event
// beats it.
func TestOverrideOnCall(t *testing.T) {
	t.Parallel()
	tr := tenSteps(t)
	out := map[string]any{"status": "ok", "value": 120}
	byStep, _, err := forkMem(tr, ThroughStep(9), testOpts{Overrides: []TraceOption{Override(OnStep(5), out)}, RunID: "run_f", Now: fixedNow})
	require.NoError(t, err)
	for _, target := range []Target{OnCall("quote", 1), OnCall("quote", 0)} {
		byCall, info, err := forkMem(tr, ThroughStep(9), testOpts{Overrides: []TraceOption{Override(target, out)}, RunID: "run_f", Now: fixedNow})
		require.NoError(t, err, target.String())
		assert.Equal(t, byStep.Events, byCall.Events, target.String())
		require.Len(t, info.Overrides, 1)
		assert.Equal(t, target.String(), info.Overrides[0].Target)
		assert.Equal(t, 5, info.Overrides[0].Step)
	}
	model, info, err := forkMem(tr, ThroughStep(9), testOpts{Overrides: []TraceOption{Override(OnCall("gpt-test", 1), map[string]any{"text": "a quote"})}})
	require.NoError(t, err)
	assert.Equal(t, trace.MustParse(`{"text":"a quote"}`), model.Events[7].Output)
	assert.Equal(t, 1, info.OverridesApplied)
	both, info, err := forkMem(tr, ThroughStep(9), testOpts{Overrides: []TraceOption{Override(OnCall("quote", 1), 1), Override(OnStep(5), 2)}})
	require.NoError(t, err)
	assert.Equal(t, trace.IntValue(2), both.Events[5].Output, "the step override beats the call override")
	assert.Equal(t, 1, info.OverridesApplied)
}

// TestStaticForkKeepsBuild: a static fork keeps the parent's build.json,
// the code that made the events it keeps, from a loaded trace and from a
// path alike.
func TestStaticForkKeepsBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	parent, err := trace.Load(bookingAgentPath)
	if err != nil {
		t.Fatal(err)
	}
	data, err := trace.MarshalBuild(trace.Build{Module: "example.com/booking", Revision: "46b7ad0c4abd"})
	if err != nil {
		t.Fatal(err)
	}
	parent.Extras = map[string][]byte{trace.BuildFile: data}
	src := filepath.Join(dir, "with-build.sftrace")
	if err := parent.Save(src); err != nil {
		t.Fatal(err)
	}
	loaded, err := Trace(parent, ThroughStep(2))
	if err != nil {
		t.Fatal(err)
	}
	fromPath, err := Trace(src, ThroughStep(2), SaveTo(filepath.Join(dir, "fork.sftrace")))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := trace.Load(fromPath.Path)
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]*trace.Trace{"loaded": loaded.Trace, "path": saved} {
		if b, ok, err := tr.Build(); !ok || err != nil || b.Module != "example.com/booking" {
			t.Errorf("%s: build %+v, %v, %v; want the parent's", name, b, ok, err)
		}
	}
}

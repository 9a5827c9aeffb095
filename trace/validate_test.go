package trace

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// validTrace is a small complete run: evt_001 run_start, evt_002
// llm_request, evt_003 llm_response, evt_004 tool_call, evt_005 tool_result,
// evt_006 run_end.
func validTrace(t testing.TB) *Trace {
	t.Helper()
	b := NewBuilder("agent")
	b.RunStart(map[string]any{"q": "Kathmandu"})
	b.LLM("openai", "gpt-test", map[string]any{"messages": []any{"hi"}}, map[string]any{"tool": "search"})
	b.Tool("search", map[string]any{"to": "KTM"}, map[string]any{"price": 320.5})
	b.RunEnd(RunCompleted, map[string]any{"ok": true})
	tr, err := b.Trace()
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// built returns a trace made by f on a fresh Builder.
func built(t testing.TB, f func(b *Builder)) *Trace {
	t.Helper()
	b := NewBuilder("agent")
	f(b)
	tr, err := b.Trace()
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func errIssue(code, msg, loc, id string, step int) Issue {
	is := Issue{Code: code, Message: msg, Location: loc, EventID: id}
	if step >= 0 {
		is.Step = &step
	}
	return is
}

func warnIssue(code, msg, loc, id string, step int) Issue {
	is := errIssue(code, msg, loc, id, step)
	is.Severity = SeverityWarning
	return is
}

func TestValidate(t *testing.T) {
	t.Parallel()
	zeros := strings.Repeat("0", 64)
	tests := []struct {
		name   string
		trace  func(t testing.TB) *Trace
		opts   []ValidateOption
		want   []Issue
		exit   int
		pedant int // exit code with Pedantic added
	}{
		{name: "complete run is valid", trace: validTrace},
		{name: "complete run is valid with hashes", trace: validTrace, opts: []ValidateOption{CheckIntegrity()}},
		{
			name: "duplicate event id",
			trace: func(t testing.TB) *Trace {
				tr := validTrace(t)
				tr.Events[2].ID = "evt_002"
				tr.Events[3].ParentID = "evt_002"
				return tr
			},
			want: []Issue{errIssue(CodeDuplicateEventID, "Event evt_002 appears more than once.", "", "evt_002", 2)},
			exit: 1, pedant: 1,
		},
		{
			name:  "missing parent",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Events[2].ParentID = "evt_missing"; return tr },
			want:  []Issue{errIssue(CodeInvalidParent, "Event evt_003 references missing parent evt_missing.", "", "evt_003", 2)},
			exit:  1, pedant: 1,
		},
		{
			name:  "parent later in the trace",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Events[1].ParentID = "evt_003"; return tr },
			want:  []Issue{errIssue(CodeParentNotEarlier, "Event evt_002 parent evt_003 does not appear earlier in the trace.", "", "evt_002", 1)},
			exit:  1, pedant: 1,
		},
		{
			name:  "self parent",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Events[1].ParentID = "evt_002"; return tr },
			want:  []Issue{errIssue(CodeParentNotEarlier, "Event evt_002 parent evt_002 does not appear earlier in the trace.", "", "evt_002", 1)},
			exit:  1, pedant: 1,
		},
		{
			name:  "foreign run id",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Events[3].RunID = "run_other"; return tr },
			want:  []Issue{errIssue(CodeRunIDMismatch, "Event evt_004 run_id 'run_other' does not match manifest run_id 'run_agent'.", "", "evt_004", 3)},
			exit:  1, pedant: 1,
		},
		{
			name:  "decreasing step",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Events[3].Step = 1; return tr },
			want:  []Issue{errIssue(CodeStepOrder, "Event evt_004 step 1 is less than the previous step 2.", "", "evt_004", 1)},
			exit:  1, pedant: 1,
		},
		{
			name: "gaps and repeats in steps are accepted",
			trace: func(t testing.TB) *Trace {
				tr := validTrace(t)
				for i := range tr.Events {
					tr.Events[i].Step = 10 + i/2
				}
				return tr
			},
		},
		{
			name:  "event count",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Totals.Events = 999; return tr },
			want:  []Issue{errIssue(CodeEventCountMismatch, "Manifest event count 999 does not match 6.", "manifest.json:totals.events", "", -1)},
			exit:  1, pedant: 1,
		},
		{
			name: "two run_starts",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) { b.RunStart(nil); b.RunStart(nil); b.RunEnd(RunCompleted, nil) })
			},
			want: []Issue{errIssue(CodeRunStartCount, "Strict validation requires exactly one run_start; found 2.", "events.jsonl", "", -1)},
			exit: 1, pedant: 1,
		},
		{
			name:  "empty trace in strict mode",
			trace: func(t testing.TB) *Trace { return built(t, func(*Builder) {}) },
			want:  []Issue{errIssue(CodeRunStartCount, "Strict validation requires exactly one run_start; found 0.", "events.jsonl", "", -1)},
			exit:  1, pedant: 1,
		},
		{name: "empty trace in partial mode", trace: func(t testing.TB) *Trace { return built(t, func(*Builder) {}) }, opts: []ValidateOption{Partial()}},
		{
			name: "partial run without run_start",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) { b.ToolCall("search", map[string]any{"q": 1}) })
			},
			want: []Issue{errIssue(CodeRunStartCount, "Strict validation requires exactly one run_start; found 0.", "events.jsonl", "", -1)},
			exit: 1, pedant: 1,
		},
		{
			name: "partial run without run_start, partial mode",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) { b.ToolCall("search", map[string]any{"q": 1}) })
			},
			opts: []ValidateOption{Partial()},
		},
		{
			name: "failed run without error event",
			trace: func(t testing.TB) *Trace {
				tr := built(t, func(b *Builder) { b.RunStart(nil); b.RunEnd(RunCompleted, nil) })
				tr.Status, tr.Events[1].RunStatus = RunFailed, RunFailed
				tr.Failure = &Failure{Type: "Boom", Message: "it broke", Step: 1}
				return tr
			},
			want: []Issue{
				errIssue(CodeMissingErrorEvent, "Failed traces require at least one error event in strict mode.", "events.jsonl", "", -1),
				warnIssue(CodeFailureStep, "Manifest failure.step 1 is not the step of an error event; set it to the step of the error that ended the run.", "manifest.json:failure.step", "", -1),
			},
			exit: 1, pedant: 1,
		},
		{
			name: "failed run with error event",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) {
					b.RunStart(nil)
					call := b.ToolCall("search", map[string]any{"q": 1})
					b.ToolFailure(call, "Timeout", "search timed out")
					b.Fail("Timeout", "search timed out")
				})
			},
			opts: []ValidateOption{CheckIntegrity()},
		},
		{
			name: "several independent issues together",
			trace: func(t testing.TB) *Trace {
				tr := validTrace(t)
				tr.Events = append(tr.Events, tr.Events[0].Clone())
				tr.Events[4].ParentID = "evt_nope"
				return tr
			},
			want: []Issue{
				errIssue(CodeEventCountMismatch, "Manifest event count 6 does not match 7.", "manifest.json:totals.events", "", -1),
				errIssue(CodeInvalidParent, "Event evt_005 references missing parent evt_nope.", "", "evt_005", 4),
				errIssue(CodeDuplicateEventID, "Event evt_001 appears more than once.", "", "evt_001", 0),
				errIssue(CodeStepOrder, "Event evt_001 step 0 is less than the previous step 5.", "", "evt_001", 0),
				errIssue(CodeRunStartCount, "Strict validation requires exactly one run_start; found 2.", "events.jsonl", "", -1),
				// The result whose parent is gone still pairs by name.
				warnIssue(CodeRunEndNotLast, "Event evt_006 run_end is followed by 1 more events; run_end must be the last event.", "events.jsonl", "evt_006", 5),
			},
			exit: 1, pedant: 1,
		},
		{
			name:  "wrong payload hash",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Events[0].InputHash = zeros; return tr },
			opts:  []ValidateOption{CheckIntegrity()},
			want:  []Issue{errIssue(CodePayloadHash, "Event evt_001 has a input_hash mismatch.", "events.jsonl:input_hash", "evt_001", 0)},
			exit:  1, pedant: 1,
		},
		{
			name:  "wrong payload hash without CheckIntegrity",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Events[0].InputHash = zeros; return tr },
		},
		{
			name:  "hash stored where no payload is hashed",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Events[2].InputHash = Hash(NullValue); return tr },
			opts:  []ValidateOption{CheckIntegrity()},
			want:  []Issue{errIssue(CodePayloadHash, "Event evt_003 has a input_hash mismatch.", "events.jsonl:input_hash", "evt_003", 2)},
			exit:  1, pedant: 1,
		},
		{
			name: "in-memory trace without hashes",
			trace: func(t testing.TB) *Trace {
				tr := validTrace(t)
				tr.Events[4].OutputHash = ""
				return tr
			},
			opts: []ValidateOption{CheckIntegrity()},
			want: []Issue{errIssue(CodeIntegrityUnverified, "Event evt_005 is missing output_hash.", "events.jsonl:output_hash", "evt_005", 4)},
			exit: 1, pedant: 1,
		},
		{
			name:  "event fields broken in memory",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Events[1].Model = ""; return tr },
			want:  []Issue{errIssue(CodeInvalidEvent, "Event evt_002 (index 1) is invalid: llm_request requires a non-empty model.", "events.jsonl", "evt_002", 1)},
			exit:  2, pedant: 2,
		},
		{
			name:  "manifest broken in memory",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.AgentName = ""; return tr },
			want:  []Issue{errIssue(CodeInvalidManifest, "Manifest is invalid: agent_name must be a non-empty string.", "manifest.json", "", -1)},
			exit:  2, pedant: 2,
		},
		// Checks beyond stepfork's: warnings unless Pedantic.
		{
			name:  "manifest status differs from run_end",
			trace: func(t testing.TB) *Trace { tr := validTrace(t); tr.Status = RunRunning; return tr },
			want: []Issue{warnIssue(CodeStatusMismatch, "Manifest status 'running' does not match run_status 'completed' of the run_end evt_006; set the manifest status to what the run_end records.",
				"manifest.json:status", "evt_006", 5)},
			pedant: 1,
		},
		{
			name: "totals of calls",
			trace: func(t testing.TB) *Trace {
				tr := validTrace(t)
				tr.Totals.LLMCalls, tr.Totals.ToolCalls = 3, 0
				return tr
			},
			want: []Issue{
				warnIssue(CodeTotalsMismatch, "Manifest totals.llm_calls 3 does not match the 1 llm_request events; save the trace again to recompute totals.", "manifest.json:totals.llm_calls", "", -1),
				warnIssue(CodeTotalsMismatch, "Manifest totals.tool_calls 0 does not match the 1 tool_call events; save the trace again to recompute totals.", "manifest.json:totals.tool_calls", "", -1),
			},
			pedant: 1,
		},
		{
			name: "failure.step not at an error",
			trace: func(t testing.TB) *Trace {
				tr := built(t, func(b *Builder) { b.RunStart(nil); b.Fail("Boom", "it broke") })
				tr.Failure.Step = 0
				return tr
			},
			want:   []Issue{warnIssue(CodeFailureStep, "Manifest failure.step 0 is not the step of an error event; set it to the step of the error that ended the run.", "manifest.json:failure.step", "", -1)},
			pedant: 1,
		},
		{
			name: "two run_ends",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) { b.RunStart(nil); b.RunEnd(RunCompleted, nil); b.RunEnd(RunCompleted, nil) })
			},
			want:   []Issue{warnIssue(CodeRunEndCount, "Found 2 run_end events; a run ends once, so keep only the last.", "events.jsonl", "", -1)},
			pedant: 1,
		},
		{
			name: "events after run_end",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) {
					b.RunStart(nil)
					b.RunEnd(RunCompleted, nil)
					b.State("k", nil, 1)
					b.State("k", 1, 2)
				})
			},
			want:   []Issue{warnIssue(CodeRunEndNotLast, "Event evt_002 run_end is followed by 2 more events; run_end must be the last event.", "events.jsonl", "evt_002", 1)},
			pedant: 1,
		},
		{
			name: "tool_result without a call",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) {
					b.RunStart(nil)
					b.Add(Event{Type: ToolResult, Name: "search", Output: NullValue})
					b.RunEnd(RunCompleted, nil)
				})
			},
			want:   []Issue{warnIssue(CodeToolResultUnpaired, "Event evt_002 tool_result 'search' answers no tool_call; set its parent_id to the id of the tool_call it answers.", "events.jsonl", "evt_002", 1)},
			pedant: 1,
		},
		{
			name: "tool_result paired by name when it has no parent link",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) {
					b.RunStart(nil)
					b.ToolCall("search", 1)
					b.Add(Event{Type: ToolResult, Name: "search", Output: NullValue})
					b.RunEnd(RunCompleted, nil)
				})
			},
		},
		{
			name: "second result for one call",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) {
					b.RunStart(nil)
					call := b.Tool("search", 1, 2)
					b.ToolResult(call, 3)
					b.RunEnd(RunCompleted, nil)
				})
			},
			want:   []Issue{warnIssue(CodeToolResultDuplicate, "Event evt_004 tool_result answers tool_call evt_002, which already has a result; a call has one result.", "events.jsonl", "evt_004", 3)},
			pedant: 1,
		},
		{
			name: "tool name differs between call and result",
			trace: func(t testing.TB) *Trace {
				tr := validTrace(t)
				tr.Events[4].Name = "book"
				return tr
			},
			want:   []Issue{warnIssue(CodeToolNameMismatch, "Event evt_005 tool_result name 'book' does not match the name 'search' of its tool_call evt_004.", "events.jsonl", "evt_005", 4)},
			pedant: 1,
		},
		{
			name: "unanswered call in a completed run",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) { b.RunStart(nil); b.ToolCall("search", 1); b.RunEnd(RunCompleted, nil) })
			},
			want:   []Issue{warnIssue(CodeToolCallUnanswered, "Event evt_002 tool_call 'search' has no tool_result, but the run completed; record its result or mark the run as not completed.", "events.jsonl", "evt_002", 1)},
			pedant: 1,
		},
		{
			name: "unanswered call in a completed run, partial mode",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) { b.RunStart(nil); b.ToolCall("search", 1); b.RunEnd(RunCompleted, nil) })
			},
			opts: []ValidateOption{Partial()},
		},
		{
			name: "unanswered call in a run still running",
			trace: func(t testing.TB) *Trace {
				return built(t, func(b *Builder) { b.RunStart(nil); b.ToolCall("search", 1) })
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rep := Validate(context.Background(), tt.trace(t), tt.opts...)
			if diff := cmp.Diff(tt.want, rep.Issues); diff != "" {
				t.Errorf("issues (-want +got):\n%s", diff)
			}
			if got := rep.ExitCode(); got != tt.exit {
				t.Errorf("ExitCode() = %d, want %d", got, tt.exit)
			}
			if rep.Valid() != (tt.exit == 0) {
				t.Errorf("Valid() = %v with exit code %d", rep.Valid(), tt.exit)
			}
			ped := Validate(context.Background(), tt.trace(t), append(slices.Clone(tt.opts), Pedantic())...)
			if got := ped.ExitCode(); got != tt.pedant {
				t.Errorf("with Pedantic, ExitCode() = %d, want %d", got, tt.pedant)
			}
			for _, is := range ped.Issues {
				if is.Severity != SeverityError {
					t.Errorf("with Pedantic, %v is still a warning", is)
				}
			}
		})
	}
}

func TestValidateModes(t *testing.T) {
	t.Parallel()
	tr := validTrace(t)
	if got := Validate(context.Background(), tr).Mode; got != ModeStrict {
		t.Errorf("default mode = %q, want %q", got, ModeStrict)
	}
	if got := Validate(context.Background(), tr, Partial()).Mode; got != ModePartial {
		t.Errorf("Partial mode = %q, want %q", got, ModePartial)
	}
	if got := Validate(context.Background(), tr).Events; got != 6 {
		t.Errorf("Events = %d, want 6", got)
	}
}

func TestReportErr(t *testing.T) {
	t.Parallel()
	if err := Validate(context.Background(), validTrace(t)).Err(); err != nil {
		t.Fatalf("valid trace: Err() = %v", err)
	}
	tr := validTrace(t)
	tr.Events[3].RunID = "run_other"
	tr.Status = RunRunning // a warning, which Err leaves out
	err := Validate(context.Background(), tr).Err()
	if !errors.Is(err, ErrInvalidTrace) {
		t.Fatalf("Err() = %v, want ErrInvalidTrace", err)
	}
	want := "trace is not valid (strict): 1 issues\n  run_id_mismatch: Event evt_004 run_id 'run_other' does not match manifest run_id 'run_agent'."
	if err.Error() != want {
		t.Errorf("Err() text:\n%s\nwant:\n%s", err, want)
	}
}

func TestValidateCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, rep := range map[string]*Report{
		"Validate":       Validate(ctx, validTrace(t)),
		"ValidateBundle": ValidateBundle(ctx, bundleOf(t, validTrace(t))),
	} {
		if !errors.Is(rep.Canceled, context.Canceled) || rep.Valid() || rep.ExitCode() != 1 {
			t.Errorf("%s with a cancelled context: Canceled=%v Valid=%v exit=%d", name, rep.Canceled, rep.Valid(), rep.ExitCode())
		}
	}
}

// countdownCtx is a context whose Err turns to context.Canceled after
// a number of calls, so that a test can cancel a validation at a known
// point of the stream.
type countdownCtx struct {
	context.Context
	calls, after int
}

func (c *countdownCtx) Err() error {
	c.calls++
	if c.calls > c.after {
		return context.Canceled
	}
	return nil
}

// TestValidateBundleCanceledMidway cancels a streaming validation after
// 1024 events (ValidateBundle looks at the context every 1024 events) and
// checks that the report says so and that no goroutine of the decoding
// pipeline is left behind. It is not parallel: it counts goroutines.
func TestValidateBundleCanceledMidway(t *testing.T) {
	p := bundleOf(t, built(t, func(b *Builder) {
		b.RunStart(nil)
		for i := range 5000 {
			b.State("k", i, i+1)
		}
		b.RunEnd(RunCompleted, nil)
	}))
	before := runtime.NumGoroutine()
	for _, procs := range []int{1, 2, 4} {
		old := runtime.GOMAXPROCS(procs)
		ctx := &countdownCtx{Context: context.Background(), after: 1}
		rep := ValidateBundle(ctx, p, CheckIntegrity())
		runtime.GOMAXPROCS(old)
		if !errors.Is(rep.Canceled, context.Canceled) || rep.Events != 1024 || rep.Valid() || rep.Integrity != nil {
			t.Errorf("GOMAXPROCS=%d: Canceled=%v Events=%d Valid=%v Integrity=%v; want canceled after 1024 events, no integrity result",
				procs, rep.Canceled, rep.Events, rep.Valid(), rep.Integrity)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the canceled validations, %d before: the pipeline leaks", n, before)
	}
}

// TestValidateVectors checks the expected outcome of every shared bundle
// (testvectors/stepfork/README.md, stepfork-format.md §13), streaming and in
// memory.
func TestValidateVectors(t *testing.T) {
	t.Parallel()
	statusWarning := []string{CodeStatusMismatch} // manifest "running", run_end completed
	tests := []struct {
		bundle      string
		strict      []string // error codes with strict + integrity
		partial     []string // error codes with partial + integrity
		exit        int      // strict + integrity
		integrity   IntegrityStatus
		warnings    []string
		events      int
		memoryValid bool // Validate(context.Background(), Load) strict, payload hashes
	}{
		{"stepfork/successful_run.sftrace", nil, nil, 0, IntegrityVerified, nil, 6, true},
		{"stepfork/failed_tool_run.sftrace", nil, nil, 0, IntegrityVerified, nil, 5, true},
		{"stepfork/failed_llm_run.sftrace", nil, nil, 0, IntegrityVerified, nil, 4, true},
		{"stepfork/diff_baseline.sftrace", nil, nil, 0, IntegrityVerified, statusWarning, 4, true},
		{"stepfork/diff_changed.sftrace", nil, nil, 0, IntegrityVerified, statusWarning, 4, true},
		{"stepfork/partial_run.sftrace", []string{CodeRunStartCount}, nil, 1, IntegrityVerified, nil, 1, false},
		{"stepfork/legacy_v01.sftrace", []string{CodeIntegrityUnverified}, []string{CodeIntegrityUnverified}, 3, IntegrityUnverifiedLegacy, nil, 2, true},
		{"stepfork-recorded/run_1000_calls.sftrace", nil, nil, 0, IntegrityVerified, nil, 2002, true},
		{"stepfork-recorded/run_1000_calls.changed.sftrace", nil, nil, 0, IntegrityVerified, nil, 2002, true},
	}
	for _, tt := range tests {
		t.Run(tt.bundle, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(vectorDir, tt.bundle)
			rep := ValidateBundle(context.Background(), path, CheckIntegrity())
			if diff := cmp.Diff(tt.strict, rep.Codes()); diff != "" {
				t.Errorf("strict codes (-want +got):\n%s\n%v", diff, rep.Issues)
			}
			if got := rep.ExitCode(); got != tt.exit {
				t.Errorf("strict exit code = %d, want %d", got, tt.exit)
			}
			if rep.Integrity == nil || rep.Integrity.Status != tt.integrity {
				t.Errorf("integrity = %+v, want %s", rep.Integrity, tt.integrity)
			}
			if rep.Events != tt.events || !rep.Loaded {
				t.Errorf("Events = %d, Loaded = %v; want %d, true", rep.Events, rep.Loaded, tt.events)
			}
			var warns []string
			for _, w := range rep.Warnings() {
				warns = append(warns, w.Code)
			}
			if diff := cmp.Diff(tt.warnings, warns); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			part := ValidateBundle(context.Background(), path, CheckIntegrity(), Partial())
			if diff := cmp.Diff(tt.partial, part.Codes()); diff != "" {
				t.Errorf("partial codes (-want +got):\n%s", diff)
			}
			if plain := ValidateBundle(context.Background(), path); !plain.Valid() && tt.bundle != "stepfork/partial_run.sftrace" {
				t.Errorf("structure alone: %v", plain.Issues)
			}
			tr, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			mem := Validate(context.Background(), tr, CheckIntegrity())
			if mem.Valid() != tt.memoryValid {
				t.Errorf("Validate(context.Background(), Load) valid = %v, want %v: %v", mem.Valid(), tt.memoryValid, mem.Issues)
			}
		})
	}
}

// bundleOf saves a copy of tr into a fresh temporary directory and returns its
// path. It saves a copy because Save sets the trace's Path, and parallel
// tests share their fixtures.
func bundleOf(t testing.TB, tr *Trace) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "run.sftrace")
	if err := tr.Clone().Save(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// editFile rewrites a file of a bundle.
func editFile(t testing.TB, bundle, name string, edit func(string) string) {
	t.Helper()
	p := filepath.Join(bundle, name)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(edit(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
}

// editLine rewrites line i (0-based) of events.jsonl.
func editLine(i int, edit func(string) string) func(string) string {
	return func(s string) string {
		lines := strings.Split(s, "\n")
		lines[i] = edit(lines[i])
		return strings.Join(lines, "\n")
	}
}

func replace(old, new string) func(string) string {
	return func(s string) string { return strings.Replace(s, old, new, 1) }
}

// TestValidateBundleMutations edits a saved bundle on disk and checks the
// streamed report, and that it equals the in-memory one when the bundle
// still loads.
func TestValidateBundleMutations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(t *testing.T, p string)
		opts   []ValidateOption
		want   func(p string) []Issue
		exit   int
	}{
		{
			name:   "valid",
			mutate: func(*testing.T, string) {},
			opts:   []ValidateOption{CheckIntegrity()},
			want:   func(string) []Issue { return nil },
		},
		{
			name: "appended copy of the first event",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, func(s string) string { return s + strings.SplitAfter(s, "\n")[0] })
			},
			opts: []ValidateOption{Partial()},
			want: func(string) []Issue {
				return []Issue{
					errIssue(CodeEventCountMismatch, "Manifest event count 6 does not match 7.", "manifest.json:totals.events", "", -1),
					errIssue(CodeDuplicateEventID, "Event evt_001 appears more than once.", "", "evt_001", 0),
					errIssue(CodeStepOrder, "Event evt_001 step 0 is less than the previous step 5.", "", "evt_001", 0),
					warnIssue(CodeRunEndNotLast, "Event evt_006 run_end is followed by 1 more events; run_end must be the last event.", "events.jsonl", "evt_006", 5),
				}
			},
			exit: 1,
		},
		{
			name: "missing parent",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, editLine(2, replace(`"parent_id":"evt_002"`, `"parent_id":"evt_missing"`)))
			},
			opts: []ValidateOption{Partial()},
			want: func(string) []Issue {
				return []Issue{errIssue(CodeInvalidParent, "Event evt_003 references missing parent evt_missing.", "", "evt_003", 2)}
			},
			exit: 1,
		},
		{
			name: "parent later in the file",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, editLine(1, replace(`"parent_id":"evt_001"`, `"parent_id":"evt_006"`)))
			},
			opts: []ValidateOption{Partial()},
			want: func(string) []Issue {
				return []Issue{errIssue(CodeParentNotEarlier, "Event evt_002 parent evt_006 does not appear earlier in the trace.", "", "evt_002", 1)}
			},
			exit: 1,
		},
		{
			name: "steps 5 then 3",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, editLine(1, replace(`"step":1`, `"step":5`)))
				editFile(t, p, EventsFile, editLine(2, replace(`"step":2`, `"step":3`)))
			},
			opts: []ValidateOption{Partial()},
			want: func(string) []Issue {
				return []Issue{errIssue(CodeStepOrder, "Event evt_003 step 3 is less than the previous step 5.", "", "evt_003", 3)}
			},
			exit: 1,
		},
		{
			name: "other run id",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, editLine(3, replace(`"run_id":"run_agent"`, `"run_id":"run_other"`)))
			},
			opts: []ValidateOption{Partial()},
			want: func(string) []Issue {
				return []Issue{errIssue(CodeRunIDMismatch, "Event evt_004 run_id 'run_other' does not match manifest run_id 'run_agent'.", "", "evt_004", 3)}
			},
			exit: 1,
		},
		{
			name: "tampered payload hash and file digest",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, editLine(4, func(s string) string {
					i := strings.Index(s, `"output_hash":"`) + len(`"output_hash":"`)
					return s[:i] + strings.Repeat("0", 64) + s[i+64:]
				}))
			},
			opts: []ValidateOption{CheckIntegrity()},
			want: func(string) []Issue {
				return []Issue{
					errIssue(CodePayloadHash, "Event evt_005 has a output_hash mismatch.", "events.jsonl:output_hash", "evt_005", 4),
					errIssue(CodeIntegrityMismatch, "SHA-256 mismatch.", "events.jsonl", "", -1),
				}
			},
			exit: 1,
		},
		{
			name: "null hash for a payload",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, editLine(0, func(s string) string {
					i := strings.Index(s, `"input_hash":"`)
					return s[:i] + `"input_hash":null` + s[i+len(`"input_hash":"`)+65:]
				}))
			},
			opts: []ValidateOption{CheckIntegrity(), Partial()},
			want: func(string) []Issue {
				return []Issue{
					errIssue(CodeIntegrityUnverified, "Event evt_001 is missing input_hash.", "events.jsonl:input_hash", "evt_001", 0),
					errIssue(CodeIntegrityMismatch, "SHA-256 mismatch.", "events.jsonl", "", -1),
				}
			},
			exit: 1,
		},
		{
			name:   "events.jsonl is not JSON",
			mutate: func(t *testing.T, p string) { editFile(t, p, EventsFile, func(string) string { return "{" }) },
			want: func(p string) []Issue {
				return []Issue{errIssue(CodeInvalidJSON, filepath.Join(p, EventsFile)+":1: invalid JSON: unterminated object (column 2)", filepath.Join(p, EventsFile)+":1", "", -1)}
			},
			exit: 2,
		},
		{
			name: "blank line",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, editLine(1, func(string) string { return "" }))
			},
			want: func(p string) []Issue {
				return []Issue{errIssue(CodeInvalidJSON, filepath.Join(p, EventsFile)+":2: blank JSONL line", filepath.Join(p, EventsFile)+":2", "", -1)}
			},
			exit: 2,
		},
		{
			name: "unknown event type",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, editLine(5, replace(`"type":"run_end"`, `"type":"framework_magic"`)))
			},
			want: func(p string) []Issue {
				return []Issue{errIssue(CodeInvalidEvent, filepath.Join(p, EventsFile)+`:6: invalid event: unknown event type "framework_magic"`, filepath.Join(p, EventsFile)+":6", "", -1)}
			},
			exit: 2,
		},
		{
			name:   "manifest deleted",
			mutate: func(t *testing.T, p string) { os.Remove(filepath.Join(p, ManifestFile)) },
			want: func(p string) []Issue {
				m := filepath.Join(p, ManifestFile)
				return []Issue{errIssue(CodeMissingFile, "Missing required file: "+m+".", m, "", -1)}
			},
			exit: 2,
		},
		{
			name: "every missing file listed",
			mutate: func(t *testing.T, p string) {
				os.Remove(filepath.Join(p, EventsFile))
				os.Remove(filepath.Join(p, RedactionsFile))
			},
			want: func(p string) []Issue {
				e, r := filepath.Join(p, EventsFile), filepath.Join(p, RedactionsFile)
				return []Issue{
					errIssue(CodeMissingFile, "Missing required file: "+e+".", e, "", -1),
					errIssue(CodeMissingFile, "Missing required file: "+r+".", r, "", -1),
				}
			},
			exit: 2,
		},
		{
			name:   "schema 9.9",
			mutate: func(t *testing.T, p string) { editFile(t, p, ManifestFile, replace(`"0.1"`, `"9.9"`)) },
			want: func(p string) []Issue {
				m := filepath.Join(p, ManifestFile)
				return []Issue{errIssue(CodeUnsupportedSchema, m+": unsupported schema version '9.9'", m, "", -1)}
			},
			exit: 2,
		},
		{
			name:   "manifest not JSON",
			mutate: func(t *testing.T, p string) { editFile(t, p, ManifestFile, func(string) string { return "{" }) },
			want: func(p string) []Issue {
				m := filepath.Join(p, ManifestFile)
				return []Issue{errIssue(CodeInvalidJSON, m+": invalid JSON: offset 1: invalid JSON: expected a string key", m, "", -1)}
			},
			exit: 2,
		},
		{
			name: "manifest field of the wrong type",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, ManifestFile, replace(`"agent_name": "agent"`, `"agent_name": 5`))
			},
			want: func(p string) []Issue {
				m := filepath.Join(p, ManifestFile)
				return []Issue{errIssue(CodeInvalidManifest, m+": invalid manifest: agent_name must be a non-empty string", m, "", -1)}
			},
			exit: 2,
		},
		{
			name: "redactions entries not a list",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, RedactionsFile, replace(`"entries": []`, `"entries": "bad"`))
			},
			want: func(p string) []Issue {
				r := filepath.Join(p, RedactionsFile)
				return []Issue{errIssue(CodeInvalidManifest, r+": invalid redactions metadata: entries must be a list", r, "", -1)}
			},
			exit: 2,
		},
		{
			name: "required path is a directory",
			mutate: func(t *testing.T, p string) {
				r := filepath.Join(p, RedactionsFile)
				os.Remove(r)
				os.Mkdir(r, 0o755)
			},
			want: func(p string) []Issue {
				r := filepath.Join(p, RedactionsFile)
				return []Issue{errIssue(CodeInvalidManifest, "required path is not a file: "+r, r, "", -1)}
			},
			exit: 2,
		},
		{
			name:   "bundle path missing",
			mutate: func(t *testing.T, p string) { os.RemoveAll(p) },
			want: func(p string) []Issue {
				return []Issue{errIssue(CodeMissingFile, "Missing required file: "+p+".", p, "", -1)}
			},
			exit: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := bundleOf(t, validTrace(t))
			tt.mutate(t, p)
			rep := ValidateBundle(context.Background(), p, tt.opts...)
			if diff := cmp.Diff(tt.want(p), rep.Issues); diff != "" {
				t.Errorf("issues (-want +got):\n%s", diff)
			}
			if got := rep.ExitCode(); got != tt.exit {
				t.Errorf("ExitCode() = %d, want %d", got, tt.exit)
			}
			tr, err := Load(p)
			if rep.Loaded != (err == nil) {
				t.Errorf("Loaded = %v, but Load error = %v", rep.Loaded, err)
			}
			if err != nil {
				return
			}
			var memOpts []ValidateOption
			if slices.Contains(rep.Codes(), CodeIntegrityMismatch) {
				memOpts = append(memOpts, CheckIntegrity()) // compare payload-hash issues too
			}
			mem := Validate(context.Background(), tr, append(memOpts, tt.opts...)...)
			streamed := slices.DeleteFunc(slices.Clone(rep.Issues), func(i Issue) bool { return i.Code == CodeIntegrityMismatch })
			if diff := cmp.Diff(streamed, mem.Issues); diff != "" {
				t.Errorf("Validate(context.Background(), Load) differs from ValidateBundle (-stream +memory):\n%s", diff)
			}
		})
	}
}

func TestValidateBundleLocationWithoutPathPrefix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "run.trace") // wrong suffix
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range coreFiles {
		if err := os.WriteFile(filepath.Join(p, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := ValidateBundle(context.Background(), p)
	want := []Issue{errIssue(CodeInvalidManifest, "trace bundle path must end with .sftrace: "+p, p, "", -1)}
	if diff := cmp.Diff(want, rep.Issues); diff != "" {
		t.Errorf("issues (-want +got):\n%s", diff)
	}
}

func TestIssueString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		is   Issue
		want string
	}{
		{errIssue(CodeRunStartCount, "found 0.", "events.jsonl", "", -1), "run_start_count: found 0. (events.jsonl)"},
		{errIssue(CodeDuplicateEventID, "Event e appears more than once.", "", "e", 1), "duplicate_event_id: Event e appears more than once."},
		{warnIssue(CodeRunEndCount, "Found 2.", "events.jsonl", "", -1), "warning: run_end_count: Found 2. (events.jsonl)"},
	}
	for _, tt := range tests {
		if got := tt.is.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

// TestDecodeEventsWorkers checks that the batched, parallel decoding of
// ValidateBundle yields the same events and the same first error as the
// sequential reader, with errors placed across batch boundaries.
func TestDecodeEventsWorkers(t *testing.T) {
	t.Parallel()
	long := func(b *Builder) {
		b.RunStart(nil)
		for i := range 400 {
			b.State("k", i, i+1)
		}
		b.RunEnd(RunCompleted, nil)
	}
	tests := []struct {
		name string
		edit func(string) string
	}{
		{"clean", func(s string) string { return s }},
		{"blank line in the second batch", editLine(249, func(string) string { return "" })},
		{"bad event at a batch boundary", editLine(127, replace(`"type":"state_change"`, `"type":"nope"`))},
		{"two errors, the first wins", func(s string) string {
			s = editLine(300, func(string) string { return "{" })(s)
			return editLine(5, func(string) string { return "[]" })(s)
		}},
		{"truncated last line", func(s string) string { return strings.TrimSuffix(s, "\n")[:len(s)-20] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := bundleOf(t, built(t, long))
			editFile(t, p, EventsFile, tt.edit)
			type result struct {
				IDs    []string
				Hashes int
				Err    string
				Digest string
			}
			run := func(workers, limit int) result {
				r, err := Open(p, hashEvents())
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				var res result
				err = decodeEvents(r, true, workers, func(ev *Event, sums *payloadSums) bool {
					res.IDs = append(res.IDs, strings.Clone(ev.ID)) // borrowed from the line
					if sums.out.ok {
						res.Hashes++
					}
					return limit == 0 || len(res.IDs) < limit
				})
				if err != nil {
					res.Err = err.Error()
				} else if limit == 0 {
					res.Digest = r.eventsDigest()
				}
				return res
			}
			want := run(1, 0)
			for _, workers := range []int{2, 3, 8} {
				if diff := cmp.Diff(want, run(workers, 0)); diff != "" {
					t.Errorf("%d workers differ from the sequential reader (-want +got):\n%s", workers, diff)
				}
			}
			if got := run(2, 150); len(got.IDs) != min(150, len(want.IDs)) || got.Err != "" && len(want.IDs) >= 150 {
				t.Errorf("stopping after 150 events: got %d events, error %q", len(got.IDs), got.Err)
			}
		})
	}
}

// TestIDKey checks that the validator's id keys are equal exactly when the
// ids are, over ids made to look alike (hex runs of odd and even length,
// prefixes that end in hex digits), and that the ids stepfork writes are
// kept in 22 bytes.
func TestIDKey(t *testing.T) {
	t.Parallel()
	if k := idKey(nil, "evt_b8d3d16ef0ab46829c8c290881bc1068"); len(k) != 22 {
		t.Errorf("key of a stepfork event id has %d bytes, want 22", len(k))
	}
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := "0123456789abcdefAF_evt"
	ids := []string{"", "a", "evt_", "0123456789abcdef", "a0123456789abcdef", "0123456789abcdef0", "00123456789abcdef"}
	for range 3000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
			if r.IntN(3) > 0 {
				b[i] = alphabet[r.IntN(16)] // long hex runs
			}
		}
		ids = append(ids, string(b))
	}
	keys := map[string]string{}
	for _, id := range ids {
		k := string(idKey(nil, id))
		if other, ok := keys[k]; ok && other != id {
			t.Fatalf("ids %q and %q have the same key %x", id, other, k)
		}
		keys[k] = id
		if again := string(idKey([]byte("scratch"), id)); again != "scratch"+k {
			t.Fatalf("idKey(%q) appended to a buffer gives %x, want %x", id, again, k)
		}
	}
}

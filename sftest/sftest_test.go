package sftest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/hexops/autogold/v2"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// fakeT stands in for the test's t so that a helper's failure can be
// checked: Errorf and Fatalf record the message, Fatalf then ends the
// goroutine as testing.T does.
type fakeT struct {
	testing.TB
	mu     sync.Mutex
	msgs   []string
	fatal  bool
	helper bool
}

func (f *fakeT) Helper()             { f.mu.Lock(); f.helper = true; f.mu.Unlock() }
func (f *fakeT) Logf(string, ...any) {}
func (f *fakeT) Log(...any)          {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.fatal = true
	f.mu.Unlock()
	runtime.Goexit()
}

// failure runs fn with a fakeT and returns the one fatal message it
// reported; the test fails if fn did not fail exactly once, fatally, after
// calling Helper.
func failure(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ft)
	}()
	<-done
	if !ft.fatal || len(ft.msgs) != 1 {
		t.Fatalf("want one fatal failure, got fatal=%v %q", ft.fatal, ft.msgs)
	}
	if !ft.helper {
		t.Errorf("the helper did not call t.Helper")
	}
	return ft.msgs[0]
}

// wantLines checks that msg's lines start with the given prefixes, in order.
func wantLines(t *testing.T, msg string, prefixes ...string) {
	t.Helper()
	lines := strings.Split(msg, "\n")
	if len(lines) < len(prefixes) {
		t.Fatalf("message has %d lines, want at least %d:\n%s", len(lines), len(prefixes), msg)
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d:\n got: %s\nwant: %s…\nmessage:\n%s", i+1, lines[i], p, msg)
		}
	}
}

func loadRefund(t testing.TB) *trace.Trace {
	t.Helper()
	return sftest.Load(t, "testdata/refund-failure.sftrace")
}

func TestLoad(t *testing.T) {
	t.Parallel()
	tr := loadRefund(t)
	if len(tr.Events) != 17 || tr.Path != "testdata/refund-failure.sftrace" {
		t.Fatalf("loaded %d events from %q", len(tr.Events), tr.Path)
	}
	msg := failure(t, func(tb testing.TB) { sftest.Load(tb, "testdata/missing.sftrace") })
	wantLines(t, msg, "sftest.Load: ", "(record it with sftest.Record and -stepfork.record")
	if !strings.Contains(msg, "missing.sftrace") {
		t.Errorf("the message does not name the bundle: %s", msg)
	}
}

// A fixture edited by hand fails Load, saying what no longer matches and
// what to do, unless SkipVerify says to load it as it is.
func TestLoadVerifies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, want string
		edit             func(string) string
	}{
		{"a payload", trace.EventsFile, "output_hash", func(s string) string {
			return strings.Replace(s, `"customer":"c_77"`, `"customer":"c_78"`, 1)
		}},
		{"the manifest", trace.ManifestFile, "manifest.json: ", func(s string) string {
			return strings.Replace(s, `"agent_name": "refund-failure"`, `"agent_name": "refund-fixture"`, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "edited.sftrace")
			if err := os.CopyFS(path, os.DirFS("testdata/refund-failure.sftrace")); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(path, tc.file)
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			edited := tc.edit(string(data))
			if edited == string(data) {
				t.Fatalf("the edit changed nothing in %s", tc.file)
			}
			if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			msg := failure(t, func(tb testing.TB) { sftest.Load(tb, path) })
			wantLines(t, msg, "sftest.Load: "+path+" was changed after it was written:")
			for _, w := range []string{tc.want, "record it again (sftest.Record with -stepfork.record, or replay.Record)",
				"trace.Overwrite", `sftest.Load(t, "` + path + `", sftest.SkipVerify())`} {
				if !strings.Contains(msg, w) {
					t.Errorf("the message lacks %q:\n%s", w, msg)
				}
			}
			if tr := sftest.Load(t, path, sftest.SkipVerify()); len(tr.Events) != 17 {
				t.Errorf("SkipVerify loaded %d events", len(tr.Events))
			}
		})
	}
}

func TestRecordFailures(t *testing.T) {
	t.Parallel()
	t.Run("missing", func(t *testing.T) {
		msg := failure(t, func(tb testing.TB) { sftest.Record(tb, "never-recorded", refundInput, refund.Agent) })
		wantLines(t, msg, "sftest.Record: testdata/never-recorded.sftrace does not exist; record it with:",
			"\tgo test -run '^TestRecordFailures$/^missing$' -stepfork.record='^never-recorded$'")
	})
	t.Run("other input", func(t *testing.T) {
		msg := failure(t, func(tb testing.TB) {
			sftest.Record(tb, "refund-failure", RefundRequest{OrderID: "o_1842", Amount: 90}, refund.Agent)
		})
		wantLines(t, msg, "sftest.Record: the input differs from the one recorded in testdata/refund-failure.sftrace; record it again with:",
			"\tgo test -run '^TestRecordFailures$/^other_input$' -stepfork.record='^refund-failure$'",
			"input (-recorded +given):")
		if !strings.Contains(msg, "- \t\"amount\":   float64(250)") || !strings.Contains(msg, "+ \t\"amount\":   float64(90)") {
			t.Errorf("the message does not show the difference:\n%s", msg)
		}
	})
	t.Run("changed agent", func(t *testing.T) {
		msg := failure(t, func(tb testing.TB) { sftest.Record(tb, "refund-failure", refundInput, changedAgent()) })
		wantLines(t, msg, "sftest.Record: the replay of testdata/refund-failure.sftrace diverged at step 2 (evt_b1e6fbf0a1ba44bd88e97427af9e87a6): call #1: ")
		if !strings.Contains(msg, "record it again with:\n\tgo test -run '^TestRecordFailures$/^changed_agent$' -stepfork.record='^refund-failure$'") {
			t.Errorf("the message does not say how to record again:\n%s", msg)
		}
	})
	t.Run("bad name", func(t *testing.T) {
		msg := failure(t, func(tb testing.TB) { sftest.Record(tb, "../escape", refundInput, refund.Agent) })
		wantLines(t, msg, `sftest.Record: "../escape" is not a trace name`)
	})
}

// changedAgent looks the order up under another id: its first call no
// longer matches the recording.
func changedAgent() replay.Agent {
	getOrder := replay.Tool("get_order", func(_ context.Context, id string) (Order, error) { return Order{OrderID: id}, nil })
	return replay.Typed(func(ctx context.Context, in RefundRequest) (RefundOutcome, error) {
		var err error
		_ = replay.Node(ctx, "lookup", func(ctx context.Context) error {
			_, err = getOrder(ctx, in.OrderID+"-v2")
			return err
		})
		return RefundOutcome{}, err
	})
}

func TestReplay(t *testing.T) {
	t.Parallel()
	tr := loadRefund(t)
	own := newRefundAgent() // its counters are this test's alone
	res := sftest.Replay(t, tr, own.Agent)
	if res.Served != 3 || res.Executed != 0 {
		t.Errorf("frozen replay: served %d, executed %d", res.Served, res.Executed)
	}
	if n := own.tools.Load() + own.models.Load(); n != 0 {
		t.Errorf("a frozen replay executed %d tool or model call(s)", n)
	}
	msg := failure(t, func(tb testing.TB) { sftest.Replay(tb, tr, changedAgent()) })
	wantLines(t, msg,
		"sftest.Replay: the replay of testdata/refund-failure.sftrace diverged at step 2 (evt_b1e6fbf0a1ba44bd88e97427af9e87a6): call #1: tool 'get_order' input diverged from the recording")
	if !strings.Contains(msg, "diff (-recorded +actual):") {
		t.Errorf("the message has no diff:\n%s", msg)
	}
}

func TestForkFailures(t *testing.T) {
	t.Parallel()
	tr := loadRefund(t)
	msg := failure(t, func(tb testing.TB) { sftest.Fork(tb, tr, fork.BeforeNode("approve", 1), refund.Agent) })
	wantLines(t, msg, "sftest.Fork: ")
	if !strings.Contains(msg, "'approve' never executed in this run") {
		t.Errorf("an unresolvable point is not explained:\n%s", msg)
	}
	msg = failure(t, func(tb testing.TB) { sftest.Fork(tb, tr, fork.Step(11), changedAgent()) })
	wantLines(t, msg, "sftest.Fork: fork: the prefix of the base run did not replay before step 11")
}

// The counterfactual assertions on a real variant.
func TestForkAssertions(t *testing.T) {
	t.Parallel()
	base := loadRefund(t)
	v := sftest.Fork(t, base, fork.Failure(), refund.Agent,
		fork.Prompt("decide", "Refunds above the policy limit need approval."), fork.Memoize())
	assert.Completed(t, v)
	assert.Diverged(t, v)
	assert.DivergesInNode(t, v, "decide")
	assert.DivergesAtStep(t, v, 7) // the model call whose prompt changed, not the node around it
	assert.StateChanged(t, v, "decision")
	assert.StateEqual(t, v, "decision", "request_approval")
	assert.StateUnchanged(t, v, "order")
	assert.PathEqual(t, v, []string{"node:lookup", "tool:get_order", "param:policy_limit", "node:decide",
		"llm:fake/fake-1", "decision:action", "state:decision", "run"})
	assert.OutputEqual(t, v, RefundOutcome{Status: "awaiting_approval"})
	assert.NoSuppressedEffects(t, v)
	assert.ChangeApplied(t, v)
	assert.IncurredCostAtMost(t, v, 0.002)
	assert.TokensAtMost(t, v, 120)

	// Without the prompt change the tail issues the refund again, which the
	// guard serves from the recording: the null fork fails as the base did.
	null := sftest.Fork(t, base, fork.Failure(), refund.Agent, fork.Memoize())
	assert.Equivalent(t, null)
	assert.Status(t, null, fork.StatusFailed)
	assert.IncurredCostAtMost(t, null, 0)
}

func TestSweep(t *testing.T) {
	t.Parallel()
	base := loadRefund(t)
	var mu sync.Mutex
	checked := map[string]fork.Status{}
	sw := sftest.Sweep(t, base, fork.Failure(), refund.Agent, []fork.Named{
		{Name: "baseline"},
		{Name: "approval", Changes: []fork.Change{fork.Prompt("decide", "Ask for approval above the limit.")}},
		{Name: "forced escalation", Changes: []fork.Change{fork.Decision("action", "request_approval")}},
	}, func(t *testing.T, name string, v *fork.Variant) {
		t.Parallel()
		mu.Lock()
		checked[t.Name()+" is "+name] = v.Status
		mu.Unlock()
		if v.Status == fork.StatusCompleted {
			assert.ToolNotCalled(t, v, "issue_refund")
		} else {
			assert.ToolFailed(t, v, "issue_refund")
		}
	}, fork.Memoize())
	t.Cleanup(func() {
		want := map[string]fork.Status{"TestSweep/baseline is baseline": fork.StatusFailed, "TestSweep/approval is approval": fork.StatusCompleted,
			"TestSweep/forced_escalation is forced escalation": fork.StatusCompleted}
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(checked) != fmt.Sprint(want) {
			t.Errorf("checked %v, want %v", checked, want)
		}
	})
	if len(sw.Entries) != 3 {
		t.Fatalf("%d entries", len(sw.Entries))
	}
	sftest.Golden(t, sw)
}

func TestForkCheck(t *testing.T) {
	t.Parallel()
	base := loadRefund(t)
	sftest.ForkCheck(t, base, refund.Agent)
	if fails := sftest.NullForks(t.Context(), base, refund.Agent); len(fails) != 0 {
		t.Errorf("NullForks found %d failing point(s) where ForkCheck found none", len(fails))
	}
}

// completedRun records, in memory, a run of the refund agent that completes
// (a small order, refunded).
func completedRun(t testing.TB) *trace.Trace {
	t.Helper()
	res, err := replay.Record(t.Context(), "refund-agent", RefundRequest{OrderID: "o_7-small", Amount: 60}, refund.Agent)
	if err != nil || res.Trace.Status != trace.RunCompleted {
		t.Fatalf("recording a completed run: %v", err)
	}
	return res.Trace
}

// flakyAgent is the refund agent with untraced nondeterminism: its output
// carries a counter the recording does not hold.
func flakyAgent() replay.Agent {
	var mu sync.Mutex
	n := 0
	return replay.Typed(func(ctx context.Context, in RefundRequest) (RefundOutcome, error) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		out, err := refund.Agent(ctx, trace.MustValueOf(in))
		if err != nil {
			return RefundOutcome{}, err
		}
		o := out.(RefundOutcome)
		o.RefundID = fmt.Sprint("rf_", k)
		return o, nil
	})
}

func TestNullForksFindUntracedNondeterminism(t *testing.T) {
	t.Parallel()
	base := completedRun(t)
	fails := sftest.NullForks(t.Context(), base, flakyAgent())
	if len(fails) != len(fork.Points(base)) {
		t.Fatalf("%d of %d points fail; the output differs from every point", len(fails), len(fork.Points(base)))
	}
	first := fails[0]
	if got, want := sftest.PointName(first.Point), "step1 before 'lookup' execution 1"; got != want {
		t.Errorf("first failing point %q, want %q", got, want)
	}
	if msg := first.Err.Error(); !strings.HasPrefix(msg, "expected the variant to behave like the base; it diverged at step 14: run 'run' changed: output.refund_id \"rf_o_7-small\" → \"rf_") {
		t.Errorf("the failure does not start with the first divergence:\n%s", msg)
	}
}

func TestMinimize(t *testing.T) {
	t.Parallel()
	base := loadRefund(t)
	failed := func(v *fork.Variant) bool { return v.Status == fork.StatusFailed }

	// The refund the tail issues is a side effect: the guard blocks it unless
	// the prefix holds its recorded result, so the prefix must reach past it.
	min := sftest.Minimize(t, base, refund.Agent, failed)
	if n := len(min.Events); n != 15 {
		t.Errorf("minimized to %d events, want 15 (up to the 'decide' node's exit at step 14)", n)
	}
	if info, err := fork.ReadInfo(min); err != nil || info.ParentRunID != base.RunID {
		t.Errorf("the minimized trace's provenance: %+v, %v", info, err)
	}
	v := sftest.Fork(t, min, fork.Step(14), refund.Agent)
	assert.Status(t, v, fork.StatusFailed)

	// With issue_refund allowed to run (it is a fake here), the agent
	// reproduces the failure from its input alone.
	min = sftest.Minimize(t, base, refund.Agent, failed, fork.Allow("issue_refund", "get_order"))
	if n := len(min.Events); n != 2 {
		t.Errorf("minimized to %d events, want 2 (run_start and the first event)", n)
	}
	path := filepath.Join(t.TempDir(), "min.sftrace")
	if err := min.Save(path); err != nil {
		t.Fatalf("the minimized trace does not save: %v", err)
	}

	msg := failure(t, func(tb testing.TB) {
		sftest.Minimize(tb, base, refund.Agent, func(*fork.Variant) bool { return false })
	})
	wantLines(t, msg, "sftest.Minimize: the failure does not reproduce even from the longest prefix (up to step 16, at the run's end)")
}

func TestRender(t *testing.T) {
	t.Parallel()
	base := loadRefund(t)
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"trace", base},
		{"replay", sftest.Replay(t, base, refund.Agent)},
		{"diff", diff.Runs(base, base)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sftest.Golden(t, tc.v)
		})
	}
	for _, bad := range []any{nil, (*fork.Variant)(nil), (*trace.Trace)(nil), "text"} {
		if _, err := sftest.Render(bad); err == nil {
			t.Errorf("Render(%#v) succeeded", bad)
		}
	}
}

// Ids, run ids and UUIDs inside payloads become numbered placeholders, the
// same value always the same one; times of any width become <time>.
func TestRenderNormalizes(t *testing.T) {
	t.Parallel()
	b := trace.NewBuilder("ids")
	b.RunStart(nil)
	b.Tool("lookup", map[string]any{"q": "x"}, map[string]any{
		"run":  "run_0123456789abcdef0123456789abcdef",
		"evt":  "evt_fedcba9876543210fedcba9876543210",
		"id":   "5f0c8a53-1b7e-4c1e-9a0e-3b8f2d6c7a10",
		"same": "5f0c8a53-1b7e-4c1e-9a0e-3b8f2d6c7a10",
		"at":   "2026-03-14T09:30:00.123456Z",
		"also": []string{"2026-03-14T09:30:00Z", "2026-03-14 09:30:00.1+00:00", "2026-03-14T09:30:00.123456789-07:00"},
	})
	b.RunEnd(trace.RunCompleted, "ok")
	text, err := sftest.Render(b.MustTrace())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"also":["<time>","<time>","<time>"],"at":"<time>","evt":"<evt-1>","id":"<uuid-1>","run":"<run-1>","same":"<uuid-1>`
	if !strings.Contains(text, want) {
		t.Errorf("rendering:\n%s\nwant it to contain %s", text, want)
	}
}

// Golden's failures, seen from a child test process: a mismatch and a
// missing file both say how to update, and ForkCheck names a failing point's
// subtest after the point.
func TestHelperProcessFailures(t *testing.T) {
	if os.Getenv("SFTEST_CHILD") != "" {
		t.Skip("running as the child")
	}
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		child string
		want  []string
	}{
		{"TestChildGoldenMismatch", []string{
			"sftest.Golden: the rendering differs from testdata/TestChildGoldenMismatch.golden; if the change is intended, accept it with:",
			"go test -run '^TestChildGoldenMismatch$' -update",
			"mismatch (-want +got):",
			"--- FAIL: TestChildGoldenMismatch"}},
		{"TestChildGoldenMissing", []string{
			"sftest.Golden: testdata/TestChildGoldenMissing/sub.golden does not exist; create it with:",
			"go test -run '^TestChildGoldenMissing$/^sub$' -update"}},
		{"TestChildGoldenNamed", []string{
			"sftest.Golden: the rendering differs from testdata/named-mismatch.golden; if the change is intended, accept it with:",
			"go test -run '^TestChildGoldenNamed$' -update",
			"mismatch (-want +got):"}},
		{"TestChildGoldenDirNamed", []string{
			"sftest.Golden: the rendering differs from testdata/elsewhere/named-mismatch.golden; if the change is intended, accept it with:",
			"mismatch (-want +got):"}},
		{"TestChildGoldenNamedMissing", []string{
			"sftest.Golden: testdata/elsewhere/never-written.golden does not exist; create it with:"}},
		{"TestChildForkCheck", []string{
			"--- FAIL: TestChildForkCheck/step1_before_'lookup'_execution_1",
			"a null fork at step 1 (before 'lookup' execution 1) does not reproduce the base: expected the variant to behave like the base; it diverged at step 14: run 'run' changed: output.refund_id"}},
	} {
		t.Run(tc.child, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(exe, "-test.run=^"+tc.child+"$", "-test.v")
			cmd.Env = append(os.Environ(), "SFTEST_CHILD=1")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the child test should fail, got %v:\n%s", err, out)
			}
			text := regexp.MustCompile(`\x1b\[[0-9;]*m`).ReplaceAllString(string(out), "")
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("child output lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

func child(t *testing.T) {
	if os.Getenv("SFTEST_CHILD") == "" {
		t.Skip("run by TestHelperProcessFailures")
	}
}

func TestChildGoldenMismatch(t *testing.T) {
	child(t)
	sftest.Golden(t, loadRefund(t)) // its golden holds another run
}

func TestChildGoldenMissing(t *testing.T) {
	child(t)
	t.Run("sub", func(t *testing.T) { sftest.Golden(t, loadRefund(t)) })
}

// With autogold's Name and Dir the messages name the file autogold
// compares with.
func TestChildGoldenNamed(t *testing.T) {
	child(t)
	sftest.Golden(t, loadRefund(t), autogold.Name("named-mismatch")) // holds another rendering
}

func TestChildGoldenDirNamed(t *testing.T) {
	child(t)
	sftest.Golden(t, loadRefund(t), autogold.Dir("testdata/elsewhere"), autogold.Name("named-mismatch"))
}

func TestChildGoldenNamedMissing(t *testing.T) {
	child(t)
	sftest.Golden(t, loadRefund(t), autogold.Name("never-written"), autogold.Dir("testdata/elsewhere"))
}

func TestChildForkCheck(t *testing.T) {
	child(t)
	sftest.ForkCheck(t, completedRun(t), flakyAgent())
}

// TestRecordNamesTheAgent: a new recording's agent is named by
// sftest.AgentName, or after the whole trace name, not after the last
// element of its path ("fork/big" recorded an agent called "big").
func TestRecordNamesTheAgent(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^TestChildRecordNames$", "-test.v", "-stepfork.record=.")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SFTEST_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	for name, want := range map[string]string{"fork/big": "fork/big", "named": "refund-desk"} {
		tr, err := trace.Load(filepath.Join(dir, "testdata", name+".sftrace"))
		if err != nil {
			t.Fatal(err)
		}
		if tr.AgentName != want {
			t.Errorf("Record(%q): agent %q, want %q", name, tr.AgentName, want)
		}
	}
}

func TestChildRecordNames(t *testing.T) {
	child(t)
	sftest.Record(t, "fork/big", refundInput, refund.Agent)
	sftest.Record(t, "named", refundInput, refund.Agent, sftest.AgentName("refund-desk"))
}

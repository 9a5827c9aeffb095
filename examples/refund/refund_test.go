package refund_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/examples/refund"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// The committed traces were recorded against the fake OpenAI server of
// fakeopenai_test.go:
//
//	go test -run TestRecord -stepfork.record=refund
//
// refund-small.sftrace is a 19.90 USD cable refund that a person confirms and
// the ledger pays; refund-failure.sftrace a 249.00 USD blender refund that the
// shipped prompt lets the model propose and the refund policy refuses.
var (
	smallRequest   = refund.Request{OrderID: "o_1001", Message: "The cable stopped working after two days. Can I get my money back?"}
	failureRequest = refund.Request{OrderID: "o_1842", Message: "My blender arrived with a cracked jar. I want a full refund."}
)

// world is the agent under test and everything it touches: the fake model
// server, the ledger and approvals files in a temporary directory, and a
// person who approves every refund. Its counters say what really happened.
type world struct {
	ai     *fakeOpenAI
	agent  *refund.Agent
	ledger string // issue_refund's side effect
	queue  string // request_approval's side effect
	asked  atomic.Int64
}

func newWorld(t testing.TB) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{ai: newFakeOpenAI(t), ledger: filepath.Join(dir, "ledger.tsv"), queue: filepath.Join(dir, "approvals.tsv")}
	w.agent = refund.New(refund.Config{
		BaseURL: w.ai.BaseURL(), APIKey: fakeAPIKey, Model: "gpt-4o-mini",
		LedgerPath: w.ledger, ApprovalsPath: w.queue,
		Approver: func(context.Context, refund.Proposal) (refund.Approval, error) {
			w.asked.Add(1)
			return refund.Approval{Approved: true, By: "dana@shop.example"}, nil
		},
	})
	return w
}

// lines returns the lines of the file at path (none when it does not exist).
func lines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// untouched checks that nothing touched the world: no model request, no
// person asked, no ledger line, no approval filed.
func (w *world) untouched(t testing.TB) {
	t.Helper()
	if n := w.ai.requests.Load(); n != 0 {
		t.Errorf("the model server answered %d request(s); want none", n)
	}
	if n := w.asked.Load(); n != 0 {
		t.Errorf("the approver was asked %d time(s); want never", n)
	}
	if got := lines(t, w.ledger); len(got) != 0 {
		t.Errorf("the ledger has %d line(s): %q; want it empty: a replay or a fork must never pay a refund", len(got), got)
	}
	if got := lines(t, w.queue); len(got) != 0 {
		t.Errorf("the approvals queue has %d line(s): %q; want it empty", len(got), got)
	}
}

// recording reports whether go test runs with -stepfork.record matching name.
func recording(name string) bool {
	f := flag.Lookup(sftest.RecordFlag)
	if f == nil || f.Value.String() == "" {
		return false
	}
	re, err := regexp.Compile(f.Value.String())
	return err == nil && re.MatchString(name)
}

// policyViolation reports whether v failed on the refund policy.
func policyViolation(v *fork.Variant) bool {
	var pv *refund.PolicyViolation
	return v.Status == fork.StatusFailed && v.Err != nil &&
		(errors.As(v.Err, &pv) || strings.Contains(v.Err.Error(), "decision violates refund policy"))
}

// TestRecord records the committed traces (with -stepfork.record=refund) or,
// without the flag, replays them: sftest.Record never touches the world
// unless asked to record.
func TestRecord(t *testing.T) {
	tests := []struct {
		name       string
		req        refund.Request
		wantStatus trace.RunStatus
		wantLedger int // lines written while recording
	}{
		{"refund-small", smallRequest, trace.RunCompleted, 1},
		{"refund-failure", failureRequest, trace.RunFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			tr := sftest.Record(t, tt.name, tt.req, w.agent.Run)

			if tr.Status != tt.wantStatus {
				t.Fatalf("%s: status %s, want %s", tt.name, tr.Status, tt.wantStatus)
			}
			assert.ToolOrder(t, tr, "lookup_order", "get_refund_policy")
			assert.ToolArguments(t, tr, "lookup_order", map[string]any{"order_id": tt.req.OrderID})
			if recording(tt.name) {
				if got := lines(t, w.ledger); len(got) != tt.wantLedger {
					t.Errorf("recording wrote %d ledger line(s) %q; want %d", len(got), got, tt.wantLedger)
				}
				return
			}
			w.untouched(t)

			// The API key went in the Authorization header of every request and
			// never into the bundle.
			for _, f := range []string{"events.jsonl", "manifest.json"} {
				b, err := os.ReadFile(filepath.Join("testdata", tt.name+".sftrace", f))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(b), fakeAPIKey) {
					t.Errorf("%s of %s holds the API key", f, tt.name)
				}
			}
		})
	}
}

// TestReplayIsFrozen replays the confirmed refund: every tool result, both
// model calls (the streamed one frame by frame) and the person's approval are
// served from the recording, so the ledger stays empty and nobody is asked.
func TestReplayIsFrozen(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := sftest.Load(t, "testdata/refund-small.sftrace")

	res := sftest.Replay(t, base, w.agent.Run)

	if res.Executed != 0 || res.Served != 5 {
		t.Errorf("replay executed %d and served %d call(s); want 0 and 5", res.Executed, res.Served)
	}
	out, ok := res.Output.(refund.Outcome)
	if !ok || out.Status != "refunded" || out.RefundID != "rf_o_1001" || !strings.Contains(out.Reply, "refunded 19.90 USD") {
		t.Errorf("replayed output %#v; want the recorded refund rf_o_1001 and its reply", res.Output)
	}
	assert.Trajectory(t, res, []string{"lookup_order", "get_refund_policy", "issue_refund"}, assert.Strict)
	assert.ToolArguments(t, res, "issue_refund", refund.RefundOrder{OrderID: "o_1001", Amount: 19.90, ApprovedBy: "dana@shop.example"})
	assert.ModelCallCount(t, res, "openai/gpt-4o-mini", 2)
	assert.MaxSteps(t, res, 40)
	sftest.Golden(t, res)
	w.untouched(t)
}

// TestRefundNeedsApproval is the product test. The recorded run failed: the
// shipped prompt let the model propose a 249.00 USD refund, above the policy's
// automatic limit. Fork it where it failed, change the "decide" prompt to
// require approval above the limit: the lookup is served from the recording,
// "decide" runs again against the model, and the agent files the case for the
// refunds team instead of paying. request_approval is allowed to run for real
// (it only files a case); issue_refund would be blocked by the side-effect
// guard, and is not even called.
func TestRefundNeedsApproval(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := sftest.Load(t, "testdata/refund-failure.sftrace")

	v := sftest.Fork(t, base, fork.Failure(), w.agent.Run,
		fork.Prompt("decide", refund.ApprovalPrompt), fork.Allow("request_approval"))

	assert.Completed(t, v)
	assert.ToolNotCalled(t, v, "issue_refund")
	assert.ToolCalled(t, v, "request_approval")
	assert.StateChanged(t, v, "decision")
	assert.StateEqual(t, v, "outcome", "awaiting_approval")
	assert.ChangeApplied(t, v)
	assert.NoSuppressedEffects(t, v)
	assert.DivergesInNode(t, v, "decide")
	assert.TokensAtMost(t, v, 1000)
	sftest.Golden(t, v)

	if got := lines(t, w.ledger); len(got) != 0 {
		t.Errorf("the ledger has %q; want it empty", got)
	}
	if got := lines(t, w.queue); len(got) != 1 || !strings.HasPrefix(got[0], "apr_o_1842\to_1842\t249.00\t") {
		t.Errorf("the approvals queue has %q; want the one case for o_1842", got)
	}
	if n := w.ai.streams.Load(); n != 1 || w.ai.requests.Load() != 2 {
		t.Errorf("the model server answered %d request(s), %d streamed; want decide (streamed) and reply", w.ai.requests.Load(), n)
	}
}

// TestDecidePromptSweep tries several fixes side by side, from the same
// failure point, one subtest and one golden file each.
func TestDecidePromptSweep(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := sftest.Load(t, "testdata/refund-failure.sftrace")
	capPrompt := refund.DecidePrompt + " Refund at most the automatic limit of the policy."
	approved := refund.Approval{Approved: true, By: "dana@shop.example"}

	tests := []struct {
		name        string
		changes     []fork.Change
		wantStatus  fork.Status
		wantOutcome string // the outcome state; "" when the run never gets there
		suppressed  string // the effect the guard holds back, if any
	}{
		{"approval-prompt", []fork.Change{fork.Prompt("decide", refund.ApprovalPrompt)},
			fork.StatusCompleted, "awaiting_approval", ""},
		{"forced-escalation", []fork.Change{fork.Decision("action", "escalate")},
			fork.StatusCompleted, "awaiting_approval", ""},
		{"capped-declined", []fork.Change{fork.Prompt("decide", capPrompt),
			fork.HumanResponse("confirm_refund", refund.Approval{Approved: false, By: "dana@shop.example", Note: "ask for photos"})},
			fork.StatusCompleted, "declined", ""},
		{"capped-approved", []fork.Change{fork.Prompt("decide", capPrompt), fork.HumanResponse("confirm_refund", approved)},
			fork.StatusBlocked, "", "issue_refund"},
		{"bigger-model", []fork.Change{fork.Model("decide", "gpt-4.1")},
			fork.StatusFailed, "", ""},
	}
	variants := make([]fork.Named, len(tests))
	want := make(map[string]int, len(tests))
	for i, tt := range tests {
		variants[i] = fork.Named{Name: tt.name, Changes: tt.changes}
		want[tt.name] = i
	}

	sweep := sftest.Sweep(t, base, fork.Failure(), w.agent.Run, variants, func(t *testing.T, name string, v *fork.Variant) {
		tt := tests[want[name]]
		assert.Status(t, v, tt.wantStatus)
		assert.ToolCallCount(t, v, "lookup_order", 1, "the lookup is served once from the recording")
		if tt.wantOutcome != "" {
			assert.StateEqual(t, v, "outcome", tt.wantOutcome)
		}
		if tt.suppressed != "" {
			if len(v.Suppressed) != 1 || v.Suppressed[0].Tool != tt.suppressed {
				t.Errorf("suppressed %+v; want the guard to hold back %s", v.Suppressed, tt.suppressed)
			}
		} else {
			assert.NoSuppressedEffects(t, v)
		}
		if tt.wantStatus == fork.StatusFailed && !policyViolation(v) {
			t.Errorf("variant failed with %v; want the refund policy violation again", v.Err)
		}
		sftest.Golden(t, v)
	}, fork.Allow("request_approval"))

	sftest.Golden(t, sweep)
	if got := lines(t, w.ledger); len(got) != 0 {
		t.Errorf("the ledger has %q; want it empty: the guard blocks issue_refund in every fork", got)
	}
	if n := w.asked.Load(); n != 0 {
		t.Errorf("the approver was asked %d time(s); want never (the sweep answers for the person)", n)
	}
}

// TestForkCheck null-forks both recordings at every fork point: with no
// change, each must reproduce its base exactly, serving everything.
func TestForkCheck(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"refund-small", "refund-failure"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			sftest.ForkCheck(t, sftest.Load(t, "testdata/"+name+".sftrace"), w.agent.Run)
			w.untouched(t)
		})
	}
}

// TestMinimize cuts the failed run down to the shortest recorded prefix from
// which the agent still fails on the refund policy: the trace to commit as a
// small regression test.
func TestMinimize(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	base := sftest.Load(t, "testdata/refund-failure.sftrace")

	min := sftest.Minimize(t, base, w.agent.Run, policyViolation)

	if len(min.Events) >= len(base.Events) {
		t.Errorf("minimized trace has %d events; want fewer than the base's %d", len(min.Events), len(base.Events))
	}
	assert.ToolCalled(t, min, "get_refund_policy", "the policy lookup is needed to fail")
	assert.ModelCallCount(t, min, "openai/gpt-4o-mini", 0)
	sftest.Golden(t, min)

	// The minimized trace reproduces the failure on its own.
	last := fork.Points(min)
	v := sftest.Fork(t, min, last[len(last)-1].At(), w.agent.Run)
	if !policyViolation(v) {
		t.Errorf("fork of the minimized trace: status %s, error %v; want the policy violation", v.Status, v.Err)
	}
	if got := lines(t, w.ledger); len(got) != 0 {
		t.Errorf("the ledger has %q; want it empty", got)
	}
}

// TestLive runs the agent with no stepfork session, as in production: the
// wrappers pass through, the model server answers, the person is asked, and
// the ledger and approvals queue are written.
func TestLive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		req         refund.Request
		wantStatus  string
		wantLedger  int
		wantQueue   int
		wantAsked   int64
		replyPrefix string
	}{
		{smallRequest, "refunded", 1, 0, 1, "Hello! About your order: refunded 19.90 USD (refund rf_o_1001)"},
		{refund.Request{OrderID: "o_2210", Message: "It leaks."}, "refunded", 1, 0, 1, "Hello! About your order: refunded 89.00 USD"},
		{refund.Request{OrderID: "o_0950", Message: "I changed my mind."}, "denied", 0, 0, 0, "Hello! About your order: denied"},
	}
	for _, tt := range tests {
		t.Run(tt.req.OrderID, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			out, err := w.agent.Handle(t.Context(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != tt.wantStatus || !strings.HasPrefix(out.Reply, tt.replyPrefix) {
				t.Errorf("outcome %+v; want status %s and a reply starting %q", out, tt.wantStatus, tt.replyPrefix)
			}
			if got := lines(t, w.ledger); len(got) != tt.wantLedger {
				t.Errorf("ledger %q; want %d line(s)", got, tt.wantLedger)
			}
			if got := lines(t, w.queue); len(got) != tt.wantQueue {
				t.Errorf("approvals queue %q; want %d line(s)", got, tt.wantQueue)
			}
			if got := w.asked.Load(); got != tt.wantAsked {
				t.Errorf("approver asked %d time(s); want %d", got, tt.wantAsked)
			}
		})
	}
}

// TestLiveEndpoint runs the agent once, recorded, against the endpoint of the
// environment when STEPFORK_LIVE=1 and OPENAI_BASE_URL are set (Ollama:
// OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2). A real
// model may decide anything; the test checks that the run was recorded and
// replays frozen.
func TestLiveEndpoint(t *testing.T) {
	if os.Getenv("STEPFORK_LIVE") != "1" || os.Getenv(refund.EnvBaseURL) == "" {
		t.Skip("set STEPFORK_LIVE=1 and OPENAI_BASE_URL (OPENAI_API_KEY, OPENAI_MODEL) to run against a real endpoint")
	}
	cfg := refund.ConfigFromEnv()
	dir := t.TempDir()
	cfg.LedgerPath, cfg.ApprovalsPath = filepath.Join(dir, "ledger.tsv"), filepath.Join(dir, "approvals.tsv")
	agent := refund.New(cfg)
	rec, err := replay.Record(t.Context(), "refund-live", failureRequest, agent.Run)
	t.Logf("live run: status %s, error %v", rec.Trace.Status, err)
	assert.ToolCalled(t, rec, "lookup_order")
	sftest.Replay(t, rec.Trace, agent.Run)
}

// TestWrongAPIKey: the server's refusal reaches the caller as the SDK's error,
// naming the phase, and nothing is paid.
func TestWrongAPIKey(t *testing.T) {
	t.Parallel()
	ai := newFakeOpenAI(t)
	ledger := filepath.Join(t.TempDir(), "ledger.tsv")
	agent := refund.New(refund.Config{BaseURL: ai.BaseURL(), APIKey: "sk-wrong", LedgerPath: ledger})
	_, err := agent.Handle(t.Context(), smallRequest)
	if err == nil || !strings.Contains(err.Error(), "decide: model call:") || !strings.Contains(err.Error(), "401") {
		t.Errorf("error %v; want the decide phase's model call refused with 401", err)
	}
	if got := lines(t, ledger); len(got) != 0 {
		t.Errorf("ledger %q; want it empty", got)
	}
}

package assert_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	testify "github.com/stretchr/testify/assert"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/trace"
)

// recorder is a fake TestingT that keeps what the assertions report.
type recorder struct {
	errors  []string
	helpers int
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() { r.helpers++ }

// bareT has Errorf only, no Helper.
type bareT struct{ errors []string }

func (b *bareT) Errorf(format string, args ...any) {
	b.errors = append(b.errors, fmt.Sprintf(format, args...))
}

// assertion is one call of an assertion under test.
type assertion func(t assert.TestingT) bool

// runAssertion calls a on a fresh recorder and checks its result and failure
// text against wantMsg ("" means the assertion must pass).
func runAssertion(t *testing.T, a assertion, wantMsg string) {
	t.Helper()
	r := &recorder{}
	ok := a(r)
	for i, e := range r.errors {
		// cmp.Diff randomly indents with U+00A0 to keep tests from
		// depending on its exact output; compare with plain spaces.
		r.errors[i] = strings.ReplaceAll(e, "\u00a0", " ")
	}
	if r.helpers == 0 {
		t.Errorf("the assertion did not call Helper")
	}
	switch {
	case wantMsg == "" && (!ok || len(r.errors) != 0):
		t.Fatalf("assertion failed unexpectedly (ok=%v):\n%s", ok, strings.Join(r.errors, "\n---\n"))
	case wantMsg == "":
		return
	case ok:
		t.Fatalf("assertion passed; want failure %q", wantMsg)
	case len(r.errors) != 1:
		t.Fatalf("got %d Errorf calls, want 1: %q", len(r.errors), r.errors)
	case !sameMessage(r.errors[0], wantMsg):
		t.Fatalf("failure message:\n got: %s\nwant: %s", r.errors[0], wantMsg)
	}
}

// sameMessage compares failure messages literally, except for the body of a
// cmp diff (after "(-want +got):"), whose line order cmp may vary between
// runs: there the same lines must appear in any order.
func sameMessage(got, want string) bool {
	const heading = "(-want +got):\n"
	gh, gd, gok := strings.Cut(got, heading)
	wh, wd, wok := strings.Cut(want, heading)
	if gok != wok || gh != wh {
		return false
	}
	gl, wl := strings.Split(gd, "\n"), strings.Split(wd, "\n")
	slices.Sort(gl)
	slices.Sort(wl)
	return slices.Equal(gl, wl)
}

// refundRun is a run of a refund agent: a model call, a lookup, two searches,
// a failed charge, a phase marker and a refund.
func refundRun(t testing.TB) *trace.Trace {
	t.Helper()
	b := trace.NewBuilder("refund-agent")
	b.RunStart(map[string]any{"order": "A1"})
	b.LLM("openai", "gpt-4o", map[string]any{"prompt": "triage"}, map[string]any{"route": "refund"})
	b.Tool("lookup_order", map[string]any{"order": "A1"}, map[string]any{"total": 120})
	b.Tool("search", map[string]any{"q": "KTM"}, []any{})
	b.Tool("search", map[string]any{"q": "DEL", "limit": 5}, []any{"x"})
	charge := b.ToolCall("charge", map[string]any{"amount": 1.5})
	b.ToolFailure(charge, "CardDeclined", "insufficient funds")
	ev := trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "refund", Phase: trace.PhaseEnter})
	b.Add(ev)
	b.Tool("issue_refund", map[string]any{"amount": 120, "api_key": "sk-live-123"}, map[string]any{"ok": true})
	b.LLM("", "local-model", "summarize", "done")
	b.RunEnd(trace.RunCompleted, "refunded")
	return b.MustTrace()
}

func TestReportMessages(t *testing.T) {
	t.Parallel()
	tr := refundRun(t)
	tests := []struct {
		name string
		args []any
		want string
	}{
		{"none", nil, "expected tool 'nope' to be called; actual: ['lookup_order', 'search', 'search', 'charge', 'issue_refund']"},
		{"one string", []any{"after retry"}, "expected tool 'nope' to be called; actual: ['lookup_order', 'search', 'search', 'charge', 'issue_refund']\nMessages:   after retry"},
		{"format", []any{"attempt %d", 3}, "expected tool 'nope' to be called; actual: ['lookup_order', 'search', 'search', 'charge', 'issue_refund']\nMessages:   attempt 3"},
		{"non-string", []any{42}, "expected tool 'nope' to be called; actual: ['lookup_order', 'search', 'search', 'charge', 'issue_refund']\nMessages:   42"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runAssertion(t, func(r assert.TestingT) bool { return assert.ToolCalled(r, tr, "nope", tc.args...) }, tc.want)
		})
	}
}

func TestNilRun(t *testing.T) {
	t.Parallel()
	var nilTrace *trace.Trace
	for _, run := range []assert.Run{nil, nilTrace} {
		err := assert.CheckToolCalled(run, "x")
		if !errors.Is(err, assert.ErrInvalid) || errors.Is(err, assert.ErrMismatch) {
			t.Fatalf("CheckToolCalled(%#v) = %v; want an ErrInvalid error", run, err)
		}
		if !strings.HasPrefix(err.Error(), "no run to check: ") {
			t.Errorf("message %q does not say what is wrong", err)
		}
	}
}

func TestWorksWithoutHelper(t *testing.T) {
	t.Parallel()
	b := &bareT{}
	if assert.ToolCalled(b, refundRun(t), "nope") || len(b.errors) != 1 {
		t.Fatalf("ToolCalled on a TestingT without Helper: errors %q", b.errors)
	}
}

// TestTestifyCollectT uses the assertions inside testify's EventuallyWithT and
// with a bare CollectT, whose only reporting method is Errorf.
func TestTestifyCollectT(t *testing.T) {
	t.Parallel()
	tr := refundRun(t)
	ok := testify.EventuallyWithT(t, func(c *testify.CollectT) {
		assert.ToolCalled(c, tr, "issue_refund")
		assert.Trajectory(c, tr, []string{"lookup_order", "issue_refund"}, assert.InOrder)
	}, time.Second, time.Millisecond)
	if !ok {
		t.Fatal("EventuallyWithT failed on passing assertions")
	}

	c := &testify.CollectT{}
	if assert.ToolNotCalled(c, tr, "issue_refund") {
		t.Fatal("ToolNotCalled passed on a run that called issue_refund")
	}
	// A failing assertion inside EventuallyWithT makes it fail and copies the
	// message of the last tick to the outer TestingT. The wait is long
	// enough for a tick to finish on a loaded machine (with 20ms none did
	// and there was no message to copy).
	outer := &recorder{}
	if testify.EventuallyWithT(outer, func(c *testify.CollectT) {
		assert.ToolNotCalled(c, tr, "issue_refund")
	}, 500*time.Millisecond, time.Millisecond) {
		t.Fatal("EventuallyWithT passed on a failing assertion")
	}
	if !strings.Contains(strings.Join(outer.errors, "\n"), "expected tool 'issue_refund' not to be called") {
		t.Errorf("EventuallyWithT did not carry the message: %q", outer.errors)
	}
}

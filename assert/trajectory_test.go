package assert_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/trace"
)

const vectorDir = "../testdata/vectors"

func loadVector(t testing.TB, name string) *trace.Trace {
	t.Helper()
	tr, err := trace.Load(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatalf("loading shared test vector: %v", err)
	}
	return tr
}

const refundTools = "['lookup_order', 'search', 'search', 'charge', 'issue_refund']"

type searchArgs struct {
	Q     string `json:"q"`
	Limit int    `json:"limit"`
}

// TestTrajectoryAssertions runs every trajectory assertion once passing and
// once failing, and checks the failure text literally.
func TestTrajectoryAssertions(t *testing.T) {
	t.Parallel()
	tr := refundRun(t)
	tests := []struct {
		name string
		call assertion
		want string // "" = passes
	}{
		{"ToolCalled/pass", func(r assert.TestingT) bool { return assert.ToolCalled(r, tr, "charge") }, ""},
		{"ToolCalled/fail", func(r assert.TestingT) bool { return assert.ToolCalled(r, tr, "notify") },
			"expected tool 'notify' to be called; actual: " + refundTools},

		{"ToolNotCalled/pass", func(r assert.TestingT) bool { return assert.ToolNotCalled(r, tr, "notify") }, ""},
		{"ToolNotCalled/marker key is not a tool", func(r assert.TestingT) bool { return assert.ToolNotCalled(r, tr, "@node") }, ""},
		{"ToolNotCalled/fail", func(r assert.TestingT) bool { return assert.ToolNotCalled(r, tr, "issue_refund") },
			"expected tool 'issue_refund' not to be called; actual: " + refundTools},

		{"ToolCallCount/pass", func(r assert.TestingT) bool { return assert.ToolCallCount(r, tr, "search", 2) }, ""},
		{"ToolCallCount/failed calls count", func(r assert.TestingT) bool { return assert.ToolCallCount(r, tr, "charge", 1) }, ""},
		{"ToolCallCount/zero", func(r assert.TestingT) bool { return assert.ToolCallCount(r, tr, "notify", 0) }, ""},
		{"ToolCallCount/fail", func(r assert.TestingT) bool { return assert.ToolCallCount(r, tr, "search", 1) },
			"tool 'search': expected 1 call(s), got 2"},
		{"ToolCallCount/negative", func(r assert.TestingT) bool { return assert.ToolCallCount(r, tr, "search", -1) },
			"count must be a non-negative integer"},

		{"ToolArguments/pass any occurrence", func(r assert.TestingT) bool {
			return assert.ToolArguments(r, tr, "search", map[string]any{"q": "DEL", "limit": 5})
		}, ""},
		{"ToolArguments/secret matches redacted", func(r assert.TestingT) bool {
			return assert.ToolArguments(r, tr, "issue_refund", map[string]any{"amount": 120, "api_key": "sk-other"})
		}, ""},
		{"ToolArguments/fail", func(r assert.TestingT) bool {
			return assert.ToolArguments(r, tr, "search", map[string]any{"q": "BOM"})
		}, "tool 'search': expected arguments {'q': 'BOM'}; actual: [{'q': 'KTM'}, {'limit': 5, 'q': 'DEL'}]"},
		{"ToolArguments/int is not float", func(r assert.TestingT) bool {
			return assert.ToolArguments(r, tr, "charge", map[string]any{"amount": 1})
		}, "tool 'charge': expected arguments {'amount': 1}; actual: [{'amount': 1.5}]\n" +
			"arguments (-want +got):\n" +
			"  map[string]any{\n" +
			"- \t\"amount\": int64(1),\n" +
			"+ \t\"amount\": float64(1.5),\n" +
			"  }"},
		{"ToolArguments/not called", func(r assert.TestingT) bool {
			return assert.ToolArguments(r, tr, "notify", map[string]any{})
		}, "tool 'notify': expected arguments {}; actual: []"},
		{"ToolArguments/secret never printed", func(r assert.TestingT) bool {
			return assert.ToolArguments(r, tr, "issue_refund", map[string]any{"amount": 1, "api_key": "sk-other"})
		}, "tool 'issue_refund': expected arguments {'amount': 1, 'api_key': '[REDACTED]'}; actual: [{'amount': 120, 'api_key': '[REDACTED]'}]\n" +
			"arguments (-want +got):\n" +
			"  map[string]any{\n" +
			"- \t\"amount\":  int64(1),\n" +
			"+ \t\"amount\":  int64(120),\n" +
			"  \t\"api_key\": string(\"[REDACTED]\"),\n" +
			"  }"},
		{"ToolArguments/cmp options", func(r assert.TestingT) bool {
			return assert.ToolArguments(r, tr, "search", searchArgs{Q: "DEL", Limit: 99}, cmpopts.IgnoreFields(searchArgs{}, "Limit"), "message")
		}, ""},
		{"ToolArguments/cmp options fail", func(r assert.TestingT) bool {
			return assert.ToolArguments(r, tr, "search", searchArgs{Q: "BOM"}, cmpopts.IgnoreFields(searchArgs{}, "Limit"), "while %s", "testing")
		}, "tool 'search': expected arguments {'limit': 0, 'q': 'BOM'}; actual: [{'q': 'KTM'}, {'limit': 5, 'q': 'DEL'}]\nMessages:   while testing"},

		{"ToolArgumentsAt/pass", func(r assert.TestingT) bool {
			return assert.ToolArgumentsAt(r, tr, "search", 1, map[string]any{"q": "KTM"})
		}, ""},
		{"ToolArgumentsAt/fail", func(r assert.TestingT) bool {
			return assert.ToolArgumentsAt(r, tr, "search", 2, map[string]any{"q": "KTM"})
		}, "tool 'search': expected arguments {'q': 'KTM'}; actual: [{'limit': 5, 'q': 'DEL'}]\n" +
			"arguments (-want +got):\n" +
			"  map[string]any{\n" +
			"+ \t\"limit\": int64(5),\n" +
			"- \t\"q\":     string(\"KTM\"),\n" +
			"+ \t\"q\":     string(\"DEL\"),\n" +
			"  }"},
		{"ToolArgumentsAt/not called", func(r assert.TestingT) bool {
			return assert.ToolArgumentsAt(r, tr, "search", 3, map[string]any{"q": "KTM"})
		}, "tool 'search': occurrence 3 was not called; got 2 call(s)"},
		{"ToolArgumentsAt/zero occurrence", func(r assert.TestingT) bool {
			return assert.ToolArgumentsAt(r, tr, "search", 0, map[string]any{"q": "KTM"})
		}, "occurrence must be a positive integer"},

		{"ToolOrder/pass", func(r assert.TestingT) bool { return assert.ToolOrder(r, tr, "lookup_order", "issue_refund") }, ""},
		{"ToolOrder/repeated name", func(r assert.TestingT) bool { return assert.ToolOrder(r, tr, "search", "search") }, ""},
		{"ToolOrder/fail", func(r assert.TestingT) bool { return assert.ToolOrder(r, tr, "issue_refund", "lookup_order") },
			"expected 'issue_refund' before 'lookup_order'; actual: " + refundTools},

		{"ToolSequence/pass", func(r assert.TestingT) bool {
			return assert.ToolSequence(r, tr, []string{"lookup_order", "search", "search", "charge", "issue_refund"})
		}, ""},
		{"ToolSequence/fail", func(r assert.TestingT) bool {
			return assert.ToolSequence(r, tr, []string{"lookup_order", "search", "charge", "issue_refund"})
		}, "expected exact tool sequence ['lookup_order', 'search', 'charge', 'issue_refund']; actual: " + refundTools + "\n" +
			"tool sequence (-want +got):\n" +
			"  []string{\n" +
			"  \t\"lookup_order\",\n" +
			"+ \t\"search\",\n" +
			"  \t\"search\",\n" +
			"  \t\"charge\",\n" +
			"  \t\"issue_refund\",\n" +
			"  }"},

		{"Trajectory/InOrder pass", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{"lookup_order", "charge"}, assert.InOrder)
		}, ""},
		{"Trajectory/InOrder fail", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{"search", "lookup_order"}, assert.InOrder)
		}, "expected ordered tool subsequence ['search', 'lookup_order']; actual: " + refundTools + "\nfirst unmatched: 'lookup_order' (position 2 of 2)"},
		{"Trajectory/Unordered pass", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{"issue_refund", "search", "charge", "search", "lookup_order"}, assert.Unordered)
		}, ""},
		{"Trajectory/Unordered fail", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{"issue_refund", "search", "notify", "charge", "lookup_order"}, assert.Unordered)
		}, "expected tool calls ['issue_refund', 'search', 'notify', 'charge', 'lookup_order'] in any order; actual: " + refundTools +
			"\nmissing: ['notify']\nunexpected: ['search']"},
		{"Trajectory/Subset pass", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{"lookup_order", "search", "search", "charge", "issue_refund", "notify"}, assert.Subset)
		}, ""},
		{"Trajectory/Subset fail", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{"lookup_order", "search", "charge", "issue_refund", "notify"}, assert.Subset)
		}, "expected only tool calls from ['lookup_order', 'search', 'charge', 'issue_refund', 'notify']; actual: " + refundTools +
			"\nunexpected: ['search']"},
		{"Trajectory/Superset pass", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{"issue_refund", "search"}, assert.Superset)
		}, ""},
		{"Trajectory/Superset fail", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{"charge", "charge", "notify"}, assert.Superset)
		}, "expected tool calls to include ['charge', 'charge', 'notify']; actual: " + refundTools +
			"\nmissing: ['charge', 'notify']"},
		{"Trajectory/empty name", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{""}, assert.Strict)
		}, "sequence must contain non-empty tool names"},
		{"Trajectory/bad mode", func(r assert.TestingT) bool {
			return assert.Trajectory(r, tr, []string{"a"}, assert.Match(9))
		}, "unknown match mode Match(9); use Strict, InOrder, Unordered, Subset or Superset"},

		{"MaxSteps/pass", func(r assert.TestingT) bool { return assert.MaxSteps(r, tr, 7) }, ""},
		{"MaxSteps/fail", func(r assert.TestingT) bool { return assert.MaxSteps(r, tr, 6) },
			"expected at most 6 dependency step(s), got 7"},
		{"MaxSteps/negative", func(r assert.TestingT) bool { return assert.MaxSteps(r, tr, -1) },
			"maximum must be a non-negative integer"},

		{"ToolSucceeded/pass", func(r assert.TestingT) bool { return assert.ToolSucceeded(r, tr, "search") }, ""},
		{"ToolSucceeded/fail", func(r assert.TestingT) bool { return assert.ToolSucceeded(r, tr, "charge") },
			"tool 'charge': expected every call to succeed; call 1 of 1 failed at step 9 (event evt_010): CardDeclined: insufficient funds"},
		{"ToolSucceeded/not called", func(r assert.TestingT) bool { return assert.ToolSucceeded(r, tr, "notify") },
			"expected tool 'notify' to be called; actual: " + refundTools},

		{"ToolFailed/pass", func(r assert.TestingT) bool { return assert.ToolFailed(r, tr, "charge") }, ""},
		{"ToolFailed/fail", func(r assert.TestingT) bool { return assert.ToolFailed(r, tr, "search") },
			"tool 'search': expected a failed call; none of 2 call(s) failed"},
		{"ToolFailed/not called", func(r assert.TestingT) bool { return assert.ToolFailed(r, tr, "notify") },
			"expected tool 'notify' to be called; actual: " + refundTools},

		{"ModelCalled/pass label", func(r assert.TestingT) bool { return assert.ModelCalled(r, tr, "openai/gpt-4o") }, ""},
		{"ModelCalled/pass model", func(r assert.TestingT) bool { return assert.ModelCalled(r, tr, "gpt-4o") }, ""},
		{"ModelCalled/pass no provider", func(r assert.TestingT) bool { return assert.ModelCalled(r, tr, "local-model") }, ""},
		{"ModelCalled/fail", func(r assert.TestingT) bool { return assert.ModelCalled(r, tr, "anthropic/gpt-4o") },
			"expected model 'anthropic/gpt-4o' to be called; actual: ['openai/gpt-4o', 'local-model']"},

		{"ModelCallCount/pass", func(r assert.TestingT) bool { return assert.ModelCallCount(r, tr, "gpt-4o", 1) }, ""},
		{"ModelCallCount/fail", func(r assert.TestingT) bool { return assert.ModelCallCount(r, tr, "openai/gpt-4o", 2) },
			"model 'openai/gpt-4o': expected 2 call(s), got 1"},
		{"ModelCallCount/negative", func(r assert.TestingT) bool { return assert.ModelCallCount(r, tr, "gpt-4o", -2) },
			"count must be a non-negative integer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runAssertion(t, tc.call, tc.want)
		})
	}
}

// TestCheckErrorKinds checks that checker errors wrap the right sentinel.
func TestCheckErrorKinds(t *testing.T) {
	t.Parallel()
	tr := refundRun(t)
	tests := []struct {
		name string
		err  error
		kind error
	}{
		{"mismatch", assert.CheckToolCalled(tr, "notify"), assert.ErrMismatch},
		{"bad count", assert.CheckToolCallCount(tr, "x", -1), assert.ErrInvalid},
		{"bad occurrence", assert.CheckToolArgumentsAt(tr, "x", 0, nil), assert.ErrInvalid},
		{"not JSON", assert.CheckToolArguments(tr, "x", func() {}), assert.ErrInvalid},
		{"uncomparable", assert.CheckToolArguments(tr, "search", struct{ q string }{}, cmpopts.EquateEmpty()), assert.ErrInvalid},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.kind) {
			t.Errorf("%s: error %v does not wrap %v", tc.name, tc.err, tc.kind)
		}
	}
}

// TestFailedCallsInVectors reads failure details from Python-written bundles:
// a failed tool (error event under the tool_result) and a failed model call
// (error event under the llm_request).
func TestFailedCallsInVectors(t *testing.T) {
	t.Parallel()
	failedTool := loadVector(t, "stepfork/failed_tool_run.sftrace")
	var name string
	for _, ev := range failedTool.Events {
		if ev.Type == trace.ToolCall {
			name = ev.Name
		}
	}
	if !assert.ToolFailed(t, failedTool, name) {
		return
	}
	err := assert.CheckToolSucceeded(failedTool, name)
	const want = "tool 'flight_search': expected every call to succeed; call 1 of 1 failed at step 1 (event evt_tool_002): ToolTimeout: flight_search timed out"
	if err == nil || err.Error() != want {
		t.Fatalf("CheckToolSucceeded on a failed tool:\n got: %v\nwant: %s", err, want)
	}

	// A failed model call (an error event under the llm_request) still counts.
	failedLLM := loadVector(t, "stepfork/failed_llm_run.sftrace")
	assert.MaxSteps(t, failedLLM, 1)
	if err := assert.CheckMaxSteps(failedLLM, 0); err == nil {
		t.Error("a failed model call was not counted as a step")
	}

	ok := loadVector(t, "stepfork/successful_run.sftrace")
	assert.ToolSequence(t, ok, []string{"weather_lookup"})
	assert.ToolArguments(t, ok, "weather_lookup", map[string]any{"city": "Kathmandu"})
	assert.ModelCalled(t, ok, "gpt-test")
	assert.MaxSteps(t, ok, 2)
	assert.ToolSucceeded(t, ok, "weather_lookup")
}

func TestReprString(t *testing.T) {
	t.Parallel()
	// Python: repr(s) for each s.
	tests := []struct{ in, want string }{
		{"plain", `'plain'`},
		{"it's", `"it's"`},
		{`both ' and "`, `'both \' and "'`},
		{"tab\tnl\ncr\r", `'tab\tnl\ncr\r'`},
		{`back\slash`, `'back\\slash'`},
		{"\x00\x1f\x7f", `'\x00\x1f\x7f'`},
		{"café ☕", `'café ☕'`},
		{"\u00a0\u200b", `'\xa0\u200b'`},
	}
	for _, tc := range tests {
		err := assert.CheckToolCalled(trace.NewBuilder("x").MustTrace(), tc.in)
		want := "expected tool " + tc.want + " to be called; actual: []"
		if err == nil || err.Error() != want {
			t.Errorf("repr of %q:\n got: %v\nwant: %s", tc.in, err, want)
		}
	}
}

// TestLegacyPairing pairs results with calls in a trace without parent links,
// as stepfork does for legacy recordings: the first later unpaired result of
// the same name, unless another call of that name comes first.
func TestLegacyPairing(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(typ trace.EventType, name string, status trace.Status) trace.Event {
		return trace.Event{Type: typ, Name: name, Status: status, ReplayPolicy: trace.PolicyFrozen,
			Timestamp: at, Input: trace.NullValue, Output: trace.NullValue}
	}
	tr := &trace.Trace{Events: []trace.Event{
		ev(trace.ToolCall, "a", trace.StatusOK),      // paired with the error result below
		ev(trace.ToolCall, "b", trace.StatusOK),      // no result: another call of b follows first
		ev(trace.ToolCall, "b", trace.StatusOK),      // paired with the ok result of b
		ev(trace.ToolResult, "a", trace.StatusError), //
		ev(trace.ToolResult, "b", trace.StatusOK),    //
	}}
	for i := range tr.Events {
		tr.Events[i].ID = fmt.Sprintf("e%d", i)
		tr.Events[i].Step = i
	}
	runAssertion(t, func(r assert.TestingT) bool { return assert.ToolFailed(r, tr, "a") }, "")
	runAssertion(t, func(r assert.TestingT) bool { return assert.ToolSucceeded(r, tr, "b") },
		"tool 'b': expected every call to succeed; call 1 of 2 has no recorded result at step 1 (event e1)")
}

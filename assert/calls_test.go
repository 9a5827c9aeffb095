package assert_test

import (
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/trace"
)

// TestCallsUnlinkedResults checks the assertions on a bundle without parent
// links whose two tool calls (steps 1, 2) come before their results (steps
// 3, 4): each call has the result trace.Trace.Calls pairs it with.
func TestCallsUnlinkedResults(t *testing.T) {
	t.Parallel()
	tr, err := trace.Load("../testdata/unlinked-results.sftrace")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lookup_order", "check_policy"} {
		if err := assert.CheckToolSucceeded(tr, name); err != nil {
			t.Errorf("CheckToolSucceeded(%s): %v", name, err)
		}
		if err := assert.CheckToolFailed(tr, name); err == nil {
			t.Errorf("CheckToolFailed(%s) passed on a call that succeeded", name)
		}
	}
	if err := assert.CheckToolArgumentsAt(tr, "lookup_order", 1, map[string]any{"order": "A-1"}); err != nil {
		t.Errorf("CheckToolArgumentsAt: %v", err)
	}
}

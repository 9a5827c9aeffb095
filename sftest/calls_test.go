package sftest_test

import (
	"strings"
	"testing"

	"github.com/stepfork/stepfork/sftest"
)

// TestRenderUnlinkedResults renders a bundle without parent links whose two
// tool calls (steps 1, 2) come before their results (steps 3, 4): each call
// is shown with the result trace.Trace.Calls pairs it with.
func TestRenderUnlinkedResults(t *testing.T) {
	t.Parallel()
	tr := sftest.Load(t, "../testdata/unlinked-results.sftrace")
	got, err := sftest.Render(tr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"step 1   tool     lookup_order  ok {\"total\":120}\n",
		"step 2   tool     check_policy  ok {\"limit\":100}\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Render does not show %q:\n%s", want, got)
		}
	}
}

package corpus

import (
	"strings"
	"testing"
)

// TestHTMLEmpty renders the page of an empty report: the template, parsed
// on first use rather than when the package is initialized, must parse and
// execute.
func TestHTMLEmpty(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := (&Report{}).HTML(&b, "a <problem>", []string{"unused.sftrace"}, func(s string) string { return s }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!doctype html>", "a &lt;problem&gt;", "unused.sftrace"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the page does not hold %q:\n%s", want, b.String())
		}
	}
}

package failures

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// fakeT stands for a testing.TB: a pointer, as every TB is.
type fakeT struct{ name string }

// assertLike is what package assert does: its exported assertion calls a
// reporter that notes the failure, one frame between them.
func assertLike(t any, msg string, step int) { reportLike(t, msg, step) }

func reportLike(t any, msg string, step int) { Note(t, msg, step, 1) }

func TestNoteNamesTheAssertionAndTheTestLine(t *testing.T) {
	t.Parallel()
	ft := &fakeT{"a"}
	if !Watch(ft) {
		t.Fatal("a new test was already watched")
	}
	defer Forget(ft)
	if Watch(ft) {
		t.Error("Watch twice reported a new watch")
	}
	assertLike(ft, "expected tool 'x' to be called", 7) // the line Where names
	assertLike(ft, "second", -1)
	got := Of(ft)
	if len(got) != 2 {
		t.Fatalf("%d failures kept, want 2: %+v", len(got), got)
	}
	f := got[0]
	if f.Assertion != "failures.assertLike" || !strings.HasPrefix(f.Where, "failures_test.go:") || f.Message != "expected tool 'x' to be called" || f.Step != 7 {
		t.Errorf("first failure %+v", f)
	}
	if got[1].Message != "second" || got[1].Step != -1 {
		t.Errorf("second failure %+v", got[1])
	}
}

func TestUnwatchedKeepsNothing(t *testing.T) {
	t.Parallel()
	ft := &fakeT{"b"}
	assertLike(ft, "lost", -1)
	Keep(ft, Failure{Message: "lost"})
	if got := Of(ft); len(got) != 0 {
		t.Errorf("an unwatched test kept %+v", got)
	}
	Watch(ft)
	assertLike(ft, "kept", -1)
	Forget(ft)
	if got := Of(ft); len(got) != 0 {
		t.Errorf("a forgotten test still holds %+v", got)
	}
}

// A TestingT that is not a pointer (a value holding a slice cannot key a
// map) is never watched, and noting its failures does not panic.
func TestValueTestingTIsIgnored(t *testing.T) {
	t.Parallel()
	type sliceT struct{ msgs []string }
	for _, x := range []any{sliceT{}, nil, (*fakeT)(nil), "name"} {
		if Watch(x) {
			t.Errorf("Watch(%#v) watched it", x)
		}
		Note(x, "m", -1, 0)
		Keep(x, Failure{})
		if got := Of(x); got != nil {
			t.Errorf("Of(%#v) = %v", x, got)
		}
		Forget(x)
	}
}

func TestAtMostMaxPerTest(t *testing.T) {
	t.Parallel()
	ft := &fakeT{"c"}
	Watch(ft)
	defer Forget(ft)
	for i := range maxPerTest + 20 {
		assertLike(ft, fmt.Sprint(i), -1)
	}
	Keep(ft, Failure{Message: "one more"})
	got := Of(ft)
	if len(got) != maxPerTest || got[0].Message != "0" || got[maxPerTest-1].Message != fmt.Sprint(maxPerTest-1) {
		t.Errorf("kept %d failures (first %q), want the first %d", len(got), got[0].Message, maxPerTest)
	}
}

// Parallel subtests note their failures concurrently, each into its own
// list, and copy them to the parent.
func TestConcurrentNotes(t *testing.T) {
	t.Parallel()
	parent := &fakeT{"parent"}
	Watch(parent)
	defer Forget(parent)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ft := &fakeT{fmt.Sprint(i)}
			Watch(ft)
			for j := range 10 {
				assertLike(ft, fmt.Sprintf("%d/%d", i, j), j)
			}
			for _, f := range Of(ft) {
				Keep(parent, f)
			}
			if n := len(Of(ft)); n != 10 {
				t.Errorf("subtest %d kept %d failures", i, n)
			}
			Forget(ft)
		})
	}
	wg.Wait()
	if n := len(Of(parent)); n != 8*10 {
		t.Errorf("the parent holds %d failures, want 80", n)
	}
}

func TestShortFunc(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"github.com/stepfork/stepfork/assert.Completed":              "assert.Completed",
		"github.com/stepfork/stepfork/assert.Status[...]":            "assert.Status",
		"github.com/stepfork/stepfork/assert.(*Expectations).Assert": "assert.(*Expectations).Assert",
		"github.com/stepfork/stepfork/sftest.Golden":                 "sftest.Golden",
		"main.helper": "main.helper",
		"github.com/stepfork/stepfork/assert.Status[go.shape.*github.com/x/y.V]": "assert.Status",
	} {
		if got := shortFunc(in); got != want {
			t.Errorf("shortFunc(%q) = %q, want %q", in, got, want)
		}
	}
}

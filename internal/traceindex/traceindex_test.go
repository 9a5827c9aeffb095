package traceindex

import (
	"slices"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

// parentsByRule is the rule of the package doc written out: look the
// parent id up among all events, take the first with it, keep it only when
// it comes earlier.
func parentsByRule(evs []trace.Event) []int32 {
	out := make([]int32, len(evs))
	for i := range evs {
		out[i] = -1
		if evs[i].ParentID == "" {
			continue
		}
		for j := range evs {
			if evs[j].ID == evs[i].ParentID {
				if j < i {
					out[i] = int32(j)
				}
				break
			}
		}
	}
	return out
}

func events(pairs ...[2]string) []trace.Event {
	evs := make([]trace.Event, len(pairs))
	for i, p := range pairs {
		evs[i] = trace.Event{ID: p[0], ParentID: p[1], Step: i}
	}
	return evs
}

func TestParentsFollowTheRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		evs  []trace.Event
		want []int32
	}{
		{"nested", events([2]string{"a", ""}, [2]string{"b", "a"}, [2]string{"c", "b"}, [2]string{"d", "a"}), []int32{-1, 0, 1, 0}},
		{"parent later", events([2]string{"a", "b"}, [2]string{"b", ""}), []int32{-1, -1}},
		{"own parent", events([2]string{"a", "a"}), []int32{-1}},
		{"missing parent", events([2]string{"a", ""}, [2]string{"b", "zz"}), []int32{-1, -1}},
		// A duplicated id names its first event, for lookups and parents:
		// d's parent is the first "a", and the second "a", whose parent
		// id is its own, has the first as its parent.
		{"duplicate id", events([2]string{"a", ""}, [2]string{"x", ""}, [2]string{"a", "a"}, [2]string{"d", "a"}), []int32{-1, -1, 0, 0}},
		{"duplicate, first is later than the child", events([2]string{"c", "a"}, [2]string{"a", ""}, [2]string{"a", ""}), []int32{-1, -1, -1}},
		{"empty ids", events([2]string{"", ""}, [2]string{"b", ""}, [2]string{"", ""}), []int32{-1, -1, -1}},
		{"none", nil, []int32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if rule := parentsByRule(tc.evs); !slices.Equal(rule, tc.want) {
				t.Fatalf("the case's want %v is not the rule's %v", tc.want, rule)
			}
			if got := Parents(tc.evs); !slices.Equal(got, tc.want) {
				t.Errorf("Parents = %v, want %v", got, tc.want)
			}
			ix := Of(&trace.Trace{Events: tc.evs})
			if got := ix.Parents(); !slices.Equal(got, tc.want) {
				t.Errorf("Of(…).Parents() = %v, want %v", got, tc.want)
			}
			if got := New(&trace.Trace{Events: tc.evs}).Parents(); !slices.Equal(got, tc.want) {
				t.Errorf("New(…).Parents() = %v, want %v", got, tc.want)
			}
			for i := range tc.evs {
				first := int32(slices.IndexFunc(tc.evs, func(e trace.Event) bool { return e.ID == tc.evs[i].ID }))
				if got, ok := ix.Lookup(tc.evs[i].ID); !ok || got != first {
					t.Errorf("Lookup(%q) = %d, %v, want %d (its first event)", tc.evs[i].ID, got, ok, first)
				}
			}
			if _, ok := ix.Lookup("no such id"); ok {
				t.Errorf("Lookup of an absent id found an event")
			}
		})
	}
}

// TestOfIsOncePerTrace: a trace's index is built once and shared; a trace
// whose events slice was replaced gets a new one.
func TestOfIsOncePerTrace(t *testing.T) {
	t.Parallel()
	tr := &trace.Trace{Events: events([2]string{"a", ""}, [2]string{"b", "a"})}
	ix := Of(tr)
	if Of(tr) != ix {
		t.Fatal("a second Of of the same trace built the index again")
	}
	if New(tr) == ix {
		t.Fatal("New returned the cached index")
	}
	tr.Events = events([2]string{"b", ""}, [2]string{"a", "b"})
	again := Of(tr)
	if again == ix {
		t.Fatal("Of kept the index of the trace's old events")
	}
	if got, want := again.Parents(), []int32{-1, 0}; !slices.Equal(got, want) {
		t.Errorf("Parents of the new events = %v, want %v", got, want)
	}
	if i, _ := again.Lookup("a"); i != 1 {
		t.Errorf("Lookup(a) in the new events = %d, want 1", i)
	}
}

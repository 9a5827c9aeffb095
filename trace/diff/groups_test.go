package diff

import (
	"encoding/json"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

// concurrent builds a run that fetches each of inputs (output: the input
// doubled, or out[input] when set) and then calls "done"; with lanes, each
// fetch is marked as made on its own goroutine.
func concurrent(t *testing.T, tag string, lanes bool, inputs []int, out map[int]int) *trace.Trace {
	t.Helper()
	tr := build(t, tag, func(b *trace.Builder) {
		for _, i := range inputs {
			o, ok := out[i]
			if !ok {
				o = 2 * i
			}
			b.Tool("fetch", map[string]any{"i": i}, map[string]any{"v": o})
		}
		b.Tool("done", nil, "ok")
		b.RunEnd(trace.RunCompleted, nil)
	})
	if lanes {
		m := map[string]int{}
		for _, c := range tr.Calls() {
			if c.Label == "fetch" {
				m[tr.Events[c.Event].ID] = len(m) + 1
			}
		}
		data, _ := json.Marshal(m)
		tr.Extras = map[string][]byte{trace.LanesFile: data}
	}
	return tr
}

func TestConcurrentGroupsCompareAsSets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		base    []int
		variant []int
		out     map[int]int
		lanes   bool
		want    counts // changed, added, removed, unchanged
		changed string // the label of the changed step's input or output path
	}{
		{"swapped pair is equivalent", []int{1, 2}, []int{2, 1}, nil, true, counts{0, 0, 0, 4}, ""},
		{"three reordered", []int{1, 2, 3}, []int{3, 1, 2}, nil, true, counts{0, 0, 0, 5}, ""},
		{"without lanes the order counts", []int{1, 2}, []int{2, 1}, nil, false, counts{0, 1, 1, 3}, ""},
		{"a changed input still shows", []int{1, 2, 3}, []int{3, 9, 2}, map[int]int{9: 2}, true, counts{1, 0, 0, 4}, "input.i"},
		{"a changed output still shows", []int{1, 2}, []int{2, 1}, map[int]int{1: 7}, true, counts{1, 0, 0, 3}, "output.v"},
		// Both outputs changed: each call is paired with the call of its
		// input, not by position (which would report inputs that changed).
		{"two changed outputs pair by input", []int{1, 2}, []int{2, 1}, map[int]int{1: 7, 2: 9}, true, counts{2, 0, 0, 2}, "output.v"},
		{"an extra call is added", []int{1, 2}, []int{2, 3, 1}, nil, true, counts{0, 1, 0, 4}, ""},
		{"a missing call is removed", []int{1, 2, 3}, []int{3, 1}, nil, true, counts{0, 0, 1, 4}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := concurrent(t, "base", tc.lanes, tc.base, nil)
			variant := concurrent(t, "variant", tc.lanes, tc.variant, tc.out)
			d := Runs(base, variant)
			if got := countsOf(d); got != tc.want {
				t.Fatalf("counts (changed, added, removed, unchanged) = %v, want %v\n%s", got, tc.want, d.Explain())
			}
			if tc.changed != "" {
				for i := range d.Steps {
					s := &d.Steps[i]
					if s.Kind == Changed && (len(s.Changes) != 1 || s.Changes[0].Path != tc.changed) {
						t.Errorf("changed step %s: changes %v, want one at %s", s.Label, changePaths(s), tc.changed)
					}
				}
			}
			if same := Runs(variant, variant); !same.Equivalent() {
				t.Errorf("the variant differs from itself:\n%s", same.Explain())
			}
		})
	}
}

// withLanes gives the events named by ids (in order) the lanes given.
func withLanes(t *testing.T, tr *trace.Trace, lanes map[string]int) *trace.Trace {
	t.Helper()
	data, err := json.Marshal(lanes)
	if err != nil {
		t.Fatal(err)
	}
	tr.Extras = map[string][]byte{trace.LanesFile: data}
	return tr
}

// Every operation made on a goroutine belongs to its group, state writes
// and decisions too, and a group is matched as a set wherever its members
// were written relative to what the scope's own goroutine did meanwhile.
func TestGroupsHoldEveryOperationWhereverTheySit(t *testing.T) {
	t.Parallel()
	// lane 0: plan, then review; a goroutine: fetch, then a state write.
	run := func(tag string, fetchFirst bool) *trace.Trace {
		lanes := map[string]int{}
		tr := build(t, tag, func(b *trace.Builder) {
			b.Tool("plan", nil, "p")
			concurrent := func() {
				lanes[b.Tool("fetch", 1, 2)] = 1
				lanes[b.State("fetched", nil, 2)] = 1
			}
			if fetchFirst {
				concurrent()
				b.Tool("review", nil, "r")
			} else {
				b.Tool("review", nil, "r")
				concurrent()
			}
			b.RunEnd(trace.RunCompleted, "ok")
		})
		return withLanes(t, tr, lanes)
	}
	d := Runs(run("base", true), run("variant", false))
	if !d.Equivalent() {
		t.Fatalf("the same work written in another order is not equivalent:\n%s", d.Explain())
	}
	// Without lanes the order is behaviour.
	a, b := run("base", true), run("variant", false)
	a.Extras, b.Extras = nil, nil
	if Runs(a, b).Equivalent() {
		t.Fatal("without lanes, another order should differ")
	}
}

package diff

import (
	"encoding/json"
	"slices"
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

// Everything under a member goes with it: a failed call's result and error,
// and the calls its body made, so a failure on a goroutine written before
// or after the other goroutine's work is the same behaviour.
func TestGroupMembersKeepWhatIsUnderThem(t *testing.T) {
	t.Parallel()
	run := func(tag string, failFirst bool, inner string) *trace.Trace {
		lanes := map[string]int{}
		tr := build(t, tag, func(b *trace.Builder) {
			fail := func() {
				c := b.ToolCall("confirm", 120)
				lanes[c] = 1
				b.ToolFailure(c, "Interrupt", "pay 120?")
			}
			lookup := func() {
				c := b.ToolCall("lookup", "q")
				lanes[c] = 2
				b.Push(c)
				b.Tool("index", inner, "hit")
				b.Pop()
				b.ToolResult(c, "found")
			}
			if failFirst {
				fail()
				lookup()
			} else {
				lookup()
				fail()
			}
			b.RunEnd(trace.RunCompleted, "ok")
		})
		return withLanes(t, tr, lanes)
	}
	d := Runs(run("base", true, "q"), run("variant", false, "q"))
	if !d.Equivalent() {
		t.Fatalf("a failure on a goroutine written after the other goroutine's work is not equivalent:\n%s", d.Explain())
	}
	// A change under a member shows as that step changed, next to its
	// member, whichever order the members were written in.
	d = Runs(run("base", true, "q"), run("variant", false, "other"))
	if got := countsOf(d); got != (counts{1, 0, 0, 4}) {
		t.Fatalf("counts %v, want one changed step:\n%s", got, d.Explain())
	}
	var labels []string
	for _, s := range d.Steps {
		labels = append(labels, s.Label)
	}
	if want := []string{"confirm", "Interrupt", "lookup", "index", "run"}; !slices.Equal(labels, want) {
		t.Errorf("steps %v, want %v (each member with what is under it, where its base steps are)", labels, want)
	}
}

// A join separates the parts of a group: members are paired within their
// part first, so the calls of one turn pair with the same turn's.
func TestGroupPartsPairWithinTheirTurn(t *testing.T) {
	t.Parallel()
	// Two turns, each asking the model and then searching for the same
	// query on goroutines; the second model call is a join.
	run := func(tag string, first, second int) *trace.Trace {
		lanes := map[string]int{}
		var joins []string
		tr := build(t, tag, func(b *trace.Builder) {
			b.LLM("p", "m", "ask 1", "search")
			lanes[b.Tool("search", "q", first)] = 1
			lanes[b.Tool("weather", "DEL", "sun")] = 2
			joins = append(joins, b.LLM("p", "m", "ask 2", "search again"))
			lanes[b.Tool("search", "q", second)] = 3
			joins = append(joins, b.LLM("p", "m", "ask 3", "done"))
			b.RunEnd(trace.RunCompleted, "ok")
		})
		tr = withLanes(t, tr, lanes)
		data, _ := json.Marshal(joins)
		tr.Extras[trace.JoinsFile] = data
		return tr
	}
	// The first turn's search changed to what the second's returned: it
	// is the first turn's that changed, not the second's.
	d := Runs(run("base", 1, 2), run("variant", 2, 2))
	if got := countsOf(d); got != (counts{1, 0, 0, 6}) {
		t.Fatalf("counts %v:\n%s", got, d.Explain())
	}
	for _, s := range d.Steps {
		if s.Kind == Changed && (s.Base.Step != 3 || s.Variant.Step != 3) {
			t.Errorf("the changed step is base %s, variant %s; want the first turn's search (steps 3–4)", s.Base.Where(), s.Variant.Where())
		}
	}
	// Without joins the two searches are one set, and the equal ones pair.
	a, b := run("base", 1, 2), run("variant", 2, 2)
	delete(a.Extras, trace.JoinsFile)
	delete(b.Extras, trace.JoinsFile)
	d = Runs(a, b)
	if dv := d.Divergence; d.Changed != 1 || dv == nil || dv.Base.Step != 3 || dv.Variant.Step != 9 {
		t.Errorf("without joins the first turn's search should pair with the second's:\n%s", d.Explain())
	}
}

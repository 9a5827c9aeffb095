package diff

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/trace"
)

// TestSameEventComparesEveryField: two events that differ in any field but
// the run id and the time stamp are not the same event, so that the base
// steps are taken only for events that would give them.
func TestSameEventComparesEveryField(t *testing.T) {
	t.Parallel()
	ignored := map[string]bool{"RunID": true, "Timestamp": true}
	one, two := int64(1), int64(2)
	cost := 0.5
	base := trace.Event{ID: "e", ParentID: "p", Step: 1, Type: trace.ToolCall, DurationMS: &one, Status: trace.StatusOK,
		ReplayPolicy: "replay", InputHash: "h", OutputHash: "o", Redactions: []string{"/a"}, Provider: "pr", Model: "m",
		Name: "n", Key: "k", Input: trace.StringValue("i"), Output: trace.StringValue("o"), Before: trace.StringValue("b"),
		After: trace.StringValue("a"), Details: trace.StringValue("d"), PromptTokens: &one, CompletionTokens: &one,
		TotalTokens: &one, CostUSD: &cost, ErrorType: "E", Message: "msg", RunStatus: trace.RunCompleted}
	typ := reflect.TypeFor[trace.Event]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		other := base.Clone()
		fv := reflect.ValueOf(&other).Elem().Field(i)
		switch v := fv.Addr().Interface().(type) {
		case *string:
			*v += "x"
		case *int:
			*v++
		case *time.Time:
			*v = v.Add(time.Hour)
		case **int64:
			*v = &two
		case **float64:
			c := 0.25
			*v = &c
		case *[]string:
			*v = append(*v, "/b")
		case *trace.Value:
			*v = trace.StringValue("changed")
		default:
			switch fv.Kind() {
			case reflect.String:
				fv.SetString(fv.String() + "x")
			default:
				t.Fatalf("field %s of type %s: add it to the test (and to sameEvent unless it is not behavior)", f.Name, f.Type)
			}
		}
		if got, want := sameEvent(&base, &other), ignored[f.Name]; got != want {
			t.Errorf("events differing in %s: sameEvent = %v, want %v", f.Name, got, want)
		}
		// Equal values in other strings are the same.
		copied := base.Clone()
		fv = reflect.ValueOf(&copied).Elem().Field(i)
		if fv.Kind() == reflect.String {
			fv.SetString(string([]byte(fv.String())))
		}
		if !sameEvent(&base, &copied) {
			t.Errorf("equal events (%s copied): not the same", f.Name)
		}
	}
}

// sharedVariants returns variants of base that share its first k events,
// for k from 0 to every event, followed by each of the given tails, and
// hostile ones: a tail answering or ending what the prefix opened, ids of
// the prefix again, an event of the prefix changed.
func sharedVariants(base *trace.Trace, tails [][]trace.Event, r *rand.Rand) []*trace.Trace {
	n := len(base.Events)
	ks := []int{0, 1, n / 2, n - 1, n}
	for range 4 {
		ks = append(ks, r.IntN(n+1))
	}
	var out []*trace.Trace
	add := func(k int, tail []trace.Event, edit func(evs []trace.Event, k int)) {
		v := *base
		v.RunID = "run_variant"
		v.Extras = nil
		v.Events = append(slices.Clip(base.Events[:max(0, min(k, n))]), tail...)
		for i := range v.Events {
			v.Events[i].RunID = v.RunID // as a fork's prefix has: not behavior
		}
		if edit != nil {
			v.Events = slices.Clone(v.Events)
			edit(v.Events, k)
		}
		out = append(out, &v)
	}
	for _, k := range ks {
		k = max(0, min(k, n))
		add(k, nil, nil)
		for _, tail := range tails {
			add(k, slices.Clone(tail[min(k, len(tail)):]), nil)
			add(k, slices.Clone(tail), nil)
		}
		if k == 0 || k == n {
			continue
		}
		rest := base.Events[k:]
		add(k, rest, nil)
		// A tail event parented to a prefix event: a result of a call of
		// the prefix, an exit of a node entered there, an error of a result.
		for j := range rest {
			for _, p := range []int{r.IntN(k), k - 1} {
				add(k, rest, func(evs []trace.Event, k int) { evs[k+j].ParentID = evs[p].ID })
				add(k, rest, func(evs []trace.Event, k int) { evs[k+j].ParentID = "" })
				add(k, rest, func(evs []trace.Event, k int) { evs[k+j].ID = evs[p].ID })
			}
			if j > 3 {
				break
			}
		}
		// The prefix changed somewhere.
		add(k, rest, func(evs []trace.Event, k int) {
			e := &evs[r.IntN(k)]
			e.Output, e.After = trace.StringValue("edited"), trace.StringValue("edited")
		})
		add(k, rest, func(evs []trace.Event, k int) { evs[r.IntN(k)].ParentID = "" })
		// The tail's first event removed, or one of the prefix's repeated.
		add(k, rest[1:], nil)
		add(k, append([]trace.Event{base.Events[r.IntN(k)]}, rest...), nil)
	}
	return out
}

// TestSharedStartEqualsFullDiff: the diff of a variant given the events of
// its base (Runs, and a fork through package sharedstart), which takes the
// base's steps for the events they share, is the diff that extracts the
// whole variant, field for field, with the same texts; and the variant's
// steps are its Behavior.
func TestSharedStartEqualsFullDiff(t *testing.T) {
	t.Parallel()
	var bases []*trace.Trace
	paths, _ := filepath.Glob(filepath.Join(vectorDir, "stepfork", "*.sftrace"))
	paths = append(paths, "../../testdata/unlinked-results.sftrace", "../../testdata/booking-agent.sftrace",
		"../../testdata/example-refund-approval.sftrace")
	for _, p := range paths {
		bases = append(bases, mustLoad(t, p))
	}
	bases = append(bases, concurrent(t, "l", true, []int{1, 2, 3}, nil), concurrent(t, "u", false, []int{1, 2, 3}, nil))
	whole := map[int]*trace.Trace{} // a base cut short → the whole run
	for seed := range uint64(12) {
		r := rand.New(rand.NewPCG(seed, 13))
		tr, _ := randomRun(t, r, "s")
		bases = append(bases, tr)
		// Cut short, inside a node or a call, or without some results:
		// what the prefix opened is ended or answered after it.
		short := *tr
		short.Events = slices.Clip(tr.Events[:1+r.IntN(len(tr.Events))])
		whole[len(bases)] = tr
		bases = append(bases, &short)
		unanswered := tr.Clone()
		unanswered.Events = slices.DeleteFunc(unanswered.Events, func(e trace.Event) bool {
			return (e.Type == trace.ToolResult || e.Type == trace.LLMResponse) && r.IntN(3) == 0
		})
		whole[len(bases)] = tr
		bases = append(bases, unanswered)
	}
	checked := 0
	for bi, base := range bases {
		r := rand.New(rand.NewPCG(uint64(bi), 17))
		other, _ := randomRun(t, r, "t")
		changed := base.Clone()
		for i := range changed.Events {
			e := &changed.Events[i]
			switch m, _ := e.Marker(); {
			case e.Type == trace.ToolResult && r.IntN(2) == 0:
				e.Output = trace.MustValueOf(map[string]any{"changed": i})
			case m.Key == trace.MarkerNode && m.Phase == trace.PhaseExit:
				e.After = trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: m.Name, Phase: trace.PhaseExit,
					Status: trace.NodeStatusFail, Error: "boom"}).After
			}
		}
		tails := [][]trace.Event{relabel(base).Events, changed.Events, other.Events}
		if w := whole[bi]; w != nil {
			tails = append(tails, w.Events, relabel(w).Events)
		}
		db := Prepare(base)
		for vi, v := range sharedVariants(base, tails, r) {
			name := fmt.Sprintf("base %d (%s) variant %d", bi, base.Path, vi)
			want := db.Diff(v) // the full extraction: no base events given
			got := db.diff(v, slices.Clone(db.steps), base.Events)
			runs := Runs(base, v)
			// The texts follow from the Result: compare them now and then,
			// and the Result field for field (go-cmp's report on failure).
			if vi%16 == 0 || !reflect.DeepEqual(want, got) || !reflect.DeepEqual(want, runs) {
				sameDiff(t, name, want, got)
				sameDiff(t, name+" (Runs)", want, runs)
			}
			if vs, _ := db.variantSteps(v, base.Events); !reflect.DeepEqual(v.Behavior(), vs) {
				t.Fatalf("%s: steps differ from Behavior (-want +got):\n%s", name, cmp.Diff(v.Behavior(), vs))
			}
			checked++
		}
	}
	t.Logf("%d variants", checked)
}

// TestSharedStartNeedsTheBaseItWasPreparedFrom: base events of another
// length than the prepared base's are not taken for its own.
func TestSharedStartNeedsTheBaseItWasPreparedFrom(t *testing.T) {
	t.Parallel()
	base := mustLoad(t, diffBaseline)
	db := Prepare(base)
	short := base.Events[:len(base.Events)-1]
	sameDiff(t, "shorter base events", db.Diff(base), db.diff(base, slices.Clone(db.steps), short))
}

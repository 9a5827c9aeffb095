package assert

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stepfork/stepfork/trace"
)

// cmp options for traces. Two recordings of the same behaviour differ in run
// ids, event ids, timestamps and durations; these options make such
// differences disappear so that cmp.Diff shows only what the agent did
// differently. Each returns the same value on every call, so TraceEqual can
// tell when an option is given twice.

var (
	ignoreIDs = cmp.Options{
		cmpopts.AcyclicTransformer("IgnoreIDs", positionalIDs),
		ignoreFields(field[trace.RedactionEntry]("EventID")),
		cmp.FilterValues(holdMinted, cmpopts.AcyclicTransformer("IgnoreIDs", mintedByContent)),
	}
	ignoreRunIDs        = ignoreFields(field[trace.Manifest]("RunID"), field[trace.Event]("RunID"))
	ignoreTimestamps    = ignoreFields(field[trace.Manifest]("CreatedAt"), field[trace.Event]("Timestamp"))
	ignoreDurations     = ignoreFields(field[trace.Totals]("DurationMS"), field[trace.Event]("DurationMS"))
	ignorePath          = ignoreFields(field[trace.Trace]("Path"))
	equateEmpty         = cmp.FilterPath(isEmptiable, cmpopts.EquateEmpty())
	canonicalPayloads   = cmp.FilterValues(differ, cmp.Transformer("CanonicalPayloads", canonicalText))
	sortConcurrentCalls = cmpopts.AcyclicTransformer("SortConcurrentCalls", sortConcurrent)
	traceOptions        = cmp.Options{ignoreIDs, ignoreRunIDs, ignoreTimestamps, ignoreDurations, ignorePath, equateEmpty, canonicalPayloads}
)

// structField names a field of a struct type.
type structField struct {
	in   reflect.Type
	name string
}

func field[T any](name string) structField { return structField{reflect.TypeFor[T](), name} }

// ignoreFields ignores the given struct fields. It is one path filter for all
// of them, cheaper than one cmpopts.IgnoreFields each on runs of thousands of
// events.
func ignoreFields(fields ...structField) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		sf, ok := p.Last().(cmp.StructField)
		if !ok || len(p) < 2 {
			return false
		}
		in := p.Index(-2).Type()
		for _, f := range fields {
			if f.name == sf.Name() && f.in == in {
				return true
			}
		}
		return false
	}, cmp.Ignore())
}

// isEmptiable selects the slices and maps of a trace where nil and empty mean
// the same.
func isEmptiable(p cmp.Path) bool {
	switch p.Last().Type() {
	case reflect.TypeFor[[]string](), reflect.TypeFor[[]trace.RedactionEntry](), reflect.TypeFor[map[string][]byte]():
		return true
	}
	return false
}

// differ reports whether two payloads are canonically different; equal ones
// need no transformation (cmp then uses Value.Equal).
func differ(x, y trace.Value) bool { return !x.Equal(y) }

// IgnoreIDs makes event ids irrelevant while keeping the shape of the run: in
// a []trace.Event each id becomes the event's position ("#3") and each parent
// id the position of its parent, so two runs compare equal when their events
// differ only in how ids were generated, yet a call moved under a different
// parent still shows. The event ids in redaction entries are ignored, and
// so are those that key the ids providers minted ([trace.MintedFile]): the
// runs' minted ids are compared as a set of each call's list.
func IgnoreIDs() cmp.Option { return ignoreIDs }

// holdMinted reports whether either extra-file map holds a minted-ids file.
func holdMinted(x, y map[string][]byte) bool {
	_, a := x[trace.MintedFile]
	_, b := y[trace.MintedFile]
	return a || b
}

// mintedByContent is extras with its minted-ids file keyed by content
// instead of by event id: the sorted list of each call's ids, as JSON (the
// file as it is when it does not decode).
func mintedByContent(extras map[string][]byte) map[string][]byte {
	m, err := trace.Minted(extras[trace.MintedFile])
	if err != nil {
		return extras
	}
	lists := make([]string, 0, len(m))
	for _, ids := range m {
		b, _ := json.Marshal(ids)
		lists = append(lists, string(b))
	}
	slices.Sort(lists)
	out := maps.Clone(extras)
	out[trace.MintedFile] = []byte("[" + strings.Join(lists, ",") + "]")
	return out
}

// IgnoreRunIDs ignores the run id of the manifest and of every event.
func IgnoreRunIDs() cmp.Option { return ignoreRunIDs }

// IgnoreTimestamps ignores the creation time of the manifest and the
// timestamp of every event. Times recorded as payloads (replay.Now markers)
// are payloads and still compared.
func IgnoreTimestamps() cmp.Option { return ignoreTimestamps }

// IgnoreDurations ignores the duration of every event and the total duration
// of the run.
func IgnoreDurations() cmp.Option { return ignoreDurations }

// CanonicalPayloads compares trace.Values (inputs, outputs, state) by their
// redacted canonical JSON, shown indented so that a diff points at the lines
// that changed. Integers and floats stay apart (1 and 1.0 differ); a secret
// compares equal to "[REDACTED]", as in stepfork's replay matching, and is
// never printed. Without it cmp still compares Values exactly, through their
// Equal method, but prints them opaquely.
func CanonicalPayloads() cmp.Option { return canonicalPayloads }

// SortConcurrentCalls makes the order of concurrent calls irrelevant. It
// applies to trace.Trace values. In a run that records lanes
// ([trace.LanesFile]), the concurrent group of each scope (its calls and
// nodes made on goroutines other than the scope's own) is concurrent: the
// group's members are put together, at the place of the first, in a fixed
// order, by event type, name or model and input hash, each followed by its
// own events; the lanes file itself is then left out, since it names event
// ids, and so is the joins file ([trace.JoinsFile]). In a run without
// lanes (a Python bundle), calls among the children of one parent whose
// events interleave in the file (a call started before its sibling's last
// event was written) are taken as concurrent and sorted the same way.
// Calls made one after another on one goroutine keep their order, so a
// reordering of sequential calls still shows. Steps are renumbered to the
// new positions; combine it with IgnoreIDs and IgnoreTimestamps, which the
// reordering also changes.
func SortConcurrentCalls() cmp.Option { return sortConcurrentCalls }

// TraceOptions is the usual set for comparing two recordings of the same
// behaviour: IgnoreIDs, IgnoreRunIDs, IgnoreTimestamps, IgnoreDurations,
// CanonicalPayloads, ignoring trace.Trace.Path (where a trace was loaded
// from), and treating nil and empty redaction lists and extra-file maps alike
// (a built trace has nil where a loaded one has empty). It does not include
// SortConcurrentCalls.
//
//	if d := cmp.Diff(want, got, assert.TraceOptions()); d != "" {
//		t.Errorf("run mismatch (-want +got):\n%s", d)
//	}
func TraceOptions() cmp.Option { return traceOptions }

// CheckTraceEqual reports whether the traces of want and got are equal under
// TraceOptions and opts, and if not, returns their cmp.Diff labelled
// (-want +got). Options already in TraceOptions may be given again.
func CheckTraceEqual(want, got Run, opts ...cmp.Option) error {
	w, err := traceOf(want)
	if err != nil {
		return err
	}
	g, err := traceOf(got)
	if err != nil {
		return err
	}
	all := dedupe(append([]cmp.Option{traceOptions}, opts...))
	if equalCheaply(w, g, all) {
		return nil
	}
	d, err := cmpDiff(w, g, all...)
	if err != nil {
		return err
	}
	if d != "" {
		return mismatchf("runs differ (-want +got):\n%s", strings.TrimRight(d, "\n"))
	}
	return nil
}

// TraceEqual asserts that want and got are the same run: equal under
// TraceOptions and any further cmp options. The leading values of args that
// are cmp.Options are comparison options; the rest are msgAndArgs.
//
//	assert.TraceEqual(t, golden, run, assert.SortConcurrentCalls())
func TraceEqual(t TestingT, want, got Run, args ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	opts, msgAndArgs := splitArgs(args)
	return report(t, CheckTraceEqual(want, got, opts...), msgAndArgs)
}

// equalCheaply reports whether want and got are equal under opts when it
// can tell without cmp, which takes a tenth of a second on a run of a
// thousand calls: opts hold only TraceOptions' parts and
// SortConcurrentCalls, and the two traces, with each option's rule applied
// (what an option ignores cleared, what it transforms transformed by the
// option's own function), are deeply equal. Deep equality is at least as
// strict as cmp under those options, so false says nothing: cmp decides,
// and writes the diff.
func equalCheaply(want, got *trace.Trace, opts []cmp.Option) bool {
	sorted := false
	for _, o := range opts {
		switch {
		case o == sortConcurrentCalls:
			sorted = true
		case !reflect.TypeOf(o).Comparable() || !slices.ContainsFunc(traceOptionParts, func(p cmp.Option) bool { return p == o }):
			return false
		}
	}
	w, g := underTraceOptions(want, sorted), underTraceOptions(got, sorted)
	if holdMinted(w.Extras, g.Extras) {
		w.Extras, g.Extras = mintedByContent(w.Extras), mintedByContent(g.Extras)
	}
	return reflect.DeepEqual(w, g)
}

// traceOptionParts are the options of TraceOptions, flattened as dedupe
// flattens them.
var traceOptionParts = dedupe([]cmp.Option{traceOptions})

// underTraceOptions is a copy of tr as TraceOptions compares it (see
// equalCheaply): sorted by SortConcurrentCalls first if asked, then ids
// positional, run ids, times, durations and the path cleared, empty lists
// and maps nil. Payloads are left as they are: equal Values are equal under
// CanonicalPayloads.
func underTraceOptions(tr *trace.Trace, sorted bool) trace.Trace {
	c := *tr
	if sorted {
		c = sortConcurrent(c)
	}
	c.Path, c.RunID, c.CreatedAt, c.Totals.DurationMS = "", "", time.Time{}, nil
	c.Events = positionalIDs(c.Events) // a copy
	for i := range c.Events {
		ev := &c.Events[i]
		ev.RunID, ev.Timestamp, ev.DurationMS = "", time.Time{}, nil
		if len(ev.Redactions) == 0 {
			ev.Redactions = nil
		}
	}
	if len(c.Redactions) == 0 {
		c.Redactions = nil
	} else {
		c.Redactions = slices.Clone(c.Redactions)
		for i := range c.Redactions {
			c.Redactions[i].EventID = ""
		}
	}
	if len(c.Extras) == 0 {
		c.Extras = nil
	}
	return c
}

// dedupe flattens opts and drops repeats of the same option value, so that
// giving a preset twice does not make cmp panic on two identical transformers.
func dedupe(opts []cmp.Option) []cmp.Option {
	var flat []cmp.Option
	var walk func(o cmp.Option)
	walk = func(o cmp.Option) {
		if os, ok := o.(cmp.Options); ok {
			for _, x := range os {
				walk(x)
			}
			return
		}
		if o == nil {
			return
		}
		if reflect.TypeOf(o).Comparable() {
			for _, seen := range flat {
				if reflect.TypeOf(seen) == reflect.TypeOf(o) && seen == o {
					return
				}
			}
		}
		flat = append(flat, o)
	}
	for _, o := range opts {
		walk(o)
	}
	return flat
}

// canonicalText is the text CanonicalPayloads compares: the redacted
// canonical JSON, indented; "<absent>" for a missing payload.
func canonicalText(v trace.Value) string {
	r, _ := trace.RedactValue(v)
	if r.IsAbsent() {
		return r.String()
	}
	var b bytes.Buffer
	if err := json.Indent(&b, r.Bytes(), "", "  "); err != nil {
		return r.Canonical()
	}
	return b.String()
}

// positionalIDs replaces event ids by positions, and parent ids by the
// position of the parent (dangling parent ids are kept as they are).
func positionalIDs(evs []trace.Event) []trace.Event {
	pos := make(map[string]int, len(evs))
	for i := range evs {
		if _, dup := pos[evs[i].ID]; !dup {
			pos[evs[i].ID] = i
		}
	}
	out := make([]trace.Event, len(evs))
	for i, ev := range evs {
		ev.ID = "#" + strconv.Itoa(i)
		if p, ok := pos[ev.ParentID]; ok && ev.ParentID != "" {
			ev.ParentID = "#" + strconv.Itoa(p)
		}
		out[i] = ev
	}
	return out
}

// sortConcurrent returns tr with concurrent sibling calls in a canonical
// order (see SortConcurrentCalls). Events whose parent is unknown or comes
// later in the file are treated as top-level.
func sortConcurrent(tr trace.Trace) trace.Trace {
	evs := tr.Events
	n := len(evs)
	pos := make(map[string]int, n)
	for i := range evs {
		if _, dup := pos[evs[i].ID]; !dup {
			pos[evs[i].ID] = i
		}
	}
	parent := make([]int, n)
	children := make([][]int, n+1) // children[n] are the top-level events
	for i := range evs {
		p, ok := pos[evs[i].ParentID]
		if !ok || evs[i].ParentID == "" || p >= i {
			p = n
		}
		parent[i] = p
		children[p] = append(children[p], i)
	}
	// end[i] is the last position of i's subtree.
	end := make([]int, n)
	for i := range end {
		end[i] = i
	}
	for i := n - 1; i >= 0; i-- {
		if p := parent[i]; p < n {
			end[p] = max(end[p], end[i])
		}
	}
	key := func(i int) []string {
		ev := &evs[i]
		return []string{string(ev.Type), ev.Provider, ev.Label(), trace.Hash(ev.Input), trace.Hash(ev.After)}
	}
	var lanes map[string]int
	if data := tr.Extras[trace.LanesFile]; len(data) > 0 {
		lanes, _ = trace.Lanes(data)
	}
	order := make([]int, 0, n)
	var emit func(p int)
	emit = func(p int) {
		kids := children[p]
		if lanes != nil {
			var group []int
			for _, c := range kids {
				if lanes[evs[c].ID] > 0 {
					group = append(group, c)
				}
			}
			slices.SortStableFunc(group, func(a, b int) int { return slices.Compare(key(a), key(b)) })
			placed := false
			for _, c := range kids {
				if lanes[evs[c].ID] == 0 {
					order = append(order, c)
					emit(c)
					continue
				}
				if !placed {
					placed = true
					for _, g := range group {
						order = append(order, g)
						emit(g)
					}
				}
			}
			return
		}
		for start := 0; start < len(kids); {
			stop, groupEnd := start+1, end[kids[start]]
			for stop < len(kids) && kids[stop] < groupEnd {
				groupEnd = max(groupEnd, end[kids[stop]])
				stop++
			}
			group := kids[start:stop]
			if len(group) > 1 {
				group = slices.Clone(group)
				slices.SortStableFunc(group, func(a, b int) int { return slices.Compare(key(a), key(b)) })
			}
			for _, c := range group {
				order = append(order, c)
				emit(c)
			}
			start = stop
		}
	}
	emit(n)

	positional := true
	for i := range evs {
		positional = positional && evs[i].Step == i
	}
	out := make([]trace.Event, n)
	newPos := make([]int, n)
	for j, i := range order {
		out[j] = evs[i]
		newPos[i] = j
		if positional {
			out[j].Step = j
		}
	}
	if positional && tr.Failure != nil {
		if i := slices.IndexFunc(evs, func(ev trace.Event) bool {
			return ev.Type == trace.ErrorEvent && ev.Step == tr.Failure.Step
		}); i >= 0 {
			f := *tr.Failure
			f.Step = newPos[i]
			tr.Failure = &f
		}
	}
	tr.Events = out
	_, laned := tr.Extras[trace.LanesFile]
	if _, joined := tr.Extras[trace.JoinsFile]; laned || joined {
		extras := maps.Clone(tr.Extras)
		delete(extras, trace.LanesFile)
		delete(extras, trace.JoinsFile)
		tr.Extras = extras
	}
	return tr
}

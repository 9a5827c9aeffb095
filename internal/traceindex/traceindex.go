// Package traceindex finds a trace's events by id and links each event to
// its parent, once per trace. The replay plan, the fork index and the diff
// of a concurrent run all need both; each used to build its own map of a
// run's ids, so a first fork built three.
//
// The rule is stepfork's: an id names the first event that has it, and an
// event's parent is the event its parent_id names when that one comes
// earlier (a later one, or none, leaves the event without a parent).
package traceindex

import (
	"github.com/stepfork/stepfork/internal/tracecache"
	"github.com/stepfork/stepfork/trace"
)

// An Index is the events of one trace by id, and their parents. It is
// read-only once built and safe for concurrent use.
type Index struct {
	byID    map[string]int32
	parents []int32
}

var indexes tracecache.Cache[Index]

// Of returns the index of tr's events, built once per trace and shared (as
// package tracecache says, again when tr's events slice is replaced): for a
// base run, which is replayed, forked and diffed again.
func Of(tr *trace.Trace) *Index { return indexes.Get(tr, New) }

// New builds the index of tr's events for one use, without keeping it: for
// a run looked at once (a variant being diffed), whose index would
// otherwise live as long as the run.
func New(tr *trace.Trace) *Index {
	ix := &Index{byID: make(map[string]int32, len(tr.Events))}
	ix.parents = link(tr.Events, ix.byID)
	return ix
}

// Parents returns, for each of evs, the index of its parent (see the
// package doc), -1 for none: [Index.Parents] of events that are not (yet) a
// trace.
func Parents(evs []trace.Event) []int32 {
	return link(evs, make(map[string]int32, len(evs)))
}

// link fills byID with the first event of each id in evs and returns each
// event's parent, in one pass: an event's parent_id is looked up among the
// events before it, which is what makes the parent an earlier event.
func link(evs []trace.Event, byID map[string]int32) []int32 {
	parents := make([]int32, len(evs))
	for i := range evs {
		ev := &evs[i]
		parents[i] = -1
		if ev.ParentID != "" {
			if j, ok := byID[ev.ParentID]; ok {
				parents[i] = j
			}
		}
		if _, dup := byID[ev.ID]; !dup {
			byID[ev.ID] = int32(i)
		}
	}
	return parents
}

// Lookup returns the index of the first event with the id.
func (ix *Index) Lookup(id string) (int32, bool) {
	i, ok := ix.byID[id]
	return i, ok
}

// Parents returns the index of each event's parent, -1 for none. The slice
// is shared: do not modify it.
func (ix *Index) Parents() []int32 { return ix.parents }

// Package tracecache keeps what a package derives from a trace (a replay
// plan, a fork index) once per trace, so that the tenth replay or fork of a
// run does not build it again.
//
// A trace has no room for such data (traces are compared with go-cmp and
// reflect.DeepEqual, which an unexported field would break), so a Cache is
// keyed by a weak pointer to the trace and its entry is dropped when the
// trace is collected. The value is built from a shallow copy of the trace,
// never from the caller's pointer: a value that held the trace would keep it
// alive forever. An entry is used only while the trace still has the same
// manifest, path and events slice (the same backing array and length) as
// when it was built; a trace whose Events slice was replaced or grown, or
// whose manifest or path changed, is built again. Events changed in place
// are not noticed: the rule [trace.Trace.Calls] states for its own cache.
package tracecache

import (
	"maps"
	"runtime"
	"sync"
	"weak"

	"github.com/stepfork/stepfork/trace"
)

// Cache holds one *T per trace. The zero Cache is ready to use; it is safe
// for concurrent use.
type Cache[T any] struct {
	m sync.Map // weak.Pointer[trace.Trace] → *entry[T]
}

type entry[T any] struct {
	snap trace.Trace // the shallow copy the value was built from
	once sync.Once
	v    *T
}

// Get returns the value for tr, calling build once per trace (and again
// when tr changed as the package doc says) with a shallow copy of tr that
// lives as long as the entry. Concurrent Gets of one trace build it once.
func (c *Cache[T]) Get(tr *trace.Trace, build func(*trace.Trace) *T) *T {
	return c.GetFrom(tr, func(snap, _ *trace.Trace) *T { return build(snap) })
}

// GetFrom is Get whose build also receives tr itself, to read (never to
// keep) what is cached on tr's pointer rather than on its events: the
// calls and nodes trace.Trace.Calls and Nodes computed for it, which a
// shallow copy would compute again (a fork index's copy is planned for
// replay, and the plan pairs the same calls). The value must not hold tr.
func (c *Cache[T]) GetFrom(tr *trace.Trace, build func(snap, tr *trace.Trace) *T) *T {
	key := weak.Make(tr)
	if v, ok := c.m.Load(key); ok {
		if e := v.(*entry[T]); same(&e.snap, tr) {
			return e.value(build, tr)
		}
	}
	e := &entry[T]{snap: *tr}
	e.snap.Extras = maps.Clone(tr.Extras) // so that an extra added to tr's map is noticed
	if old, loaded := c.m.Swap(key, e); loaded {
		// A stale entry, or one another goroutine stored meanwhile for the
		// same trace: keep using that one.
		if o := old.(*entry[T]); same(&o.snap, tr) {
			c.m.CompareAndSwap(key, e, o)
			return o.value(build, tr)
		}
	} else {
		runtime.AddCleanup(tr, func(k weak.Pointer[trace.Trace]) { c.m.Delete(k) }, key)
	}
	return e.value(build, tr)
}

func (e *entry[T]) value(build func(snap, tr *trace.Trace) *T, tr *trace.Trace) *T {
	e.once.Do(func() { e.v = build(&e.snap, tr) })
	return e.v
}

// same reports whether tr still looks as it did when snap was taken.
func same(snap, tr *trace.Trace) bool {
	return snap.Manifest == tr.Manifest && snap.Path == tr.Path &&
		sameSlice(snap.Events, tr.Events) && sameSlice(snap.Redactions, tr.Redactions) &&
		sameExtras(snap.Extras, tr.Extras)
}

func sameSlice[E any](a, b []E) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func sameExtras(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !sameSlice(v, w) {
			return false
		}
	}
	return true
}

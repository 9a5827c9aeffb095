package replay

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/stepfork/stepfork/trace"
)

// Every replay of a base run encodes the same inputs again: a sweep of
// sixty-four variants encodes each input of the prefix sixty-four times.
// For plain types, whose encoding is a function of the value, a Prepared
// keeps what it computed, shared by every replay of it: encoded, value →
// its canonical Value, for inputs and state written while the run still
// follows the base. (Recorded outputs are not kept decoded: the decoder
// compiled for their type, typedecode.go, costs less than a lookup.)
//
// A plain type is a bool, an integer, a string, or an array or struct of
// plain types, with no json or text (un)marshaler at any level. Floats are
// not plain (0 and -0 are equal and encode differently), nor anything
// holding a pointer, slice, map or interface. The memo holds at most as
// many entries as the base run has events, so the memory stays in
// proportion to the trace.
//
// The first replay of a Prepared fills nothing: most tests replay or fork
// a base once, and would pay for a memo no later replay reads. Within that
// replay, the value it encoded last (a tool's output written as state and
// passed to the next call) is reused as in a changed tail. Every later
// replay fills the memo.

// encodedValue is a plain value and its encoding.
type encodedValue struct {
	x any
	v trace.Value
}

type memo struct {
	encoded  sync.Map
	size     atomic.Int64 // entries
	limit    int64
	sessions atomic.Int64 // the replays that started on it
}

func newMemo(events int) *memo { return &memo{limit: int64(events) + 16} }

// store adds key → v to m unless the memo is full.
func (mm *memo) store(m *sync.Map, key, v any) {
	if mm.size.Load() >= mm.limit {
		return
	}
	if _, loaded := m.LoadOrStore(key, v); !loaded {
		mm.size.Add(1)
	}
}

var plainTypes sync.Map // reflect.Type → bool

// plain reports whether values of t may be memoized (see above).
func plain(t reflect.Type) bool {
	if v, ok := plainTypes.Load(t); ok {
		return v.(bool)
	}
	p := plainUncached(t, 0)
	plainTypes.Store(t, p)
	return p
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func plainUncached(t reflect.Type, depth int) bool {
	if depth > 8 {
		return false
	}
	for _, m := range []reflect.Type{jsonMarshaler, jsonUnmarshaler, textMarshaler, textUnmarshaler} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return false
		}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	case reflect.Array:
		return plainUncached(t.Elem(), depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			if !plainUncached(t.Field(i).Type, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// valueOf is the package's valueOf, memoized for plain values when the
// session replays a Prepared.
func (s *session) valueOf(x any) (trace.Value, error) {
	if s.plan == nil || s.plan.memo == nil || x == nil || !plain(reflect.TypeOf(x)) {
		return valueOf(x)
	}
	mm := s.plan.memo
	if v, ok := mm.encoded.Load(x); ok {
		return v.(trace.Value), nil
	}
	if last := s.lastEncoded.Load(); last != nil && last.x == x {
		return last.v, nil // a value written and then passed on, in a changed tail
	}
	v, err := valueOf(x)
	if err != nil {
		return v, err
	}
	if !s.memoize || s.parted.Load() {
		// The first replay of the Prepared, or a run that no longer
		// follows the base: what its tail encodes is this variant's own,
		// and would crowd out of the Prepared's memo the prefix's values
		// that every replay repeats.
		s.lastEncoded.Store(&encodedValue{x, v})
	} else {
		mm.store(&mm.encoded, x, v)
	}
	return v, nil
}

package replay

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/stepfork/stepfork/trace"
)

// Every replay of a base run encodes the same inputs and decodes the same
// recorded outputs again: a sweep of sixty-four variants decodes each
// output of the prefix sixty-four times. For plain types, whose encoding is
// a function of the value and whose decoding a function of the text, a
// Prepared keeps what it computed, shared by every replay of it:
//
//   - decoded: (recorded text, type) → the decoded value, for outputs
//     served from the recording that the type's typeDecoder declines
//     (typedecode.go; it decodes the rest more cheaply than a lookup);
//   - encoded: value → its canonical Value, for inputs and state written
//     while the run still follows the base.
//
// A plain type is a bool, an integer, a string, or an array or struct of
// plain types, with no json or text (un)marshaler at any level. Floats are
// not plain (0 and -0 are equal and encode differently), nor anything
// holding a pointer, slice, map or interface: a cached value is handed out
// by copy, and a copy of a plain value shares nothing mutable. Each cache
// holds at most as many entries as the base run has events, so the memory
// stays in proportion to the trace.

type decodeKey struct {
	raw string
	t   reflect.Type
}

// encodedValue is a plain value and its encoding.
type encodedValue struct {
	x any
	v trace.Value
}

type memo struct {
	decoded, encoded sync.Map
	size             atomic.Int64 // entries in both
	limit            int64
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
	if s.parted.Load() {
		// The run no longer follows the base: what its tail encodes is
		// this variant's own, and would crowd out of the Prepared's memo
		// the prefix's values that every replay repeats.
		s.lastEncoded.Store(&encodedValue{x, v})
	} else {
		mm.store(&mm.encoded, x, v)
	}
	return v, nil
}

// decodeMemo decodes v into a T: with the type's typeDecoder when it has
// one and takes v (typedecode.go: cheaper than a memo lookup), else
// memoized for plain types when the session replays a Prepared.
func decodeMemo[T any](s *session, v trace.Value) (T, error) {
	if _, ok := any((*T)(nil)).(*trace.Value); ok {
		return any(v).(T), nil // what decoding canonical text into a Value gives
	}
	t := reflect.TypeFor[T]()
	if d := typeDecoderFor(t); d != nil {
		if out, ok := decodeTyped[T](d, v.Canonical()); ok {
			return out, nil
		}
	}
	if s.plan == nil || s.plan.memo == nil || !plain(t) {
		return decodeInto[T](v)
	}
	mm := s.plan.memo
	k := decodeKey{v.Canonical(), t}
	if d, ok := mm.decoded.Load(k); ok {
		return d.(T), nil
	}
	out, err := decodeInto[T](v)
	if err != nil {
		return out, err
	}
	mm.store(&mm.decoded, k, out)
	return out, nil
}

// decodeInto decodes v into a new T. (Apart from decodeMemo, so that only
// a decoding, not a value served from the memo, puts a T on the heap.)
func decodeInto[T any](v trace.Value) (T, error) {
	var out T
	err := v.Decode(&out)
	return out, err
}

package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/trace"
)

// valueOf converts a Go value for recording, as trace.ValueOf does; its
// errors match ErrNotRecordable. Values that trace.ValueOf would send
// through encoding/json (structs, typed slices and maps, Marshalers) are
// encoded into a pooled buffer and canonicalized from there, which spares
// the intermediate copies; anything that fails that way goes to
// trace.ValueOf, so that errors read the same.
func valueOf(x any) (trace.Value, error) {
	if v, ok := x.(trace.Value); ok {
		// What trace.ValueOf gives (its text, null when absent), without
		// copying the text.
		if v.IsAbsent() {
			return trace.NullValue, nil
		}
		return v, nil
	}
	if viaJSON(x) {
		e := encoders.Get().(*jsonEncoder)
		e.buf.Reset()
		var v trace.Value
		err := e.enc.Encode(x)
		if err == nil {
			v, err = trace.ParseValue(e.buf.Bytes())
		}
		if e.buf.Cap() <= maxPooledJSON {
			encoders.Put(e)
		}
		if err == nil {
			return v, nil
		}
	}
	v, err := trace.ValueOf(x)
	if err != nil {
		return trace.Value{}, fmt.Errorf("%w: %w", ErrNotRecordable, err)
	}
	return v, nil
}

// jsonEncoder is a pooled encoding/json encoder and its buffer.
type jsonEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// maxPooledJSON bounds the buffers kept in the pool.
const maxPooledJSON = 64 << 10

var encoders = sync.Pool{New: func() any {
	e := &jsonEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false) // canonical JSON unescapes them anyway
	return e
}}

// viaJSON reports whether trace.ValueOf encodes x with encoding/json.
func viaJSON(x any) bool {
	switch x.(type) {
	case nil, trace.Value, json.RawMessage, json.Number, bool, string,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64,
		float32, float64, []any, map[string]any:
		return false
	}
	switch rv := reflect.ValueOf(x); rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return !rv.IsNil()
	case reflect.Float32, reflect.Float64:
		return false
	}
	return true
}

// redacted is v after redaction: what a recording holds and what live inputs
// are compared in.
func redacted(v trace.Value) trace.Value {
	r, _ := trace.RedactValue(v)
	return r
}

// redactedText is s with credential patterns replaced (and what the
// scrubbers remove), for messages.
func redactedText(s string, scrub ...trace.Scrubber) string {
	r, _ := trace.RedactString(s, scrub...)
	return r
}

// preview is the canonical JSON of v cut to 200 characters with an ellipsis
// (stepfork's preview), after redaction.
func preview(v trace.Value) string {
	if v.IsAbsent() {
		v = trace.NullValue
	}
	return clip.Head(redacted(v).Canonical(), 200)
}

// previewOrMissing is preview, or "<missing>" for an absent value.
func previewOrMissing(v trace.Value) string {
	if v.IsAbsent() {
		return "<missing>"
	}
	return preview(v)
}

// firstDifference finds the first place where a and b differ, as a path like
// $.items[2].price, and the two values there.
func firstDifference(a, b trace.Value, path string) (string, trace.Value, trace.Value) {
	if a == b {
		return "", a, b
	}
	switch {
	case a.Kind() == trace.Object && b.Kind() == trace.Object:
		for k, av := range a.Members() {
			bv := b.Get(k)
			if bv.IsAbsent() {
				return path + "." + k, av, bv
			}
			if av != bv {
				return firstDifference(av, bv, path+"."+k)
			}
		}
		for k, bv := range b.Members() {
			if a.Get(k).IsAbsent() {
				return path + "." + k, trace.Value{}, bv
			}
		}
	case a.Kind() == trace.Array && b.Kind() == trace.Array:
		as, bs := elems(a), elems(b)
		for i := 0; i < len(as) && i < len(bs); i++ {
			if as[i] != bs[i] {
				return firstDifference(as[i], bs[i], path+"["+strconv.Itoa(i)+"]")
			}
		}
		i := min(len(as), len(bs))
		var av, bv trace.Value
		if i < len(as) {
			av = as[i]
		}
		if i < len(bs) {
			bv = bs[i]
		}
		return path + "[" + strconv.Itoa(i) + "]", av, bv
	}
	return path, a, b
}

func elems(v trace.Value) []trace.Value {
	var out []trace.Value
	for _, e := range v.Elems() {
		out = append(out, e)
	}
	return out
}

// modelFingerprint is stepfork's fingerprint of a model identity: the hash of
// {"model": m, "provider": p} (null provider when there is none).
func modelFingerprint(provider, model string) string {
	p := trace.NullValue
	if provider != "" {
		p = trace.StringValue(provider)
	}
	v, _ := trace.ObjectValue(trace.Member{Key: "model", Value: trace.StringValue(model)}, trace.Member{Key: "provider", Value: p})
	return trace.Hash(v)
}

// descriptor is stepfork's one-line description of a call.
func descriptor(kind CallKind, name, provider, model string) string {
	if kind == KindLLM {
		return fmt.Sprintf("llm provider=%s model='%s' model_fingerprint=%s", pyStr(provider), model, modelFingerprint(provider, model))
	}
	return fmt.Sprintf("%s name='%s'", kind, name)
}

// asRecorded is what the agent gets back from a live call whose result v
// was recorded as rec (before redaction): rec decoded into T, as a replay
// serves it, so that the agent sees the same Go values whether the call ran
// or was served (a []string in a map[string]any comes back as []any, a
// time.Time without its monotonic reading, a json.RawMessage compacted). A
// type whose values survive encoding unchanged (roundTrips) is spared the
// decoding, unless a string held invalid UTF-8, which encoding replaced by
// U+FFFD. An error says the recording could not be served back as a T.
func asRecorded[T any](v T, rec trace.Value) (T, error) {
	if roundTrips(reflect.TypeFor[T]()) && !strings.Contains(rec.Canonical(), "\uFFFD") {
		return v, nil
	}
	var out T
	if rec.IsNull() {
		return out, nil // as decodeServed serves null
	}
	if p, ok := any(&out).(*trace.Value); ok {
		*p = rec
		return out, nil
	}
	out, err := decodeValue[T](rec)
	if err != nil {
		return out, fmt.Errorf("%w: %s, recorded as %s, does not decode back into %T, so a replay could not serve it: %w",
			ErrNotRecordable, reflect.TypeFor[T](), preview(rec), out, err)
	}
	return out, nil
}

var roundTripTypes sync.Map // reflect.Type → bool

// roundTrips reports whether every value of t that can be recorded decodes
// from its recording into an equal value of t (strings aside, whose
// invalid UTF-8 encoding replaces): booleans, numbers and strings, and
// pointers, slices, arrays, maps (with string or integer keys) and structs
// of such types, where every struct field is exported, not embedded, not
// left out with a "-" tag and has a name of its own, and no type at any
// level has a JSON or text (un)marshaler. An interface is never one (a
// recorded []string comes back as []any).
func roundTrips(t reflect.Type) bool {
	if v, ok := roundTripTypes.Load(t); ok {
		return v.(bool)
	}
	ok := roundTripsUncached(t, map[reflect.Type]bool{})
	roundTripTypes.Store(t, ok)
	return ok
}

func roundTripsUncached(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true // a recursive type: decided where it started
	}
	seen[t] = true
	for _, m := range []reflect.Type{jsonMarshaler, jsonUnmarshaler, textMarshaler, textUnmarshaler} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return false
		}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return roundTripsUncached(t.Elem(), seen)
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			return false
		}
		return roundTripsUncached(t.Key(), seen) && roundTripsUncached(t.Elem(), seen)
	case reflect.Struct:
		names := make(map[string]bool, t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Anonymous {
				return false
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				return false
			}
			if name == "" {
				name = f.Name
			}
			if names[strings.ToLower(name)] || !roundTripsUncached(f.Type, seen) {
				return false
			}
			names[strings.ToLower(name)] = true
		}
		return true
	}
	return false
}

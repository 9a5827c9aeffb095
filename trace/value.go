package trace

import (
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The kinds of Value. Int and Float are distinct: 1 and 1.0 are different
// values with different hashes, as in Python.
const (
	Absent Kind = iota // the zero Value: the key was not present at all
	Null
	Bool
	Int
	Float
	String
	Array
	Object
)

var kindNames = [...]string{"absent", "null", "bool", "int", "float", "string", "array", "object"}

// String returns the name of the kind ("int", "object", …).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is an immutable JSON value held in canonical form (CanonicalProfile).
//
// The zero Value is Absent: it stands for a key that was not present, which is
// not the same as an explicit null (the two change which payload hashes a
// trace must carry). Integers and floats stay apart, integers keep every digit,
// and object members are sorted by key. Two Values are canonically equal iff
// their Canonical strings are equal, so == on Values is canonical equality.
type Value struct {
	raw string
}

// Common values.
var (
	NullValue  = Value{"null"}
	TrueValue  = Value{"true"}
	FalseValue = Value{"false"}
)

// ParseValue parses JSON text into a Value. See canonicalize for what is
// refused.
func ParseValue(data []byte) (Value, error) {
	out, err := canonicalize(data)
	if err != nil {
		return Value{}, err
	}
	return Value{owned(out)}, nil
}

// MustParse is like ParseValue but panics on error. It is meant for literals in
// tests and examples.
func MustParse(text string) Value {
	v, err := ParseValue([]byte(text))
	if err != nil {
		panic(fmt.Sprintf("trace.MustParse(%q): %v", text, err))
	}
	return v
}

// StringValue returns s as a JSON string. JSON text is UTF-8, so each run
// of bytes of s that are not valid UTF-8 is replaced by one U+FFFD (where
// encoding/json writes one U+FFFD for each such byte).
func StringValue(s string) Value { return Value{owned(appendQuoted(nil, s))} }

// IntValue returns i as a JSON integer.
func IntValue(i int64) Value { return Value{strconv.FormatInt(i, 10)} }

// BoolValue returns b as a JSON boolean.
func BoolValue(b bool) Value {
	if b {
		return TrueValue
	}
	return FalseValue
}

// FloatValue returns f as a JSON float. NaN and infinities are refused.
func FloatValue(f float64) (Value, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Value{}, &CanonicalError{Off: -1, Msg: msgNonFinite}
	}
	return Value{string(appendFloatRepr(nil, f))}, nil
}

// ArrayValue returns a JSON array of the given elements. Absent elements are
// refused.
func ArrayValue(elems ...Value) (Value, error) {
	b := []byte{'['}
	for i, e := range elems {
		if e.IsAbsent() {
			return Value{}, &CanonicalError{Off: -1, Msg: fmt.Sprintf("array element %d is absent", i)}
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.raw...)
	}
	return Value{owned(append(b, ']'))}, nil
}

// Member is one key and value of a JSON object.
type Member struct {
	Key   string
	Value Value
}

// ObjectValue returns a JSON object of the given members in canonical (sorted)
// order. Absent values are left out; duplicate keys are refused.
func ObjectValue(members ...Member) (Value, error) {
	ms := slices.Clone(members)
	slices.SortStableFunc(ms, func(a, b Member) int { return strings.Compare(a.Key, b.Key) })
	b := []byte{'{'}
	n := 0
	for i, m := range ms {
		if i > 0 && ms[i-1].Key == m.Key {
			return Value{}, &CanonicalError{Off: -1, Msg: fmt.Sprintf("duplicate object key %q", m.Key)}
		}
		if m.Value.IsAbsent() {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, m.Key)
		b = append(b, ':')
		b = append(b, m.Value.raw...)
		n++
	}
	return Value{owned(append(b, '}'))}, nil
}

// IsAbsent reports whether v is the zero Value.
func (v Value) IsAbsent() bool { return v.raw == "" }

// IsNull reports whether v is an explicit JSON null.
func (v Value) IsNull() bool { return v.raw == "null" }

// Canonical returns the canonical JSON text of v ("" when absent).
func (v Value) Canonical() string { return v.raw }

// Bytes returns a copy of the canonical JSON bytes of v (nil when absent).
func (v Value) Bytes() []byte {
	if v.raw == "" {
		return nil
	}
	return []byte(v.raw)
}

// String returns the canonical JSON text, or "<absent>".
func (v Value) String() string {
	if v.raw == "" {
		return "<absent>"
	}
	return v.raw
}

// Equal reports whether v and w are canonically equal (1 and 1.0 are not).
func (v Value) Equal(w Value) bool { return v.raw == w.raw }

// Kind returns the JSON type of v.
func (v Value) Kind() Kind {
	if v.raw == "" {
		return Absent
	}
	switch c := v.raw[0]; c {
	case 'n':
		return Null
	case 't', 'f':
		return Bool
	case '"':
		return String
	case '[':
		return Array
	case '{':
		return Object
	default:
		if strings.ContainsAny(v.raw, ".eE") {
			return Float
		}
		return Int
	}
}

// Str returns the string held by v, and whether v is a string.
func (v Value) Str() (string, bool) {
	if v.Kind() != String {
		return "", false
	}
	if !strings.ContainsRune(v.raw, '\\') {
		return v.raw[1 : len(v.raw)-1], true
	}
	return unquote(v.raw), true
}

// Int returns the integer held by v, and whether v is an integer that fits in
// an int64.
func (v Value) Int() (int64, bool) {
	if v.Kind() != Int {
		return 0, false
	}
	i, err := strconv.ParseInt(v.raw, 10, 64)
	return i, err == nil
}

// Float returns the number held by v as a float64 (integers are converted), and
// whether v is a number.
func (v Value) Float() (float64, bool) {
	switch v.Kind() {
	case Int, Float:
		f, err := strconv.ParseFloat(v.raw, 64)
		return f, err == nil
	}
	return 0, false
}

// BoolOf returns the boolean held by v, and whether v is a boolean.
func (v Value) BoolOf() (b, ok bool) {
	switch v.raw {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// Members iterates over the members of an object in key order. It yields
// nothing when v is not an object.
func (v Value) Members() iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		if v.Kind() != Object {
			return
		}
		s := v.raw
		i := 1
		for i < len(s)-1 {
			kEnd := skipValue(s, i)
			key := s[i+1 : kEnd-1]
			if strings.IndexByte(key, '\\') >= 0 {
				key = unquote(s[i:kEnd])
			}
			vEnd := skipValue(s, kEnd+1)
			if !yield(key, Value{s[kEnd+1 : vEnd]}) {
				return
			}
			i = vEnd + 1
		}
	}
}

// unquote decodes a JSON string literal holding escapes. (On its own, so
// that the string it decodes into does not move every key of Members to
// the heap.)
func unquote(lit string) string {
	var out string
	_ = json.Unmarshal([]byte(lit), &out)
	return out
}

// Get returns the member of an object with the given key, or Absent.
func (v Value) Get(key string) Value {
	for k, m := range v.Members() {
		if k == key {
			return m
		}
	}
	return Value{}
}

// Elems iterates over the elements of an array. It yields nothing when v is not
// an array.
func (v Value) Elems() iter.Seq2[int, Value] {
	return func(yield func(int, Value) bool) {
		if v.Kind() != Array {
			return
		}
		s := v.raw
		i, n := 1, 0
		for i < len(s)-1 {
			end := skipValue(s, i)
			if !yield(n, Value{s[i:end]}) {
				return
			}
			n++
			i = end + 1
		}
	}
}

// Len returns the number of members of an object or elements of an array, and
// 0 for other kinds.
func (v Value) Len() int {
	n := 0
	switch v.Kind() {
	case Object:
		for range v.Members() {
			n++
		}
	case Array:
		for range v.Elems() {
			n++
		}
	}
	return n
}

// skipValue returns the end offset of the canonical value starting at i.
// Canonical text has no white space, so this is a plain bracket matcher.
func skipValue(s string, i int) int {
	switch s[i] {
	case '"':
		i++
		for {
			switch s[i] {
			case '\\':
				i += 2
			case '"':
				return i + 1
			default:
				i++
			}
		}
	case '{', '[':
		depth := 0
		for ; i < len(s); i++ {
			switch s[i] {
			case '"':
				i = skipValue(s, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default:
		for i < len(s) && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ':' {
			i++
		}
		return i
	}
}

// Decode unmarshals v into the Go value pointed to by dst with encoding/json.
// Decoding an absent value is an error. Decoding into a *[Value] stores v
// itself, which is what encoding/json would give: canonical text parses to
// itself.
func (v Value) Decode(dst any) error {
	if v.raw == "" {
		return fmt.Errorf("trace: cannot decode an absent value")
	}
	if p, ok := dst.(*Value); ok && p != nil {
		*p = v
		return nil
	}
	return json.Unmarshal([]byte(v.raw), dst)
}

// Any returns v as plain Go data: nil, bool, json.Number, string, []any or
// map[string]any. Numbers stay json.Number so that 1 and 1.0 keep their text.
func (v Value) Any() any {
	if v.raw == "" {
		return nil
	}
	// Read from the canonical text, as encoding/json with UseNumber would
	// decode it (FuzzValueOps checks they agree).
	switch v.raw[0] {
	case 'n':
		return nil
	case 't':
		return true
	case 'f':
		return false
	case '"':
		s, _ := v.Str()
		return s
	case '{':
		m := make(map[string]any, v.Len())
		for k, e := range v.Members() {
			m[k] = e.Any()
		}
		return m
	case '[':
		a := make([]any, 0, v.Len())
		for _, e := range v.Elems() {
			a = append(a, e.Any())
		}
		return a
	}
	return json.Number(v.raw)
}

// MarshalJSON returns the canonical bytes of v; an absent value marshals as
// null.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.raw == "" {
		return []byte("null"), nil
	}
	return []byte(v.raw), nil
}

// UnmarshalJSON parses JSON text into v.
func (v *Value) UnmarshalJSON(data []byte) error {
	p, err := ParseValue(data)
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// ValueOf converts a Go value to a Value.
//
// Value, json.RawMessage, nil, bool, strings, integers, floats, []any,
// map[string]any and the json.Number type are converted directly, so float64(1)
// becomes the float 1.0 and int(1) the integer 1. Any other value (structs,
// typed slices and maps, json.Marshaler implementations) goes through
// encoding/json first; there a float field holding an integral value is
// printed by encoding/json without a fraction and becomes an integer. NaN,
// infinities, cycles and values nested deeper than MaxDepth are refused with
// an error naming the path ($.key[0]).
func ValueOf(x any) (Value, error) {
	var b []byte
	b, err := appendGo(b, x, "$", 0)
	if err != nil {
		return Value{}, err
	}
	return Value{owned(b)}, nil
}

// MustValueOf is like ValueOf but panics on error; for literals in tests.
func MustValueOf(x any) Value {
	v, err := ValueOf(x)
	if err != nil {
		panic(fmt.Sprintf("trace.MustValueOf: %v", err))
	}
	return v
}

func appendGo(dst []byte, x any, path string, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return nil, &CanonicalError{Off: -1, Msg: fmt.Sprintf("value at %s exceeds the maximum nesting depth of %d; this usually means a cyclic structure", path, MaxDepth)}
	}
	switch t := x.(type) {
	case nil:
		return append(dst, "null"...), nil
	case Value:
		if t.IsAbsent() {
			return append(dst, "null"...), nil
		}
		return append(dst, t.raw...), nil
	case json.RawMessage:
		c, err := canonicalize(t)
		if err != nil {
			return nil, fmt.Errorf("value at %s: %w", path, err)
		}
		return append(dst, c...), nil
	case json.Number:
		c, err := canonicalize([]byte(t))
		if err != nil {
			return nil, fmt.Errorf("value at %s: %w", path, err)
		}
		return append(dst, c...), nil
	case bool:
		if t {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendQuoted(dst, t), nil
	case int:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int64:
		return strconv.AppendInt(dst, t, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(t), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(t), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(t), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(t), 10), nil
	case uint64:
		return strconv.AppendUint(dst, t, 10), nil
	case float32:
		return appendGoFloat(dst, float64(t), path)
	case float64:
		return appendGoFloat(dst, t, path)
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			dst, err = appendGo(dst, e, path+"["+strconv.Itoa(i)+"]", depth+1)
			if err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendQuoted(dst, k)
			dst = append(dst, ':')
			var err error
			dst, err = appendGo(dst, t[k], path+"."+k, depth+1)
			if err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	rv := reflect.ValueOf(x)
	if (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface || rv.Kind() == reflect.Map || rv.Kind() == reflect.Slice) && rv.IsNil() {
		return append(dst, "null"...), nil
	}
	if f, ok := floatOf(rv); ok {
		return appendGoFloat(dst, f, path)
	}
	data, err := json.Marshal(x)
	if err != nil {
		return nil, fmt.Errorf("cannot serialize %T at %s: %w", x, path, err)
	}
	c, err := canonicalize(data)
	if err != nil {
		return nil, fmt.Errorf("cannot serialize %T at %s: %w", x, path, err)
	}
	return append(dst, c...), nil
}

func floatOf(rv reflect.Value) (float64, bool) {
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

func appendGoFloat(dst []byte, f float64, path string) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &CanonicalError{Off: -1, Msg: fmt.Sprintf("non-finite float at %s cannot be recorded as JSON", path)}
	}
	return appendFloatRepr(dst, f), nil
}

// appendFileForm appends the canonical text of v with floats printed the way
// Pydantic prints them in events.jsonl (appendFloatPydantic). The two forms
// differ only in floats with negative exponents, so the common case is a copy.
func appendFileForm(dst []byte, v Value) []byte {
	s := v.raw
	if !strings.Contains(s, "e-") {
		return append(dst, s...)
	}
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			i = skipValue(s, i) - 1
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' {
				j++
			}
			if tok := s[i:j]; strings.Contains(tok, "e-") {
				f, _ := strconv.ParseFloat(tok, 64)
				dst = append(dst, s[start:i]...)
				dst = appendFloatPydantic(dst, f)
				start = j
			}
			i = j - 1
		}
	}
	return append(dst, s[start:]...)
}

// owned is b as a string without a copy. b must be a buffer of the
// caller's own that nothing writes to, or keeps, afterwards: the string
// shares its bytes.
func owned(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

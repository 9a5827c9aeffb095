package replay

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/stepfork/stepfork/trace"
)

// The first replay of a base decodes every recorded output it serves, and
// encoding/json spends most of that on what canonical text never needs: a
// validity scan of text known valid, case-insensitive field lookup, and
// reflection set up per call. A typeDecoder is compiled once per type and
// decodes canonical text (trace.Value's: valid, no space, no key twice in an
// object) into it directly.
//
// It decodes only what it can decode exactly as json.Unmarshal does into a
// new value, and reports false for anything else — a key that is not a
// field's exact name, a number that does not fit, a value of the wrong kind,
// an escape it does not read, invalid UTF-8 — after which the caller decodes
// with encoding/json, which gives the value or the error it always gave.
// time.Time and trace.Value are read by calling their UnmarshalJSON with the
// value's text, as json does. A type with another json or text unmarshaler
// at any level, a channel, function or non-empty interface, a []byte (json
// reads it from base64; a json.RawMessage, whose unmarshaler copies the
// text, is read), a map whose keys are not strings, or fields json names by
// rules this file does not follow (embedded fields, the ",string" option,
// two fields of one name, a tag json would not accept as a name) has no
// typeDecoder at all.

// typeDecoder decodes canonical text into values of one type, written in
// place (a decoding that calls through functions would put every value it
// decodes on the heap).
type typeDecoder struct {
	typ  reflect.Type
	kind reflect.Kind
	raw  bool // a json.RawMessage: the value's text
	// unmarshal: time.Time or trace.Value, whose UnmarshalJSON is given
	// the value's text, as encoding/json gives it
	unmarshal bool
	bits      int            // of a number
	n         int            // an array's length
	size      uintptr        // its element's size (of an array or slice)
	elem      *typeDecoder   // an array's, slice's, map's or pointer's element
	fields    []fieldDecoder // a struct's fields, as json names them
}

// fieldDecoder is a struct field json decodes into by name.
type fieldDecoder struct {
	name   string
	offset uintptr
	dec    *typeDecoder
}

// typeScan reads canonical JSON text.
type typeScan struct {
	text string
	pos  int
}

var typeDecoders sync.Map // reflect.Type → *typeDecoder (nil: none)

var (
	rawMessage = reflect.TypeFor[json.RawMessage]()
	valueType  = reflect.TypeFor[trace.Value]()
	timeType   = reflect.TypeFor[time.Time]()
)

// typeDecoderFor is the typeDecoder of t, nil when t has none.
func typeDecoderFor(t reflect.Type) *typeDecoder {
	if d, ok := typeDecoders.Load(t); ok {
		return d.(*typeDecoder)
	}
	c := decoderCompiler{done: map[reflect.Type]*typeDecoder{}, open: map[reflect.Type]bool{}}
	d := c.compile(t, 0)
	typeDecoders.Store(t, d)
	return d
}

// decoderCompiler compiles the decoder of one type: each type it meets
// once (a type that fields share is not compiled again for each), and a
// recursive type (met again inside itself) to none, which encoding/json
// decodes; compiling it level by level would take time exponential in the
// depth limit for a type with more than one recursive field.
type decoderCompiler struct {
	done map[reflect.Type]*typeDecoder // compiled, nil for none
	open map[reflect.Type]bool         // being compiled
}

func (c *decoderCompiler) compile(t reflect.Type, depth int) *typeDecoder {
	if d, ok := c.done[t]; ok {
		return d
	}
	if c.open[t] || depth > 16 {
		return nil
	}
	c.open[t] = true
	d := c.compileType(t, depth)
	delete(c.open, t)
	c.done[t] = d
	return d
}

// decodeTyped decodes canonical text into a new T with d, reporting false
// when the caller must decode it with encoding/json instead. d must be
// T's decoder.
func decodeTyped[T any](d *typeDecoder, text string) (T, bool) {
	var out T
	s := typeScan{text: text}
	if !d.decode(&s, unsafe.Pointer(&out)) || s.pos != len(text) {
		var zero T
		return zero, false
	}
	return out, true
}

// decodeValue decodes v, canonical text, into a new T as json.Unmarshal
// does: with T's typeDecoder when it takes v, else with encoding/json.
func decodeValue[T any](v trace.Value) (T, error) {
	if reflect.TypeFor[T]() == valueType && !v.IsAbsent() {
		return *(*T)(unsafe.Pointer(&v)), nil // canonical text is its own decoding (trace.Value.Decode)
	}
	if d := typeDecoderFor(reflect.TypeFor[T]()); d != nil {
		if out, ok := decodeTyped[T](d, v.Canonical()); ok {
			return out, nil
		}
	}
	var out T // on the heap: encoding/json takes its address
	err := v.Decode(&out)
	return out, err
}

func (c *decoderCompiler) compileType(t reflect.Type, depth int) *typeDecoder {
	if t == rawMessage {
		// Its UnmarshalJSON keeps a copy of the value's text, null too.
		return &typeDecoder{typ: t, kind: t.Kind(), raw: true}
	}
	switch {
	case t == timeType || t == valueType:
		// Their UnmarshalJSON, which encoding/json calls with the value's
		// text, null too, is called the same way (see decode).
		return &typeDecoder{typ: t, kind: t.Kind(), unmarshal: true}
	case t.Kind() == reflect.Pointer:
		// Its element decides.
	case reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler):
		// Another unmarshaler would have to be called through an
		// interface, which would put every value decoded on the heap.
		return nil
	}
	d := &typeDecoder{typ: t, kind: t.Kind()}
	switch t.Kind() {
	case reflect.Bool, reflect.String:
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		d.bits = t.Bits()
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return nil // json decodes into it only what it already holds
		}
	case reflect.Array, reflect.Slice, reflect.Pointer, reflect.Map:
		switch k := t.Kind(); {
		case k == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
			return nil // base64
		case k == reflect.Map && (t.Key().Kind() != reflect.String || reflect.PointerTo(t.Key()).Implements(textUnmarshaler)):
			return nil
		case k == reflect.Array:
			d.n = t.Len()
		}
		d.size, d.elem = t.Elem().Size(), c.compile(t.Elem(), depth+1)
		if d.elem == nil {
			return nil
		}
	case reflect.Struct:
		if !c.compileFields(d, t, depth) {
			return nil
		}
	default:
		return nil
	}
	return d
}

// compileFields names t's fields, into d, as encoding/json does, reporting false
// when that takes a rule this file does not follow.
func (c *decoderCompiler) compileFields(d *typeDecoder, t reflect.Type, depth int) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return false // promotion and its conflict rules
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		for opts != "" {
			var o string
			o, opts, _ = strings.Cut(opts, ",")
			if o == "string" {
				return false
			}
		}
		if name == "" {
			name = f.Name
		} else if !jsonTagName(name) {
			return false
		}
		dec := c.compile(f.Type, depth+1)
		if dec == nil {
			return false
		}
		for _, g := range d.fields {
			if g.name == name {
				return false // json keeps the tagged one, or neither
			}
		}
		d.fields = append(d.fields, fieldDecoder{name: name, offset: f.Offset, dec: dec})
	}
	return true
}

// jsonTagName reports whether json takes name, a tag's name, as the
// field's name: letters, digits and the punctuation json accepts.
func jsonTagName(name string) bool {
	for _, c := range name {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case unicode.IsLetter(c) || unicode.IsDigit(c):
		default:
			return false
		}
	}
	return true
}

// decode decodes the JSON value at the start of s.text[s.pos:] into the
// value of d's type at p, which holds its zero value, and advances s.pos
// past it. A null leaves the value as it is, as json.Unmarshal does (and a
// zero map, slice, pointer or interface is nil already).
func (d *typeDecoder) decode(s *typeScan, p unsafe.Pointer) bool {
	if d.raw {
		start := s.pos
		if !s.skip(0) {
			return false
		}
		*(*json.RawMessage)(p) = json.RawMessage(s.text[start:s.pos])
		return true
	}
	if d.unmarshal {
		start := s.pos
		if !s.skip(0) {
			return false
		}
		// Both methods only read what they are given; a call on the
		// concrete type leaves the value where it is (on the stack).
		text := unsafe.Slice(unsafe.StringData(s.text[start:s.pos]), s.pos-start)
		if d.typ == timeType {
			return (*time.Time)(p).UnmarshalJSON(text) == nil
		}
		return (*trace.Value)(p).UnmarshalJSON(text) == nil
	}
	if s.null() {
		return true
	}
	switch d.kind {
	case reflect.Bool:
		switch {
		case strings.HasPrefix(s.text[s.pos:], "true"):
			s.pos += 4
			*(*bool)(p) = true
		case strings.HasPrefix(s.text[s.pos:], "false"):
			s.pos += 5
		default:
			return false
		}
	case reflect.String:
		str, ok := s.str()
		if !ok {
			return false
		}
		*(*string)(p) = str
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s.number(), 10, d.bits)
		if err != nil {
			return false // json's error: out of range, or not an integer
		}
		switch d.bits {
		case 8:
			*(*int8)(p) = int8(n)
		case 16:
			*(*int16)(p) = int16(n)
		case 32:
			*(*int32)(p) = int32(n)
		default:
			*(*int64)(p) = n
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s.number(), 10, d.bits)
		if err != nil {
			return false
		}
		switch d.bits {
		case 8:
			*(*uint8)(p) = uint8(n)
		case 16:
			*(*uint16)(p) = uint16(n)
		case 32:
			*(*uint32)(p) = uint32(n)
		default:
			*(*uint64)(p) = n
		}
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s.number(), d.bits)
		if err != nil {
			return false
		}
		if d.bits == 32 {
			*(*float32)(p) = float32(f)
		} else {
			*(*float64)(p) = f
		}
	case reflect.Interface:
		v, ok := s.anyValue(0)
		if !ok {
			return false
		}
		*(*any)(p) = v
	case reflect.Array:
		return d.decodeArray(s, p)
	case reflect.Slice:
		return d.decodeSlice(s, p)
	case reflect.Pointer:
		v := reflect.New(d.elem.typ)
		if !d.elem.decode(s, v.UnsafePointer()) {
			return false
		}
		*(*unsafe.Pointer)(p) = v.UnsafePointer()
	case reflect.Map:
		return d.decodeMap(s, p)
	case reflect.Struct:
		return d.decodeStruct(s, p)
	default:
		return false
	}
	return true
}

func (d *typeDecoder) decodeArray(s *typeScan, p unsafe.Pointer) bool {
	if !s.consume('[') {
		return false
	}
	if s.consume(']') {
		return true
	}
	for i := 0; ; i++ {
		if i < d.n {
			if !d.elem.decode(s, unsafe.Add(p, uintptr(i)*d.size)) {
				return false
			}
		} else if !s.skip(0) {
			return false // json reads and drops what the array has no room for
		}
		if s.consume(']') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

// decodeSlice decodes an array into a new slice of its length (json gives
// an empty array a non-nil slice).
func (d *typeDecoder) decodeSlice(s *typeScan, p unsafe.Pointer) bool {
	n, ok := s.count()
	if !ok {
		return false
	}
	v := reflect.MakeSlice(d.typ, n, n)
	base := v.UnsafePointer()
	s.pos++ // '['
	for i := range n {
		if i > 0 {
			s.pos++ // ','
		}
		if !d.elem.decode(s, unsafe.Add(base, uintptr(i)*d.size)) {
			return false
		}
	}
	if !s.consume(']') {
		return false
	}
	*(*sliceHeader)(p) = sliceHeader{base, n, n}
	return true
}

// sliceHeader is the layout of a slice value (written through p, which
// reflect.NewAt would move to the heap with the value p points into).
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// decodeMap decodes an object into a new map (json gives an empty object a
// non-nil map).
func (d *typeDecoder) decodeMap(s *typeScan, p unsafe.Pointer) bool {
	if !s.consume('{') {
		return false
	}
	m := reflect.MakeMap(d.typ)
	kt := d.typ.Key()
	if !s.consume('}') {
		for {
			key, ok := s.str()
			if !ok || !s.consume(':') {
				return false
			}
			e := reflect.New(d.elem.typ).Elem()
			if !d.elem.decode(s, e.Addr().UnsafePointer()) {
				return false
			}
			m.SetMapIndex(reflect.ValueOf(key).Convert(kt), e)
			if s.consume('}') {
				break
			}
			if !s.consume(',') {
				return false
			}
		}
	}
	*(*unsafe.Pointer)(p) = m.UnsafePointer() // a map value is one pointer
	return true
}

func (d *typeDecoder) decodeStruct(s *typeScan, p unsafe.Pointer) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	for {
		key, ok := s.str()
		if !ok || !s.consume(':') {
			return false
		}
		var f *fieldDecoder
		for i := range d.fields {
			if d.fields[i].name == key {
				f = &d.fields[i]
				break
			}
		}
		if f == nil || !f.dec.decode(s, unsafe.Add(p, f.offset)) {
			return false // json may match the key ignoring case
		}
		if s.consume('}') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

// anyValue reads a JSON value as json.Unmarshal decodes it into an empty
// interface: map[string]any, []any, float64, string, bool or nil.
func (s *typeScan) anyValue(depth int) (any, bool) {
	if depth > 10000 || s.pos >= len(s.text) {
		return nil, false
	}
	switch c := s.text[s.pos]; {
	case c == '{':
		s.pos++
		m := map[string]any{}
		if s.consume('}') {
			return m, true
		}
		for {
			key, ok := s.str()
			if !ok || !s.consume(':') {
				return nil, false
			}
			v, ok := s.anyValue(depth + 1)
			if !ok {
				return nil, false
			}
			m[key] = v
			if s.consume('}') {
				return m, true
			}
			if !s.consume(',') {
				return nil, false
			}
		}
	case c == '[':
		s.pos++
		a := []any{}
		if s.consume(']') {
			return a, true
		}
		for {
			v, ok := s.anyValue(depth + 1)
			if !ok {
				return nil, false
			}
			a = append(a, v)
			if s.consume(']') {
				return a, true
			}
			if !s.consume(',') {
				return nil, false
			}
		}
	case c == '"':
		return s.str()
	case c == 't' && s.literal("true"):
		return true, true
	case c == 'f' && s.literal("false"):
		return false, true
	case c == 'n' && s.literal("null"):
		return nil, true
	case c == '-' || c >= '0' && c <= '9':
		f, err := strconv.ParseFloat(s.number(), 64)
		return f, err == nil
	}
	return nil, false
}

// count reads ahead the number of elements of the array at s.pos (s.pos
// does not move).
func (s *typeScan) count() (int, bool) {
	at := s.pos
	defer func() { s.pos = at }()
	if !s.consume('[') {
		return 0, false
	}
	if s.consume(']') {
		return 0, true
	}
	for n := 1; ; n++ {
		if !s.skip(0) {
			return 0, false
		}
		if s.consume(']') {
			return n, true
		}
		if !s.consume(',') {
			return 0, false
		}
	}
}

// null reads a JSON null, which json.Unmarshal leaves a plain value
// unchanged for.
func (s *typeScan) null() bool {
	if strings.HasPrefix(s.text[s.pos:], "null") {
		s.pos += 4
		return true
	}
	return false
}

func (s *typeScan) consume(c byte) bool {
	if s.pos < len(s.text) && s.text[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// number reads the text of a JSON number (empty when there is none).
func (s *typeScan) number() string {
	start := s.pos
	for s.pos < len(s.text) {
		switch c := s.text[s.pos]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			s.pos++
		default:
			return s.text[start:s.pos]
		}
	}
	return s.text[start:]
}

// str reads a JSON string as json.Unmarshal decodes it. Text without
// escapes is shared with the recording, not copied.
func (s *typeScan) str() (string, bool) {
	if !s.consume('"') {
		return "", false
	}
	start := s.pos
	ascii := true
	for s.pos < len(s.text) {
		c := s.text[s.pos]
		switch {
		case c == '"':
			out := s.text[start:s.pos]
			s.pos++
			if !ascii && !utf8.ValidString(out) {
				return "", false // json replaces each invalid byte
			}
			return out, true
		case c == '\\':
			return s.unescape(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		s.pos++
	}
	return "", false
}

// unescape reads the rest of a string holding an escape, from its first
// byte at start.
func (s *typeScan) unescape(start int) (string, bool) {
	b := []byte(s.text[start:s.pos])
	for s.pos < len(s.text) {
		c := s.text[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !utf8.Valid(b) {
				return "", false
			}
			return string(b), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			s.pos++
			continue
		}
		if s.pos+1 >= len(s.text) {
			return "", false
		}
		e := s.text[s.pos+1]
		s.pos += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok || utf16.IsSurrogate(r) {
				return "", false // pairs and lone halves: json's rules
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (s *typeScan) hex4() (rune, bool) {
	if s.pos+4 > len(s.text) {
		return 0, false
	}
	n, err := strconv.ParseUint(s.text[s.pos:s.pos+4], 16, 32)
	if err != nil {
		return 0, false
	}
	s.pos += 4
	return rune(n), true
}

// skip reads past any JSON value, which the text holds whole and valid.
func (s *typeScan) skip(depth int) bool {
	if depth > 10000 || s.pos >= len(s.text) {
		return false
	}
	switch c := s.text[s.pos]; c {
	case '"':
		s.pos++
		for s.pos < len(s.text) {
			switch s.text[s.pos] {
			case '\\':
				s.pos += 2
			case '"':
				s.pos++
				return true
			default:
				s.pos++
			}
		}
		return false
	case '[', '{':
		closing := byte(']')
		if c == '{' {
			closing = '}'
		}
		s.pos++
		if s.consume(closing) {
			return true
		}
		for {
			if c == '{' && (!s.skip(depth+1) || !s.consume(':')) {
				return false
			}
			if !s.skip(depth + 1) {
				return false
			}
			if s.consume(closing) {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.number() != ""
}

func (s *typeScan) literal(lit string) bool {
	if !strings.HasPrefix(s.text[s.pos:], lit) {
		return false
	}
	s.pos += len(lit)
	return true
}

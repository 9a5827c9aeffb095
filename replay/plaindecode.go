package replay

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The first replay of a base decodes every recorded output it serves, and
// encoding/json spends most of that on what canonical text of a plain type
// never needs: a validity scan of text known valid, case-insensitive field
// lookup, and reflection set up per call. A plainDecoder is compiled once per
// plain type (memo.go) and decodes canonical text into it directly.
//
// It decodes only what it can decode exactly as json.Unmarshal does, and
// reports false for anything else — a key that is not a field's exact name,
// a number that does not fit, a value of the wrong kind, an escape it does
// not read, invalid UTF-8 — after which the caller decodes with
// encoding/json, which gives the value or the error it always gave. A type
// whose fields json names by rules this file does not follow (embedded
// fields, the ",string" option, two fields of one name, a tag json would
// not accept as a name) has no plainDecoder at all.

// plainDecoder decodes canonical text into values of one plain type,
// written in place (a decoding that calls through functions would put every
// value it decodes on the heap).
type plainDecoder struct {
	kind   reflect.Kind
	bits   int           // of an integer
	n      int           // an array's length
	size   uintptr       // its element's size
	elem   *plainDecoder // its element's decoder
	fields []plainField  // a struct's fields, as json names them
}

// plainField is a struct field json decodes into by name.
type plainField struct {
	name   string
	offset uintptr
	dec    *plainDecoder
}

// plainScan reads canonical JSON text.
type plainScan struct {
	text string
	pos  int
}

var plainDecoders sync.Map // reflect.Type → *plainDecoder (nil: none)

// plainDecoderFor is the plainDecoder of t, nil when t is not plain or
// json names its fields by rules this file does not follow.
func plainDecoderFor(t reflect.Type) *plainDecoder {
	if d, ok := plainDecoders.Load(t); ok {
		return d.(*plainDecoder)
	}
	var d *plainDecoder
	if plain(t) {
		d = compilePlain(t, 0)
	}
	plainDecoders.Store(t, d)
	return d
}

// decodePlain decodes canonical text into a new T with d, reporting false
// when the caller must decode it with encoding/json instead. d must be
// T's decoder.
func decodePlain[T any](d *plainDecoder, text string) (T, bool) {
	var out T
	s := plainScan{text: text}
	if !d.decode(&s, unsafe.Pointer(&out)) || s.pos != len(text) {
		var zero T
		return zero, false
	}
	return out, true
}

func compilePlain(t reflect.Type, depth int) *plainDecoder {
	if depth > 8 {
		return nil
	}
	d := &plainDecoder{kind: t.Kind()}
	switch t.Kind() {
	case reflect.Bool, reflect.String:
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		d.bits = t.Bits()
	case reflect.Array:
		d.n, d.size, d.elem = t.Len(), t.Elem().Size(), compilePlain(t.Elem(), depth+1)
		if d.elem == nil {
			return nil
		}
	case reflect.Struct:
		if !d.compileFields(t, depth) {
			return nil
		}
	default:
		return nil
	}
	return d
}

// compileFields names t's fields as encoding/json does, reporting false
// when that takes a rule this file does not follow.
func (d *plainDecoder) compileFields(t reflect.Type, depth int) bool {
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
		} else if !plainTagName(name) {
			return false
		}
		dec := compilePlain(f.Type, depth+1)
		if dec == nil {
			return false
		}
		for _, g := range d.fields {
			if g.name == name {
				return false // json keeps the tagged one, or neither
			}
		}
		d.fields = append(d.fields, plainField{name: name, offset: f.Offset, dec: dec})
	}
	return true
}

// plainTagName reports whether json takes name, a tag's name, as the
// field's name: letters, digits and the punctuation json accepts.
func plainTagName(name string) bool {
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
// past it. A null leaves the value as it is, as json.Unmarshal does.
func (d *plainDecoder) decode(s *plainScan, p unsafe.Pointer) bool {
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
	case reflect.Array:
		return d.decodeArray(s, p)
	case reflect.Struct:
		return d.decodeStruct(s, p)
	default:
		return false
	}
	return true
}

func (d *plainDecoder) decodeArray(s *plainScan, p unsafe.Pointer) bool {
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

func (d *plainDecoder) decodeStruct(s *plainScan, p unsafe.Pointer) bool {
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
		var f *plainField
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

// null reads a JSON null, which json.Unmarshal leaves a plain value
// unchanged for.
func (s *plainScan) null() bool {
	if strings.HasPrefix(s.text[s.pos:], "null") {
		s.pos += 4
		return true
	}
	return false
}

func (s *plainScan) consume(c byte) bool {
	if s.pos < len(s.text) && s.text[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// number reads the text of a JSON number (empty when there is none).
func (s *plainScan) number() string {
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
func (s *plainScan) str() (string, bool) {
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
func (s *plainScan) unescape(start int) (string, bool) {
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

func (s *plainScan) hex4() (rune, bool) {
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
func (s *plainScan) skip(depth int) bool {
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

func (s *plainScan) literal(lit string) bool {
	if !strings.HasPrefix(s.text[s.pos:], lit) {
		return false
	}
	s.pos += len(lit)
	return true
}

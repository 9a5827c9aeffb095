package trace

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// CanonicalProfile names the canonical JSON profile used for payload hashes. It
// is Python's json.dumps(v, ensure_ascii=False, sort_keys=True,
// separators=(",", ":"), allow_nan=False) encoded as UTF-8; it is not RFC 8785.
const CanonicalProfile = "stepfork-json-v0.1"

// MaxDepth is the deepest nesting of arrays and objects that a payload may
// have. Deeper input is refused with an error, never truncated. Python's
// recorder refuses values nested deeper than 100 levels; the reader allows more
// so that hand-written traces still load, but bounds it so that hostile input
// cannot exhaust the stack.
const MaxDepth = 1000

// ErrCanonical is matched (with errors.Is) by every error that reports a value
// which cannot be represented in canonical JSON: NaN or an infinity, invalid
// JSON text, a lone UTF-16 surrogate, duplicate object keys, or nesting deeper
// than MaxDepth.
var ErrCanonical = errors.New("value is not canonical JSON serializable")

// CanonicalError is a value that cannot be represented in canonical JSON. Off is
// the byte offset in the input where the problem was found (-1 when the value
// did not come from text).
type CanonicalError struct {
	Off int
	Msg string
}

// Error returns the error message.
func (e *CanonicalError) Error() string {
	if e.Off < 0 {
		return e.Msg
	}
	return fmt.Sprintf("offset %d: %s", e.Off, e.Msg)
}

// Is reports whether target is ErrCanonical.
func (e *CanonicalError) Is(target error) bool { return target == ErrCanonical }

// Messages of Python stepfork's canonical JSON, which this package keeps.
const (
	msgNonFinite  = "non-finite floats are not supported"
	msgKeyNotText = "JSON object keys must be strings"
)

// Hash returns the lowercase hex SHA-256 of the canonical form of v: the
// payload hash stored in input_hash and output_hash. The hash of an absent value
// is the empty string.
func Hash(v Value) string {
	if v.IsAbsent() {
		return ""
	}
	return hashString(v.raw)
}

func hashString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// canonicalize parses JSON text and returns its canonical bytes. It accepts any
// valid JSON formatting (leading and trailing white space included) and refuses
// NaN, infinities, invalid UTF-8, lone surrogates, duplicate keys and nesting
// deeper than MaxDepth.
func canonicalize(data []byte) ([]byte, error) {
	c := canonicalizers.Get().(*canonicalizer)
	defer func() {
		c.in, c.out = nil, nil // keep no reference to the caller's bytes
		canonicalizers.Put(c)
	}()
	// The canonical form is rarely longer than the input: a float in
	// exponent form or a \u escape of a control character can grow a little.
	out, err := c.run(data, make([]byte, 0, len(data)+len(data)/16+8))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendCanonical appends the canonical form of the JSON text data to dst
// and returns the extended slice, like canonicalize but into the caller's
// buffer: with a buffer reused from call to call it allocates nothing. On
// error it returns dst unchanged and the error.
func appendCanonical(dst, data []byte) ([]byte, error) {
	c := canonicalizers.Get().(*canonicalizer)
	defer func() {
		c.in, c.out = nil, nil
		canonicalizers.Put(c)
	}()
	out, err := c.run(data, dst)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// hashJSON returns the payload hash of the JSON text data: the lowercase hex
// SHA-256 of its canonical form, what Hash returns for the parsed value. It
// canonicalizes into a reused buffer, so that the only allocation is the
// returned string. Errors are those of canonicalize.
//
//	h, err := trace.hashJSON([]byte(`{"b": 1, "a": [1.0, "x"]}`))
//	// h == trace.Hash(trace.MustParse(`{"a":[1.0,"x"],"b":1}`))
func hashJSON(data []byte) (string, error) {
	c := canonicalizers.Get().(*canonicalizer)
	defer func() {
		c.in, c.out = nil, nil
		canonicalizers.Put(c)
	}()
	out, err := c.run(data, c.hashBuf[:0])
	if err != nil {
		return "", err
	}
	if cap(out) <= maxPooledBuf {
		c.hashBuf = out
	}
	sum := sha256.Sum256(out)
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	return string(hx[:]), nil
}

// maxPooledBuf bounds the buffer a pooled canonicalizer keeps for hashJSON,
// so that one huge payload does not stay pinned in the pool.
const maxPooledBuf = 1 << 20

// canonicalizers keeps canonicalizers, whose scratch buffers are worth
// reusing between calls.
var canonicalizers = sync.Pool{New: func() any { return new(canonicalizer) }}

// canonicalizer turns JSON text into canonical JSON in one pass. It is reusable:
// its scratch buffers keep their capacity between calls, so the steady state
// allocates nothing but the caller's output.
type canonicalizer struct {
	in    []byte
	pos   int
	out   []byte
	depth int
	// members is a stack of object members being canonicalized; each object
	// uses the tail starting at its own base index.
	members []member
	keys    []byte // decoded keys that needed unescaping
	tmp     []byte // scratch for reordering an object
	hashBuf []byte // hashJSON's output buffer
	// checkKeys makes object set sensitive when a key is one that
	// redaction redacts (IsSensitiveKey).
	checkKeys, sensitive bool
	// noteBehaviorKeys makes savedValue set behaviorKey when the value has
	// a key that the behavior of a step may leave out ("headers", or one
	// that starts with "usage"; see partialBehavior).
	noteBehaviorKeys, behaviorKey bool
	runeBuf                       [utf8.UTFMax]byte
	floatMemo                     floatMemo // savedValue's
}

// byteTable holds every byte value at its own index, so that a one-byte
// slice of it can be passed on without allocating.
var byteTable = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
	}
	return t
}()

// member locates one object member while its object is being canonicalized.
type member struct {
	keyFromIn        bool // key bytes are in c.in, otherwise in c.keys
	keyStart, keyEnd int
	start, end       int // the member's bytes in c.out, including the key and ':'
}

func (c *canonicalizer) key(m member) []byte {
	if m.keyFromIn {
		return c.in[m.keyStart:m.keyEnd]
	}
	return c.keys[m.keyStart:m.keyEnd]
}

// run canonicalizes data, appending to out.
func (c *canonicalizer) run(data, out []byte) ([]byte, error) {
	c.in, c.pos, c.out, c.depth = data, 0, out, 0
	c.members = c.members[:0]
	c.keys = c.keys[:0]
	c.skipSpace()
	if err := c.value(); err != nil {
		return nil, err
	}
	c.skipSpace()
	if c.pos != len(c.in) {
		return nil, c.errf("invalid JSON: extra data after the value")
	}
	out = c.out
	c.in, c.out = nil, nil
	return out, nil
}

func (c *canonicalizer) errf(format string, args ...any) error {
	return &CanonicalError{Off: c.pos, Msg: fmt.Sprintf(format, args...)}
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) value() error {
	if c.pos >= len(c.in) {
		return c.errf("invalid JSON: unexpected end of input")
	}
	switch ch := c.in[c.pos]; {
	case ch == '{':
		return c.object()
	case ch == '[':
		return c.array()
	case ch == '"':
		if c.appendString() {
			return nil
		}
		c.out = append(c.out, '"')
		if err := c.stringBody(func(b []byte) { c.out = appendEscaped(c.out, b) }); err != nil {
			return err
		}
		c.out = append(c.out, '"')
		return nil
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.number()
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	case ch == 'N' || ch == 'I':
		return c.errf("invalid JSON: %s", msgNonFinite)
	default:
		return c.errf("invalid JSON: unexpected character %q", rune(ch))
	}
}

func (c *canonicalizer) literal(word string) error {
	if len(c.in)-c.pos < len(word) || string(c.in[c.pos:c.pos+len(word)]) != word {
		return c.errf("invalid JSON: invalid literal")
	}
	c.pos += len(word)
	c.out = append(c.out, word...)
	return nil
}

func (c *canonicalizer) enter() error {
	c.depth++
	if c.depth > MaxDepth {
		return c.errf("value exceeds the maximum nesting depth of %d", MaxDepth)
	}
	return nil
}

func (c *canonicalizer) array() error {
	if err := c.enter(); err != nil {
		return err
	}
	c.pos++ // [
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		c.depth--
		return nil
	}
	for {
		c.skipSpace()
		if err := c.value(); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.errf("invalid JSON: unterminated array")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			c.depth--
			return nil
		default:
			return c.errf("invalid JSON: expected ',' or ']' in array")
		}
	}
}

func (c *canonicalizer) object() error {
	if err := c.enter(); err != nil {
		return err
	}
	c.pos++ // {
	c.out = append(c.out, '{')
	objStart := len(c.out)
	base := len(c.members)
	sorted := true
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		c.depth--
		return nil
	}
	for {
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			if c.pos < len(c.in) && c.in[c.pos] != '}' {
				return c.errf("invalid JSON: %s", msgKeyNotText)
			}
			return c.errf("invalid JSON: expected a string key")
		}
		if len(c.members) > base {
			c.out = append(c.out, ',')
		}
		m := member{start: len(c.out)}
		keyStartIn := c.pos + 1
		var escaped bool
		if c.plainString() {
			c.out = append(c.out, c.in[keyStartIn-1:c.pos]...)
		} else {
			c.out = append(c.out, '"')
			if err := c.stringBodyEsc(&escaped, func(b []byte) { c.out = appendEscaped(c.out, b) }); err != nil {
				return err
			}
			c.out = append(c.out, '"')
		}
		if !escaped {
			m.keyFromIn, m.keyStart, m.keyEnd = true, keyStartIn, c.pos-1
		} else {
			// Decode the key again into c.keys for ordering; keys with escapes
			// are rare, so the second pass costs nothing in practice.
			save := c.pos
			c.pos = keyStartIn - 1
			m.keyStart = len(c.keys)
			_ = c.stringBody(func(b []byte) { c.keys = append(c.keys, b...) })
			m.keyEnd = len(c.keys)
			c.pos = save
		}
		if c.checkKeys && !c.sensitive && sensitiveKeyBytes(c.key(m)) {
			c.sensitive = true
		}
		if len(c.members) > base {
			switch cmp := bytes.Compare(c.key(c.members[len(c.members)-1]), c.key(m)); {
			case cmp == 0:
				return c.errf("invalid JSON: duplicate object key %q", c.key(m))
			case cmp > 0:
				sorted = false
			}
		}
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.errf("invalid JSON: expected ':' after object key")
		}
		c.pos++
		c.out = append(c.out, ':')
		c.skipSpace()
		if err := c.value(); err != nil {
			return err
		}
		m.end = len(c.out)
		c.members = append(c.members, m)
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.errf("invalid JSON: unterminated object")
		}
		if c.in[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.in[c.pos] != '}' {
			return c.errf("invalid JSON: expected ',' or '}' in object")
		}
		c.pos++
		break
	}
	if !sorted {
		if err := c.reorder(base, objStart); err != nil {
			return err
		}
	}
	c.members = c.members[:base]
	c.out = append(c.out, '}')
	c.depth--
	return nil
}

// reorder sorts the members of the object whose canonical bytes start at
// objStart and refuses duplicate keys that were not adjacent in the input.
func (c *canonicalizer) reorder(base, objStart int) error {
	ms := c.members[base:]
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(c.key(a), c.key(b)) })
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(c.key(ms[i-1]), c.key(ms[i])) {
			return c.errf("invalid JSON: duplicate object key %q", c.key(ms[i]))
		}
	}
	c.tmp = c.tmp[:0]
	for i, m := range ms {
		if i > 0 {
			c.tmp = append(c.tmp, ',')
		}
		c.tmp = append(c.tmp, c.out[m.start:m.end]...)
	}
	c.out = append(c.out[:objStart], c.tmp...)
	return nil
}

// sensitiveKeyBytes is isSensitiveKey over the bytes of a key.
func sensitiveKeyBytes(key []byte) bool {
	return isSensitiveKey(unsafe.String(unsafe.SliceData(key), len(key)))
}

// plainString reports whether the JSON string at the cursor (its opening
// quote) has no escape sequences and is valid UTF-8: then its bytes are
// already canonical, and plainString moves the cursor past its closing
// quote. Otherwise it leaves the cursor alone, and stringBodyEsc decodes
// the string (and reports errors at their exact offsets). It checks eight
// bytes at a time.
func (c *canonicalizer) plainString() bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	in := c.in
	i := c.pos + 1
	var high uint64
	for ; i+8 <= len(in); i += 8 {
		x := binary.LittleEndian.Uint64(in[i:])
		q, bs := x^(lo*'"'), x^(lo*'\\')
		if ((x-lo*0x20)&^x|(q-lo)&^q|(bs-lo)&^bs)&hi != 0 {
			break // a quote, a backslash or a control character is near
		}
		high |= x
	}
	for ; i < len(in); i++ {
		b := in[i]
		if b == '"' {
			break
		}
		if b < 0x20 || b == '\\' {
			return false
		}
		high |= uint64(b)
	}
	if i >= len(in) || high&hi != 0 && !utf8.Valid(in[c.pos+1:i]) { // a high bit in any byte
		return false
	}
	c.pos = i + 1
	return true
}

// appendString appends the canonical form of the JSON string at the cursor
// in one pass: runs of plain bytes are copied as they are, escape sequences
// are decoded and re-escaped canonically. On anything it cannot take (an
// invalid escape, a lone surrogate, invalid UTF-8, a control character, the
// end of input) it undoes its output and returns false, leaving the cursor
// at the string, so that stringBodyEsc reports the error at its offset.
func (c *canonicalizer) appendString() bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	in, outStart := c.in, len(c.out)
	i := c.pos + 1
	run := i
	var high uint64
	c.out = append(c.out, '"')
	for {
		for ; i+8 <= len(in); i += 8 {
			x := binary.LittleEndian.Uint64(in[i:])
			q, bs := x^(lo*'"'), x^(lo*'\\')
			if ((x-lo*0x20)&^x|(q-lo)&^q|(bs-lo)&^bs)&hi != 0 {
				break
			}
			high |= x
		}
		for ; i < len(in); i++ {
			b := in[i]
			if b == '"' || b == '\\' || b < 0x20 {
				break
			}
			high |= uint64(b)
		}
		if i >= len(in) || in[i] < 0x20 || high&hi != 0 && !utf8.Valid(in[run:i]) {
			c.out = c.out[:outStart]
			return false
		}
		c.out = append(c.out, in[run:i]...)
		high = 0
		if in[i] == '"' {
			c.out = append(c.out, '"')
			c.pos = i + 1
			return true
		}
		if i+1 >= len(in) {
			c.out = c.out[:outStart]
			return false
		}
		switch e := in[i+1]; e {
		case '"', '\\':
			c.out = append(c.out, '\\', e)
			i += 2
		case '/':
			c.out = append(c.out, '/')
			i += 2
		case 'b', 'f', 'n', 'r', 't':
			c.out = append(c.out, '\\', e)
			i += 2
		case 'u':
			save := c.pos
			c.pos = i + 2
			r, err := c.unicodeEscape()
			if err != nil {
				c.pos = save
				c.out = c.out[:outStart]
				return false
			}
			i, c.pos = c.pos, save
			n := utf8.EncodeRune(c.runeBuf[:], r)
			c.out = appendEscaped(c.out, c.runeBuf[:n])
		default:
			c.out = c.out[:outStart]
			return false
		}
		run = i
	}
}

func (c *canonicalizer) stringBody(emit func([]byte)) error {
	var escaped bool
	return c.stringBodyEsc(&escaped, emit)
}

// stringBodyEsc reads a JSON string starting at the opening quote and passes
// its decoded bytes to emit in runs. It sets *escaped when the text held escape
// sequences.
func (c *canonicalizer) stringBodyEsc(escaped *bool, emit func([]byte)) error {
	c.pos++ // opening quote
	start := c.pos
	for {
		// Fast scan of plain bytes.
		i := c.pos
		for i < len(c.in) {
			b := c.in[i]
			if b == '"' || b == '\\' || b < 0x20 || b >= 0x80 {
				break
			}
			i++
		}
		c.pos = i
		if c.pos >= len(c.in) {
			return c.errf("invalid JSON: unterminated string")
		}
		b := c.in[c.pos]
		switch {
		case b == '"':
			if c.pos > start {
				emit(c.in[start:c.pos])
			}
			c.pos++
			return nil
		case b < 0x20:
			return c.errf("invalid JSON: invalid control character in string")
		case b >= 0x80:
			r, size := utf8.DecodeRune(c.in[c.pos:])
			if r == utf8.RuneError && size <= 1 {
				return c.errf("invalid JSON: invalid UTF-8 in string")
			}
			c.pos += size
		default: // backslash
			*escaped = true
			if c.pos > start {
				emit(c.in[start:c.pos])
			}
			if c.pos+1 >= len(c.in) {
				return c.errf("invalid JSON: unterminated string")
			}
			esc := c.in[c.pos+1]
			c.pos += 2
			// Single bytes come from a static table and runes from a
			// buffer in c: emit escapes its argument, so a local array
			// would cost an allocation per escape sequence.
			switch esc {
			case '"', '\\', '/':
				emit(byteTable[esc : esc+1])
			case 'b':
				emit(byteTable['\b' : '\b'+1])
			case 'f':
				emit(byteTable['\f' : '\f'+1])
			case 'n':
				emit(byteTable['\n' : '\n'+1])
			case 'r':
				emit(byteTable['\r' : '\r'+1])
			case 't':
				emit(byteTable['\t' : '\t'+1])
			case 'u':
				r, err := c.unicodeEscape()
				if err != nil {
					return err
				}
				n := utf8.EncodeRune(c.runeBuf[:], r)
				emit(c.runeBuf[:n])
			default:
				c.pos -= 2
				return c.errf("invalid JSON: invalid escape \\%c", esc)
			}
			start = c.pos
		}
	}
}

// unicodeEscape reads the hex of a \u escape (c.pos is just after "\u") and a
// following low surrogate when the first is a high one.
func (c *canonicalizer) unicodeEscape() (rune, error) {
	r1, ok := c.hex4()
	if !ok {
		return 0, c.errf("invalid JSON: invalid \\u escape")
	}
	if !utf16.IsSurrogate(r1) {
		return r1, nil
	}
	if r1 >= 0xDC00 || c.pos+1 >= len(c.in) || c.in[c.pos] != '\\' || c.in[c.pos+1] != 'u' {
		return 0, c.errf("lone UTF-16 surrogate \\u%04x cannot be encoded as UTF-8", r1)
	}
	c.pos += 2
	r2, ok := c.hex4()
	if !ok {
		return 0, c.errf("invalid JSON: invalid \\u escape")
	}
	r := utf16.DecodeRune(r1, r2)
	if r == utf8.RuneError {
		return 0, c.errf("lone UTF-16 surrogate \\u%04x cannot be encoded as UTF-8", r1)
	}
	return r, nil
}

func (c *canonicalizer) hex4() (rune, bool) {
	if len(c.in)-c.pos < 4 {
		return 0, false
	}
	var r rune
	for _, b := range c.in[c.pos : c.pos+4] {
		r <<= 4
		switch {
		case b >= '0' && b <= '9':
			r |= rune(b - '0')
		case b >= 'a' && b <= 'f':
			r |= rune(b - 'a' + 10)
		case b >= 'A' && b <= 'F':
			r |= rune(b - 'A' + 10)
		default:
			return 0, false
		}
	}
	c.pos += 4
	return r, true
}

// number reads a JSON number. Integers keep their exact digits; floats are
// re-emitted as Python's repr of the nearest float64.
func (c *canonicalizer) number() error {
	start := c.pos
	i := c.pos
	if c.in[i] == '-' {
		i++
		if i < len(c.in) && c.in[i] == 'I' {
			c.pos = i
			return c.errf("invalid JSON: %s", msgNonFinite)
		}
	}
	if i >= len(c.in) {
		c.pos = i
		return c.errf("invalid JSON: invalid number")
	}
	if c.in[i] == '0' {
		i++
	} else if c.in[i] >= '1' && c.in[i] <= '9' {
		for i < len(c.in) && c.in[i] >= '0' && c.in[i] <= '9' {
			i++
		}
	} else {
		c.pos = i
		return c.errf("invalid JSON: invalid number")
	}
	isFloat := false
	if i < len(c.in) && c.in[i] == '.' {
		isFloat = true
		i++
		d := i
		for i < len(c.in) && c.in[i] >= '0' && c.in[i] <= '9' {
			i++
		}
		if i == d {
			c.pos = i
			return c.errf("invalid JSON: invalid number")
		}
	}
	if i < len(c.in) && (c.in[i] == 'e' || c.in[i] == 'E') {
		isFloat = true
		i++
		if i < len(c.in) && (c.in[i] == '+' || c.in[i] == '-') {
			i++
		}
		d := i
		for i < len(c.in) && c.in[i] >= '0' && c.in[i] <= '9' {
			i++
		}
		if i == d {
			c.pos = i
			return c.errf("invalid JSON: invalid number")
		}
	}
	lit := c.in[start:i]
	c.pos = i
	if !isFloat {
		if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
			c.out = append(c.out, '0') // Python: int("-0") == 0
			return nil
		}
		c.out = append(c.out, lit...)
		return nil
	}
	if reprLiteral(lit) {
		c.out = append(c.out, lit...)
		return nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
		c.pos = start
		return c.errf("%s", msgNonFinite)
	}
	c.out = appendFloatRepr(c.out, f)
	return nil
}

// reprLiteral reports whether a JSON float literal is already what Python's
// repr prints for it, so that parsing and formatting can be skipped: plain
// decimal notation (no exponent), at most 15 significant digits, no trailing
// zero after the point unless the fraction is a single 0, and a decimal
// exponent in repr's plain range [-4, 16). Such a literal is its own
// shortest round-trip form: any two decimals of at most 15 significant
// digits convert to different float64s (DBL_DIG = 15), so no other string of
// at most as many digits denotes the same float.
func reprLiteral(lit []byte) bool {
	if lit[0] == '-' {
		lit = lit[1:]
	}
	dot := bytes.IndexByte(lit, '.')
	if dot < 0 {
		return false
	}
	intPart, frac := lit[:dot], lit[dot+1:]
	for _, b := range frac {
		if b < '0' || b > '9' {
			return false // an exponent
		}
	}
	if len(frac) > 1 && frac[len(frac)-1] == '0' {
		return false
	}
	if len(intPart) == 1 && intPart[0] == '0' {
		z := 0
		for z < len(frac) && frac[z] == '0' {
			z++
		}
		if z == len(frac) {
			return true // 0.0
		}
		return z <= 3 && len(frac)-z <= 15
	}
	digits := len(intPart)
	if len(frac) > 1 || frac[0] != '0' {
		digits += len(frac)
	}
	return digits <= 15
}

// appendEscaped appends s with the canonical string escapes: only '"', '\\' and
// control characters below U+0020 are escaped; everything else, U+007F,
// U+2028 and U+2029 included, is copied as raw UTF-8.
func appendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			const hexDigits = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
		start = i + 1
	}
	return append(dst, s[start:]...)
}

// appendQuoted appends s as a canonical JSON string literal.
func appendQuoted(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		// A Go string may hold any bytes; JSON text, and so every Value and
		// every file this package writes, is UTF-8. Each run of invalid
		// bytes becomes one U+FFFD, where encoding/json writes one per
		// byte; the bundles written so far hold this form, so it stays.
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// floatParts returns the shortest round-trip decimal digits of |f| and the
// decimal exponent of its first digit (f = 0.d1d2d3… × 10^(exp+1)).
func floatParts(buf []byte, f float64) (digits []byte, exp int) {
	b := strconv.AppendFloat(buf[:0], math.Abs(f), 'e', -1, 64)
	// b is "d.ddde±XX" or "de±XX"; drop the '.' in place and read the
	// exponent by hand, so nothing is allocated.
	e := bytes.IndexByte(b, 'e')
	neg := b[e+1] == '-'
	for _, ch := range b[e+2:] {
		exp = exp*10 + int(ch-'0')
	}
	if neg {
		exp = -exp
	}
	if e > 2 {
		copy(b[1:], b[2:e])
		return b[:e-1], exp
	}
	return b[:1], exp
}

// appendFloatRepr appends f formatted as Python's repr(float): the shortest
// digits that round-trip, always with a '.' or an exponent; scientific notation
// with a signed, at least two-digit exponent when the exponent is below -4 or at
// least 16 (1e-05, 1e+16, 1000000000000000.0, -0.0). f must be finite.
func appendFloatRepr(dst []byte, f float64) []byte {
	return appendFloat(dst, f, -4, 16, 2)
}

// appendFloatPydantic appends f the way Pydantic's dump_json prints it in
// events.jsonl: like repr but with decimal notation from 1e-05 upwards and no
// zero padding in negative exponents (0.00001, 1e-7, 1e+16).
func appendFloatPydantic(dst []byte, f float64) []byte {
	return appendFloat(dst, f, -5, 16, 1)
}

// appendFloat prints f in decimal notation when minExp <= exponent < maxExp and
// in scientific notation otherwise, with at least expDigits exponent digits.
func appendFloat(dst []byte, f float64, minExp, maxExp, expDigits int) []byte {
	if math.Signbit(f) {
		dst = append(dst, '-')
	}
	if f == 0 {
		return append(dst, '0', '.', '0')
	}
	var buf [32]byte
	digits, exp := floatParts(buf[:0], f)
	n := len(digits)
	switch {
	case exp < minExp || exp >= maxExp:
		dst = append(dst, digits[0])
		if n > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		e := strconv.Itoa(exp)
		for i := len(e); i < expDigits; i++ {
			dst = append(dst, '0')
		}
		return append(dst, e...)
	case exp < 0:
		dst = append(dst, '0', '.')
		for i := -1; i > exp; i-- {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	case exp+1 >= n:
		dst = append(dst, digits...)
		for i := n; i <= exp; i++ {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	default:
		dst = append(dst, digits[:exp+1]...)
		dst = append(dst, '.')
		return append(dst, digits[exp+1:]...)
	}
}

package trace

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// savedValue is the fast path of reading a payload: it checks, without
// decoding or copying, that the JSON value at the cursor is already in the
// form Save (and Python stepfork) writes payloads in — canonical JSON,
// with floats that have a negative exponent in Pydantic's style
// (appendFileForm) — and returns its canonical bytes. Those are the
// value's own bytes in c.in, unless a float of it is written in Pydantic's
// style (0.00001 for 1e-05): then they are built in scratch (built
// true). On success
// the cursor is past the value and, with checkKeys, c.sensitive is set as
// value would set it.
//
// It accepts exactly the text that is appendFileForm of the canonical form
// of what it holds: no white space, object keys without escapes in
// strictly increasing byte order, strings with only the escapes
// appendEscaped writes and valid UTF-8, integers as Python prints them,
// floats as repr (or Pydantic) prints them, nesting within MaxDepth. On
// anything else it returns ok false and leaves the cursor and c.sensitive
// as they were, and the caller canonicalizes the value (c.value), which
// gives the same bytes for what savedValue accepts and the error for what
// is not JSON. The two are checked against each other by tests and a fuzz
// target (FuzzSavedValue).
func (c *canonicalizer) savedValue(scratch []byte) (canon []byte, built, ok bool) {
	s := savedScanner{in: c.in, pos: c.pos, depth: c.depth, checkKeys: c.checkKeys, noteBehaviorKeys: c.noteBehaviorKeys, memo: &c.floatMemo}
	start := c.pos
	if !s.value() {
		return nil, false, false
	}
	end := s.pos
	if s.nfix > 0 {
		canon = scratch[:0]
		from := start
		for _, fx := range s.fixes[:s.nfix] {
			canon = append(canon, c.in[from:fx.start]...)
			canon = appendFloatRepr(canon, fx.f)
			from = fx.end
		}
		canon = append(canon, c.in[from:end]...)
	} else {
		canon = c.in[start:end]
	}
	c.pos = end
	if s.sensitive {
		c.sensitive = true
	}
	c.behaviorKey = s.behaviorKey
	return canon, s.nfix > 0, true
}

// maxFloatFixes bounds the floats in Pydantic's style that savedValue
// rewrites in one value; a value with more takes the slow path.
const maxFloatFixes = 16

// floatFix is a float that the file writes in Pydantic's style: the
// canonical form has repr's (appendFloatRepr of f) in place of the bytes
// [start, end).
type floatFix struct {
	start, end int
	f          float64
}

// savedScanner is the state of savedValue's scan. Every method returns
// false as soon as the text is not in saved form.
type savedScanner struct {
	in        []byte
	pos       int
	depth     int
	checkKeys bool
	sensitive bool
	// noteBehaviorKeys and behaviorKey: see canonicalizer.
	noteBehaviorKeys, behaviorKey bool
	nfix                          int
	fixes                         [maxFloatFixes]floatFix
	memo                          *floatMemo
}

// floatMemo remembers savedScanner's verdict on the last float literal
// that was not repr's own, which recorded runs repeat (0.00001 in every
// model call): the verdict depends on the literal's bytes alone.
type floatMemo struct {
	lit     [24]byte
	n       int // length of lit; 0: nothing remembered
	verdict int // fileFloat's
	f       float64
}

func (s *savedScanner) value() bool {
	if s.pos >= len(s.in) {
		return false
	}
	switch ch := s.in[s.pos]; {
	case ch == '{':
		return s.object()
	case ch == '[':
		return s.array()
	case ch == '"':
		return s.str(false)
	case ch == '-' || ch >= '0' && ch <= '9':
		return s.number()
	case ch == 't':
		return s.literal("true")
	case ch == 'f':
		return s.literal("false")
	case ch == 'n':
		return s.literal("null")
	}
	return false
}

func (s *savedScanner) literal(word string) bool {
	if len(s.in)-s.pos < len(word) || string(s.in[s.pos:s.pos+len(word)]) != word {
		return false
	}
	s.pos += len(word)
	return true
}

func (s *savedScanner) array() bool {
	if s.depth++; s.depth > MaxDepth {
		return false
	}
	s.pos++ // [
	if s.pos < len(s.in) && s.in[s.pos] == ']' {
		s.pos++
		s.depth--
		return true
	}
	for {
		if !s.value() || s.pos >= len(s.in) {
			return false
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return true
		default:
			return false
		}
	}
}

func (s *savedScanner) object() bool {
	if s.depth++; s.depth > MaxDepth {
		return false
	}
	s.pos++ // {
	if s.pos < len(s.in) && s.in[s.pos] == '}' {
		s.pos++
		s.depth--
		return true
	}
	var prev []byte
	for i := 0; ; i++ {
		if s.pos >= len(s.in) || s.in[s.pos] != '"' {
			return false
		}
		keyStart := s.pos + 1
		if !s.str(true) {
			return false
		}
		key := s.in[keyStart : s.pos-1]
		// Keys in strictly increasing order: a key equal to the previous
		// one (a duplicate, which is an error) or before it (an object
		// to sort) takes the slow path.
		if i > 0 && bytes.Compare(prev, key) >= 0 {
			return false
		}
		prev = key
		if s.checkKeys && !s.sensitive && sensitiveKeyBytes(key) {
			s.sensitive = true
		}
		if s.noteBehaviorKeys && !s.behaviorKey && behaviorKeyBytes(key) {
			s.behaviorKey = true
		}
		if s.pos >= len(s.in) || s.in[s.pos] != ':' {
			return false
		}
		s.pos++
		if !s.value() || s.pos >= len(s.in) {
			return false
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// str scans a string whose text is what appendQuoted writes for it: raw
// bytes from U+0020 up other than '"' and '\\', and the escapes
// appendEscaped writes (\" \\ \n \r \t \b \f, and \u00xx in lowercase hex
// for the other control characters). A key must have no escape at all
// (its bytes are then the key, compared as they are), and the string must
// be valid UTF-8.
func (s *savedScanner) str(key bool) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	in := s.in
	start := s.pos + 1
	i := start
	var high uint64
	for {
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
			if b == '"' || b == '\\' || b < 0x20 {
				break
			}
			high |= uint64(b)
		}
		if i >= len(in) || in[i] < 0x20 {
			return false
		}
		if in[i] == '"' {
			// UTF-8 is checked per string: only a string that holds a
			// byte >= 0x80 is read again, by utf8.Valid, whose loop over
			// multi-byte characters is tighter than a check inside the
			// scan above (which would stop at each one).
			if high&hi != 0 && !utf8.Valid(in[start:i]) {
				return false
			}
			s.pos = i + 1
			return true
		}
		// A backslash.
		if key || i+1 >= len(in) {
			return false
		}
		switch in[i+1] {
		case '"', '\\', 'n', 'r', 't', 'b', 'f':
			i += 2
		case 'u':
			// Only a control character without a short escape is
			// written as \u00xx.
			if i+6 > len(in) || in[i+2] != '0' || in[i+3] != '0' {
				return false
			}
			h, l := in[i+4], in[i+5]
			var v byte
			switch h {
			case '0':
			case '1':
				v = 0x10
			default:
				return false
			}
			switch {
			case l >= '0' && l <= '9':
				v |= l - '0'
			case l >= 'a' && l <= 'f':
				v |= l - 'a' + 10
			default:
				return false
			}
			switch v {
			case '\n', '\r', '\t', '\b', '\f':
				return false
			}
			i += 6
		default:
			return false
		}
	}
}

// number scans a number as the file writes it: an integer as Python
// prints it (not "-0"), or a float as repr prints it, or as Pydantic does
// where its exponent is negative (noted in s.fixes).
func (s *savedScanner) number() bool {
	in := s.in
	start, i := s.pos, s.pos
	if in[i] == '-' {
		i++
	}
	if i >= len(in) {
		return false
	}
	switch {
	case in[i] == '0':
		i++
	case in[i] >= '1' && in[i] <= '9':
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	default:
		return false
	}
	isFloat := false
	if i < len(in) && in[i] == '.' {
		isFloat = true
		i++
		d := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		isFloat = true
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		d := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	lit := in[start:i]
	s.pos = i
	if !isFloat {
		return len(lit) != 2 || lit[0] != '-' || lit[1] != '0' // "-0" is written 0
	}
	if reprLiteral(lit) {
		return true // canonical, and without an exponent its own file form
	}
	m := s.memo
	if m.n != len(lit) || string(m.lit[:m.n]) != string(lit) {
		m.n = 0
		verdict, f := fileFloat(lit)
		if len(lit) <= len(m.lit) {
			m.n = copy(m.lit[:], lit)
			m.verdict, m.f = verdict, f
		}
		return s.take(verdict, start, i, f)
	}
	return s.take(m.verdict, start, i, m.f)
}

// Verdicts of fileFloat.
const (
	floatRefused  = iota // not in saved form
	floatAsIs            // in saved form, and repr's own (1e+16)
	floatPydantic        // in saved form, in Pydantic's style (0.00001)
)

// take notes what fileFloat said of the float at [start, end).
func (s *savedScanner) take(verdict, start, end int, f float64) bool {
	switch verdict {
	case floatAsIs:
		return true
	case floatPydantic:
		if s.nfix == maxFloatFixes {
			return false
		}
		s.fixes[s.nfix] = floatFix{start, end, f}
		s.nfix++
		return true
	}
	return false
}

// fileFloat says whether the float literal lit, which is not repr's own
// form as reprLiteral knows it, is in saved form, and gives its value: it
// is if it is the file form of the float's repr, which is repr itself when
// that has no "e-" (1e+16), and Pydantic's form otherwise (0.00001, 1e-7).
func fileFloat(lit []byte) (verdict int, f float64) {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return floatRefused, 0 // out of range: the slow path reports it
	}
	var buf [40]byte
	repr := appendFloatRepr(buf[:0], f)
	if !bytes.Contains(repr, []byte("e-")) {
		if bytes.Equal(repr, lit) {
			return floatAsIs, f
		}
		return floatRefused, 0
	}
	var pbuf [40]byte
	if bytes.Equal(appendFloatPydantic(pbuf[:0], f), lit) {
		return floatPydantic, f
	}
	return floatRefused, 0
}

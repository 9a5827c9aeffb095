package assert

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stepfork/stepfork/trace"
)

// The failure messages of Python stepfork print names and payloads with
// Python's repr: ['search', 'book'], {'city': 'KTM', 'n': 1}, None, True. The
// functions here render the same text so that messages match literally.

// reprString renders s as Python's repr of a str.
func reprString(s string) string {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(quote)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '\\' || r == rune(quote):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			b.WriteString(`\x`)
			writeHex(&b, r, 2)
		case r < 0x80 || unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			b.WriteString(`\x`)
			writeHex(&b, r, 2)
		case r < 0x10000:
			b.WriteString(`\u`)
			writeHex(&b, r, 4)
		default:
			b.WriteString(`\U`)
			writeHex(&b, r, 8)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

func writeHex(b *strings.Builder, r rune, width int) {
	h := strconv.FormatInt(int64(r), 16)
	for n := len(h); n < width; n++ {
		b.WriteByte('0')
	}
	b.WriteString(h)
}

// reprNames renders a list of names as Python's repr of a list of str.
func reprNames(names []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(reprString(n))
	}
	b.WriteByte(']')
	return b.String()
}

// reprValue renders a JSON value as Python's repr of the object json.loads
// would return. Object members come in canonical (sorted) order; floats print
// as Python's repr because canonical JSON already does.
func reprValue(v trace.Value) string {
	var b strings.Builder
	appendRepr(&b, v)
	return b.String()
}

// reprValues renders a list of JSON values as Python's repr of a list.
func reprValues(vs []trace.Value) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		appendRepr(&b, v)
	}
	b.WriteByte(']')
	return b.String()
}

func appendRepr(b *strings.Builder, v trace.Value) {
	switch v.Kind() {
	case trace.Absent, trace.Null:
		b.WriteString("None")
	case trace.Bool:
		if t, _ := v.BoolOf(); t {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case trace.String:
		s, _ := v.Str()
		b.WriteString(reprString(s))
	case trace.Array:
		b.WriteByte('[')
		for i, e := range v.Elems() {
			if i > 0 {
				b.WriteString(", ")
			}
			appendRepr(b, e)
		}
		b.WriteByte(']')
	case trace.Object:
		b.WriteByte('{')
		first := true
		for k, e := range v.Members() {
			if !first {
				b.WriteString(", ")
			}
			first = false
			b.WriteString(reprString(k))
			b.WriteString(": ")
			appendRepr(b, e)
		}
		b.WriteByte('}')
	default: // Int, Float
		b.WriteString(v.Canonical())
	}
}

// plainOf returns v as plain Go data for cmp.Diff: like Value.Any, but with
// integers as int64 and floats as float64, so that a diff shows 1 and 1.0 as
// int64(1) and float64(1). Integers too large for int64 stay json.Number.
func plainOf(v trace.Value) any {
	switch v.Kind() {
	case trace.Int:
		if i, ok := v.Int(); ok {
			return i
		}
		return json.Number(v.Canonical())
	case trace.Float:
		f, _ := v.Float()
		return f
	case trace.Array:
		out := make([]any, 0, v.Len())
		for _, e := range v.Elems() {
			out = append(out, plainOf(e))
		}
		return out
	case trace.Object:
		out := make(map[string]any, v.Len())
		for k, e := range v.Members() {
			out[k] = plainOf(e)
		}
		return out
	}
	return v.Any()
}

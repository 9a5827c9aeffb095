package clip

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Inert returns s made safe to print for people: every character that
// would act on a terminal or reorder the text around it instead of
// showing — C0 controls (line breaks, escapes), DEL, C1 controls (U+0080
// to U+009F, CSI among them), the line and paragraph separators and the
// bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066
// to U+2069) — is written as its Go escape (\n, \x1b, \u202e), and each
// byte of invalid UTF-8 as \xNN; so a name holding "\nFAKE LINE" cannot
// forge a line of output. Text without such characters is returned as it
// is.
func Inert(s string) string { return inert(s, active) }

// InertText is Inert for text shown as a block (a page's payloads and
// messages), which keeps its line breaks and tabs.
func InertText(s string) string {
	return inert(s, func(r rune) bool { return r != '\n' && r != '\t' && active(r) })
}

func inert(s string, active func(rune) bool) string {
	i := strings.IndexFunc(s, active)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&15, 16))
		case active(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Acts reports whether r acts instead of showing: Inert escapes it (an
// invalid byte decodes as utf8.RuneError).
func Acts(r rune) bool { return active(r) }

func active(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return r == utf8.RuneError
}

// InertJSON returns JSON text with the characters Inert escapes, which
// JSON allows raw in its strings (DEL, C1 controls, the separators and
// bidirectional controls), written as \u escapes: the same JSON value,
// safe to print. Text without them is returned as it is.
func InertJSON(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x7f {
			i++
			continue
		}
		r, size := rune(c), 1
		if c >= 0x80 {
			r, size = utf8.DecodeRune(b[i:])
		}
		if r != utf8.RuneError && active(r) {
			if out == nil {
				out = make([]byte, 0, len(b)+16)
			}
			out = append(out, b[last:i]...)
			out = append(out, `\u`...)
			hex := strconv.FormatInt(int64(r), 16)
			for range 4 - len(hex) {
				out = append(out, '0')
			}
			out = append(out, hex...)
			last = i + size
		}
		i += size
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// Package clip shortens text for people to read. A long string is cut to a
// number of characters either from its start ([Head]) or, when two strings
// are shown side by side, to a window around the first character where they
// differ ([Diff]), so that a change at the end of a long prompt is visible
// instead of two identical beginnings.
//
// Lengths count characters (runes; each byte of an invalid UTF-8 sequence
// counts as one), never bytes, and a cut never splits a UTF-8 sequence. Every
// cut is marked with [Ellipsis]; text that is not cut is returned as it is.
package clip

import "unicode/utf8"

// Ellipsis marks where text was cut.
const Ellipsis = "…"

// Head returns s when it has at most n characters, and otherwise its first n
// characters followed by [Ellipsis]. A negative n counts as 0.
func Head(s string, n int) string {
	if cut, ok := offset(s, max(n, 0)); ok {
		return s[:cut] + Ellipsis
	}
	return s
}

// Diff returns a and b cut for showing side by side. When both have at most
// n characters they are returned as they are. When they are equal each is
// [Head](s, n). Otherwise both are cut to the same window of at most n
// characters that starts at the same character on both sides, so that their
// common text before the difference reads alike. The window starts at the
// beginning when the first character where they differ is among the first
// n - n/4; otherwise it holds n/4 characters of context before that
// character and the rest after it (fewer before when the longer string ends
// sooner). Each side is marked with [Ellipsis] where its text goes on beyond
// the window, before or after. When one string is a prefix of the other, the
// difference is where the shorter one ends. A negative n counts as 0.
func Diff(a, b string, n int) (string, string) {
	n = max(n, 0)
	la, lb := utf8.RuneCountInString(a), utf8.RuneCountInString(b)
	if la <= n && lb <= n {
		return a, b
	}
	if a == b {
		s := Head(a, n)
		return s, s
	}
	start := firstDifference(a, b)
	if start < n-n/4 {
		start = 0
	} else {
		start = max(0, min(start-n/4, max(la, lb)-n))
	}
	return window(a, start, n), window(b, start, n)
}

// firstDifference is the index, in characters, of the first character where
// a and b differ (the length of the shorter when it is a prefix of the other).
func firstDifference(a, b string) int {
	k := 0
	for i := 0; i < len(a) && i < len(b); k++ {
		_, wa := utf8.DecodeRuneInString(a[i:])
		_, wb := utf8.DecodeRuneInString(b[i:])
		if wa != wb || a[i:i+wa] != b[i:i+wb] {
			return k
		}
		i += wa
	}
	return k
}

// window is the characters [start, start+n) of s, with [Ellipsis] before
// when start > 0 and after when s goes on.
func window(s string, start, n int) string {
	from, ok := offset(s, start)
	if !ok {
		from = len(s)
	}
	out := s[from:]
	if to, ok := offset(out, n); ok {
		out = out[:to] + Ellipsis
	}
	if start > 0 {
		out = Ellipsis + out
	}
	return out
}

// offset is the byte offset of character n of s, and whether s has more
// than n characters (when it has not, there is nothing to cut at n).
func offset(s string, n int) (int, bool) {
	k := 0
	for i := range s {
		if k == n {
			return i, true
		}
		k++
	}
	return len(s), false
}

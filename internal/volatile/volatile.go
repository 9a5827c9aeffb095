// Package volatile names the values of a run that differ between two runs
// of the same behaviour although nothing behaved differently: run ids,
// event ids, UUIDs (what replay.NewID and many providers mint), RFC 3339
// times, and the ids a provider minted in a model's responses, which a run
// lists (trace.MintedIDs). Replay orders concurrent work by content with
// them blanked out (Blank); renderings (goldens, Explain, pages) replace
// them by placeholders numbered by kind in order of first appearance
// (Numbering): the same value always gets the same placeholder (<call-1>,
// <run-1>), so a rendering is stable run after run and still shows which
// values are the same. It is the one place these values are recognised.
package volatile

import "strings"

// kinds are the volatile values, in the order they are replaced. Each
// find returns the leftmost match in s at or after from, exactly as the
// regular expression in its comment does (the tests hold the expressions
// as the reference), or -1. numbered says whether a rendering gives each
// distinct value its own placeholder (<run-1>, <run-2>): ids are
// identities, while two equal times are a coincidence (<time>). A \b is
// an ASCII word boundary, \d an ASCII digit, as in RE2.
var kinds = [...]struct {
	name     string
	numbered bool
	find     func(s string, from int) (start, end int)
}{
	{"run", true, func(s string, from int) (int, int) { return findPrefixedHex(s, from, "run_") }}, // \brun_[0-9a-f]{32}\b
	{"evt", true, func(s string, from int) (int, int) { return findPrefixedHex(s, from, "evt_") }}, // \bevt_[0-9a-f]{32}\b
	{"uuid", true, findUUID},  // \b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b
	{"time", false, findTime}, // \b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})
}

// Blank replaces every volatile value in s by "<kind>".
func Blank(s string) string {
	if len(s) < 16 {
		return s // shorter than any volatile value
	}
	for _, k := range kinds {
		s = replaceAll(s, k.find, func(string) string { return "<" + k.name + ">" })
	}
	return s
}

// replaceAll replaces the matches of find in s, left to right and not
// overlapping, by what with gives for each; s itself when there is none.
func replaceAll(s string, find func(string, int) (int, int), with func(match string) string) string {
	start, end := find(s, 0)
	if start < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for start >= 0 {
		b.WriteString(s[last:start])
		b.WriteString(with(s[start:end]))
		last = end
		start, end = find(s, end)
	}
	b.WriteString(s[last:])
	return b.String()
}

// findPrefixedHex finds \b prefix [0-9a-f]{32} \b.
func findPrefixedHex(s string, from int, prefix string) (int, int) {
	for from < len(s) {
		k := strings.Index(s[from:], prefix)
		if k < 0 {
			break
		}
		at := from + k
		end := at + len(prefix) + 32
		if boundaryBefore(s, at) && end <= len(s) && hexRun(s[at+len(prefix):end]) && boundaryAfter(s, end) {
			return at, end
		}
		from = at + 1
	}
	return -1, -1
}

// findUUID finds \b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b.
func findUUID(s string, from int) (int, int) {
	return findByDash(s, from, 8, func(at, d int) int {
		end := d + 28
		if end <= len(s) && hexRun(s[at:d]) && hexRun(s[d+1:d+5]) && s[d+5] == '-' &&
			hexRun(s[d+6:d+10]) && s[d+10] == '-' && hexRun(s[d+11:d+15]) && s[d+15] == '-' &&
			hexRun(s[d+16:end]) && boundaryAfter(s, end) {
			return end
		}
		return -1
	})
}

// findTime finds \b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}).
// A fraction is taken whole or not at all: a zone never starts with a
// digit, so no shorter run of its digits can be followed by one.
func findTime(s string, from int) (int, int) {
	return findByDash(s, from, 4, func(at, d int) int {
		p := at + 19
		if p > len(s) || !digits(s[at:d]) || !digits(s[d+1:d+3]) || s[d+3] != '-' ||
			!digits(s[d+4:d+6]) || s[d+6] != 'T' && s[d+6] != ' ' || !digits(s[d+7:d+9]) || s[d+9] != ':' ||
			!digits(s[d+10:d+12]) || s[d+12] != ':' || !digits(s[d+13:d+15]) {
			return -1
		}
		if p < len(s) && s[p] == '.' {
			q := p + 1
			for q < len(s) && isDigit(s[q]) {
				q++
			}
			if q > p+1 {
				p = q
			}
		}
		return zoneEnd(s, p)
	})
}

// findByDash finds the leftmost match of a kind whose first '-' is lead
// bytes into it: each '-' of s, in order, names the one candidate start
// lead bytes before it, and end gives the end of the match that starts at
// that start (its first '-' at d), or -1. A match starts a word.
func findByDash(s string, from, lead int, end func(at, d int) int) (int, int) {
	for d := from + lead; d < len(s); d++ {
		k := strings.IndexByte(s[d:], '-')
		if k < 0 {
			break
		}
		d += k
		if at := d - lead; boundaryBefore(s, at) {
			if e := end(at, d); e >= 0 {
				return at, e
			}
		}
	}
	return -1, -1
}

// zoneEnd is the end of Z or [+-]\d{2}:\d{2} at s[p:], or -1.
func zoneEnd(s string, p int) int {
	switch {
	case p < len(s) && s[p] == 'Z':
		return p + 1
	case p+6 <= len(s) && (s[p] == '+' || s[p] == '-') && digits(s[p+1:p+3]) && s[p+3] == ':' && digits(s[p+4:p+6]):
		return p + 6
	}
	return -1
}

// boundaryBefore reports whether s[at], a word byte, starts a word.
func boundaryBefore(s string, at int) bool { return at >= 0 && (at == 0 || !isWord(s[at-1])) }

// boundaryAfter reports whether s[end-1], a word byte, ends a word.
func boundaryAfter(s string, end int) bool { return end == len(s) || !isWord(s[end]) }

func isWord(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func hexRun(s string) bool {
	for i := range len(s) {
		if c := s[i]; !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func digits(s string) bool {
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// Replace returns s with every volatile value replaced by its placeholder:
// the ids of minted (id → kind, see Minted) by kind, then run ids, event
// ids and UUIDs numbered, times by <time>. The numbering is n's, kept
// across the texts of one rendering.
func (n *Numbering) Replace(s string, minted map[string]string) string {
	s = n.Minted(s, minted)
	if len(s) < 16 {
		return s // shorter than any kind's value
	}
	for _, k := range kinds {
		if k.numbered {
			s = replaceAll(s, k.find, func(m string) string { return n.Name(k.name, m) })
		} else {
			s = replaceAll(s, k.find, func(string) string { return "<" + k.name + ">" })
		}
	}
	return s
}

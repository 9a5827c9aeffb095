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

import (
	"regexp"
	"strings"
	"sync"
)

// Patterns match the volatile values, each with the name of its kind and
// a test that a string cannot hold one (a cheap look before the regexp).
// Numbered says whether a rendering gives each distinct value its own
// placeholder (<run-1>, <run-2>): ids are identities, while two equal
// times are a coincidence (<time>). They are compiled on first use, not
// when every program that links this package starts.
var Patterns = sync.OnceValue(func() []Pattern {
	return []Pattern{
		{"run", regexp.MustCompile(`\brun_[0-9a-f]{32}\b`), func(s string) bool { return !strings.Contains(s, "run_") }, true},
		{"evt", regexp.MustCompile(`\bevt_[0-9a-f]{32}\b`), func(s string) bool { return !strings.Contains(s, "evt_") }, true},
		{"uuid", regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), func(s string) bool { return strings.Count(s, "-") < 4 }, true},
		{"time", regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`), func(s string) bool {
			return strings.Count(s, "-") < 2 || strings.Count(s, ":") < 2
		}, false},
	}
})

// Pattern is one of [Patterns].
type Pattern struct {
	Name     string
	Re       *regexp.Regexp
	none     func(s string) bool
	Numbered bool
}

// Blank replaces every volatile value in s by "<kind>".
func Blank(s string) string {
	if len(s) < 16 {
		return s // shorter than any volatile value
	}
	for _, p := range Patterns() {
		if !p.none(s) && p.Re.MatchString(s) {
			s = p.Re.ReplaceAllLiteralString(s, "<"+p.Name+">")
		}
	}
	return s
}

// Replace returns s with every volatile value replaced by its placeholder:
// the ids of minted (id → kind, see Minted) by kind, then run ids, event
// ids and UUIDs numbered, times by <time>. The numbering is n's, kept
// across the texts of one rendering.
func (n *Numbering) Replace(s string, minted map[string]string) string {
	s = n.Minted(s, minted)
	if len(s) < 16 {
		return s // shorter than any pattern's value
	}
	for _, p := range Patterns() {
		if p.none(s) || !p.Re.MatchString(s) {
			continue
		}
		if !p.Numbered {
			s = p.Re.ReplaceAllLiteralString(s, "<"+p.Name+">")
			continue
		}
		s = p.Re.ReplaceAllStringFunc(s, func(m string) string { return n.Name(p.Name, m) })
	}
	return s
}

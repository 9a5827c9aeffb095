// Package volatile names the values of a run that differ between two runs
// of the same behaviour although nothing behaved differently: run ids,
// event ids, UUIDs (what replay.NewID and many providers mint) and RFC 3339
// times. Replay orders concurrent work by content with them blanked out;
// renderings replace them by placeholders.
package volatile

import (
	"regexp"
	"strings"
)

// Patterns match the volatile values, each with the name of its kind and
// a test that a string cannot hold one (a cheap look before the regexp).
var Patterns = []struct {
	Name string
	Re   *regexp.Regexp
	none func(s string) bool
}{
	{"run", regexp.MustCompile(`\brun_[0-9a-f]{32}\b`), func(s string) bool { return !strings.Contains(s, "run_") }},
	{"evt", regexp.MustCompile(`\bevt_[0-9a-f]{32}\b`), func(s string) bool { return !strings.Contains(s, "evt_") }},
	{"uuid", regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), func(s string) bool { return strings.Count(s, "-") < 4 }},
	{"time", regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`), func(s string) bool {
		return strings.Count(s, "-") < 2 || strings.Count(s, ":") < 2
	}},
}

// Blank replaces every volatile value in s by "<kind>".
func Blank(s string) string {
	if len(s) < 16 {
		return s // shorter than any volatile value
	}
	for _, p := range Patterns {
		if !p.none(s) && p.Re.MatchString(s) {
			s = p.Re.ReplaceAllLiteralString(s, "<"+p.Name+">")
		}
	}
	return s
}

// Package volatile names the values of a run that differ between two runs
// of the same behaviour although nothing behaved differently: run ids,
// event ids, UUIDs (what replay.NewID and many providers mint) and RFC 3339
// times. Replay orders concurrent work by content with them blanked out;
// renderings replace them by placeholders.
package volatile

import "regexp"

// Patterns match the volatile values, each with the name of its kind.
var Patterns = []struct {
	Name string
	Re   *regexp.Regexp
}{
	{"run", regexp.MustCompile(`\brun_[0-9a-f]{32}\b`)},
	{"evt", regexp.MustCompile(`\bevt_[0-9a-f]{32}\b`)},
	{"uuid", regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)},
	{"time", regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`)},
}

// Blank replaces every volatile value in s by "<kind>".
func Blank(s string) string {
	for _, p := range Patterns {
		if p.Re.MatchString(s) {
			s = p.Re.ReplaceAllLiteralString(s, "<"+p.Name+">")
		}
	}
	return s
}

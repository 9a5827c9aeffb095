package volatile

import (
	"regexp"
	"strings"
	"testing"
)

// reference holds each kind's regular expression, which its find must
// match exactly: the same matches, left to right, not overlapping.
var reference = map[string]*regexp.Regexp{
	"run":  regexp.MustCompile(`\brun_[0-9a-f]{32}\b`),
	"evt":  regexp.MustCompile(`\bevt_[0-9a-f]{32}\b`),
	"uuid": regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`),
	"time": regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`),
}

// referenceBlank is Blank written with the regular expressions.
func referenceBlank(s string) string {
	for _, k := range kinds {
		s = reference[k.name].ReplaceAllLiteralString(s, "<"+k.name+">")
	}
	return s
}

// checkMatchesRegexp fails t when a kind's find, or Blank, disagrees with
// the regular expressions on s.
func checkMatchesRegexp(t *testing.T, s string) {
	t.Helper()
	mark := func(m string) string { return "«" + m + "»" }
	for _, k := range kinds {
		if got, want := replaceAll(s, k.find, mark), reference[k.name].ReplaceAllStringFunc(s, mark); got != want {
			t.Fatalf("%s in %q:\ngot  %q\nwant %q", k.name, s, got, want)
		}
	}
	if got, want := Blank(s), referenceBlank(s); got != want {
		t.Fatalf("Blank(%q):\ngot  %q\nwant %q", s, got, want)
	}
}

const (
	hex32 = "0123456789abcdef0123456789abcdef"
	uuid  = "123e4567-e89b-12d3-a456-426614174000"
)

// hostileTexts are near misses of every kind: a byte short or long, upper
// case, glued to a word, overlapping, at either end, with zones and
// fractions cut short.
var hostileTexts = []string{
	"", "short", "run_" + hex32, "xrun_" + hex32, "run_" + hex32 + "x", "run_" + hex32 + "_", "run_" + hex32[:31],
	"run_" + strings.ToUpper(hex32), "(run_" + hex32 + ")", "run_run_" + hex32, "-run_" + hex32 + "-", "é" + "run_" + hex32 + "é",
	"run_" + hex32 + "run_" + hex32, "run_" + hex32 + " run_" + hex32, "evt_" + hex32 + ",evt_" + hex32[:30] + "zz",
	uuid, "x" + uuid, uuid + "0", uuid[:35], strings.ToUpper(uuid), "-" + uuid + "-", uuid + uuid, uuid + "-" + uuid,
	"1234567-" + uuid, "123e4567-e89b-12d3-a456-42661417400g", "123e4567-e89b-12d3-a456-426614174000-e89b-12d3-a456-426614174000",
	"run_" + uuid, "evt_" + uuid[:8] + uuid[9:13] + uuid[14:18] + uuid[19:23] + uuid[24:],
	"2026-12-03T20:02:04Z", "2026-12-03 20:02:04+01:00", "2026-12-03T20:02:04.123456789Z", "2026-12-03T20:02:04.Z",
	"2026-12-03T20:02:04.123", "2026-12-03T20:02:04.123+01:0", "2026-12-03T20:02:04+0100", "2026-12-03T20:02:04-01:00x",
	"x2026-12-03T20:02:04Z", "12026-12-03T20:02:04Z", "2026-12-03t20:02:04Z", "2026-12-03T20:02:4Z", "at 2026-12-03T20:02:04Z.",
	"2026-12-03T20:02:04Z2026-12-03T20:02:04Z", "2026-12-2026-12-03T20:02:04Z", "1999-99-99T99:99:99.9-99:99",
	"2026-12-03T20:02:04.5Zrun_" + hex32, "\u00a02026-12-03T20:02:04Z", "2026-12-03T20:02:04Z" + uuid,
	`{"run_id":"run_` + hex32 + `","id":"evt_` + hex32 + `","at":"2026-12-03T20:02:04.1Z","u":"` + uuid + `"}`,
	"----------------------------------------", "0000-00-00-00-00-00 00:00:00Z",
}

func TestKindsMatchRegexp(t *testing.T) {
	t.Parallel()
	for _, s := range hostileTexts {
		checkMatchesRegexp(t, s)
	}
}

// FuzzKindsMatchRegexp: every kind's find agrees with its regular
// expression on any text.
func FuzzKindsMatchRegexp(f *testing.F) {
	for _, s := range hostileTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkMatchesRegexp(t, s) })
}

// BenchmarkReplace replaces the volatile values of a model response's
// canonical text, as a golden's rendering does for each text it shows. It
// checks each result whole: the uuid, the run id and the timestamp
// replaced, the rest as it was.
func BenchmarkReplace(b *testing.B) {
	s := `{"content":"The refund of order 1234-5678 was approved at 2026-12-03 20:02:04 by the desk.","id":"` + uuid +
		`","model":"gpt-4o","run":"run_` + hex32 + `","created":"2026-12-03T20:02:04.123Z","usage":{"prompt_tokens":120}}`
	const want = `{"content":"The refund of order 1234-5678 was approved at 2026-12-03 20:02:04 by the desk.","id":"<uuid-1>",` +
		`"model":"gpt-4o","run":"<run-1>","created":"<time>","usage":{"prompt_tokens":120}}`
	b.ReportAllocs()
	for b.Loop() {
		var n Numbering
		if got := n.Replace(s, nil); got != want {
			b.Fatalf("Replace = %s, want %s", got, want)
		}
	}
}

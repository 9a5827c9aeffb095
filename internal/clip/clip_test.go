package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"abcd", 0, "…"},
		{"abcd", -1, "…"},
		{"héllo wörld", 5, "héllo…"},      // two-byte characters count once
		{"日本語のテキスト", 3, "日本語…"},           // three-byte characters
		{"a😀b😀c", 2, "a😀…"},               // a four-byte character is never split
		{"ab\xffcd", 3, "ab\xff…"},        // an invalid byte counts as one character
		{"\xe6\x97\xa5\xff\xfe", 1, "日…"}, // and is kept whole after a valid one
		{"…already", 3, "…al…"},
	} {
		if got := Head(tc.s, tc.n); got != tc.want {
			t.Errorf("Head(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Refunds need a receipt. ", 10) // 240 characters
	for _, tc := range []struct {
		name         string
		a, b         string
		n            int
		wantA, wantB string
	}{
		{"short strings are kept", "abc", "abd", 3, "abc", "abd"},
		{"equal strings are cut from the start", long, long, 10, "Refunds ne…", "Refunds ne…"},
		{"a difference at the start", "xbcdefghij", "ybcdefghij", 4, "xbcd…", "ybcd…"},
		{"a difference in the middle", "0123456789abcdefghij", "0123456789Xbcdefghij", 8,
			"…89abcdef…", "…89Xbcdef…"},
		{"an appended sentence", long, long + "Above the limit, ask for approval.", 40,
			"… receipt. ", "… receipt. Above the limit, ask for appro…"},
		{"a removed ending", long + "Above the limit, ask.", long, 30,
			"…receipt. Above the limit, ask.", "…receipt. "},
		{"the window fills to the end", "0123456789abcdefghiX", "0123456789abcdefghiY", 8,
			"…cdefghiX", "…cdefghiY"},
		{"only one side is long", "short", "short and then a much longer text", 10,
			"short", "short and …"},
		{"multi-byte characters", "日本語のテキストです。変更前", "日本語のテキストです。変更後", 8,
			"…ストです。変更前", "…ストです。変更後"},
		{"a differing character shares its first bytes", "ééééééé\u00e9", "ééééééé\u00e8", 4,
			"…éééé", "…éééè"},
		{"invalid bytes", "aaaaaaa\xffb", "aaaaaaa\xfeb", 4, "…aa\xffb", "…aa\xfeb"},
		{"a four-byte character differs", "xxxxxxxx😀", "xxxxxxxx😁", 2, "…x😀", "…x😁"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := Diff(tc.a, tc.b, tc.n)
			if a != tc.wantA || b != tc.wantB {
				t.Errorf("Diff(%q, %q, %d)\n got %q, %q\nwant %q, %q", tc.a, tc.b, tc.n, a, b, tc.wantA, tc.wantB)
			}
		})
	}
}

func TestFirstDifference(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "abc", 3},
		{"abc", "abd", 2},
		{"ab", "abc", 2},
		{"é", "è", 0}, // same first byte, different character
		{"日本", "日本語", 2},
		{"a\xff", "a\xfe", 1},
		{"a\xc3", "a\xc3\xa9", 1}, // a truncated sequence is not the character it starts
	} {
		if got := firstDifference(tc.a, tc.b); got != tc.want {
			t.Errorf("firstDifference(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// FuzzDiff checks what holds for any input: a cut never splits a character
// (valid UTF-8 stays valid), each side shows at most n characters of its
// text, the text shown is the string's own (a prefix when not marked before,
// a suffix when not marked after), and two different strings never look the
// same.
func FuzzDiff(f *testing.F) {
	long := strings.Repeat("Refunds need a receipt. ", 10)
	for _, s := range [][2]string{
		{"", ""}, {"abc", "abd"}, {long, long + "Ask."}, {"日本語のテキスト", "日本語のテキト"},
		{"a😀b", "a😁b"}, {"\xff\xfe", "\xff"}, {"…", "……"}, {"é", "è"},
	} {
		f.Add(s[0], s[1], 8)
	}
	f.Fuzz(func(t *testing.T, a, b string, n int) {
		n = int(uint(n) % 300)
		ca, cb := Diff(a, b, n)
		for _, side := range [][2]string{{a, ca}, {b, cb}} {
			s, c := side[0], side[1]
			if utf8.ValidString(s) && !utf8.ValidString(c) {
				t.Fatalf("Diff(%q, %q, %d) split a character: %q", a, b, n, c)
			}
			if !shownFrom(s, c, n) {
				t.Fatalf("Diff(%q, %q, %d): %q is not a window of at most %d characters of %q", a, b, n, c, n, s)
			}
		}
		if a != b && n > 0 && ca == cb {
			t.Fatalf("Diff(%q, %q, %d) shows both as %q", a, b, n, ca)
		}
		if h := Head(a, n); !shownFrom(a, h, n) || (utf8.ValidString(a) && !utf8.ValidString(h)) {
			t.Fatalf("Head(%q, %d) = %q", a, n, h)
		}
	})
}

// shownFrom reports whether c reads as a window of at most n characters of
// s, marked with Ellipsis where s goes on beyond it.
func shownFrom(s, c string, n int) bool {
	for _, before := range []bool{false, true} {
		for _, after := range []bool{false, true} {
			core := c
			if before {
				var ok bool
				if core, ok = strings.CutPrefix(core, Ellipsis); !ok {
					continue
				}
			}
			if after {
				var ok bool
				if core, ok = strings.CutSuffix(core, Ellipsis); !ok {
					continue
				}
			}
			if utf8.RuneCountInString(core) > n || !strings.Contains(s, core) {
				continue
			}
			if (!before && !strings.HasPrefix(s, core)) || (!after && !strings.HasSuffix(s, core)) {
				continue
			}
			if !before && !after && core != s {
				continue
			}
			return true
		}
	}
	return false
}

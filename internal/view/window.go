package view

import (
	"unicode/utf8"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/trace"
)

// Limits of what a changed value shows.
const (
	shortValue = 2000 // values up to this many characters are shown whole
	windowMax  = 600  // longer ones are cut to a window of this many around where they differ
)

// change is one changed field or state key, each side cut to the window
// where the two differ. The window is computed from the redacted values
// (ExpV, ActV) when the page is rendered.
type change struct {
	Path string `json:"p"`
	Kind string `json:"k"`
	Exp  shown  `json:"a"`
	Act  shown  `json:"b"`

	ExpV, ActV trace.Value `json:"-"`
}

// shown is a value as the page shows it: Mid is the part that differs
// from the other side (highlighted), Pre and Post the text around it. Long
// values are cut by clip.Diff, which marks every cut with clip.Ellipsis.
type shown struct {
	Absent bool   `json:"x,omitempty"`
	Pre    string `json:"pre,omitempty"`
	Mid    string `json:"mid,omitempty"`
	Post   string `json:"post,omitempty"`
}

func changeOf(path, kind string, exp, act trace.Value) change {
	c := change{Path: path, Kind: kind, ExpV: exp, ActV: act}
	c.window()
	return c
}

// window computes Exp and Act from ExpV and ActV: two strings are compared
// as text, anything else as JSON.
func (c *change) window() {
	exp, act := c.ExpV, c.ActV
	a, as := exp.Str()
	b, bs := act.Str()
	if !as || !bs {
		a, b = exp.Canonical(), act.Canonical()
	}
	c.Exp, c.Act = shown{}, shown{}
	switch {
	case exp.IsAbsent() && act.IsAbsent():
		c.Exp.Absent, c.Act.Absent = true, true
	case exp.IsAbsent():
		c.Exp.Absent = true
		c.Act = whole(b)
	case act.IsAbsent():
		c.Act.Absent = true
		c.Exp = whole(a)
	default:
		c.Exp, c.Act = window(a, b)
	}
}

// whole shows s in full when it is short, else its start.
func whole(s string) shown { return shown{Mid: clip.Head(s, shortValue)} }

// window cuts a and b to the window where they differ when either is long
// (clip.Diff), and splits each into the common prefix, the part that
// differs and the common suffix.
func window(a, b string) (shown, shown) {
	if utf8.RuneCountInString(a) > shortValue || utf8.RuneCountInString(b) > shortValue {
		a, b = clip.Diff(a, b, windowMax)
	}
	p := commonPrefix(a, b)
	s := commonSuffix(a[p:], b[p:])
	mk := func(x string) shown { return shown{Pre: x[:p], Mid: x[p : len(x)-s], Post: x[len(x)-s:]} }
	return mk(a), mk(b)
}

// commonPrefix is the length in bytes of the longest common prefix of a
// and b that ends on a character boundary.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && ((n < len(a) && !utf8.RuneStart(a[n])) || (n < len(b) && !utf8.RuneStart(b[n]))) {
		n--
	}
	return n
}

// commonSuffix is the length in bytes of the longest common suffix of a and
// b that starts on a character boundary.
func commonSuffix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	for n > 0 && (!utf8.RuneStart(a[len(a)-n]) || !utf8.RuneStart(b[len(b)-n])) {
		n--
	}
	return n
}

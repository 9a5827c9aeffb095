package view

import (
	"unicode/utf8"

	"github.com/stepfork/stepfork/trace"
)

// Context and limits of the window shown around where two values differ.
const (
	windowContext = 48   // characters kept on each side of the difference
	windowMax     = 600  // characters of the differing part shown at most
	shortValue    = 2000 // values up to this long are shown whole
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

// shown is a value as the page shows it: Pre and Post are the context
// around Mid, the part that differs from the other side (highlighted);
// Cut says text was left out before Pre or after Post.
type shown struct {
	Absent  bool   `json:"x,omitempty"`
	Pre     string `json:"pre,omitempty"`
	Mid     string `json:"mid,omitempty"`
	Post    string `json:"post,omitempty"`
	CutPre  bool   `json:"cp,omitempty"`
	CutPost bool   `json:"cq,omitempty"`
	CutMid  bool   `json:"cm,omitempty"`
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
func whole(s string) shown {
	if len(s) <= shortValue {
		return shown{Mid: s}
	}
	return shown{Mid: cutRunes(s, windowMax), CutMid: true}
}

// window splits a and b into their common prefix, the part where they
// differ and their common suffix, keeping windowContext characters of
// context on each side and at most windowMax of the differing part.
func window(a, b string) (shown, shown) {
	p := commonPrefix(a, b)
	s := commonSuffix(a[p:], b[p:])
	mk := func(x string) shown {
		pre, mid, post := x[:p], x[p:len(x)-s], x[len(x)-s:]
		var sh shown
		if len(x) <= shortValue && len(a) <= shortValue && len(b) <= shortValue {
			sh.Pre, sh.Mid, sh.Post = pre, mid, post
			return sh
		}
		sh.Pre, sh.CutPre = lastRunes(pre, windowContext)
		sh.Mid = mid
		if n := utf8.RuneCountInString(mid); n > windowMax {
			sh.Mid, sh.CutMid = cutRunes(mid, windowMax), true
		}
		sh.Post = cutRunes(post, windowContext)
		sh.CutPost = len(sh.Post) < len(post)
		return sh
	}
	return mk(a), mk(b)
}

// commonPrefix is the length in bytes of the longest common prefix of a
// and b that ends on a character boundary.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[n]) {
		n--
	}
	for n > 0 && n < len(b) && !utf8.RuneStart(b[n]) {
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

// cutRunes is s cut to at most n characters.
func cutRunes(s string, n int) string {
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}

// lastRunes is the last n characters of s, and whether s was longer.
func lastRunes(s string, n int) (string, bool) {
	c := utf8.RuneCountInString(s)
	if c <= n {
		return s, false
	}
	i := 0
	for k := range s {
		if i == c-n {
			return s[k:], true
		}
		i++
	}
	return s, false
}

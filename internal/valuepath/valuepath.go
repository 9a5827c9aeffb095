// Package valuepath addresses parts of a JSON value with the paths the run
// diff prints ("input.messages[0].content"): the one rule for the paths
// that user matchers (package replay) and code fields (package fork) name.
//
// A path is a dot-separated list of member names, each followed by any
// number of indexes: "system", "messages[0].content", "tools[*].name". An
// index is a non-negative integer or "*" (every element); a member name
// "*" is every member of an object. A member whose name holds '.', '[' or
// ']' is written in brackets as a JSON string: `headers["x-request.id"]`.
package valuepath

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// seg is one step of a path: a member name, an index, or every member or
// element.
type seg struct {
	key   string
	index int  // -1 for a member
	every bool // "*": every member (key) or element (index)
}

// Path is a parsed path.
type Path struct {
	segs []seg
	text string
}

// String is the path as written.
func (p Path) String() string { return p.text }

// Parse parses a path. An empty path, an empty member name, a bad index or
// an unclosed bracket is an error that quotes the path and says where.
func Parse(s string) (Path, error) {
	p := Path{text: s}
	if s == "" {
		return p, fmt.Errorf("the path is empty: name a field such as \"system\" or \"messages[0].content\"")
	}
	i := 0
	expectKey := true
	for i < len(s) {
		switch {
		case s[i] == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return p, fmt.Errorf("path %q: the bracket at byte %d is not closed", s, i)
			}
			inner := s[i+1 : i+end]
			switch {
			case strings.HasPrefix(inner, `"`):
				// A quoted member name, which may itself hold ']'.
				var key string
				dec := json.NewDecoder(strings.NewReader(s[i+1:]))
				if err := dec.Decode(&key); err != nil {
					return p, fmt.Errorf("path %q: the member name at byte %d is not a JSON string", s, i+1)
				}
				n := int(dec.InputOffset())
				if i+1+n >= len(s) || s[i+1+n] != ']' {
					return p, fmt.Errorf("path %q: the bracket at byte %d is not closed after the member name", s, i)
				}
				p.segs = append(p.segs, seg{key: key, index: -1})
				i += n + 2
			case inner == "*":
				p.segs = append(p.segs, seg{index: 0, every: true})
				i += end + 1
			default:
				n, err := strconv.Atoi(inner)
				if err != nil || n < 0 || inner != strconv.Itoa(n) {
					return p, fmt.Errorf("path %q: index %q is not a non-negative integer or *", s, inner)
				}
				p.segs = append(p.segs, seg{index: n})
				i += end + 1
			}
			expectKey = false
		case s[i] == '.':
			if expectKey {
				return p, fmt.Errorf("path %q: an empty member name at byte %d", s, i)
			}
			i++
			expectKey = true
			if i == len(s) {
				return p, fmt.Errorf("path %q: it ends with '.'", s)
			}
		default:
			if !expectKey {
				return p, fmt.Errorf("path %q: a member name at byte %d must follow a '.'", s, i)
			}
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' && s[j] != ']' {
				j++
			}
			if j < len(s) && s[j] == ']' {
				return p, fmt.Errorf("path %q: an unopened ']' at byte %d", s, j)
			}
			name := s[i:j]
			if name == "*" {
				p.segs = append(p.segs, seg{index: -1, every: true})
			} else {
				p.segs = append(p.segs, seg{key: name, index: -1})
			}
			i = j
			expectKey = false
		}
	}
	if expectKey {
		return p, fmt.Errorf("path %q: it ends with '.'", s)
	}
	return p, nil
}

// MustParse is Parse for paths known to be valid; it panics otherwise.
func MustParse(s string) Path {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Drop returns v without what p addresses: members are removed from their
// object, elements from their array. Parts of the path that v does not
// have are left alone.
func (p Path) Drop(v trace.Value) trace.Value {
	return p.Apply(v, func(trace.Value) trace.Value { return trace.Value{} })
}

// Apply returns v with every value p addresses replaced by fn(value); a
// member or element for which fn returns the Absent value is removed. Parts
// of the path that v does not have are left alone, and v itself is
// returned when nothing changed.
func (p Path) Apply(v trace.Value, fn func(trace.Value) trace.Value) trace.Value {
	if len(p.segs) == 0 {
		return fn(v)
	}
	out, _ := apply(v, p.segs, fn)
	return out
}

// apply applies fn at segs below v; changed reports a change.
func apply(v trace.Value, segs []seg, fn func(trace.Value) trace.Value) (trace.Value, bool) {
	if len(segs) == 0 {
		r := fn(v)
		return r, r != v
	}
	s, rest := segs[0], segs[1:]
	switch {
	case s.index < 0 && v.Kind() == trace.Object:
		var ms []trace.Member
		changed := false
		for k, m := range v.Members() {
			if s.every || k == s.key {
				r, c := apply(m, rest, fn)
				changed = changed || c
				if r.IsAbsent() {
					continue
				}
				m = r
			}
			ms = append(ms, trace.Member{Key: k, Value: m})
		}
		if !changed {
			return v, false
		}
		o, err := trace.ObjectValue(ms...)
		if err != nil {
			return v, false
		}
		return o, true
	case s.index >= 0 && v.Kind() == trace.Array:
		var es []trace.Value
		changed := false
		for i, e := range v.Elems() {
			if s.every || i == s.index {
				r, c := apply(e, rest, fn)
				changed = changed || c
				if r.IsAbsent() {
					continue
				}
				e = r
			}
			es = append(es, e)
		}
		if !changed {
			return v, false
		}
		a, err := trace.ArrayValue(es...)
		if err != nil {
			return v, false
		}
		return a, true
	}
	return v, false
}

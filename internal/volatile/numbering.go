package volatile

import (
	"sort"
	"strconv"
	"strings"
)

// Numbering hands out placeholders: one per distinct value of a kind, in
// the order values are first seen. The zero Numbering is ready to use; it
// is not safe for concurrent use.
type Numbering struct {
	seen map[string]map[string]string // kind → value → placeholder
}

// Name returns the placeholder of value among those of kind: "<kind-N>",
// where N counts the distinct values of kind seen so far.
func (n *Numbering) Name(kind, value string) string {
	if n.seen == nil {
		n.seen = map[string]map[string]string{}
	}
	byValue := n.seen[kind]
	if byValue == nil {
		byValue = map[string]string{}
		n.seen[kind] = byValue
	}
	p, ok := byValue[value]
	if !ok {
		p = "<" + kind + "-" + strconv.Itoa(len(byValue)+1) + ">"
		byValue[value] = p
	}
	return p
}

// Minted returns s with every occurrence of an id of ids (id → kind, as
// trace.MintedIDs gives them: the ids providers minted in a run's model
// responses) replaced by its placeholder of that kind (<call-1>,
// <response-1>), numbered in the order the ids appear. An id made of letters, digits, '_' and '-' (as
// providers mint them) is replaced where it stands as a whole word, not
// inside a longer one; any other id wherever it occurs.
func (n *Numbering) Minted(s string, ids map[string]string) string {
	if len(ids) == 0 || s == "" {
		return s
	}
	type hit struct {
		at, end int
		id      string
	}
	var hits []hit
	// Words of id characters, looked up.
	for i := 0; i < len(s); {
		if !idChar(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && idChar(s[j]) {
			j++
		}
		if _, ok := ids[s[i:j]]; ok {
			hits = append(hits, hit{i, j, s[i:j]})
		}
		i = j
	}
	// Ids of other characters, searched for.
	for id := range ids {
		if id == "" || plainID(id) {
			continue
		}
		for from := 0; ; {
			k := strings.Index(s[from:], id)
			if k < 0 {
				break
			}
			hits = append(hits, hit{from + k, from + k + len(id), id})
			from += k + len(id)
		}
	}
	if len(hits) == 0 {
		return s
	}
	sort.Slice(hits, func(a, b int) bool {
		if hits[a].at != hits[b].at {
			return hits[a].at < hits[b].at
		}
		return hits[a].end > hits[b].end // the longer first
	})
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, h := range hits {
		if h.at < last {
			continue // inside one replaced already
		}
		b.WriteString(s[last:h.at])
		b.WriteString(n.Name(kindName(ids[h.id]), h.id))
		last = h.end
	}
	b.WriteString(s[last:])
	return b.String()
}

func idChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func plainID(id string) bool {
	for i := range len(id) {
		if !idChar(id[i]) {
			return false
		}
	}
	return id != ""
}

// kindName is kind as a placeholder shows it: its letters, digits, '_' and
// '-' ("id" when none is left).
func kindName(kind string) string {
	if plainID(kind) {
		return kind
	}
	var b strings.Builder
	for i := range len(kind) {
		if idChar(kind[i]) {
			b.WriteByte(kind[i])
		}
	}
	if b.Len() == 0 {
		return "id"
	}
	return b.String()
}

package diff

import (
	"cmp"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/internal/scopepath"
	"github.com/stepfork/stepfork/internal/traceindex"
	"github.com/stepfork/stepfork/trace"
)

// The group stage: what a run did on goroutines, aligned as sets.
//
// A member of a concurrent group is an operation made on another goroutine
// than its scope's own (trace.EventLane.Number ≥ 1). Everything under it
// (its call's result, the error it failed with, a node's steps, the calls
// its body made, goroutines of its own) goes with it: a member and its
// steps are one unit. At one level, the steps of no unit are aligned by
// LCS among themselves; the units of a group (the same scope path) are
// paired as a multiset, first by equal content (every step of the unit),
// then by the identity of the step the member made (a call's input, a
// state write's value), then by its type and label, each first within the
// member's part of the group (trace.EventLane.Part: turns separated by
// joins) and then across its parts; a pair of units is aligned inside the
// same way, one level down. The pairs of a unit are listed together, where
// its base steps are relative to the steps of no unit (an added unit where
// its variant steps are).

// groups is what the group stage knows of one run's behavior steps.
type groups struct {
	// chains holds, for each step, the members enclosing its event (the
	// event itself included), outermost first, as indexes of events; nil
	// for a step under no member.
	chains [][]int32
	// key and part are, for each member event, its group (the path of
	// the scope it was made in) and its part of that group.
	key  map[int32]string
	part map[int32]int
}

// groupsOf computes the groups of a run's behavior steps, nil when the
// run has no lanes ([trace.LanesFile]) or none of its steps is under a
// member. index is traceindex.Of for a base run (its index is shared with
// the replay plan and the fork index), traceindex.New for a variant.
func groupsOf(tr *trace.Trace, steps []trace.BehaviorStep, index func(*trace.Trace) *traceindex.Index) *groups {
	lanes := tr.EventLanes()
	if lanes == nil {
		return nil
	}
	evs := tr.Events
	ids := index(tr)
	parent := ids.Parents()
	paths := make([]string, len(evs)) // the scope path inside each event
	g := &groups{key: map[int32]string{}, part: map[int32]int{}}
	for i := range evs {
		ev := &evs[i]
		scope := ""
		if j := parent[i]; j >= 0 {
			scope = paths[j]
		}
		if ev.Type != trace.RunStart {
			paths[i] = scope + "/" + scopepath.Label(ev)
		}
		if lanes[i].Number > 0 {
			g.key[int32(i)] = scope
			g.part[int32(i)] = lanes[i].Part
		}
	}
	if len(g.key) == 0 {
		return nil
	}
	g.chains = make([][]int32, len(steps))
	found := false
	for n := range steps {
		i, ok := ids.Lookup(steps[n].EventID)
		if !ok || !lanes[i].Free {
			continue
		}
		var chain []int32
		for j := i; j >= 0; j = parent[j] {
			if lanes[j].Number > 0 {
				chain = append(chain, j)
			}
		}
		slices.Reverse(chain)
		g.chains[n] = chain
		found = found || len(chain) > 0
	}
	if !found {
		return nil
	}
	return g
}

// stepContent is what makes two steps equal: type, label and payload.
type stepContent struct {
	typ     trace.StepType
	label   string
	payload trace.Value
}

// identity is what pairs two members of a group whose content differs
// before their type and label alone do: a call's input (so that two calls
// whose results both changed are paired with the calls they stand for, not
// by position, which would invent a change of input), a state write's
// value.
type identity struct {
	typ   trace.StepType
	label string
	input trace.Value
}

func identityOf(s *trace.BehaviorStep) (identity, bool) {
	switch s.Type {
	case trace.StepTool, trace.StepLLM:
		return identity{s.Type, s.Label, s.Payload.Get("input")}, true
	case trace.StepState:
		return identity{s.Type, s.Label, s.Payload.Get("after")}, true
	}
	return identity{}, false
}

// unit is one member of a group and the steps under it, at one level of
// the alignment.
type unit struct {
	member int32 // the member's event
	steps  []int // its steps, in order
}

// side is one run's steps and groups, as the group stage reads them.
type side struct {
	steps []trace.BehaviorStep
	g     *groups
}

// head is the step a unit's member made itself (its call, its state write,
// its node), else its first step.
func (sd side) head(u *unit) *trace.BehaviorStep {
	for _, i := range u.steps {
		if c := sd.g.chains[i]; c[len(c)-1] == u.member {
			return &sd.steps[i]
		}
	}
	return &sd.steps[u.steps[0]]
}

// content is the exact content of a unit's steps, one string.
func (sd side) content(u *unit) string {
	var b strings.Builder
	for _, i := range u.steps {
		s := &sd.steps[i]
		b.WriteString(string(s.Type))
		b.WriteByte(0)
		b.WriteString(s.Label)
		b.WriteByte(0)
		b.WriteString(s.Payload.Canonical())
		b.WriteByte(1)
	}
	return b.String()
}

// split parts the steps at level d (indexes of sd.steps, in order) into
// the steps under no member at that level and the units of the members
// at that level, in order of their first step.
func (sd side) split(steps []int, d int) (own []int, units []*unit) {
	at := map[int32]*unit{}
	for _, i := range steps {
		c := sd.g.chains[i]
		if len(c) <= d {
			own = append(own, i)
			continue
		}
		u := at[c[d]]
		if u == nil {
			u = &unit{member: c[d]}
			at[c[d]] = u
			units = append(units, u)
		}
		u.steps = append(u.steps, i)
	}
	return own, units
}

// alignGroups aligns two runs that both record concurrent groups (see
// above).
func alignGroups(bs []trace.BehaviorStep, bg *groups, vs []trace.BehaviorStep, vg *groups) []stepPair {
	all := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	return alignLevel(side{bs, bg}, all(len(bs)), side{vs, vg}, all(len(vs)), 0)
}

// alignLevel aligns the base steps bi with the variant steps vi (indexes,
// in order), all inside one pair of units of level d (or the whole runs, at
// level 0).
func alignLevel(b side, bi []int, v side, vi []int, d int) []stepPair {
	bo, bu := b.split(bi, d)
	vo, vu := v.split(vi, d)
	sub := func(sd side, idx []int) []trace.BehaviorStep {
		out := make([]trace.BehaviorStep, len(idx))
		for j, i := range idx {
			out[j] = sd.steps[i]
		}
		return out
	}
	lcs := alignLCS(sub(b, bo), sub(v, vo))
	type keyed struct {
		p            stepPair
		major, tier  int
		sub, ordinal int
	}
	all := make([]keyed, 0, len(bi)+len(vi))
	var bAt, vAt []int // for the pairs of lcs with a base (variant) step: that step
	var bJ, vJ []int   // and the pair's index in lcs
	for j, p := range lcs {
		q := stepPair{b: -1, v: -1, same: p.same}
		if p.b >= 0 {
			q.b = bo[p.b]
			bAt, bJ = append(bAt, q.b), append(bJ, j)
		}
		if p.v >= 0 {
			q.v = vo[p.v]
			vAt, vJ = append(vAt, q.v), append(vJ, j)
		}
		all = append(all, keyed{q, j, 1, 0, 0})
	}
	if len(bu) == 0 && len(vu) == 0 {
		out := make([]stepPair, len(all))
		for i, k := range all {
			out[i] = k.p
		}
		return out
	}
	// before is the index in lcs of the first pair whose step (in at, with
	// their indexes js) comes after step i; len(lcs) when none does.
	before := func(at, js []int, i int) int {
		k, _ := slices.BinarySearch(at, i)
		if k == len(at) {
			return len(lcs)
		}
		return js[k]
	}
	for _, up := range pairUnits(b, bu, v, vu) {
		var inner []stepPair
		switch {
		case up.b == nil:
			for _, i := range up.v.steps {
				inner = append(inner, stepPair{b: -1, v: i})
			}
		case up.v == nil:
			for _, i := range up.b.steps {
				inner = append(inner, stepPair{b: i, v: -1})
			}
		default:
			inner = alignLevel(b, up.b.steps, v, up.v.steps, d+1)
		}
		major, at := 0, 0
		if up.b != nil {
			at = up.b.steps[0]
			major = before(bAt, bJ, at)
		} else {
			at = len(b.steps) + up.v.steps[0]
			major = before(vAt, vJ, up.v.steps[0])
		}
		for k, p := range inner {
			all = append(all, keyed{p, major, 0, at, k})
		}
	}
	slices.SortStableFunc(all, func(a, b keyed) int {
		if c := cmp.Compare(a.major, b.major); c != 0 {
			return c
		}
		if c := cmp.Compare(a.tier, b.tier); c != 0 {
			return c
		}
		if c := cmp.Compare(a.sub, b.sub); c != 0 {
			return c
		}
		return cmp.Compare(a.ordinal, b.ordinal)
	})
	out := make([]stepPair, len(all))
	for i, k := range all {
		out[i] = k.p
	}
	return out
}

// unitPair is a base unit and the variant unit paired with it; either is
// nil for a unit without a partner.
type unitPair struct{ b, v *unit }

// pairUnits pairs the base units of each group with the variant's units
// of the same group, as a multiset (see above). The pairs come in the
// order of the variant's units, then the base's units left without a
// partner.
func pairUnits(b side, bu []*unit, v side, vu []*unit) []unitPair {
	type tierKey struct {
		group string
		part  int // -1: any part
		what  any
	}
	// keysOf is what a unit is paired by, tier by tier: its content, its
	// member's identity (nil when it has none), its member's type and label.
	keysOf := func(sd side, u *unit) [3]any {
		h := sd.head(u)
		var id any
		if x, ok := identityOf(h); ok {
			id = x
		}
		return [3]any{sd.content(u), id, [2]string{string(h.Type), h.Label}}
	}
	lists := map[tierKey][]int{}
	for c, u := range bu {
		ks := keysOf(b, u)
		for _, k := range ks {
			if k == nil {
				continue
			}
			group := b.g.key[u.member]
			lists[tierKey{group, b.g.part[u.member], k}] = append(lists[tierKey{group, b.g.part[u.member], k}], c)
			lists[tierKey{group, -1, k}] = append(lists[tierKey{group, -1, k}], c)
		}
	}
	used := make([]bool, len(bu))
	take := func(list []int) int {
		for _, c := range list {
			if !used[c] {
				used[c] = true
				return c
			}
		}
		return -1
	}
	partner := make([]int, len(vu))
	vkeys := make([][3]any, len(vu))
	for j, u := range vu {
		partner[j] = -1
		vkeys[j] = keysOf(v, u)
	}
	for t := range 3 {
		for _, anyPart := range []bool{false, true} {
			for j, u := range vu {
				if partner[j] >= 0 || vkeys[j][t] == nil {
					continue
				}
				part := v.g.part[u.member]
				if anyPart {
					part = -1
				}
				partner[j] = take(lists[tierKey{v.g.key[u.member], part, vkeys[j][t]}])
			}
		}
	}
	out := make([]unitPair, 0, len(vu)+len(bu))
	for j, u := range vu {
		p := unitPair{v: u}
		if partner[j] >= 0 {
			p.b = bu[partner[j]]
		}
		out = append(out, p)
	}
	for c, u := range bu {
		if !used[c] {
			out = append(out, unitPair{b: u})
		}
	}
	return out
}

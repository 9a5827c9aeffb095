package diff

import (
	"cmp"
	"slices"

	"github.com/stepfork/stepfork/internal/scopepath"
	"github.com/stepfork/stepfork/trace"
)

// groupKeys returns, for each of a run's behavior steps, the concurrent
// group it belongs to ("" for none), or nil when the run has no lanes
// ([trace.LanesFile]). A step belongs to a group when its event was made on
// a concurrent goroutine of its scope, or inside a node or call that was;
// the group is the scope's path (the labels of the enclosing events), so
// that the groups of two runs can be told apart and paired.
func groupKeys(tr *trace.Trace, steps []trace.BehaviorStep) []string {
	lanes := tr.EventLanes()
	if lanes == nil {
		return nil
	}
	evs := tr.Events
	index := make(map[string]int, len(evs))
	for i := len(evs) - 1; i >= 0; i-- {
		index[evs[i].ID] = i
	}
	paths := make([]string, len(evs)) // the scope path inside each event
	scope := make([]string, len(evs)) // the scope path each event was made in
	for i := range evs {
		ev := &evs[i]
		if j, ok := index[ev.ParentID]; ok && ev.ParentID != "" && j < i {
			scope[i] = paths[j]
		}
		if ev.Type != trace.RunStart {
			paths[i] = scope[i] + "/" + scopepath.Label(ev)
		}
	}
	keys := make([]string, len(steps))
	found := false
	for n := range steps {
		if i, ok := index[steps[n].EventID]; ok && lanes[i].Free {
			keys[n] = "\x00" + scope[i]
			found = true
		}
	}
	if !found {
		return nil
	}
	return keys
}

// stepContent is what makes two steps equal: type, label and payload.
type stepContent struct {
	typ     trace.StepType
	label   string
	payload trace.Value
}

// identity is what pairs two steps of a group whose content differs
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

// alignSets aligns two runs that both record concurrent groups: the steps
// of no group by the LCS alignment of those steps alone (alignLCS), the
// members of each group as a set (pairGroups), wherever they sit relative
// to the rest (goroutines that ran while the scope's own goroutine worked
// may be written before or after its steps), and the two merged: a group
// pair goes where its base step is, an added member where its variant step
// is, relative to the pairs of steps of no group.
func alignSets(bs []trace.BehaviorStep, bk []string, vs []trace.BehaviorStep, vk []string) []stepPair {
	var bo, vo []int // the steps of no group
	for i, k := range bk {
		if k == "" {
			bo = append(bo, i)
		}
	}
	for i, k := range vk {
		if k == "" {
			vo = append(vo, i)
		}
	}
	sub := func(steps []trace.BehaviorStep, idx []int) []trace.BehaviorStep {
		out := make([]trace.BehaviorStep, len(idx))
		for j, i := range idx {
			out[j] = steps[i]
		}
		return out
	}
	lcs := alignLCS(sub(bs, bo), sub(vs, vo))
	type keyed struct {
		p                stepPair
		major, tier, sub int
	}
	all := make([]keyed, 0, len(lcs)+8)
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
		all = append(all, keyed{q, j, 1, 0})
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
	for _, p := range pairGroups(bs, bk, vs, vk) {
		if p.b >= 0 {
			all = append(all, keyed{p, before(bAt, bJ, p.b), 0, p.b})
		} else {
			all = append(all, keyed{p, before(vAt, vJ, p.v), 0, len(bs) + p.v})
		}
	}
	slices.SortStableFunc(all, func(a, b keyed) int {
		if c := cmp.Compare(a.major, b.major); c != 0 {
			return c
		}
		if c := cmp.Compare(a.tier, b.tier); c != 0 {
			return c
		}
		return cmp.Compare(a.sub, b.sub)
	})
	out := make([]stepPair, len(all))
	for i, k := range all {
		out[i] = k.p
	}
	return out
}

// pairGroups pairs the members of each concurrent group of the base (the
// steps with the same group key) with the variant's members of the same
// group, as a multiset: first by equal content, then by identity (a call's
// type, label and input; a state write's key and value), then by type and
// label (they will show as changed). Members that match nothing are added
// or removed.
func pairGroups(bs []trace.BehaviorStep, bk []string, vs []trace.BehaviorStep, vk []string) []stepPair {
	baseOf := map[string][]int{}
	var keys []string
	for i, k := range bk {
		if k == "" {
			continue
		}
		if _, ok := baseOf[k]; !ok {
			keys = append(keys, k)
		}
		baseOf[k] = append(baseOf[k], i)
	}
	varOf := map[string][]int{}
	for i, k := range vk {
		if k == "" {
			continue
		}
		if _, ok := varOf[k]; !ok && len(baseOf[k]) == 0 {
			keys = append(keys, k)
		}
		varOf[k] = append(varOf[k], i)
	}
	var out []stepPair
	for _, k := range keys {
		cand, pos := baseOf[k], varOf[k]
		used := make([]bool, len(cand))
		exact := map[stepContent][]int{}
		byIdentity := map[identity][]int{}
		byLabel := map[[2]string][]int{}
		for c, bi := range cand {
			b := &bs[bi]
			exact[stepContent{b.Type, b.Label, b.Payload}] = append(exact[stepContent{b.Type, b.Label, b.Payload}], c)
			if id, ok := identityOf(b); ok {
				byIdentity[id] = append(byIdentity[id], c)
			}
			byLabel[[2]string{string(b.Type), b.Label}] = append(byLabel[[2]string{string(b.Type), b.Label}], c)
		}
		take := func(list []int) int {
			for _, c := range list {
				if !used[c] {
					used[c] = true
					return c
				}
			}
			return -1
		}
		partner := make([]int, len(pos))
		same := make([]bool, len(pos))
		for j, p := range pos {
			v := &vs[p]
			partner[j] = take(exact[stepContent{v.Type, v.Label, v.Payload}])
			same[j] = partner[j] >= 0
		}
		for j, p := range pos {
			if partner[j] < 0 {
				if id, ok := identityOf(&vs[p]); ok {
					partner[j] = take(byIdentity[id])
				}
			}
		}
		for j, p := range pos {
			if partner[j] < 0 {
				v := &vs[p]
				partner[j] = take(byLabel[[2]string{string(v.Type), v.Label}])
			}
		}
		for j, p := range pos {
			q := stepPair{b: -1, v: p, same: same[j]}
			if partner[j] >= 0 {
				q.b = cand[partner[j]]
			}
			out = append(out, q)
		}
		for c, bi := range cand {
			if !used[c] {
				out = append(out, stepPair{b: bi, v: -1})
			}
		}
	}
	return out
}

package diff

import (
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

// regroup orders the steps of each concurrent group of the variant (the
// steps with the same group key) like their counterparts in the base, so
// that the alignment pairs them whatever order the goroutines ran in. The
// steps of a group are matched with the base's steps of the same group as
// a multiset: first by equal content, then by identity (a call's type,
// label and input; a state write's key and value), then by type and label
// (they will show as changed); the members keep the variant's positions of
// the group, filled in the base's order, with the members that match
// nothing last in their own order (they will show as added). Steps of no
// group do not move. It returns vs itself when nothing moves, else a new
// slice.
func regroup(bs []trace.BehaviorStep, bk []string, vs []trace.BehaviorStep, vk []string) []trace.BehaviorStep {
	baseOf := map[string][]int{}
	for i, k := range bk {
		if k != "" {
			baseOf[k] = append(baseOf[k], i)
		}
	}
	varOf := map[string][]int{}
	var keys []string
	for i, k := range vk {
		if k == "" || len(baseOf[k]) == 0 {
			continue
		}
		if _, ok := varOf[k]; !ok {
			keys = append(keys, k)
		}
		varOf[k] = append(varOf[k], i)
	}
	out := vs
	for _, k := range keys {
		pos := varOf[k]
		if len(pos) < 2 {
			continue
		}
		cand := baseOf[k]
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
		for j, p := range pos {
			v := &vs[p]
			partner[j] = take(exact[stepContent{v.Type, v.Label, v.Payload}])
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
		order := make([]int, len(pos))
		for j := range order {
			order[j] = j
		}
		rank := func(j int) int {
			if partner[j] < 0 {
				return len(cand) + j
			}
			return partner[j]
		}
		slices.SortStableFunc(order, func(a, b int) int { return rank(a) - rank(b) })
		moved := false
		for slot, j := range order {
			if slot != j {
				moved = true
				break
			}
		}
		if !moved {
			continue
		}
		if &out[0] == &vs[0] {
			out = slices.Clone(vs)
		}
		for slot, j := range order {
			out[pos[slot]] = vs[pos[j]]
		}
	}
	return out
}

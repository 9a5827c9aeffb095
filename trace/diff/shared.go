package diff

import (
	"slices"
	"unsafe"

	"github.com/stepfork/stepfork/internal/sharedstart"
	"github.com/stepfork/stepfork/trace"
)

// shared is what a Prepared keeps to find the base steps a variant shares.
// A variant made from the base (a fork, whose served prefix holds the
// base's events; a null fork, whose every event may be the base's) has the
// base's behavior steps wherever its events, and what answered its calls
// and ended its nodes, are the base's: only the steps after the first event
// that differs need extracting. Runs has both runs' events in hand; a fork
// gives its base's with package sharedstart.
type shared struct {
	events int          // how many events the base had
	calls  []trace.Call // the base's calls and nodes (trace.Trace.Calls, Nodes)
	nodes  []trace.Node
	at     []int32 // the event each base step comes from, increasing
}

func init() {
	sharedstart.RegisterDiff(func(db *Prepared, base []trace.Event, variant *trace.Trace) *Result {
		return db.diff(variant, slices.Clone(db.steps), base)
	})
}

// variantSteps returns the behavior steps of variant, equal to
// variant.Behavior(): the base's own steps (copies) for the events the
// variant shares at its start with base, the events db was prepared from
// (nil when they are not known), and the steps of the rest extracted. same
// reports that every event of the variant is the base's (sameEvent), so
// that its steps and final state are the base's.
func (db *Prepared) variantSteps(variant *trace.Trace, base []trace.Event) (vs []trace.BehaviorStep, same bool) {
	sh := db.shared
	if sh == nil || base == nil || len(base) != sh.events {
		return behavior(variant, db.cfg.positional), false
	}
	k := commonEvents(base, variant.Events)
	switch {
	case k == 0:
		return variant.Behavior(), false
	case k == len(base) && k == len(variant.Events):
		// Calls are paired and nodes matched from the fields sameEvent
		// compares: the same events have the same steps.
		return slices.Clone(db.steps), true
	}
	cut := sh.cut(k, variant.Calls(), variant.Nodes())
	// The base steps of the events before cut are the variant's.
	p, _ := slices.BinarySearch(sh.at, int32(cut))
	tail, _ := sharedstart.Steps[*trace.Trace, trace.BehaviorStep](variant, cut, p)
	vs = make([]trace.BehaviorStep, p+len(tail))
	copy(vs, db.steps[:p])
	copy(vs[p:], tail)
	return vs, false
}

// cut returns the first event from which a variant whose first k events are
// the base's (commonEvents) and whose calls and nodes are vcalls and vnodes
// may have other steps than the base: k, or the first call or node before k
// that the variant answered or ended otherwise, or that was answered or
// ended at or after k (in the base or the variant).
func (sh *shared) cut(k int, vcalls []trace.Call, vnodes []trace.Node) int {
	cut := k
	for i := range sh.calls {
		b := &sh.calls[i]
		if b.Event >= cut {
			break
		}
		if i >= len(vcalls) || !sameCall(b, &vcalls[i]) || b.Result >= k || b.Failure >= k {
			cut = b.Event
			break
		}
	}
	i := 0
	for ; i < len(sh.nodes); i++ {
		b := &sh.nodes[i]
		if nodeFirst(b) >= cut {
			break
		}
		if i >= len(vnodes) || *b != vnodes[i] || b.Exit >= k {
			cut = nodeFirst(b)
			break
		}
	}
	// The variant has no node before cut that the base lacks (its first
	// events being the base's, it cannot; checked all the same).
	for ; i < len(vnodes) && nodeFirst(&vnodes[i]) < cut; i++ {
		cut = nodeFirst(&vnodes[i])
	}
	return cut
}

// sameCall reports whether two calls are answered alike: the same events,
// status, output and failure (their lanes aside, which are not behavior).
func sameCall(b, v *trace.Call) bool {
	c := *b
	c.Lane = v.Lane
	return c == *v
}

// nodeFirst is the index of the node's first marker: the order of
// trace.Trace.Nodes.
func nodeFirst(n *trace.Node) int {
	if n.Enter >= 0 {
		return n.Enter
	}
	return n.Exit
}

// commonEvents returns how many events at the start of a and b are the
// same (sameEvent).
func commonEvents(a, b []trace.Event) int {
	n := min(len(a), len(b))
	for i := range n {
		if !sameEvent(&a[i], &b[i]) {
			return i
		}
	}
	return n
}

// sameEvent reports whether a and b are the same event in two runs: every
// field equal but the run id and the time stamp. A fork's served events
// share the base's strings, so most comparisons are of pointers.
func sameEvent(a, b *trace.Event) bool {
	return a.Step == b.Step && a.Type == b.Type && same(a.ID, b.ID) && same(a.ParentID, b.ParentID) &&
		same(a.Status, b.Status) && same(a.ReplayPolicy, b.ReplayPolicy) &&
		same(a.InputHash, b.InputHash) && same(a.OutputHash, b.OutputHash) && slices.Equal(a.Redactions, b.Redactions) &&
		same(a.Provider, b.Provider) && same(a.Model, b.Model) && same(a.Name, b.Name) && same(a.Key, b.Key) &&
		same(a.Input.Canonical(), b.Input.Canonical()) && same(a.Output.Canonical(), b.Output.Canonical()) &&
		same(a.Before.Canonical(), b.Before.Canonical()) && same(a.After.Canonical(), b.After.Canonical()) &&
		same(a.Details.Canonical(), b.Details.Canonical()) &&
		samePtr(a.DurationMS, b.DurationMS) && samePtr(a.PromptTokens, b.PromptTokens) &&
		samePtr(a.CompletionTokens, b.CompletionTokens) && samePtr(a.TotalTokens, b.TotalTokens) &&
		samePtr(a.CostUSD, b.CostUSD) &&
		same(a.ErrorType, b.ErrorType) && same(a.Message, b.Message) && same(a.RunStatus, b.RunStatus)
}

// same reports whether two strings are equal, without a call when they
// share their bytes (a served event's strings are its base event's).
func same[S ~string](a, b S) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(string(a)) == unsafe.StringData(string(b)) || a == b)
}

// samePtr reports whether two optional numbers are both absent or equal.
func samePtr[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}

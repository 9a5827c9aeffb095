package fork

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Estimation predicts what a sweep's tails will do, from the base run's
// tail, without running anything.
type Estimation struct {
	At       Resolved
	Variants []VariantEstimate
	// Samples is how many times each variant will run ([Samples]).
	Samples int
	// CostUSD is what the whole sweep is predicted to cost: the sum of the
	// variants' predicted costs, times Samples.
	CostUSD float64
}

// VariantEstimate is the prediction for one sample of one variant: the
// calls of the base run's tail (the tail before changes), less the calls
// its output substitutions serve. Costs are what those calls cost in the base run; a
// changed prompt or model is not priced differently, and Memoize would serve
// unchanged calls for nothing, so it is an upper bound for memoized forks.
type VariantEstimate struct {
	Name       string
	ModelCalls int
	ToolCalls  int
	CostUSD    float64
	Tokens     int64
	// Changes describes the variant's changes as bound; Unmatched the ones
	// whose target matches nothing in the base run's tail (they will be
	// unused unless the tail takes another path).
	Changes   []string
	Unmatched []string
}

// Estimate resolves the fork point and every variant's changes against
// base, exactly as [Each] would with the same variants and options, and
// predicts each variant's tail from the base run's tail. opts are those the
// sweep will run with: the changes among them are added to every variant's,
// and [Samples] multiplies the predicted cost; the others change nothing
// here. An unresolvable point or change, or a conflict, is an error before
// anything runs. No agent runs.
func Estimate(base *trace.Trace, at At, variants []Named, opts ...EachOption) (*Estimation, error) {
	if base == nil {
		return nil, errors.New("fork.Estimate: the base trace is nil")
	}
	cfg := eachConfig(opts)
	ix := indexOf(base)
	plans, r, err := planSweep(ix, at, variants, cfg.changes)
	if err != nil {
		return nil, fmt.Errorf("fork.Estimate: %w", err)
	}
	est := &Estimation{At: r, Samples: max(cfg.samples, 1)}
	for i, plan := range plans {
		ve := ix.predict(variants[i].Name, plan)
		est.CostUSD += ve.CostUSD * float64(est.Samples)
		est.Variants = append(est.Variants, ve)
	}
	return est, nil
}

// predict is the estimate of one sample of the variant plan runs.
func (ix *index) predict(name string, plan *forkPlan) VariantEstimate {
	p := plan.at.pos
	ve := VariantEstimate{Name: name, ModelCalls: int(ix.sufModels[p]), ToolCalls: int(ix.sufTools[p]),
		CostUSD: ix.sufCost[p], Tokens: ix.sufTokens[p]}
	for _, b := range plan.changes {
		ve.Changes = append(ve.Changes, b.desc)
		calls := ix.tailMatches(b, p)
		if len(calls) == 0 {
			ve.Unmatched = append(ve.Unmatched, b.desc)
		}
		if b.kind == ckToolResult || b.kind == ckLLMResponse {
			for _, c := range calls {
				ix.subtractCall(&ve, c)
			}
		}
	}
	return ve
}

// subtractCall removes a substituted call from a prediction.
func (ix *index) subtractCall(ve *VariantEstimate, c int32) {
	ev := &ix.tr.Events[c]
	if ev.Type == trace.ToolCall {
		ve.ToolCalls--
		return
	}
	ve.ModelCalls--
	for j := c + 1; j <= ix.end[c]; j++ {
		if r := &ix.tr.Events[j]; r.Type == trace.LLMResponse && ix.parent[j] == c {
			if r.CostUSD != nil {
				ve.CostUSD -= *r.CostUSD
			}
			ve.Tokens -= r.Tokens()
		}
	}
}

// tailMatches lists the base events at or after position p that change b
// would act on if the tail repeated the base run: calls for output and agent
// changes, markers for decisions, parameters and approvals. State changes
// act on reads, which a recording does not hold, so they always match.
func (ix *index) tailMatches(b *bound, p int) []int32 {
	evs := ix.tr.Events
	var out []int32
	switch b.kind {
	case ckToolResult, ckLLMResponse:
		kind := replay.KindTool
		if b.kind == ckLLMResponse {
			kind = replay.KindLLM
		}
		for _, c := range ix.calls[callKey(kind, b.label)] {
			if int(c) >= p && (b.occ == 0 || int(ix.occ[c]) == b.occ) {
				out = append(out, c)
			}
		}
	case ckPrompt, ckModel, ckTemperature:
		for _, c := range ix.calls {
			for _, i := range c {
				ev := &evs[i]
				if int(i) < p || ev.Type != trace.LLMRequest {
					continue
				}
				if b.label == All || b.label == ix.innermostNode(int(i)) || b.label == ev.Model || b.label == trace.LLMLabel(ev.Provider, ev.Model) {
					out = append(out, i)
				}
			}
		}
	case ckDecision, ckHuman:
		for name, list := range ix.decisions {
			if b.kind == ckDecision && name != b.name || b.kind == ckHuman && b.name != "" && name != b.name {
				continue
			}
			for _, i := range list {
				m, _ := evs[i].Marker()
				want := trace.KindDecision
				if b.kind == ckHuman {
					want = trace.KindApproval
				}
				if int(i) >= p && m.Kind == want {
					out = append(out, i)
				}
			}
		}
	case ckParam:
		for _, i := range ix.params[b.name] {
			if int(i) >= p {
				out = append(out, i)
			}
		}
	case ckState:
		out = append(out, int32(p))
	}
	return out
}

// Explain renders the estimate, one line per variant naming its changes as
// bound (the model a Model change would use, for instance):
//
//	estimate at step 6 (before 'decide' execution 1), 3 samples each
//	  stricter  ~$0.002 over 1 model call(s) and 1 tool call(s) per sample; prompt of 'decide'
//	  broken    ~$0.002 over 1 model call(s) and 1 tool call(s) per sample; param 'x' → 1; unmatched: param 'x' → 1
//	  total     ~$0.012
func (e *Estimation) Explain() string {
	var b strings.Builder
	fmt.Fprintf(&b, "estimate at %s", e.At)
	per := ""
	if e.Samples > 1 {
		fmt.Fprintf(&b, ", %d samples each", e.Samples)
		per = " per sample"
	}
	b.WriteString("\n")
	width := len("total")
	for _, v := range e.Variants {
		width = max(width, len(v.Name))
	}
	for _, v := range e.Variants {
		fmt.Fprintf(&b, "  %-*s  ~%s over %d model call(s) and %d tool call(s)%s", width, v.Name, usd.Format(v.CostUSD), v.ModelCalls, v.ToolCalls, per)
		if len(v.Changes) > 0 {
			fmt.Fprintf(&b, "; %s", strings.Join(v.Changes, ", "))
		}
		if len(v.Unmatched) > 0 {
			fmt.Fprintf(&b, "; unmatched: %s", strings.Join(v.Unmatched, "; "))
		}
		b.WriteString("\n")
	}
	// The total is what the lines above show, times the samples.
	total := 0.0
	for _, v := range e.Variants {
		total = usd.Sum(total, usd.Round(v.CostUSD)*float64(max(e.Samples, 1)))
	}
	fmt.Fprintf(&b, "  %-*s  ~%s\n", width, "total", usd.Format(total))
	return b.String()
}

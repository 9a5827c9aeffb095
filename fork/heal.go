package fork

import (
	"context"
	"errors"
	"fmt"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// KindHeal is a fork made by [Heal]: the base run made again by the
// current agent, from where it first departs from the recording.
const KindHeal Kind = "heal"

// StatusDryRun is the status of a variant run with [DryRun] that stopped
// where its tail would first have run something live.
const StatusDryRun Status = "dry run"

// TailCall is a call of a variant's tail: [Variant.FirstLive].
type TailCall struct {
	Step     int // the call's step in the variant
	Kind     replay.CallKind
	Name     string // tool name or model label
	BaseStep int    // the step of the base call it stands for, -1 for none (a call the base never made)
}

// String is "model call 'openai/gpt-4o' at step 7".
func (c *TailCall) String() string {
	if c == nil {
		return "no live call"
	}
	return fmt.Sprintf("%s call '%s' at step %d", kindWord(c.Kind), c.Name, c.Step)
}

func kindWord(k replay.CallKind) string {
	if k == replay.KindLLM {
		return "model"
	}
	return string(k)
}

// dryRun is the DryRun option.
type dryRun struct{}

func (dryRun) applyRun(c *config) { c.dry = true }

// DryRun runs the fork without running anything live: the agent runs, every
// call the recording or a change answers is answered, and the first call
// the tail would run live (a model call neither memoized nor substituted, a
// tool [Allow] lets run) is blocked instead, which usually ends the run.
// The variant, with [StatusDryRun], says where its tail would start
// ([Variant.FirstLive]) and what the tail would cost
// ([Variant.Estimate]: the base run's calls from there on, as recorded).
// Nothing is saved. A variant that completes without any live call has the
// status it ran to and no FirstLive: its fork would cost nothing.
func DryRun() RunOption { return dryRun{} }

// Heal makes base again with agent, the current code: the recorded input is
// handed to the agent and every call it makes that the recording answers
// (the same tool with the same input, the same request to the same model)
// is served from it, so the calls up to where the agent first departs from
// the recording cost nothing; from there the tail runs live: models live,
// tools under the side-effect guard (a recorded result where the input
// matches an unconsumed base call, live where [Allow] names the tool, and
// otherwise the variant stops, blocked, naming the tool). It is
// [Run](ctx, base, [Start](), agent, [Memoize](), opts…) with tools
// matched before they are allowed, and its fork.json kind is [KindHeal].
//
// The changes among opts are the intended changes (see [Class]): they
// apply to every call they target, and a request the agent's code already
// makes as the change would make it is left as it is; a target the run
// never reaches is not an error (every change is taken as [NewInTail]).
// [Variant.Class] says whether the new run differs only where they apply,
// [Variant.FirstLive] where the tail started, and the variant's live calls,
// tokens and [Variant.IncurredCost] what it spent. With [SaveTo] (and
// [trace.Overwrite]) the variant replaces a bundle atomically.
//
// A [Budget] is checked before anything runs live: the fork is first run
// with [DryRun] to find where its tail starts, and refused (matching
// [ErrOverBudget]) when the base run's calls from there on cost more. With
// DryRun among opts, Heal stops there and returns the dry variant.
func Heal(ctx context.Context, base *trace.Trace, agent replay.Agent, opts ...RunOption) (*Variant, error) {
	if base == nil {
		return nil, errors.New("fork.Heal: the base trace is nil")
	}
	if agent == nil {
		return nil, errors.New("fork.Heal: the agent is nil")
	}
	cfg := runConfig(opts)
	for i, c := range cfg.changes {
		if _, ok := c.(newInTail); !ok {
			cfg.changes[i] = NewInTail(c)
		}
	}
	cfg.memoize, cfg.heal = true, true
	p, err := planFork(indexOf(base), Start(), cfg.changes)
	if err != nil {
		return nil, fmt.Errorf("fork.Heal: %w", err)
	}
	p.base = base
	if cfg.hasBudget && !cfg.dry {
		dry := cfg
		dry.dry, dry.save, dry.runID = true, false, ""
		v, err := p.run(ctx, agent, &dry, "")
		if err != nil {
			return nil, fmt.Errorf("fork.Heal: %w", err)
		}
		if v.Estimate != nil {
			if err := cfg.checkBudget("fork.Heal", v.Estimate.CostUSD, fmt.Sprintf("%d model call(s) from %s, as recorded", v.Estimate.ModelCalls, v.FirstLive)); err != nil {
				return nil, err
			}
		}
	}
	return p.run(ctx, agent, &cfg, cfg.savePath)
}

// estimateFrom is the prediction of a tail that starts at base position
// pos: the base run's calls and cost from there on, as recorded.
func (ix *index) estimateFrom(pos int) *VariantEstimate {
	pos = min(max(pos, 0), len(ix.tr.Events))
	return &VariantEstimate{ModelCalls: int(ix.sufModels[pos]), ToolCalls: int(ix.sufTools[pos]),
		CostUSD: ix.sufCost[pos], Tokens: ix.sufTokens[pos]}
}

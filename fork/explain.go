package fork

import (
	"fmt"
	"strings"

	"github.com/stepfork/stepfork/internal/usd"
)

// shortID is a run id's first six hex digits after "run_", with an
// ellipsis: 8f3a2c….
func shortID(id string) string {
	s := strings.TrimPrefix(id, "run_")
	if len(s) > 6 {
		s = s[:6]
	}
	return s + "…"
}

// Explain renders the variant for people: a header naming the fork, the
// base and the fork point, one line per change (and whether it was
// applied), the policy, what was served and what the guard held back, the
// incurred cost, then the diff against the base (diff.Result.Explain):
//
//	fork 8f3a2c… of 41d0be… at step 6 (before 'write' execution 1)
//	  change    prompt of 'write' (applied at step 7)
//	  policy    replay, memoize
//	  status    completed
//	  served    3 tool call(s) replayed, 2 model call(s) memoized
//	  cost      $0.0021 incurred, 412 tokens, 1 live model call(s), 0 live tool call(s)
//	behavior changed: …
func (v *Variant) Explain() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fork %s of %s at %s\n", shortID(v.Trace.RunID), shortID(v.Base.RunID), v.At)
	for _, c := range v.Changes {
		state := "unused: its target matched nothing in the tail"
		if c.Applied > 0 {
			steps := make([]string, len(c.Steps))
			for i, s := range c.Steps {
				steps[i] = fmt.Sprint(s)
			}
			state = "applied at step " + strings.Join(steps, ", ")
			if c.Applied > len(c.Steps) {
				state += fmt.Sprintf(" (+%d more)", c.Applied-len(c.Steps))
			}
		}
		fmt.Fprintf(&b, "  change    %s (%s)\n", c.Description, state)
	}
	policy := v.Policy.String()
	if v.Memoized {
		policy += ", memoize"
	}
	fmt.Fprintf(&b, "  policy    %s\n", policy)
	fmt.Fprintf(&b, "  status    %s\n", v.Status)
	if len(v.Replayed) > 0 || len(v.MemoHits) > 0 {
		fmt.Fprintf(&b, "  served    %d tool call(s) replayed, %d model call(s) memoized\n", len(v.Replayed), len(v.MemoHits))
	}
	for _, s := range v.Suppressed {
		fmt.Fprintf(&b, "  blocked   step %d %s '%s': %s\n", s.Step, s.Kind, s.Tool, s.Reason)
	}
	fmt.Fprintf(&b, "  cost      %s incurred, %d tokens, %d live model call(s), %d live tool call(s)\n",
		usd.Format(v.IncurredCost), v.IncurredTokens, v.LiveModelCalls, v.LiveToolCalls)
	if v.Scored {
		fmt.Fprintf(&b, "  score     %.2f (base %.2f, %+.2f)\n", v.Score, v.BaseScore, v.Score-v.BaseScore)
	}
	if v.Path != "" {
		fmt.Fprintf(&b, "  saved     %s\n", v.Path)
	}
	if v.Diff != nil {
		b.WriteString(v.Diff.Explain())
	}
	return b.String()
}

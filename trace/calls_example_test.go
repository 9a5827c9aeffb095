package trace_test

import (
	"fmt"

	"github.com/stepfork/stepfork/trace"
)

// Calls pairs each call with what answered it: a result, a failure, or
// nothing (status skipped).
func ExampleTrace_Calls() {
	b := trace.NewBuilder("refund-agent")
	b.RunStart(map[string]any{"order": "A-1"})
	b.Tool("lookup_order", map[string]any{"order": "A-1"}, map[string]any{"total": 120})
	refund := b.ToolCall("issue_refund", map[string]any{"amount": 120})
	b.ToolFailure(refund, "PaymentDeclined", "card expired")
	b.LLMRequest("openai", "gpt-4o", map[string]any{"prompt": "summarize"}) // never answered
	b.RunEnd(trace.RunFailed, nil)
	b.Fail("PaymentDeclined", "card expired")
	tr := b.MustTrace()

	for _, c := range tr.Calls() {
		fmt.Printf("#%d %-14s step %d: %s", c.Index, c.Label, tr.Events[c.Event].Step, c.Status)
		switch {
		case c.Missing():
			fmt.Println(" (no result recorded)")
		case c.Status == trace.StatusError:
			fmt.Printf(" %s: %s\n", c.ErrorType, c.Message)
		default:
			fmt.Printf(" %s\n", c.Output)
		}
	}
	// Output:
	// #0 lookup_order   step 1: ok {"total":120}
	// #1 issue_refund   step 3: error PaymentDeclined: card expired
	// #2 openai/gpt-4o  step 6: skipped (no result recorded)
}

package trace

// Tokens returns the tokens a model response reports: its total_tokens,
// else prompt_tokens + completion_tokens (0 when it reports none).
func (e *Event) Tokens() int64 {
	if e.TotalTokens != nil {
		return *e.TotalTokens
	}
	var t int64
	if e.PromptTokens != nil {
		t += *e.PromptTokens
	}
	if e.CompletionTokens != nil {
		t += *e.CompletionTokens
	}
	return t
}

// Add counts ev in t: one more event, a model call for an llm_request, a
// tool call for a tool_call, and an llm_response's cost_usd added to CostUSD
// (which stays nil until a response reports a cost). DurationMS is left as
// it is. CostUSD is replaced, never written through, so a Totals copied from
// another keeps the other's cost intact.
func (t *Totals) Add(ev *Event) {
	t.Events++
	switch ev.Type {
	case LLMRequest:
		t.LLMCalls++
	case ToolCall:
		t.ToolCalls++
	case LLMResponse:
		if ev.CostUSD != nil {
			c := *ev.CostUSD
			if t.CostUSD != nil {
				c += *t.CostUSD
			}
			t.CostUSD = &c
		}
	}
}

// TotalsOf returns the totals of a list of events: [Totals.Add] of each,
// from zero.
func TotalsOf(events []Event) Totals {
	var t Totals
	for i := range events {
		t.Add(&events[i])
	}
	return t
}

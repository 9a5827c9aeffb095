package trace_test

import (
	"testing"

	"github.com/stepfork/stepfork/trace"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	n := func(i int64) *int64 { return &i }
	for _, tc := range []struct {
		name string
		ev   trace.Event
		want int64
	}{
		{"total wins", trace.Event{TotalTokens: n(30), PromptTokens: n(1), CompletionTokens: n(2)}, 30},
		{"prompt + completion", trace.Event{PromptTokens: n(10), CompletionTokens: n(5)}, 15},
		{"prompt only", trace.Event{PromptTokens: n(7)}, 7},
		{"none", trace.Event{}, 0},
	} {
		if got := tc.ev.Tokens(); got != tc.want {
			t.Errorf("%s: Tokens() = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestTotalsOf(t *testing.T) {
	t.Parallel()
	cost := func(f float64) *float64 { return &f }
	evs := []trace.Event{
		{Type: trace.RunStart},
		{Type: trace.LLMRequest},
		{Type: trace.LLMResponse, CostUSD: cost(0.25)},
		{Type: trace.ToolCall},
		{Type: trace.ToolResult, CostUSD: cost(9)}, // only model responses cost
		{Type: trace.LLMRequest},
		{Type: trace.LLMResponse},
		{Type: trace.LLMResponse, CostUSD: cost(0.5)},
	}
	got := trace.TotalsOf(evs)
	if got.Events != 8 || got.LLMCalls != 2 || got.ToolCalls != 1 || got.CostUSD == nil || *got.CostUSD != 0.75 || got.DurationMS != nil {
		t.Errorf("TotalsOf = %+v (cost %v)", got, got.CostUSD)
	}
	if c := trace.TotalsOf(evs[:2]).CostUSD; c != nil {
		t.Errorf("no response reports a cost, yet CostUSD = %v", *c)
	}

	// Add replaces CostUSD: a copy keeps its own.
	before := got
	got.Add(&evs[2])
	if *before.CostUSD != 0.75 || *got.CostUSD != 1 {
		t.Errorf("Add wrote through a shared CostUSD: before %v, after %v", *before.CostUSD, *got.CostUSD)
	}
}

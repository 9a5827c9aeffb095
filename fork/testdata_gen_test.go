package fork

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stepfork/stepfork/trace"
)

// bookingAgentPath is the committed 15-event failed run that the spec's
// examples fork ("stepfork fork failure.sftrace --at-step 2" → 3 events).
const bookingAgentPath = "../testdata/booking-agent.sftrace"

// bookingAgent builds the booking-agent run: the user asks to book a flight
// from Kathmandu to Delhi; the agent plans, searches, chooses, checks the
// seat, and the booking fails with PaymentDeclined.
//
//	step  0 run_start
//	      1 llm_request  plan        2 llm_response
//	      3 tool_call search_flights 4 tool_result
//	      5 llm_request  choose      6 llm_response
//	      7 state_change selected_flight
//	      8 tool_call check_seat     9 tool_result
//	     10 tool_call book_flight   11 tool_result (error)  12 error PaymentDeclined
//	     13 error (run level)       14 run_end failed
func bookingAgent(t testing.TB) *trace.Trace {
	t.Helper()
	start := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)
	b := trace.NewBuilder("booking-agent").RunID("run_booking_agent_0001").Start(start)
	b.RunStart(map[string]any{
		"user":    "Book me a flight from Kathmandu (KTM) to Delhi (DEL) on 2026-04-02, economy, one adult.",
		"user_id": "u_1842",
	})
	llm := func(purpose string, messages []any, output any, prompt, completion int64, cost float64) {
		req := b.LLMRequest("openai", "gpt-4o-mini", map[string]any{"messages": messages, "temperature": 0.2, "purpose": purpose})
		b.Add(trace.Event{Type: trace.LLMResponse, ParentID: req, Model: "gpt-4o-mini",
			Output: trace.MustValueOf(output), PromptTokens: &prompt, CompletionTokens: &completion,
			TotalTokens: ptr(prompt + completion), CostUSD: &cost})
	}
	llm("plan", []any{
		map[string]any{"role": "system", "content": "You are a travel booking agent. Use the tools to search, check and book."},
		map[string]any{"role": "user", "content": "Book me a flight from Kathmandu (KTM) to Delhi (DEL) on 2026-04-02, economy, one adult."},
	}, map[string]any{"plan": []any{"search_flights", "choose", "check_seat", "book_flight"}}, 142, 38, 0.000044)
	b.Tool("search_flights",
		map[string]any{"from": "KTM", "to": "DEL", "date": "2026-04-02", "cabin": "economy", "adults": 1},
		map[string]any{"flights": []any{
			map[string]any{"flight": "AI-216", "departs": "10:55", "arrives": "12:25", "price": map[string]any{"amount": 182.5, "currency": "USD"}},
			map[string]any{"flight": "6E-1158", "departs": "14:40", "arrives": "16:05", "price": map[string]any{"amount": 149.0, "currency": "USD"}},
			map[string]any{"flight": "RA-205", "departs": "18:15", "arrives": "19:50", "price": map[string]any{"amount": 171.25, "currency": "USD"}},
		}})
	llm("choose", []any{
		map[string]any{"role": "user", "content": "Pick the cheapest flight that arrives before 17:00."},
	}, map[string]any{"choice": "6E-1158", "reason": "cheapest, arrives 16:05"}, 318, 21, 0.000061)
	b.State("selected_flight", nil, map[string]any{"flight": "6E-1158", "price": 149.0})
	b.Tool("check_seat", map[string]any{"flight": "6E-1158", "date": "2026-04-02", "cabin": "economy"},
		map[string]any{"available": true, "seats_left": 4, "fare_class": "T"})
	call := b.ToolCall("book_flight", map[string]any{"flight": "6E-1158", "date": "2026-04-02",
		"passenger": map[string]any{"name": "Sita Sharma"}, "payment": map[string]any{"method": "card", "last4": "4242"}})
	b.ToolFailure(call, "PaymentDeclined", "card ending 4242 was declined by the issuer (insufficient funds)")
	b.Fail("PaymentDeclined", "booking failed: card ending 4242 was declined by the issuer (insufficient funds)")
	tr, err := b.Trace()
	if err != nil {
		t.Fatal(err)
	}
	cost := 0.000044 + 0.000061
	duration := tr.Events[len(tr.Events)-1].Timestamp.Sub(start).Milliseconds()
	tr.Totals.CostUSD, tr.Totals.DurationMS = &cost, &duration
	tr.Environment.OS = ptr("linux")
	return tr
}

func ptr[T any](v T) *T { return &v }

// TestGenerateTestdata checks the committed booking-agent bundle: it loads,
// has the 15 events the generator makes, equals what the generator builds,
// and passes strict validation with integrity. With STEPFORK_REGEN=1 it
// rewrites the bundle first.
func TestGenerateTestdata(t *testing.T) {
	built := bookingAgent(t)
	if os.Getenv("STEPFORK_REGEN") == "1" {
		if err := built.Save(bookingAgentPath, trace.Overwrite()); err != nil {
			t.Fatal(err)
		}
	}
	got, err := trace.Load(bookingAgentPath)
	if err != nil {
		t.Fatalf("%v (regenerate with STEPFORK_REGEN=1 go test ./fork -run TestGenerateTestdata)", err)
	}
	if len(got.Events) != 15 {
		t.Fatalf("booking-agent has %d events, want 15", len(got.Events))
	}
	want, err := built.Prepared()
	if err != nil {
		t.Fatal(err)
	}
	got.Path, want.Path = "", ""
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("committed bundle differs from the generator (-generated +committed); regenerate with STEPFORK_REGEN=1:\n%s", diff)
	}
	if rep := trace.ValidateBundle(context.Background(), bookingAgentPath, trace.CheckIntegrity()); !rep.Valid() {
		t.Errorf("booking-agent is not strictly valid: %v", rep.Err())
	}
	if got.Status != trace.RunFailed || got.Failure == nil || got.Failure.Type != "PaymentDeclined" {
		t.Errorf("status %s, failure %+v; want failed with PaymentDeclined", got.Status, got.Failure)
	}
}

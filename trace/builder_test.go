package trace

import (
	"path/filepath"
	"testing"
)

func TestBuilderSavesAndLoads(t *testing.T) {
	t.Parallel()
	b := NewBuilder("booking-agent")
	b.RunStart(map[string]any{"city": "Lisbon"})
	req := b.LLM("openai", "gpt-test", map[string]any{"messages": []any{"hi"}}, map[string]any{"tool": "search"})
	call := b.Tool("search_flights", map[string]any{"to": "LIS"}, map[string]any{"price": 320.5})
	b.State("choice", nil, "B")
	b.RunEnd(RunCompleted, map[string]any{"booked": true})
	tr := b.MustTrace()
	if tr.Totals.Events != 7 || tr.Totals.LLMCalls != 1 || tr.Totals.ToolCalls != 1 {
		t.Errorf("totals = %+v", tr.Totals)
	}
	if ev, _ := tr.Event(call); ev == nil || ev.ParentID != "evt_001" || ev.Step != 3 {
		t.Errorf("tool call = %+v", ev)
	}
	if ev, _ := tr.Event(req); ev.InputHash != Hash(ev.Input) {
		t.Error("hash not set")
	}
	dst := filepath.Join(t.TempDir(), "b.sftrace")
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Events) != 7 || back.Events[6].ParentID != "" || back.Status != RunCompleted {
		t.Errorf("loaded %d events, run_end parent %q, status %s", len(back.Events), back.Events[6].ParentID, back.Status)
	}
	if r := VerifyIntegrity(dst); r.Status != IntegrityVerified {
		t.Errorf("integrity = %+v", r)
	}
}

func TestBuilderFailure(t *testing.T) {
	t.Parallel()
	b := NewBuilder("f")
	b.RunStart(nil)
	call := b.ToolCall("pay", map[string]any{"amount": 5})
	b.ToolFailure(call, "Timeout", "pay timed out")
	b.Fail("Timeout", "pay timed out")
	tr := b.MustTrace()
	if tr.Status != RunFailed || tr.Failure == nil || tr.Failure.Step != 4 {
		t.Fatalf("status %s failure %+v", tr.Status, tr.Failure)
	}
	if err := tr.Save(filepath.Join(t.TempDir(), "f.sftrace")); err != nil {
		t.Fatal(err)
	}
}

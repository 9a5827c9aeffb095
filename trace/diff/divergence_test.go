package diff

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

// A Divergence prints as one line naming the step as the run numbers its
// events, not as a struct of pointers (t.Log(v.Diff.Divergence) printed
// "&{3 removed 0x… <nil> 3 3}").
func TestDivergenceString(t *testing.T) {
	t.Parallel()
	base := build(t, "a", func(b *trace.Builder) {
		b.LLM("fake", "fake-1", map[string]any{"q": "refund?"}, map[string]any{"content": "refund"})
		b.Tool("issue_refund", map[string]any{"amount": 250}, map[string]any{"ok": true})
		b.RunEnd(trace.RunCompleted, nil)
	})
	long := strings.Repeat("Refunds need a receipt. ", 12)
	tests := []struct {
		name    string
		variant script
		want    string
	}{
		{"changed output", func(b *trace.Builder) {
			b.LLM("fake", "fake-1", map[string]any{"q": "refund?"}, map[string]any{"content": "escalate"})
			b.Tool("issue_refund", map[string]any{"amount": 250}, map[string]any{"ok": true})
			b.RunEnd(trace.RunCompleted, nil)
		}, `steps 1–2: llm 'fake/fake-1' changed: output.content "refund" → "escalate"`},
		{"removed call", func(b *trace.Builder) {
			b.LLM("fake", "fake-1", map[string]any{"q": "refund?"}, map[string]any{"content": "refund"})
			b.RunEnd(trace.RunCompleted, nil)
		}, `steps 3–4: tool 'issue_refund' only in the base`},
		{"added call", func(b *trace.Builder) {
			b.LLM("fake", "fake-1", map[string]any{"q": "refund?"}, map[string]any{"content": "refund"})
			b.Tool("check", nil, true)
			b.Tool("issue_refund", map[string]any{"amount": 250}, map[string]any{"ok": true})
			b.RunEnd(trace.RunCompleted, nil)
		}, `steps 3–4: tool 'check' only in the variant`},
		{"other model", func(b *trace.Builder) {
			b.LLM("fake", "fake-2", map[string]any{"q": "refund?"}, map[string]any{"content": "refund"})
			b.Tool("issue_refund", map[string]any{"amount": 250}, map[string]any{"ok": true})
			b.RunEnd(trace.RunCompleted, nil)
		}, `steps 1–2: llm 'fake/fake-1' became llm 'fake/fake-2'`},
		{"several changes, moved", func(b *trace.Builder) {
			b.State("note", nil, "x")
			b.LLM("fake", "fake-1", map[string]any{"q": "refund?"}, map[string]any{"content": "refund"})
			b.Tool("issue_refund", map[string]any{"amount": 90}, map[string]any{"ok": false})
			b.RunEnd(trace.RunCompleted, nil)
		}, `step 1: state 'note' only in the variant`},
		{"long value", func(b *trace.Builder) {
			b.LLM("fake", "fake-1", map[string]any{"q": long + "Escalate above 100 USD."}, map[string]any{"content": "refund"})
			b.Tool("issue_refund", map[string]any{"amount": 250}, map[string]any{"ok": true})
			b.RunEnd(trace.RunCompleted, nil)
		}, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := base
			if tt.want == "" {
				base = build(t, "a", func(b *trace.Builder) {
					b.LLM("fake", "fake-1", map[string]any{"q": long}, map[string]any{"content": "refund"})
					b.Tool("issue_refund", map[string]any{"amount": 250}, map[string]any{"ok": true})
					b.RunEnd(trace.RunCompleted, nil)
				})
			}
			d := Runs(base, build(t, "b", tt.variant))
			got := fmt.Sprint(d.Divergence)
			if tt.want == "" {
				// A long value is cut around the difference, which shows.
				if !strings.Contains(got, "Escalate above 100 USD.") || !strings.Contains(got, "…") || len([]rune(got)) > 400 {
					t.Errorf("Divergence = %q, want the end of the prompt, cut", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("Divergence = %q\nwant         %q", got, tt.want)
			}
		})
	}
	var none *Divergence
	if got := fmt.Sprint(none); got != "none: the runs are equivalent" {
		t.Errorf("nil Divergence = %q", got)
	}
}

// A changed step whose step numbers differ in the two runs names both.
func TestDivergenceStringNamesBothNumberings(t *testing.T) {
	t.Parallel()
	base := build(t, "a", func(b *trace.Builder) {
		b.Tool("search", "LIS", 320)
		b.RunEnd(trace.RunCompleted, nil)
	})
	variant := build(t, "b", func(b *trace.Builder) {
		b.State("note", nil, "x")
		b.Tool("search", "LIS", 450)
		b.RunEnd(trace.RunCompleted, nil)
	})
	d := Runs(base, variant)
	// The added state is the first divergence; the changed call is next.
	if got, want := d.Steps[1].Kind, Changed; got != want {
		t.Fatalf("step 1 is %s, want %s", got, want)
	}
	dv := &Divergence{Index: 1, Kind: Changed, Base: d.Steps[1].Base, Variant: d.Steps[1].Variant, Changes: d.Steps[1].Changes}
	if got, want := dv.String(), "steps 2–3 (base steps 1–2): tool 'search' changed: output 320 → 450"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

// A node's step holds how the node ended, a consequence of what ran inside
// it: when a later step differs too, that step is the divergence, so each
// variant of a sweep shows what it changed rather than the same node.
func TestDivergenceIsNotANodesOutcome(t *testing.T) {
	t.Parallel()
	node := func(prompt, answer, status, msg string) script {
		return func(b *trace.Builder) {
			b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "decide", Phase: trace.PhaseEnter}))
			b.LLM("fake", "fake-1", map[string]any{"system": prompt}, map[string]any{"content": answer})
			b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "decide", Phase: trace.PhaseExit, Status: status, Error: msg}))
			b.RunEnd(trace.RunCompleted, nil)
		}
	}
	base := build(t, "a", node("Refund.", "refund", trace.NodeStatusFail, "over the limit"))
	tests := []struct {
		name    string
		variant script
		want    string
		index   int
	}{
		{"prompt changed inside the node", node("Escalate.", "escalate", trace.NodeStatusOK, ""),
			`steps 2–3: llm 'fake/fake-1' changed: input.system "Refund." → "Escalate." (+1 more)`, 1},
		{"only the outcome changed", node("Refund.", "refund", trace.NodeStatusOK, ""),
			`step 1: node 'decide' changed: error "over the limit" → (absent) (+1 more)`, 0},
	}
	for _, tt := range tests {
		d := Runs(base, build(t, "b", tt.variant))
		if d.Divergence == nil || d.Divergence.Index != tt.index || d.Divergence.String() != tt.want {
			t.Errorf("%s: divergence %v at #%d, want %q at #%d", tt.name, d.Divergence, d.Divergence.Index, tt.want, tt.index)
		}
		if d.Steps[0].Kind != Changed {
			t.Errorf("%s: the node's step is %s, want changed (it is still listed)", tt.name, d.Steps[0].Kind)
		}
	}
	// A node entered only in the variant is a divergence of its own.
	added := build(t, "c", func(b *trace.Builder) {
		b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "review", Phase: trace.PhaseEnter}))
		b.Add(trace.MarkerEvent(trace.Marker{Key: trace.MarkerNode, Name: "review", Phase: trace.PhaseExit, Status: trace.NodeStatusOK}))
		node("Escalate.", "escalate", trace.NodeStatusOK, "")(b)
	})
	if d := Runs(base, added); d.Divergence.Kind != Added || d.Divergence.Variant.Label != "review" {
		t.Errorf("added node: divergence %v", d.Divergence)
	}
}

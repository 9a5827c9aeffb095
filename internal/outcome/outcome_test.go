package outcome

import (
	"strings"
	"testing"

	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

func run(t *testing.T, id string, f func(b *trace.Builder)) *trace.Trace {
	t.Helper()
	b := trace.NewBuilder("agent").RunID(id)
	b.RunStart(nil)
	f(b)
	tr, err := b.Trace()
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A summary says what the variant did that the base did not: its first
// divergence, its output cut around where it differs, and the tool calls
// it made more or fewer of.
func TestOf(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("The policy allows refunds. ", 10)
	base := run(t, "run_a", func(b *trace.Builder) {
		b.Tool("lookup", "o_1", 250)
		b.Tool("issue_refund", 250, "ok")
		b.RunEnd(trace.RunCompleted, map[string]any{"note": long + "Refunded."})
	})
	variant := run(t, "run_b", func(b *trace.Builder) {
		b.Tool("lookup", "o_1", 250)
		b.Tool("request_approval", 250, "t_1")
		b.Tool("notify", "c_1", "sent")
		b.Tool("notify", "c_2", "sent")
		b.RunEnd(trace.RunCompleted, map[string]any{"note": long + "Escalated."})
	})
	s := Of(diff.Runs(base, variant), nil)
	if s.Equivalent || s.SameOutput {
		t.Fatalf("summary %+v", s)
	}
	if want := "steps 3–4: tool 'issue_refund' became tool 'request_approval'"; s.Divergence != want {
		t.Errorf("Divergence %q, want %q", s.Divergence, want)
	}
	if !strings.Contains(s.Output, "Escalated.") || !strings.Contains(s.BaseOutput, "Refunded.") || !strings.HasPrefix(s.Output, "…") || len([]rune(s.Output)) > Width+2 {
		t.Errorf("the outputs are not cut around where they differ: %q / %q", s.Output, s.BaseOutput)
	}
	if got, want := s.ToolsText(), "+request_approval +notify ×2 -issue_refund"; got != want {
		t.Errorf("ToolsText %q, want %q", got, want)
	}
	same := Of(diff.Runs(base, base), nil)
	if !same.Equivalent || !same.SameOutput || same.Divergence != "" || same.ToolsText() != "" {
		t.Errorf("the base against itself: %+v", same)
	}
}

// Write lays out a block per variant and a total that is the sum of the
// costs shown (three calls of $0.0000149 each showed a total of $0.0001
// next to three costs of $0.0000).
func TestWrite(t *testing.T) {
	t.Parallel()
	base := run(t, "run_a", func(b *trace.Builder) { b.Fail("PolicyViolation", "over the limit") })
	ok := run(t, "run_b", func(b *trace.Builder) {
		b.Tool("request_approval", 250, "t_1")
		b.RunEnd(trace.RunCompleted, "awaiting approval")
	})
	rows := []Row{
		RowOf("control", nil, []Sample{{Status: "failed", Cost: 0.0000149}}, diff.Runs(base, base), nil),
		RowOf("approval", []string{"prompt of 'decide'"}, []Sample{{Status: "completed", Cost: 0.0000149}}, diff.Runs(base, ok), nil),
		RowOf("sampled", []string{"temperature of '*' → 0.9"}, []Sample{{Status: "completed", Cost: 0.0000149}, {Status: "failed", Cost: 0.0000149}, {}}, diff.Runs(base, ok), nil),
		{Name: "broken", Err: "the agent panicked"},
	}
	rows[1].Score = ScoreText(1, 1, 1, 1, 0)
	var b strings.Builder
	Write(&b, "sweep of base at step 1: 4 variant(s)", rows)
	want := `sweep of base at step 1: 4 variant(s)
  control   failed         $0.000015  none (the control)
      behaved as the base
  approval  completed      $0.000015  prompt of 'decide'
      diverged  steps 1–2 (base step 1): error 'PolicyViolation' became tool 'request_approval'
      output    "awaiting approval" (base: null)
      tools     +request_approval
      score     1.00 (base 0.00, +1.00)
  sampled   1/3 completed  $0.00003   temperature of '*' → 0.9
      diverged  steps 1–2 (base step 1): error 'PolicyViolation' became tool 'request_approval'
      output    "awaiting approval" (base: null)
      tools     +request_approval
      samples   3: 1 completed, 1 failed, 1 not run; mean $0.000015 each
  broken    error: the agent panicked
  total                    $0.00006
`
	if got := b.String(); got != want {
		t.Errorf("Write:\n%s\nwant:\n%s", got, want)
	}
}

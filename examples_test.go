package stepfork_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// The examples run a small refund desk: it looks an order up, asks a model
// what to do, and either issues the refund or leaves it for a person to
// approve. The payment system refuses automatic refunds above 100 USD.
//
// The model is a deterministic fake that reads its system prompt, so every
// run of the examples prints the same thing. The traces they read are
// committed under testdata/ and recorded from this very agent by
// TestExampleTraces (STEPFORK_REGEN=1 records them again).
//
//	testdata/example-refund-small.sftrace     40 USD, refunded
//	testdata/example-refund-failure.sftrace   250 USD, the payment system refuses: a failed run
//	testdata/example-refund-approval.sftrace  250 USD with the approval prompt: awaiting approval

// RefundRequest is the desk's input.
type RefundRequest struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

// Order is what get_order returns.
type Order struct {
	OrderID  string  `json:"order_id"`
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

// Receipt is what issue_refund returns.
type Receipt struct {
	RefundID string `json:"refund_id"`
}

// Outcome is the desk's output.
type Outcome struct {
	Status   string `json:"status"`
	RefundID string `json:"refund_id,omitempty"`
}

// PaymentRefused is the payment system's refusal of a refund above its
// automatic limit.
type PaymentRefused struct{ Amount float64 }

func (e *PaymentRefused) Error() string {
	return fmt.Sprintf("payment system refused an automatic refund of %.2f USD", e.Amount)
}

// The system prompts of the "resolve" node: the one the desk shipped with,
// and the fix.
const (
	shippedPrompt  = "You resolve refund requests. Do what the customer asks."
	approvalPrompt = "You resolve refund requests. Refunds above the policy limit need approval."
)

// desk is the agent and the world it touches. The counters say what really
// executed: a frozen replay leaves them alone.
type desk struct {
	Agent         replay.Agent
	tools, models atomic.Int64
}

// newDesk returns a refund desk whose "resolve" node uses prompt.
func newDesk(prompt string) *desk {
	d := &desk{}
	getOrder := replay.Tool("get_order", func(_ context.Context, id string) (Order, error) {
		d.tools.Add(1)
		amounts := map[string]float64{"o_1001": 40, "o_1842": 250}
		return Order{OrderID: id, Amount: amounts[id], Customer: "c_77"}, nil
	})
	issueRefund := replay.Tool("issue_refund", func(_ context.Context, o Order) (Receipt, error) {
		d.tools.Add(1)
		if o.Amount > 100 {
			return Receipt{}, &PaymentRefused{Amount: o.Amount}
		}
		return Receipt{RefundID: "rf_" + o.OrderID}, nil
	})
	d.Agent = replay.Typed(func(ctx context.Context, in RefundRequest) (Outcome, error) {
		var order Order
		err := replay.Node(ctx, "lookup", func(ctx context.Context) error {
			var err error
			order, err = getOrder(ctx, in.OrderID)
			return err
		})
		if err != nil {
			return Outcome{}, err
		}
		var out Outcome
		err = replay.Node(ctx, "resolve", func(ctx context.Context) error {
			limit := replay.Param(ctx, "policy_limit", 100.0)
			resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "desk-1", System: prompt,
				Messages: []replay.Message{{Role: "user", Content: fmt.Sprintf(
					"Refund %.2f USD for order %s (policy limit %.2f USD).", order.Amount, order.OrderID, limit)}}},
				d.model)
			if err != nil {
				return err
			}
			action := replay.Decide(ctx, "action", resp.Content)
			if err := replay.Set(ctx, "action", action); err != nil {
				return err
			}
			if action == "escalate" {
				out = Outcome{Status: "awaiting_approval"}
				return nil
			}
			receipt, err := issueRefund(ctx, order)
			if err != nil {
				return err
			}
			out = Outcome{Status: "refunded", RefundID: receipt.RefundID}
			return nil
		})
		return out, err
	})
	return d
}

// model is the fake model: it escalates when its prompt asks for approval
// above the limit and the amount is above it, and refunds otherwise.
func (d *desk) model(_ context.Context, req replay.Request) (replay.Response, error) {
	d.models.Add(1)
	var amount, limit float64
	var order string
	fmt.Sscanf(req.Messages[0].Content, "Refund %f USD for order %s (policy limit %f USD).", &amount, &order, &limit)
	content := "refund"
	if strings.Contains(req.System, "approval") && amount > limit {
		content = "escalate"
	}
	return replay.Response{Model: req.Model, Content: content,
		Usage: replay.Usage{PromptTokens: 60, CompletionTokens: 2, TotalTokens: 62, CostUSD: 0.0004}}, nil
}

// executions is how many tool and model calls really ran.
func (d *desk) executions() int64 { return d.tools.Load() + d.models.Load() }

func mustLoad(path string) *trace.Trace {
	tr, err := trace.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	return tr
}

// Record a run, then replay it frozen: the replay serves every tool and model
// result from the recording and executes nothing.
func Example_recordAndReplay() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "stepfork-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	d := newDesk(shippedPrompt)
	rec, err := replay.Record(ctx, "refund-desk", RefundRequest{OrderID: "o_1001", Amount: 40}, d.Agent,
		replay.SaveTo(filepath.Join(dir, "small.sftrace")))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("recorded:", rec.Trace.Status, "with", len(rec.Trace.Events), "events,", d.executions(), "calls executed")

	// The same run, committed to testdata/ earlier: it behaves the same.
	committed := mustLoad("testdata/example-refund-small.sftrace")
	fmt.Println("same behavior as the committed trace:", diff.Runs(committed, rec.Trace).Equivalent())

	// Replay the committed trace: nothing executes.
	before := d.executions()
	res, err := replay.Replay(ctx, committed, d.Agent)
	if err != nil {
		log.Fatal(err) // a divergence, naming its step
	}
	fmt.Printf("replayed: output %+v, %d served, %d executed, %d calls executed\n",
		res.Output, res.Served, res.Executed, d.executions()-before)
	// Output:
	// recorded: completed with 15 events, 3 calls executed
	// same behavior as the committed trace: true
	// replayed: output {Status:refunded RefundID:rf_o_1001}, 3 served, 0 executed, 0 calls executed
}

// Fork the failed run at the payment system's answer and override it: what
// if the refund had gone through? The fork is a new bundle with provenance;
// a frozen replay of it serves the override, and the desk completes.
func Example_forkAtStepWithOverride() {
	ctx := context.Background()
	base := mustLoad("testdata/example-refund-failure.sftrace")
	res, err := fork.Trace(base, fork.ThroughStep(12), fork.Override(fork.OnStep(12), Receipt{RefundID: "rf_manual_7"}))
	if err != nil {
		log.Fatal(err)
	}
	ev := res.Trace.Events[12]
	fmt.Println("fork keeps", res.ForkedEventCount, "of", res.OriginalEventCount, "events, up to", res.Info.ForkPointEventID)
	fmt.Println("step 12:", ev.Type, ev.Name, ev.Status, ev.Output)

	d := newDesk(shippedPrompt)
	rep, err := replay.Replay(ctx, res.Trace, d.Agent)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("replayed fork: output %+v, %d calls executed\n", rep.Output, d.executions())
	// Output:
	// fork keeps 13 of 17 events, up to evt_013
	// step 12: tool_result issue_refund ok {"refund_id":"rf_manual_7"}
	// replayed fork: output {Status:refunded RefundID:rf_manual_7}, 0 calls executed
}

// Fork the failed run where it failed and change the prompt of the node that
// decides: the recorded lookup is served, the "resolve" node runs again with
// the new prompt, and the desk asks for approval instead of refunding.
func Example_counterfactualPrompt() {
	ctx := context.Background()
	base := mustLoad("testdata/example-refund-failure.sftrace")
	d := newDesk(shippedPrompt)

	v, err := fork.Run(ctx, base, fork.Failure(), d.Agent, fork.Prompt("resolve", approvalPrompt))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fork point:", v.At)
	fmt.Println("status:    ", v.Status, "(base:", base.Status+")")
	fmt.Printf("output:     %+v\n", v.Output)
	fmt.Println("change:    ", v.Changes[0].Description, "applied", v.Changes[0].Applied, "time(s)")
	fmt.Println("live calls:", v.LiveModelCalls, "model,", v.LiveToolCalls, "tool; cost", v.IncurredCost, "USD")
	fmt.Println("diverged:  ", v.Diff.Divergence)
	// Output:
	// fork point: step 5 (before the failing node ('resolve', execution 1))
	// status:     completed (base: failed)
	// output:     {Status:awaiting_approval RefundID:}
	// change:     prompt of 'resolve' applied 1 time(s)
	// live calls: 1 model, 0 tool; cost 0.0004 USD
	// diverged:   steps 7–8: llm 'fake/desk-1' changed: input.system "You resolve refund requests. Do what the customer asks." → "You resolve refund requests. Refunds above the policy limit need approval." (+1 more)
}

// Sweep three variants at the failure point. Raising the policy limit does
// not help: the model refunds again, the side-effect guard serves the
// recorded issue_refund call instead of executing it, and that call was
// refused.
func Example_sweep() {
	ctx := context.Background()
	base := mustLoad("testdata/example-refund-failure.sftrace")
	d := newDesk(shippedPrompt)

	sweep, err := fork.Each(ctx, base, fork.Failure(), d.Agent, []fork.Named{
		{Name: "approval-prompt", Changes: []fork.Change{fork.Prompt("resolve", approvalPrompt)}},
		{Name: "higher-limit", Changes: []fork.Change{fork.Param("policy_limit", 500.0)}},
		{Name: "force-escalate", Changes: []fork.Change{fork.Decision("action", "escalate")}},
	}, fork.Memoize())
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range sweep.Entries {
		v := e.Variant
		fmt.Printf("%-16s %-10s output %+v, %d live model call(s), %d tool call(s) replayed\n",
			e.Name, v.Status, v.Output, v.LiveModelCalls, len(v.Replayed))
	}
	fmt.Println("tools executed:", d.tools.Load())
	fmt.Println(sweep.Explain())
	// Output:
	// approval-prompt  completed  output {Status:awaiting_approval RefundID:}, 1 live model call(s), 0 tool call(s) replayed
	// higher-limit     failed     output {Status: RefundID:}, 1 live model call(s), 1 tool call(s) replayed
	// force-escalate   completed  output {Status:awaiting_approval RefundID:}, 0 live model call(s), 0 tool call(s) replayed
	// tools executed: 0
	// sweep of exampl… at step 5 (before the failing node ('resolve', execution 1)): 3 variant(s)
	//   approval-prompt  completed  $0.0004  prompt of 'resolve'
	//       diverged  steps 7–8: llm 'fake/desk-1' changed: input.system "You resolve refund requests. Do what the customer asks." → "You resolve refund requests. Refunds above the policy limit need approval." (+1 more)
	//       output    {"status":"awaiting_approval"} (base: null)
	//       tools     -issue_refund
	//   higher-limit     failed     $0.0004  param 'policy_limit' → 500.0
	//       diverged  step 6: param 'policy_limit' changed: value 100.0 → 500.0
	//       output    as in the base
	//   force-escalate   completed  $0.00    decision 'action' → "escalate"
	//       diverged  step 9: decision 'action' changed: value "refund" → "escalate"
	//       output    {"status":"awaiting_approval"} (base: null)
	//       tools     -issue_refund
	//   total                       $0.0008
}

// Diff the failed run with the run recorded after the prompt was fixed:
// aligned behavior steps, the first divergence, state and cost deltas.
func Example_diff() {
	base := mustLoad("testdata/example-refund-failure.sftrace")
	fixed := mustLoad("testdata/example-refund-approval.sftrace")

	d := diff.Runs(base, fixed)
	fmt.Println(d.Explain())
	// Output:
	// behavior changed: 5 changed, 0 added, 3 removed, 3 unchanged (11 steps, LCS)
	//   status    completed          was failed
	//   diverged  steps 7–8: llm 'fake/desk-1' changed: input.system "You resolve refund requests. Do what the customer asks." → "You resolve refund requests. Refunds above the policy limit need approval." (+1 more)
	//   path      node:lookup → tool:get_order → ~node:resolve → param:policy_limit → ~llm:fake/desk-1 → ~decision:action → ~state:action → -tool:issue_refund → -error:stepfork_test.PaymentRefused → -error:stepfork_test.PaymentRefused → ~run
	//                                                                                 ^ diverged here
	//   ~ #2      node resolve (base #2 evt_006 step 5, variant #2 evt_006 step 5)
	//               error
	//                 expected: "payment system refused an automatic refund of 250.00 USD"
	//                 actual:   (absent)
	//               status
	//                 expected: "error"
	//                 actual:   "ok"
	//   ~ #4      llm fake/desk-1 (base #4 evt_008 steps 7–8, variant #4 evt_008 steps 7–8)
	//               input.system
	//                 expected: "You resolve refund requests. Do what the customer asks."
	//                 actual:   "You resolve refund requests. Refunds above the policy limit need approval."
	//               output.content
	//                 expected: "refund"
	//                 actual:   "escalate"
	//   ~ #5      decision action (base #5 evt_010 step 9, variant #5 evt_010 step 9)
	//               value
	//                 expected: "refund"
	//                 actual:   "escalate"
	//   ~ #6      state action (base #6 evt_011 step 10, variant #6 evt_011 step 10)
	//               after
	//                 expected: "refund"
	//                 actual:   "escalate"
	//   - #7      tool issue_refund (base #7 evt_012 steps 11–12)
	//   - #8      error stepfork_test.PaymentRefused (base #8 evt_014 step 13)
	//   - #9      error stepfork_test.PaymentRefused (base #9 evt_016 step 15)
	//   ~ #10     run run (base #10 evt_017 step 16, variant #7 evt_013 step 12)
	//               output
	//                 expected: null
	//                 actual:   {"status":"awaiting_approval"}
	//               run_status
	//                 expected: "failed"
	//                 actual:   "completed"
	//   state     ~action (+2B)
	//   tokens    +0 (62 → 62)
	//   cost      +$0.00 ($0.0004 → $0.0004)
}

// stableRun gives a recorded trace the ids and times of a generated one
// (run_NAME, evt_001, evt_002, …, one millisecond per step from a fixed
// instant), so that recording the example traces again rewrites the same
// bytes and the examples print readable ids.
func stableRun(tr *trace.Trace, name string) {
	start := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	tr.RunID = "run_example_" + strings.ReplaceAll(name, "-", "_")
	tr.CreatedAt = start
	ids := make(map[string]string, len(tr.Events))
	for i := range tr.Events {
		ids[tr.Events[i].ID] = fmt.Sprintf("evt_%03d", i+1)
	}
	for i := range tr.Events {
		ev := &tr.Events[i]
		ev.ID, ev.RunID, ev.ParentID = ids[ev.ID], tr.RunID, ids[ev.ParentID]
		ev.Timestamp = start.Add(time.Duration(ev.Step) * time.Millisecond)
		if ev.DurationMS != nil {
			ev.DurationMS = new(int64(1))
		}
	}
	if tr.Totals.DurationMS != nil {
		tr.Totals.DurationMS = new(int64(len(tr.Events)))
	}
}

// exampleTraces are the traces the examples read, and how each is recorded.
var exampleTraces = []struct {
	name   string
	prompt string
	input  RefundRequest
}{
	{"example-refund-small", shippedPrompt, RefundRequest{OrderID: "o_1001", Amount: 40}},
	{"example-refund-failure", shippedPrompt, RefundRequest{OrderID: "o_1842", Amount: 250}},
	{"example-refund-approval", approvalPrompt, RefundRequest{OrderID: "o_1842", Amount: 250}},
}

// TestExampleTraces records the traces of the examples with
// STEPFORK_REGEN=1 (go test -run TestExampleTraces . with it set), and
// otherwise checks that the committed ones are still what the desk does: a
// new recording behaves the same, and a frozen replay reproduces each
// without executing anything.
func TestExampleTraces(t *testing.T) {
	regen := os.Getenv("STEPFORK_REGEN") == "1"
	for _, tt := range exampleTraces {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join("testdata", tt.name+".sftrace")
			d := newDesk(tt.prompt)
			rec, err := replay.Record(t.Context(), "refund-desk", tt.input, d.Agent) // a failed run is recorded too
			if err != nil {
				t.Fatal(err)
			}
			if regen {
				stableRun(rec.Trace, strings.TrimPrefix(tt.name, "example-"))
				if err := rec.Trace.Save(path, trace.Overwrite()); err != nil {
					t.Fatal(err)
				}
				t.Logf("recorded %s", path)
			}
			committed, err := trace.Load(path)
			if err != nil {
				t.Fatalf("%v (record it with STEPFORK_REGEN=1 go test -run TestExampleTraces .)", err)
			}
			if d := diff.Runs(committed, rec.Trace); !d.Equivalent() {
				t.Errorf("the desk no longer behaves as %s records (STEPFORK_REGEN=1 records it again):\n%s", path, d.Explain())
			}
			before := d.executions()
			res, err := replay.Replay(t.Context(), committed, d.Agent)
			if err != nil {
				t.Fatalf("frozen replay of %s: %v", path, err)
			}
			if n := d.executions() - before; n != 0 || res.Executed != 0 {
				t.Errorf("frozen replay executed %d call(s) (result says %d); want none", n, res.Executed)
			}
		})
	}
}

// TestReadmeQuickStart keeps the test of README.md's "Quick start in a test"
// identical to examples/quickstart/refund_test.go, which the examples module
// runs: the README shows a test that passes.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("examples", "quickstart", "refund_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Quick start in a test\n")
	if !ok {
		t.Fatal(`README.md has no "## Quick start in a test" section`)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the quick start section of README.md has no ```go block")
	}
	block, _, _ = strings.Cut(block, "```\n")
	if block != string(want) {
		t.Errorf("README.md's quick start test differs from examples/quickstart/refund_test.go; copy one over the other:\n%s",
			cmp.Diff(string(want), block))
	}
}

// TestReadmeCLITool keeps README.md's way of using the CLI from another
// module right: the command it names is this module's main package.
func TestReadmeCLITool(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module, _, _ := strings.Cut(strings.TrimPrefix(string(mod), "module "), "\n")
	for _, want := range []string{"go get -tool " + module + "/cmd/stepfork\n", "go tool stepfork validate "} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
	main, err := os.ReadFile(filepath.Join("cmd", "stepfork", "main.go"))
	if err != nil || !strings.Contains(string(main), "\npackage main\n") {
		t.Errorf("cmd/stepfork is not a main package: %v", err)
	}
}

package fork_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// The examples fork runs of a small refund desk: it looks an order up
// (node "lookup"), asks a model what to do (node "resolve"), and either
// issues the refund or leaves it for a person to approve. The payment
// system refuses automatic refunds above 100 USD, so the recorded run of a
// 250 USD refund failed. The model is a deterministic fake that reads its
// system prompt.

type request struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

type order struct {
	OrderID  string  `json:"order_id"`
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

type receipt struct {
	RefundID string `json:"refund_id"`
}

type outcome struct {
	Status   string `json:"status"`
	RefundID string `json:"refund_id,omitempty"`
}

type refused struct{ amount float64 }

func (e *refused) Error() string {
	return fmt.Sprintf("payment system refused an automatic refund of %.2f USD", e.amount)
}

// desk is the refund desk whose "resolve" node was shipped with the system
// prompt "You resolve refund requests. Do what the customer asks.".
var desk = deskWith("You resolve refund requests. Do what the customer asks.")

// deskWith is the refund desk with the system prompt of "resolve" as its
// code says.
func deskWith(system string) replay.Agent {
	return replay.Typed(func(ctx context.Context, in request) (outcome, error) {
		getOrder := replay.Tool("get_order", func(_ context.Context, id string) (order, error) {
			return order{OrderID: id, Amount: map[string]float64{"o_1001": 40, "o_1842": 250}[id], Customer: "c_77"}, nil
		})
		issueRefund := replay.Tool("issue_refund", func(_ context.Context, o order) (receipt, error) {
			if o.Amount > 100 {
				return receipt{}, &refused{o.Amount}
			}
			return receipt{RefundID: "rf_" + o.OrderID}, nil
		})
		var o order
		if err := replay.Node(ctx, "lookup", func(ctx context.Context) (err error) {
			o, err = getOrder(ctx, in.OrderID)
			return err
		}); err != nil {
			return outcome{}, err
		}
		var out outcome
		err := replay.Node(ctx, "resolve", func(ctx context.Context) error {
			limit := replay.Param(ctx, "policy_limit", 100.0)
			resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "desk-1",
				System: system,
				Messages: []replay.Message{{Role: "user", Content: fmt.Sprintf(
					"Refund %.2f USD for order %s (policy limit %.2f USD).", o.Amount, o.OrderID, limit)}}},
				model)
			if err != nil {
				return err
			}
			action := replay.Decide(ctx, "action", resp.Content)
			if err := replay.Set(ctx, "action", action); err != nil {
				return err
			}
			if action == "escalate" {
				out = outcome{Status: "awaiting_approval"}
				return nil
			}
			r, err := issueRefund(ctx, o)
			if err != nil {
				return err
			}
			out = outcome{Status: "refunded", RefundID: r.RefundID}
			return nil
		})
		return out, err
	})
}

// model escalates when its prompt asks for approval above the limit and the
// amount is above it, and refunds otherwise.
func model(_ context.Context, req replay.Request) (replay.Response, error) {
	var amount, limit float64
	var id string
	fmt.Sscanf(req.Messages[0].Content, "Refund %f USD for order %s (policy limit %f USD).", &amount, &id, &limit)
	content := "refund"
	if strings.Contains(req.System, "approval") && amount > limit {
		content = "escalate"
	}
	return replay.Response{Model: req.Model, Content: content,
		Usage: replay.Usage{PromptTokens: 60, CompletionTokens: 2, TotalTokens: 62, CostUSD: 0.0004}}, nil
}

// Fork the failed run where it failed and change the prompt of the node
// that decides: the recorded lookup is served, "resolve" runs again with
// the new prompt, and the desk asks for approval instead of refunding.
func ExampleRun() {
	base, err := trace.Load("../testdata/example-refund-failure.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	v, err := fork.Run(context.Background(), base, fork.Failure(), desk,
		fork.Prompt("resolve", "You resolve refund requests. Refunds above the policy limit need approval."))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fork point:", v.At)
	fmt.Println("status:    ", v.Status, "(base:", base.Status+")")
	fmt.Printf("output:     %+v\n", v.Output)
	fmt.Println("change:    ", v.Changes[0].Description, "applied", v.Changes[0].Applied, "time(s)")
	fmt.Println("live calls:", v.LiveModelCalls, "model,", v.LiveToolCalls, "tool")
	// Output:
	// fork point: step 5 (before the failing node ('resolve', execution 1))
	// status:     completed (base: failed)
	// output:     {Status:awaiting_approval RefundID:}
	// change:     prompt of 'resolve' applied 1 time(s)
	// live calls: 1 model, 0 tool
}

// Sweep three variants at the failure point, each changing one thing.
// Raising the policy limit does not help: the model refunds again, and the
// side-effect guard serves the recorded issue_refund call (which was
// refused) instead of executing it.
func ExampleEach() {
	base, err := trace.Load("../testdata/example-refund-failure.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	sweep, err := fork.Each(context.Background(), base, fork.Failure(), desk, []fork.Named{
		{Name: "approval-prompt", Changes: []fork.Change{
			fork.Prompt("resolve", "You resolve refund requests. Refunds above the policy limit need approval.")}},
		{Name: "higher-limit", Changes: []fork.Change{fork.Param("policy_limit", 500.0)}},
		{Name: "force-escalate", Changes: []fork.Change{fork.Decision("action", "escalate")}},
	}, fork.Memoize(), fork.Concurrency(2))
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range sweep.Entries {
		v := e.Variant
		fmt.Printf("%-16s %-10s %+v, %d tool call(s) replayed\n", e.Name, v.Status, v.Output, len(v.Replayed))
	}
	// Output:
	// approval-prompt  completed  {Status:awaiting_approval RefundID:}, 0 tool call(s) replayed
	// higher-limit     failed     {Status: RefundID:}, 1 tool call(s) replayed
	// force-escalate   completed  {Status:awaiting_approval RefundID:}, 0 tool call(s) replayed
}

// Keep the 15-event booking-agent failure through step 2, as
// `stepfork fork failure.sftrace --at-step 2` does.
func ExampleTrace() {
	dir, err := os.MkdirTemp("", "fork-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	res, err := fork.Trace("../testdata/booking-agent.sftrace", fork.ThroughStep(2),
		fork.SaveTo(filepath.Join(dir, "failure-forked.sftrace")))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Original Events ", res.OriginalEventCount)
	fmt.Println("Forked Events   ", res.ForkedEventCount)
	fmt.Println("Fork Point Step ", res.Info.ForkPointStep)
	fmt.Println("Fork Point Event", res.Info.ForkPointEventID)
	fmt.Println("Saved to        ", filepath.Base(res.Path))
	// Output:
	// Original Events  15
	// Forked Events    3
	// Fork Point Step  2
	// Fork Point Event evt_003
	// Saved to         failure-forked.sftrace
}

// What if the booking had gone through? Override the failed tool result at
// step 11 and keep the run through it.
func ExampleOverride() {
	tr, err := trace.Load("../testdata/booking-agent.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	res, err := fork.Trace(tr, fork.ThroughStep(11),
		fork.Override(fork.OnStep(11), map[string]any{"confirmation": "PNR-7QX2"}))
	if err != nil {
		log.Fatal(err)
	}
	ev := res.Trace.Events[11]
	fmt.Println(ev.Type, ev.Name, ev.Status, ev.Output)
	fmt.Println("overrides applied:", res.Info.OverridesApplied)
	// Output:
	// tool_result book_flight ok {"confirmation":"PNR-7QX2"}
	// overrides applied: 1
}

// Invalid overrides are refused before anything is written.
func ExampleOverride_invalid() {
	tr, err := trace.Load("../testdata/booking-agent.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	_, err = fork.Trace(tr, fork.ThroughStep(5), fork.Override(fork.OnStep(3), map[string]any{}))
	fmt.Println(err)
	// Output:
	// invalid overrides: override targets step 3 (tool_call); only tool_result and llm_response can be overridden
}

// A fork of a fork remembers every generation.
func ExampleReadInfo() {
	tr, err := trace.Load("../testdata/booking-agent.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	first, err := fork.Trace(tr, fork.ThroughStep(9))
	if err != nil {
		log.Fatal(err)
	}
	second, err := fork.Trace(first.Trace, fork.ThroughStep(4))
	if err != nil {
		log.Fatal(err)
	}
	info, err := fork.ReadInfo(second.Trace)
	if err != nil {
		log.Fatal(err)
	}
	chain := info.Chain()
	fmt.Println(len(chain), "runs, back to", chain[len(chain)-1])
	fmt.Println(info.Ancestors[0].ForkPoint, "then", info.ForkPoint)
	// Output:
	// 3 runs, back to run_booking_agent_0001
	// step 9 then step 4
}

// Append a sentence to the shipped prompt instead of restating it: the
// request of the "resolve" model call gets the prompt with the sentence at
// its end, in the field its API reads.
func ExamplePromptAppend() {
	base, err := trace.Load("../testdata/example-refund-failure.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	v, err := fork.Run(context.Background(), base, fork.Failure(), desk,
		fork.PromptAppend("resolve", " Refunds above the policy limit need approval."))
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range v.Trace.Events {
		if ev.Type == trace.LLMRequest && ev.Step >= v.At.Step {
			fmt.Println("system:", ev.Input.Get("system"))
		}
	}
	fmt.Println("status:", v.Status)
	fmt.Println("change:", v.Changes[0].Description, "applied", v.Changes[0].Applied, "time(s)")
	fmt.Println("wire:  ", v.Changes[0].Change.Wire())
	// Output:
	// system: "You resolve refund requests. Do what the customer asks. Refunds above the policy limit need approval."
	// status: completed
	// change: prompt of 'resolve' (appended to) applied 1 time(s)
	// wire:   {"kind":"prompt_edit","op":"append","target":"resolve","text":" Refunds above the policy limit need approval."}
}

// Heal the recorded run after the prompt of "resolve" was edited in the
// code: a dry run first says where the tail starts and what it would cost,
// without running anything live; then the heal serves the recorded lookup,
// runs the edited model call live, and classes the new run against the
// recording, the edit declared as intended.
func ExampleHeal() {
	base, err := trace.Load("../testdata/example-refund-failure.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	edit := fork.Prompt("resolve", "You resolve refund requests. Refunds above the policy limit need approval.")
	dry, err := fork.Heal(context.Background(), base, desk, edit, fork.DryRun())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("dry run:    tail from %s, ~$%.4f over %d model call(s)\n", dry.FirstLive, dry.Estimate.CostUSD, dry.Estimate.ModelCalls)
	v, err := fork.Heal(context.Background(), base, desk, edit, fork.Budget(0.01))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("class:     ", v.Class)
	fmt.Println("live calls:", v.LiveModelCalls, "model,", v.LiveToolCalls, "tool")
	fmt.Println("provenance:", v.Info.Kind, "of", v.Info.ParentRunID)
	// Output:
	// dry run:    tail from model call 'fake/desk-1' at step 7, ~$0.0004 over 1 model call(s)
	// class:      repaired
	// live calls: 1 model, 0 tool
	// provenance: heal of run_example_refund_failure
}

// Mark the system prompt as code: after an edit of the prompt in the code,
// a request that differs from the recording only there is an intended
// change, not a regression, as long as the model answers the same.
func ExampleCodeFields() {
	base, err := trace.Load("../testdata/example-refund-failure.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	edited := deskWith("You resolve refund requests. Do what the customer asks. Be brief.")
	v, err := fork.Heal(context.Background(), base, edited, fork.CodeFields(fork.All, "system"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("class:", v.Class)
	for _, s := range v.Diff.Steps {
		if s.Intended != "" {
			fmt.Printf("step %d: intended: %s\n", s.Variant.Step, s.Intended)
		}
	}
	// Output:
	// class: intended
	// step 7: intended: code fields system of '*'
}

package sftest_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
)

// The refund agent of the tests: it looks an order up, asks a model what to
// do, and issues the refund, which the payment system refuses above its
// limit. testdata/refund-failure.sftrace is its recorded failure (recorded
// by TestRecordRefund with go test -run TestRecordRefund
// -stepfork.record=refund-failure).

// refundAgent is the agent and the world it touches; the counters say what
// really executed.
type refundAgent struct {
	Agent                   replay.Agent
	tools, models, refunded atomic.Int64
}

var refund = newRefundAgent()

// refundInput is the recorded request.
var refundInput = RefundRequest{OrderID: "o_1842", Amount: 250}

type RefundRequest struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

type Order struct {
	OrderID  string  `json:"order_id"`
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

type RefundReceipt struct {
	RefundID string `json:"refund_id"`
}

type RefundOutcome struct {
	Status   string `json:"status"`
	RefundID string `json:"refund_id,omitempty"`
}

// PolicyViolation is the payment system's refusal.
type PolicyViolation struct{ Amount float64 }

func (e *PolicyViolation) Error() string {
	return fmt.Sprintf("refund of %.2f USD exceeds the automatic refund limit", e.Amount)
}

// model is a deterministic fake chat model that reads its system prompt:
// when the prompt speaks of approval it asks for approval, otherwise it
// refunds.
func (r *refundAgent) model(_ context.Context, req replay.Request) (replay.Response, error) {
	r.models.Add(1)
	content := "issue_refund"
	if strings.Contains(strings.ToLower(req.System), "approval") {
		content = "request_approval"
	}
	return replay.Response{Model: req.Model, Content: content,
		Usage: replay.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CostUSD: 0.002}}, nil
}

func newRefundAgent() *refundAgent {
	r := &refundAgent{}
	getOrder := replay.Tool("get_order", func(_ context.Context, id string) (Order, error) {
		r.tools.Add(1)
		if strings.HasSuffix(id, "-small") {
			return Order{OrderID: id, Amount: 60, Customer: "c_12"}, nil
		}
		return Order{OrderID: id, Amount: 250, Customer: "c_77"}, nil
	})
	issue := replay.Tool("issue_refund", func(_ context.Context, o Order) (RefundReceipt, error) {
		r.tools.Add(1)
		if o.Amount > 100 {
			return RefundReceipt{}, &PolicyViolation{Amount: o.Amount}
		}
		r.refunded.Add(1)
		return RefundReceipt{RefundID: "rf_" + o.OrderID}, nil
	})
	r.Agent = replay.Typed(func(ctx context.Context, in RefundRequest) (RefundOutcome, error) {
		var order Order
		err := replay.Node(ctx, "lookup", func(ctx context.Context) error {
			var err error
			order, err = getOrder(ctx, in.OrderID)
			return err
		})
		if err != nil {
			return RefundOutcome{}, err
		}
		limit := replay.Param(ctx, "policy_limit", 100.0)
		var out RefundOutcome
		err = replay.Node(ctx, "decide", func(ctx context.Context) error {
			resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "fake-1",
				System: "You handle refunds. Do what the customer asks.",
				Messages: []replay.Message{{Role: "user", Content: fmt.Sprintf(
					"Refund %.2f USD for order %s (policy limit %.2f USD).", order.Amount, order.OrderID, limit)}}}, r.model)
			if err != nil {
				return err
			}
			action := replay.Decide(ctx, "action", resp.Content)
			if err := replay.Set(ctx, "decision", action); err != nil {
				return err
			}
			if action == "request_approval" {
				out = RefundOutcome{Status: "awaiting_approval"}
				return nil
			}
			receipt, err := issue(ctx, order)
			if err != nil {
				return err
			}
			out = RefundOutcome{Status: "refunded", RefundID: receipt.RefundID}
			return nil
		})
		return out, err
	})
	return r
}

// TestRecordRefund records testdata/refund-failure.sftrace with
// -stepfork.record=refund-failure, and otherwise checks that the agent still
// reproduces it.
func TestRecordRefund(t *testing.T) {
	tr := sftest.Record(t, "refund-failure", refundInput, refund.Agent)
	if tr.Status != "failed" || tr.Failure == nil || !strings.HasSuffix(tr.Failure.Type, "PolicyViolation") {
		t.Fatalf("the recorded run should fail with PolicyViolation: status %s, failure %+v", tr.Status, tr.Failure)
	}
	assert.ToolCalled(t, tr, "issue_refund")
	assert.ToolFailed(t, tr, "issue_refund")
}

// The product test: the recorded refund failed; with the approval policy in
// the decide prompt the agent asks for approval instead.
func TestRefundNeedsApproval(t *testing.T) {
	base := sftest.Load(t, "testdata/refund-failure.sftrace")
	v := sftest.Fork(t, base, fork.Failure(), refund.Agent,
		fork.Prompt("decide", "Refunds above the policy limit need approval."))
	assert.Completed(t, v)
	assert.ToolNotCalled(t, v, "issue_refund")
	sftest.Golden(t, v)
}

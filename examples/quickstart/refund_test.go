package refund_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
)

func TestRefundNeedsApproval(t *testing.T) {
	// Record a run: the model refunds 250 USD and the payment system refuses
	// (the agent's error is in rec.Err; err says whether recording failed).
	rec, err := replay.Record(t.Context(), "refund", 250.0, agent)
	if err != nil {
		t.Fatal(err)
	}

	// Fork it where it failed, with the fixed prompt: the tail runs again.
	v := sftest.Fork(t, rec.Trace, fork.Failure(), agent,
		fork.Prompt("decide", "Refunds above 100 USD need approval."))
	assert.Completed(t, v)
	assert.ToolNotCalled(t, v, "issue_refund")
	assert.OutputEqual(t, v, "awaiting approval")
}

// The agent under test (yours will be bigger): a model decides, a tool pays.
var agent = replay.Typed(func(ctx context.Context, amount float64) (string, error) {
	outcome := "awaiting approval"
	err := replay.Node(ctx, "decide", func(ctx context.Context) error {
		resp, err := replay.LLM(ctx, replay.Request{Model: "fake-model", System: "Refund what is asked.",
			Messages: []replay.Message{{Role: "user", Content: fmt.Sprintf("Refund %.2f USD.", amount)}}}, model)
		if err != nil || resp.Content == "escalate" {
			return err
		}
		outcome, err = issueRefund(ctx, amount)
		return err
	})
	return outcome, err
})

var issueRefund = replay.Tool("issue_refund", func(ctx context.Context, amount float64) (string, error) {
	if amount > 100 {
		return "", errors.New("payment system: refunds above 100 USD are refused")
	}
	return "refunded", nil
})

// model stands in for a model client: it escalates when told about approval.
func model(ctx context.Context, req replay.Request) (replay.Response, error) {
	if strings.Contains(req.System, "approval") {
		return replay.Response{Content: "escalate"}, nil
	}
	return replay.Response{Content: "refund"}, nil
}

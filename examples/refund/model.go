package refund

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
)

// decide asks the model for a decision, streaming the answer (a long answer
// shows progress in a UI; here it shows that streams are recorded and served
// frame by frame).
func (a *Agent) decide(ctx context.Context, req Request, order Order, policy Policy) (Decision, error) {
	user := fmt.Sprintf("Order %s: %s (%s), %.2f USD, delivered %d days ago, customer %s.\n"+
		"Policy %s: window %d days, automatic refund limit %.2f USD. %s\n"+
		"Customer message: %s",
		order.OrderID, order.Item, order.Category, order.Amount, order.DaysSince, order.Customer,
		policy.RuleID, policy.WindowDays, policy.AutoRefundLimit, policy.Text, req.Message)
	stream := a.client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: a.cfg.Model,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(DecidePrompt),
			openai.UserMessage(user),
		},
		Temperature:   openai.Float(0),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return Decision{}, fmt.Errorf("decide: model call: %w", err)
	}
	if len(acc.Choices) == 0 {
		return Decision{}, fmt.Errorf("decide: %w: the stream had no choices", ErrNotADecision)
	}
	return parseDecision(acc.Choices[0].Message.Content)
}

// parseDecision reads the first JSON object of the model's answer (models
// wrap it in prose or code fences more often than not).
func parseDecision(answer string) (Decision, error) {
	start, end := strings.Index(answer, "{"), strings.LastIndex(answer, "}")
	if start < 0 || end < start {
		return Decision{}, fmt.Errorf("decide: %w: no JSON object in %q", ErrNotADecision, shorten(answer, 120))
	}
	var d Decision
	if err := json.Unmarshal([]byte(answer[start:end+1]), &d); err != nil {
		return Decision{}, fmt.Errorf("decide: %w: %v in %q", ErrNotADecision, err, shorten(answer, 120))
	}
	d.Action = strings.ToLower(strings.TrimSpace(d.Action))
	return d, nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// reply asks the model to write the answer to the customer.
func (a *Agent) reply(ctx context.Context, req Request, order Order, out Outcome, dec Decision) (string, error) {
	outcome := out.Status
	switch out.Status {
	case "refunded":
		outcome = fmt.Sprintf("refunded %.2f USD (refund %s)", out.Amount, out.RefundID)
	case "awaiting_approval":
		outcome = fmt.Sprintf("escalated to the refunds team for approval (ticket %s)", out.Ticket)
	}
	resp, err := a.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: a.cfg.Model,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(ReplyPrompt),
			openai.UserMessage(fmt.Sprintf("Customer %s wrote about order %s (%s): %s\nOutcome: %s\nReason: %s",
				order.Customer, order.OrderID, order.Item, req.Message, outcome, dec.Reason)),
		},
		Temperature: openai.Float(0),
	})
	if err != nil {
		return "", fmt.Errorf("reply: model call: %w", err)
	}
	if len(resp.Choices) == 0 {
		return "", fmt.Errorf("reply: the model returned no choices")
	}
	return strings.TrimSpace(resp.Choices[0].Message.Content), nil
}

// Package refund is a refund-triage agent built the way agents are built in
// production — named phases, tools with real side effects, a person in the
// loop, and model calls through the official OpenAI Go SDK — and recorded,
// replayed and forked with stepfork.
//
// A customer asks for their money back. The agent runs four phases:
//
//	lookup  lookup_order and get_refund_policy (read-only tools)
//	decide  a streamed chat completion proposes refund, escalate or deny;
//	        the proposal is checked against the policy
//	act     refund: a person confirms (replay.Approve), then issue_refund
//	        appends a line to the refund ledger (a real side effect);
//	        escalate: request_approval files the case for the refunds team
//	reply   a chat completion writes the answer to the customer
//
// The model client's http.Client uses replay.Transport, so every model call
// is recorded and served like any tool call, and the endpoint comes from the
// usual environment variables (ConfigFromEnv): the same agent runs against
// OpenAI or any OpenAI-compatible server (Ollama, vLLM, llama.cpp).
//
//	agent := refund.New(refund.ConfigFromEnv())
//	out, err := agent.Handle(ctx, refund.Request{OrderID: "o_1842", Message: "The blender arrived broken."})
//
// Under test, Run is the replay.Agent that stepfork records and forks:
//
//	base := sftest.Load(t, "testdata/refund-failure.sftrace")
//	v := sftest.Fork(t, base, fork.Failure(), agent.Run,
//		fork.Prompt("decide", refund.ApprovalPrompt), fork.Allow("request_approval"))
//	assert.ToolNotCalled(t, v, "issue_refund")
package refund

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// The system prompts of the "decide" phase: the one the agent ships with, and
// the one that fixes its recorded failure (refunds above the policy limit go
// to a person).
const (
	DecidePrompt = "You triage refund requests for an online shop. " +
		"Refund what the customer asks when the order is eligible. " + answerFormat
	ApprovalPrompt = "You triage refund requests for an online shop. " +
		"Refunds above the policy limit need approval: escalate them. " + answerFormat
	ReplyPrompt = "You write short, friendly replies to customers of an online shop about their refund request. " +
		"State the outcome plainly; never promise what the outcome does not say."
)

// answerFormat ends the triage prompts: the shape of the answer.
const answerFormat = "Read the order, the refund policy and the customer's message, and answer with one JSON object: " +
	`{"action": "refund" | "escalate" | "deny", "amount": <USD>, "reason": "<one sentence>"}.`

// Environment variables read by ConfigFromEnv.
const (
	EnvBaseURL   = "OPENAI_BASE_URL"  // OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 for Ollama
	EnvAPIKey    = "OPENAI_API_KEY"   // never recorded: replay.Transport records no request header
	EnvModel     = "OPENAI_MODEL"     // default DefaultModel
	EnvLedger    = "REFUND_LEDGER"    // default "refund-ledger.tsv"
	EnvApprovals = "REFUND_APPROVALS" // default "refund-approvals.tsv"
)

// DefaultModel is the model used when OPENAI_MODEL is not set.
const DefaultModel = "gpt-4o-mini"

// Config is what the agent needs from its environment.
type Config struct {
	// BaseURL, APIKey and Model select the chat-completions endpoint; an
	// empty BaseURL is the SDK's default (api.openai.com).
	BaseURL, APIKey, Model string
	// LedgerPath is the file issue_refund appends a line to for every refund
	// paid; ApprovalsPath the file request_approval files cases in.
	LedgerPath, ApprovalsPath string
	// Orders is the order book lookup_order reads (nil: DemoOrders).
	Orders map[string]Order
	// Approver is the person who confirms a refund before it is paid.
	// Nil declines every refund ("no approver configured").
	Approver Approver
	// Transport sends the model requests that run live (nil:
	// http.DefaultTransport). The agent wraps it in replay.Transport.
	Transport http.RoundTripper
}

// ConfigFromEnv reads OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL,
// REFUND_LEDGER and REFUND_APPROVALS, with the defaults documented on the
// Env constants. It sets no Approver.
func ConfigFromEnv() Config {
	return Config{
		BaseURL:       os.Getenv(EnvBaseURL),
		APIKey:        os.Getenv(EnvAPIKey),
		Model:         envOr(EnvModel, DefaultModel),
		LedgerPath:    envOr(EnvLedger, "refund-ledger.tsv"),
		ApprovalsPath: envOr(EnvApprovals, "refund-approvals.tsv"),
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Request is a customer's refund request: the agent's input.
type Request struct {
	OrderID string `json:"order_id"`
	Message string `json:"message"`
}

// Outcome is what the agent did: its output.
type Outcome struct {
	// Status is "refunded", "awaiting_approval", "declined" (the person
	// said no) or "denied" (not eligible).
	Status   string  `json:"status"`
	Amount   float64 `json:"amount,omitempty"`
	RefundID string  `json:"refund_id,omitempty"`
	Ticket   string  `json:"ticket,omitempty"`
	Reply    string  `json:"reply"`
}

// Decision is the model's proposal in the "decide" phase.
type Decision struct {
	Action string  `json:"action"` // refund, escalate or deny
	Amount float64 `json:"amount"`
	Reason string  `json:"reason"`
}

// PolicyViolation is the error of a proposal the refund policy does not
// allow: a refund above the automatic limit, which needs a person.
type PolicyViolation struct {
	OrderID      string
	Amount, Max  float64
	PolicyRuleID string
}

func (e *PolicyViolation) Error() string {
	return fmt.Sprintf("decision violates refund policy %s: refund of %.2f USD for order %s is above the automatic limit of %.2f USD; escalate it for approval",
		e.PolicyRuleID, e.Amount, e.OrderID, e.Max)
}

// Prices are the list prices of the models the agent is tried with, in US
// dollars per million tokens: with them, what a live call of a fork costs
// shows in its Explain, golden file and page.
var Prices = replay.Prices{
	"gpt-4o-mini": {Input: 0.15, CachedInput: 0.075, Output: 0.60},
	"gpt-4.1":     {Input: 2, CachedInput: 0.5, Output: 8},
}

// Agent is the refund-triage agent. It is safe for concurrent use.
type Agent struct {
	cfg    Config
	client openai.Client
	run    replay.Agent

	lookupOrder     func(context.Context, OrderQuery) (Order, error)
	getPolicy       func(context.Context, PolicyQuery) (Policy, error)
	issueRefund     func(context.Context, RefundOrder) (Receipt, error)
	requestApproval func(context.Context, ApprovalRequest) (Ticket, error)
}

// New returns an agent configured by cfg.
func New(cfg Config) *Agent {
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.Orders == nil {
		cfg.Orders = DemoOrders()
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(&http.Client{Transport: replay.Transport(cfg.Transport, Prices)}),
		option.WithMaxRetries(0), // a retry is a new model call: let the caller decide
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	a := &Agent{cfg: cfg, client: openai.NewClient(opts...)}
	a.lookupOrder = replay.Tool("lookup_order", a.lookupOrderTool)
	a.getPolicy = replay.Tool("get_refund_policy", getRefundPolicy)
	a.issueRefund = replay.Tool("issue_refund", a.issueRefundTool)
	a.requestApproval = replay.Tool("request_approval", a.requestApprovalTool)
	a.run = replay.Typed(a.Handle)
	return a
}

// Run is the agent as a replay.Agent: its input is a Request as JSON, its
// output an Outcome. It is what tests record, replay and fork.
func (a *Agent) Run(ctx context.Context, input trace.Value) (any, error) {
	return a.run(ctx, input)
}

// Handle triages one refund request.
func (a *Agent) Handle(ctx context.Context, req Request) (Outcome, error) {
	var (
		order  Order
		policy Policy
		dec    Decision
		out    Outcome
	)
	err := replay.Node(ctx, "lookup", func(ctx context.Context) error {
		var err error
		if order, err = a.lookupOrder(ctx, OrderQuery{OrderID: req.OrderID}); err != nil {
			return err
		}
		if policy, err = a.getPolicy(ctx, PolicyQuery{Category: order.Category}); err != nil {
			return err
		}
		return replay.Set(ctx, "order", order)
	})
	if err != nil {
		return Outcome{}, err
	}
	err = replay.Node(ctx, "decide", func(ctx context.Context) error {
		var err error
		if dec, err = a.decide(ctx, req, order, policy); err != nil {
			return err
		}
		dec.Action = replay.Decide(ctx, "action", dec.Action)
		if err := replay.Set(ctx, "decision", dec); err != nil {
			return err
		}
		if dec.Action == "refund" && dec.Amount > policy.AutoRefundLimit {
			return &PolicyViolation{OrderID: order.OrderID, Amount: dec.Amount, Max: policy.AutoRefundLimit, PolicyRuleID: policy.RuleID}
		}
		return nil
	})
	if err != nil {
		return Outcome{}, err
	}
	err = replay.Node(ctx, "act", func(ctx context.Context) error {
		var err error
		out, err = a.act(ctx, order, dec)
		if err != nil {
			return err
		}
		return replay.Set(ctx, "outcome", out.Status)
	})
	if err != nil {
		return Outcome{}, err
	}
	err = replay.Node(ctx, "reply", func(ctx context.Context) error {
		var err error
		out.Reply, err = a.reply(ctx, req, order, out, dec)
		return err
	})
	return out, err
}

// act carries the decision out.
func (a *Agent) act(ctx context.Context, order Order, dec Decision) (Outcome, error) {
	switch dec.Action {
	case "refund":
		approval, err := replay.Approve(ctx, "confirm_refund", func(ctx context.Context) (Approval, error) {
			if a.cfg.Approver == nil {
				return Approval{Approved: false, Note: "no approver configured"}, nil
			}
			return a.cfg.Approver(ctx, Proposal{OrderID: order.OrderID, Customer: order.Customer, Amount: dec.Amount, Reason: dec.Reason})
		})
		if err != nil {
			return Outcome{}, err
		}
		if !approval.Approved {
			return Outcome{Status: "declined", Amount: dec.Amount}, nil
		}
		receipt, err := a.issueRefund(ctx, RefundOrder{OrderID: order.OrderID, Amount: dec.Amount, ApprovedBy: approval.By})
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Status: "refunded", Amount: dec.Amount, RefundID: receipt.RefundID}, nil
	case "escalate":
		ticket, err := a.requestApproval(ctx, ApprovalRequest{OrderID: order.OrderID, Amount: dec.Amount, Reason: dec.Reason})
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Status: "awaiting_approval", Amount: dec.Amount, Ticket: ticket.ID}, nil
	case "deny":
		return Outcome{Status: "denied"}, nil
	default:
		return Outcome{}, fmt.Errorf("the model proposed action %q; want refund, escalate or deny", dec.Action)
	}
}

// ErrNotADecision is matched when the model's answer holds no decision.
var ErrNotADecision = errors.New("model answer is not a refund decision")
